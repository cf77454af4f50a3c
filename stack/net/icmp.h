// ICMPv4 (RFC 792) and ICMPv6 (RFC 4443) headers, and the NDP messages quadsock speaks:
// neighbour solicitation and advertisement (RFC 4861) with link-layer address options.
//
// Both ICMP versions share one 8-byte header shape: type, code, checksum and four bytes whose
// meaning depends on the type (identifier and sequence for echo, MTU for "too big", ...).
//
//   IcmpHeader icmp;
//   icmp.Parse(r);
//   if (icmp.type == kIcmpv6NeighborSolicitation) { NdpMessage ns; ns.Parse(icmp.type, r); }
#ifndef QUADSOCK_STACK_NET_ICMP_H_
#define QUADSOCK_STACK_NET_ICMP_H_

#include <cstdint>
#include <optional>

#include "stack/net/address.h"
#include "stack/net/bytes.h"
#include "stack/net/parse_error.h"

namespace quadsock::net {

inline constexpr uint8_t kIcmpv4EchoReply = 0;
inline constexpr uint8_t kIcmpv4DestUnreachable = 3;
inline constexpr uint8_t kIcmpv4CodePortUnreachable = 3;
inline constexpr uint8_t kIcmpv4EchoRequest = 8;
inline constexpr uint8_t kIcmpv4TimeExceeded = 11;

inline constexpr uint8_t kIcmpv6DestUnreachable = 1;
inline constexpr uint8_t kIcmpv6CodePortUnreachable = 4;
inline constexpr uint8_t kIcmpv6PacketTooBig = 2;
inline constexpr uint8_t kIcmpv6TimeExceeded = 3;
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
