// ICMPv4 (RFC 792) and ICMPv6 (RFC 4443) headers, the datagram an ICMP error quotes, and the
// NDP messages quadsock speaks: neighbour solicitation and advertisement (RFC 4861) with
// link-layer address options.
//
// Both ICMP versions share one 8-byte header shape: type, code, checksum and four bytes whose
// meaning depends on the type (identifier and sequence for echo, MTU for "too big", ...).
//
//   IcmpHeader icmp;
//   icmp.Parse(r);
//   if (icmp.type == kIcmpv6NeighborSolicitation) { NdpMessage ns; ns.Parse(icmp.type, r); }
//   if (IsIcmpError(v6, icmp.type)) { IcmpQuote q; q.Parse(v6, r); }  // q.src_port: our port
#ifndef QUADSOCK_STACK_NET_ICMP_H_
#define QUADSOCK_STACK_NET_ICMP_H_

#include <cstdint>
#include <optional>
#include <span>

#include "stack/net/address.h"
#include "stack/net/bytes.h"
#include "stack/net/parse_error.h"

namespace quadsock::net {

inline constexpr uint8_t kIcmpv4EchoReply = 0;
inline constexpr uint8_t kIcmpv4DestUnreachable = 3;
inline constexpr uint8_t kIcmpv4CodeProtocolUnreachable = 2;
inline constexpr uint8_t kIcmpv4CodePortUnreachable = 3;
inline constexpr uint8_t kIcmpv4CodeFragmentationNeeded = 4;
inline constexpr uint8_t kIcmpv4EchoRequest = 8;
inline constexpr uint8_t kIcmpv4TimeExceeded = 11;
inline constexpr uint8_t kIcmpv4ParameterProblem = 12;

inline constexpr uint8_t kIcmpv6DestUnreachable = 1;
inline constexpr uint8_t kIcmpv6CodeAdminProhibited = 1;
inline constexpr uint8_t kIcmpv6CodePortUnreachable = 4;
inline constexpr uint8_t kIcmpv6PacketTooBig = 2;
inline constexpr uint8_t kIcmpv6TimeExceeded = 3;
inline constexpr uint8_t kIcmpv6ParameterProblem = 4;
// Parameter Problem's codes (RFC 4443 3.4); its `rest` is the pointer to the offending byte.
inline constexpr uint8_t kIcmpv6CodeErroneousField = 0;
inline constexpr uint8_t kIcmpv6CodeUnrecognizedNextHeader = 1;
inline constexpr uint8_t kIcmpv6CodeUnrecognizedOption = 2;
inline constexpr uint8_t kIcmpv6EchoRequest = 128;
inline constexpr uint8_t kIcmpv6EchoReply = 129;
inline constexpr uint8_t kIcmpv6RouterSolicitation = 133;
inline constexpr uint8_t kIcmpv6RouterAdvertisement = 134;
inline constexpr uint8_t kIcmpv6NeighborSolicitation = 135;
inline constexpr uint8_t kIcmpv6NeighborAdvertisement = 136;

inline constexpr uint8_t kNdpOptionSourceLinkAddress = 1;
inline constexpr uint8_t kNdpOptionTargetLinkAddress = 2;

struct IcmpHeader {
  static constexpr size_t kSize = 8;

  uint8_t type = 0;
  uint8_t code = 0;
  uint16_t checksum = 0;
  uint32_t rest = 0;  // type-specific

  // Echo request/reply.
  uint16_t echo_id() const { return static_cast<uint16_t>(rest >> 16); }
  uint16_t echo_sequence() const { return static_cast<uint16_t>(rest); }
  static uint32_t EchoRest(uint16_t id, uint16_t sequence) {
    return uint32_t{id} << 16 | sequence;
  }

  ParseError Parse(ByteReader& r) {
    if (!r.ReadU8(type) || !r.ReadU8(code) || !r.ReadU16(checksum) || !r.ReadU32(rest)) {
      return ParseError::kTruncatedIcmp;
    }
    return ParseError::kOk;
  }
  void Write(ByteWriter& w) const {
    w.WriteU8(type);
    w.WriteU8(code);
    w.WriteU16(checksum);
    w.WriteU32(rest);
  }
};

// Whether an ICMP message of `type` is an error that quotes the datagram it is about:
// destination unreachable, time exceeded and parameter problem (ICMPv4 also has source quench,
// long deprecated, and redirect, which is not an error: neither is taken), and for ICMPv6 also
// packet too big: the four errors RFC 4443 defines.
constexpr bool IsIcmpError(bool v6, uint8_t type) {
  if (v6) {
    return type == kIcmpv6DestUnreachable || type == kIcmpv6PacketTooBig ||
           type == kIcmpv6TimeExceeded || type == kIcmpv6ParameterProblem;
  }
  return type == kIcmpv4DestUnreachable || type == kIcmpv4TimeExceeded ||
         type == kIcmpv4ParameterProblem;
}

// Whether an ICMP error may be sent about `packet` (an IP packet from its IP header, either
// version, as received): not when it is itself an ICMP error message (RFC 1122 3.2.2; RFC 4443
// 2.4 (e.1): an ICMPv6 type below 128), nor a fragment other than the first, nor when the
// packet is too short or its IPv6 extension headers too many to tell. ICMPv4 types other than
// echo, timestamp, information and address mask requests and replies count as errors, as in
// Linux's icmp_send. The extension headers are stepped over, not processed, as Linux's
// ipv6_skip_exthdr does: the answer holds for a packet refused for one of them too.
bool IcmpErrorAllowedAbout(std::span<const uint8_t> packet);

// The start of the datagram an ICMP error quotes (RFC 792: its IP header and first 8 bytes;
// RFC 4443 2.4: as much as fits in 1280 bytes), which says whose datagram it was: `src` and
// `src_port` are the sender's (ours, when the error is for us), `dst` and `dst_port` where it
// was going. Only what names the flow is checked: the IP version, a whole IPv4 header, and the
// transport's first 8 bytes. A router may have changed the quoted TTL and checksum, and the
// quote is cut short, so the quoted lengths and checksums are not checked. An IPv6 quote's
// extension headers are not walked: `protocol` is then the first of them, not UDP.
struct IcmpQuote {
  static constexpr size_t kTransportBytes = 8;

  IpAddress src;
  IpAddress dst;
  uint8_t protocol = 0;
  uint16_t src_port = 0;  // the first two 16-bit words of the transport header: a UDP
  uint16_t dst_port = 0;  // datagram's ports

  // kBadIcmpQuote when the quote is too short or of the other IP version than the message.
  ParseError Parse(bool v6, ByteReader& r);
};

// The body of a neighbour solicitation or advertisement, after the ICMPv6 header. For an
// advertisement the header's `rest` holds the R/S/O flags.
struct NdpMessage {
  static constexpr uint32_t kFlagRouter = 0x80000000;
  static constexpr uint32_t kFlagSolicited = 0x40000000;
  static constexpr uint32_t kFlagOverride = 0x20000000;

  IpAddress target = IpAddress::AnyV6();
  // The source link-layer option (solicitation) or the target one (advertisement).
  std::optional<MacAddress> link_address;

  // Reads the target and walks the options (unknown ones are skipped; a zero-length option or
  // one that runs past the end is kBadNdpOption, RFC 4861 4.6).
  ParseError Parse(uint8_t icmp_type, ByteReader& r);
  // Writes the target and, if set, the link-layer option for `icmp_type`.
  void Write(uint8_t icmp_type, ByteWriter& w) const;
};

}  // namespace quadsock::net

#endif  // QUADSOCK_STACK_NET_ICMP_H_
