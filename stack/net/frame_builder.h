// Building whole frames into a caller's buffer (a UMEM frame, or a test's array): UDP over
// IPv4/IPv6, ARP, ICMPv4/ICMPv6 (echo and errors) and NDP solicitations and advertisements.
// Checksums are computed in software.
//
// Each builder returns the frame's length, or nothing when the buffer is too small (nothing
// useful is left in it then).
//
//   uint8_t buf[1514];
//   LinkAddresses link{.src = my_mac, .dst = peer_mac};
//   std::optional<size_t> n = BuildUdp(link, {.src = {a, 4000}, .dst = {b, 53}}, payload, buf);
#ifndef QUADSOCK_STACK_NET_FRAME_BUILDER_H_
#define QUADSOCK_STACK_NET_FRAME_BUILDER_H_

#include <cstdint>
#include <optional>
#include <span>

#include "stack/net/address.h"
#include "stack/net/ethernet.h"
#include "stack/net/icmp.h"

namespace quadsock::net {

struct LinkAddresses {
  MacAddress src;
  MacAddress dst;
  std::optional<VlanTag> vlan;  // one 802.1Q tag, if the link is a VLAN
};

struct IpOptions {
  uint8_t ttl = 64;  // TTL or hop limit
  uint8_t tos = 0;   // TOS or traffic class
  uint16_t id = 0;   // IPv4 identification
  bool dont_fragment = true;  // IPv4's DF flag
};

struct UdpAddresses {
  Endpoint src;  // both of one family
  Endpoint dst;
};

// UDP over IPv4 or IPv6 (by the endpoints' family). A computed checksum of 0 is sent as 0xffff.
std::optional<size_t> BuildUdp(const LinkAddresses& link, const UdpAddresses& addresses,
                               std::span<const uint8_t> payload, std::span<uint8_t> out,
                               const IpOptions& ip = {});

// A UDP datagram without its IP header (header, payload, checksum filled): what the fragments
// of a datagram too big for one frame carry between them.
std::optional<size_t> BuildUdpSegment(const UdpAddresses& addresses,
                                      std::span<const uint8_t> payload, std::span<uint8_t> out);

// One fragment of an IP datagram (RFC 791; RFC 8200 4.5: a Fragment header after the fixed
// header): `piece` is its share of the datagram's upper-layer bytes, at `offset` (a multiple
// of 8), `more` unless it is the last. IPv4 fragments leave DF clear whatever `ip` says.
struct FragmentFields {
  IpAddress src;
  IpAddress dst;
  uint8_t protocol = 0;
  uint32_t id = 0;  // IPv4: its low 16 bits
  uint32_t offset = 0;
  bool more = false;
};
std::optional<size_t> BuildIpFragment(const LinkAddresses& link, const FragmentFields& fragment,
                                      std::span<const uint8_t> piece, std::span<uint8_t> out,
                                      const IpOptions& ip = {});

std::optional<size_t> BuildArp(const LinkAddresses& link, const ArpPacket& arp,
                               std::span<uint8_t> out);

// ICMPv4 or ICMPv6 (by the addresses' family) with `header.checksum` computed. `body` follows
// the 8-byte header: the echo data, or the quoted packet of an error.
std::optional<size_t> BuildIcmp(const LinkAddresses& link, const IpAddress& src,
                                const IpAddress& dst, const IcmpHeader& header,
                                std::span<const uint8_t> body, std::span<uint8_t> out,
                                const IpOptions& ip = {});

// A neighbour solicitation or advertisement (`type`), hop limit 255 as RFC 4861 requires.
// `flags` are the advertisement's R/S/O bits (NdpMessage::kFlag*).
std::optional<size_t> BuildNdp(const LinkAddresses& link, const IpAddress& src,
                               const IpAddress& dst, uint8_t type, const NdpMessage& message,
                               std::span<uint8_t> out, uint32_t flags = 0);

// The most of an offending packet that an ICMP error may quote so that the error fits in the
// minimum MTU: 576 bytes for IPv4 (RFC 1812 4.3.2.3), 1280 for IPv6 (RFC 4443 2.4).
size_t IcmpQuoteLimit(Family family);

}  // namespace quadsock::net

#endif  // QUADSOCK_STACK_NET_FRAME_BUILDER_H_
