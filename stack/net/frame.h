// Parsing a whole Ethernet frame down to UDP, ICMP or ARP: the stack's one entry point for
// untrusted bytes from the wire.
//
// ParseFrame never reads past the frame and never trusts a length field; a malformed frame
// yields a named ParseError. Frames the stack does not handle (other ethertypes, TCP, IP
// fragments) parse fine and say so in `l3`/`l4`/`fragment`, so the caller can count them.
//
//   ParsedFrame f;
//   if (ParseFrame(bytes, f) != ParseError::kOk) return Drop(...);
//   if (f.l4 == L4::kUdp) Deliver(f.src, f.udp.src_port, f.dst, f.udp.dst_port, f.payload(bytes));
#ifndef QUADSOCK_STACK_NET_FRAME_H_
#define QUADSOCK_STACK_NET_FRAME_H_

#include <cstdint>
#include <span>

#include "stack/net/address.h"
#include "stack/net/ethernet.h"
#include "stack/net/icmp.h"
#include "stack/net/ip.h"
#include "stack/net/parse_error.h"
#include "stack/net/udp.h"

namespace quadsock::net {

enum class L3 : uint8_t { kOther, kArp, kIpv4, kIpv6 };
enum class L4 : uint8_t { kNone, kUdp, kIcmpv4, kIcmpv6, kOther };

struct ParsedFrame {
  EthernetHeader eth;
  L3 l3 = L3::kOther;
  ArpPacket arp;    // when l3 == kArp
  Ipv4Header ipv4;  // when l3 == kIpv4
  Ipv6Header ipv6;  // when l3 == kIpv6

  // The IP view shared by both versions (when l3 is kIpv4 or kIpv6).
  IpAddress src;
  IpAddress dst;
  uint8_t ttl = 0;       // TTL or hop limit
  uint8_t protocol = 0;  // the upper-layer protocol
  bool fragment = false;  // an IP fragment: recognised, not parsed further (no reassembly)
  size_t l3_offset = 0;
  size_t l4_offset = 0;
  size_t l4_length = 0;  // the IP payload from l4_offset, padding excluded

  L4 l4 = L4::kNone;
  UdpHeader udp;     // when l4 == kUdp (checksum verified)
  IcmpHeader icmp;   // when l4 is kIcmpv4 or kIcmpv6 (checksum verified)
  NdpMessage ndp;    // when l4 == kIcmpv6 and icmp.type is a neighbour solicitation/advert
  IcmpQuote quote;   // when l4 is kIcmpv4 or kIcmpv6 and IsIcmpError(v6, icmp.type)
  size_t payload_offset = 0;  // UDP payload, or the ICMP body after its 8-byte header
  size_t payload_length = 0;

  std::span<const uint8_t> payload(std::span<const uint8_t> frame) const {
    return frame.subspan(payload_offset, payload_length);
  }
};

ParseError ParseFrame(std::span<const uint8_t> frame, ParsedFrame& out);

// A UDP datagram from `src` to `dst` (its IP payload, `segment`), checked as ParseFrame checks
// one: its length within the segment (the rest is padding) and its checksum (mandatory over
// IPv6). For a datagram reassembled from fragments.
ParseError ParseUdpDatagram(const IpAddress& src, const IpAddress& dst,
                            std::span<const uint8_t> segment, UdpHeader& out);

// The receive fast path: the fields the data path needs of the commonest frames, untagged
// Ethernet with a UDP datagram right after an IPv4 header without options (not a fragment) or
// an IPv6 header without extension headers, verified as ParseFrame verifies them (lengths, the
// IPv4 header checksum, the UDP checksum; mandatory over IPv6) without building a ParsedFrame.
// For such a frame the fields equal ParseFrame's; for any other frame, or one with an error, it
// returns false and the caller uses ParseFrame.
struct UdpFrameView {
  MacAddress dst_mac;
  IpAddress src;
  IpAddress dst;
  uint16_t src_port = 0;
  uint16_t dst_port = 0;
  uint32_t payload_offset = 0;
  uint32_t payload_length = 0;
};
bool ParsePlainUdpFrame(std::span<const uint8_t> frame, UdpFrameView& out);

}  // namespace quadsock::net

#endif  // QUADSOCK_STACK_NET_FRAME_H_
