// IPv4 (RFC 791) and IPv6 (RFC 8200) headers. Fields are host order; Parse and Write convert.
//
// Ipv4Header::Parse checks version, header length, total length and the header checksum,
// checks each option's length and refuses a source route naming a further hop (we route
// nothing), and recognises fragments. Ipv6Header::Parse walks the extension headers (at most
// kMaxExtensionHeaders) to the upper-layer protocol as RFC 8200 4.2-4.5 says a destination
// processes them: options whose type says discard, a routing header with segments left, and a
// hop-by-hop header anywhere but first are errors (some of which ask for an ICMPv6 Parameter
// Problem: `problem`); the walk stops at a Fragment header that is not an atomic fragment.
//
//   ByteReader r(packet);
//   Ipv4Header ip;
//   if (ip.Parse(r) == ParseError::kOk && !ip.is_fragment()) udp_bytes = ip.payload(packet);
#ifndef QUADSOCK_STACK_NET_IP_H_
#define QUADSOCK_STACK_NET_IP_H_

#include <cstdint>
#include <span>

#include "stack/net/address.h"
#include "stack/net/bytes.h"
#include "stack/net/parse_error.h"

namespace quadsock::net {

inline constexpr uint8_t kIpProtoHopByHop = 0;
inline constexpr uint8_t kIpProtoIcmp = 1;
inline constexpr uint8_t kIpProtoTcp = 6;
inline constexpr uint8_t kIpProtoUdp = 17;
inline constexpr uint8_t kIpProtoRouting = 43;
inline constexpr uint8_t kIpProtoFragment = 44;
inline constexpr uint8_t kIpProtoAh = 51;
inline constexpr uint8_t kIpProtoIcmpv6 = 58;
inline constexpr uint8_t kIpProtoNoNext = 59;
inline constexpr uint8_t kIpProtoDestOptions = 60;

// Whether `type` (a Next Header value) is an IPv6 extension header the walk steps over (RFC 8200
// 4: hop-by-hop, routing, fragment, destination options; and AH, whose length it knows).
constexpr bool IsIpv6ExtensionHeader(uint8_t type) {
  return type == kIpProtoHopByHop || type == kIpProtoRouting || type == kIpProtoFragment ||
         type == kIpProtoAh || type == kIpProtoDestOptions;
}

// The length in bytes of an extension header of `type` whose second byte (Hdr Ext Len, or AH's
// Payload Len) is `length_byte`: 8 for a fragment header, (n + 2) * 4 for AH (RFC 4302), else
// (n + 1) * 8.
constexpr size_t Ipv6ExtensionHeaderLength(uint8_t type, uint8_t length_byte) {
  return type == kIpProtoFragment ? 8
         : type == kIpProtoAh     ? (size_t{length_byte} + 2) * 4
                                  : (size_t{length_byte} + 1) * 8;
}

struct Ipv4Header {
  static constexpr size_t kMinSize = 20;

  uint8_t header_length = kMinSize;  // bytes, options included
  uint8_t tos = 0;
  uint16_t total_length = 0;
  uint16_t id = 0;
  bool dont_fragment = true;
  bool more_fragments = false;
  uint16_t fragment_offset = 0;  // in 8-byte units
  uint8_t ttl = 64;
  uint8_t protocol = 0;
  uint16_t checksum = 0;  // as received; Write computes its own
  IpAddress src = IpAddress::AnyV4();
  IpAddress dst = IpAddress::AnyV4();

  bool is_fragment() const { return more_fragments || fragment_offset != 0; }

  // Reads the header at the reader's position (the start of the IP packet). On success the
  // reader stands at the payload, and total_length is known to fit in what was readable.
  ParseError Parse(ByteReader& r);
  // Writes a 20-byte header (no options) with its checksum computed.
  void Write(ByteWriter& w) const;
};

struct Ipv6Header {
  static constexpr size_t kSize = 40;
  static constexpr int kMaxExtensionHeaders = 8;

  uint8_t traffic_class = 0;
  uint32_t flow_label = 0;
  uint16_t payload_length = 0;
  uint8_t next_header = 0;
  uint8_t hop_limit = 64;
  IpAddress src = IpAddress::AnyV6();
  IpAddress dst = IpAddress::AnyV6();

  // Filled by Parse from the extension-header walk.
  uint8_t upper_protocol = 0;  // kIpProtoNoNext when there is none
  uint16_t upper_offset = 0;   // from the start of the IPv6 header
  // The offset of the Next Header field that named upper_protocol (6: the fixed header's; else
  // the last extension header's first byte): the pointer of a Parameter Problem "unrecognized
  // Next Header" about it (RFC 8200 4, RFC 4443 3.4).
  uint16_t upper_naming = 6;
  int extension_count = 0;
  bool fragment = false;  // a Fragment header that is not an atomic fragment
  // When `fragment`: the Fragment header's fields (RFC 8200 4.5). upper_protocol is its Next
  // Header and upper_offset the first byte after it (the fragment's share of the datagram).
  uint32_t fragment_id = 0;
  uint16_t fragment_offset = 0;  // in 8-byte units
  bool more_fragments = false;

  // When Parse refused the packet for an extension header that RFC 8200 answers with an
  // ICMPv6 Parameter Problem: its code and pointer (an offset from the start of the IPv6
  // header). An unrecognised option of type 11xxxxxx sent to a multicast address asks none.
  struct ParameterProblem {
    bool asked = false;
    uint8_t code = 0;  // kIcmpv6CodeErroneousField, ...UnrecognizedNextHeader, ...Option
    uint32_t pointer = 0;
  };
  ParameterProblem problem;

  bool is_fragment() const { return fragment; }

  // Reads the fixed header and walks the extension headers. On success the reader stands at
  // the upper-layer header, and payload_length is known to fit in what was readable.
  ParseError Parse(ByteReader& r);
  // Writes the 40-byte fixed header (no extension headers; next_header is written as given).
  void Write(ByteWriter& w) const;
};

}  // namespace quadsock::net

#endif  // QUADSOCK_STACK_NET_IP_H_
