// What an ICMP error says to the socket whose datagram it quotes, as Linux's udp_err and
// __udp6_lib_err read it (with icmp_err_convert and icmpv6_err_convert): an errno, and whether
// the error is hard. A connected socket keeps the last hard error until its next Send reports
// it, once, as sock_error() does in Linux. Soft errors (a network or host unreachable, which a
// route may mend; time exceeded) and every error for an unconnected socket are only counted, as
// in Linux without IP_RECVERR.
//
//   IcmpError e{.v6 = false, .type = net::kIcmpv4DestUnreachable, .code = 3};
//   e.Errno() == ECONNREFUSED && e.Hard();
//   e.ToString() == "ECONNREFUSED (ICMP port unreachable)"
#ifndef QUADSOCK_STACK_ICMP_ERROR_H_
#define QUADSOCK_STACK_ICMP_ERROR_H_

#include <cstdint>
#include <optional>
#include <string>

namespace quadsock::stack {

struct IcmpError {
  bool v6 = false;  // ICMPv6, or ICMPv4
  uint8_t type = 0;
  uint8_t code = 0;

  int Errno() const;
  bool Hard() const;
  // The errno's name and what the message said: "ECONNREFUSED (ICMP port unreachable)".
  std::string ToString() const;

  // One word, for a socket to keep in an atomic: never 0, so that 0 can mean "none".
  uint32_t Pack() const { return 1u << 24 | uint32_t{v6} << 16 | uint32_t{type} << 8 | code; }
  static std::optional<IcmpError> Unpack(uint32_t packed) {
    if (packed == 0) return std::nullopt;
    return IcmpError{(packed >> 16 & 1) != 0, static_cast<uint8_t>(packed >> 8),
                     static_cast<uint8_t>(packed)};
  }
};

}  // namespace quadsock::stack

#endif  // QUADSOCK_STACK_ICMP_ERROR_H_
