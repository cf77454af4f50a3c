// Why a frame was not accepted: one named reason per kind of malformed input, so the stack can
// count each (AdminService reports them) and tests can expect the exact one.
//
//   ParsedFrame f;
//   ParseError e = ParseFrame(bytes, f);
//   if (e != ParseError::kOk) counters.parse_errors[static_cast<int>(e)]++;
//   LOG: ParseErrorName(e) -> "bad_udp_checksum"
#ifndef QUADSOCK_STACK_NET_PARSE_ERROR_H_
#define QUADSOCK_STACK_NET_PARSE_ERROR_H_

#include <cstdint>


namespace quadsock::net {

#define QUADSOCK_PARSE_ERRORS(X)                                                   \
  X(kOk, "ok")                                                                     \
  X(kTruncatedEthernet, "truncated_ethernet")                                      \
  X(kTooManyVlanTags, "too_many_vlan_tags")                                        \
  X(kTruncatedArp, "truncated_arp")                                                \
  X(kUnsupportedArp, "unsupported_arp")           /* not Ethernet/IPv4, or bad op */ \
  X(kTruncatedIpv4, "truncated_ipv4")                                              \
  X(kBadIpv4Version, "bad_ipv4_version")                                           \
  X(kBadIpv4HeaderLength, "bad_ipv4_header_length")                                \
  X(kBadIpv4TotalLength, "bad_ipv4_total_length")                                  \
  X(kBadIpv4Checksum, "bad_ipv4_checksum")                                         \
  X(kBadIpv4Option, "bad_ipv4_option")  /* a length or pointer out of bounds */ \
  X(kIpv4SourceRoute, "ipv4_source_route")  /* LSRR/SSRR naming a further hop */   \
  X(kTruncatedIpv6, "truncated_ipv6")                                              \
  X(kBadIpv6Version, "bad_ipv6_version")                                           \
  X(kBadIpv6PayloadLength, "bad_ipv6_payload_length")                              \
  X(kTruncatedIpv6ExtensionHeader, "truncated_ipv6_extension_header")              \
  X(kTooManyIpv6ExtensionHeaders, "too_many_ipv6_extension_headers")               \
  X(kBadIpv6Option, "bad_ipv6_option")  /* an option past its header's end */      \
  X(kIpv6UnrecognizedOption, "ipv6_unrecognized_option")  /* its type says discard */ \
  X(kIpv6HopByHopNotFirst, "ipv6_hop_by_hop_not_first")                            \
  X(kIpv6RoutingHeader, "ipv6_routing_header")  /* segments left: we route nothing */ \
  X(kTruncatedUdp, "truncated_udp")                                                \
  X(kBadUdpLength, "bad_udp_length")                                               \
  X(kBadUdpChecksum, "bad_udp_checksum")                                           \
  X(kZeroUdpChecksumIpv6, "zero_udp_checksum_ipv6")                                \
  X(kTruncatedIcmp, "truncated_icmp")                                              \
  X(kBadIcmpChecksum, "bad_icmp_checksum")                                         \
  X(kBadNdpHopLimit, "bad_ndp_hop_limit")                                          \
  X(kBadNdpMessage, "bad_ndp_message")            /* short body or nonzero code */   \
  X(kBadNdpOption, "bad_ndp_option")                                               \
  X(kBadIcmpQuote, "bad_icmp_quote")   /* an ICMP error quoting no whole IP header + 8 bytes */

enum class ParseError : uint8_t {
#define QUADSOCK_PARSE_ERROR_ENUM(name, text) name,
  QUADSOCK_PARSE_ERRORS(QUADSOCK_PARSE_ERROR_ENUM)
#undef QUADSOCK_PARSE_ERROR_ENUM
};

inline constexpr int kParseErrorCount = 0
#define QUADSOCK_PARSE_ERROR_COUNT(name, text) +1
    QUADSOCK_PARSE_ERRORS(QUADSOCK_PARSE_ERROR_COUNT)
#undef QUADSOCK_PARSE_ERROR_COUNT
    ;

// A stable snake_case name, used in counters, metrics and logs.
constexpr const char* ParseErrorName(ParseError e) {
  switch (e) {
#define QUADSOCK_PARSE_ERROR_NAME(name, text) \
  case ParseError::name:                      \
    return text;
    QUADSOCK_PARSE_ERRORS(QUADSOCK_PARSE_ERROR_NAME)
#undef QUADSOCK_PARSE_ERROR_NAME
  }
  return "unknown";
}

}  // namespace quadsock::net

#endif  // QUADSOCK_STACK_NET_PARSE_ERROR_H_
