#include "stack/icmp_error.h"

#include <cerrno>
#include <iterator>

#include "absl/strings/str_cat.h"
#include "stack/net/icmp.h"

namespace quadsock::stack {
namespace {

struct Meaning {
  int error;
  bool hard;
  const char* what;
};

// ICMPv4 destination unreachable, by code (RFC 792, RFC 1812 5.2.7.1), as icmp_err_convert.
// Fragmentation needed is hard for UDP, whose sockets set DF by default (IP_PMTUDISC_WANT).
constexpr Meaning kV4Unreachable[] = {
    {ENETUNREACH, false, "network unreachable"},
    {EHOSTUNREACH, false, "host unreachable"},
    {ENOPROTOOPT, true, "protocol unreachable"},
    {ECONNREFUSED, true, "port unreachable"},
    {EMSGSIZE, true, "fragmentation needed"},
    {EOPNOTSUPP, false, "source route failed"},
    {ENETUNREACH, true, "network unknown"},
    {EHOSTDOWN, true, "host unknown"},
    {ENONET, true, "source host isolated"},
    {ENETUNREACH, true, "network administratively prohibited"},
    {EHOSTUNREACH, true, "host administratively prohibited"},
    {ENETUNREACH, false, "network unreachable for TOS"},
    {EHOSTUNREACH, false, "host unreachable for TOS"},
    {EHOSTUNREACH, true, "communication administratively prohibited"},
    {EHOSTUNREACH, true, "host precedence violation"},
    {EHOSTUNREACH, true, "precedence cutoff in effect"},
};

// ICMPv6 destination unreachable, by code (RFC 4443 3.1), as icmpv6_err_convert.
constexpr Meaning kV6Unreachable[] = {
    {ENETUNREACH, false, "no route to destination"},
    {EACCES, true, "administratively prohibited"},
    {EHOSTUNREACH, false, "beyond scope of source address"},
    {EHOSTUNREACH, false, "address unreachable"},
    {ECONNREFUSED, true, "port unreachable"},
    {EACCES, true, "source address failed ingress/egress policy"},
    {EACCES, true, "reject route to destination"},
};

Meaning MeaningOf(const IcmpError& e) {
  if (e.v6) {
    switch (e.type) {
      case net::kIcmpv6DestUnreachable:
        if (e.code < std::size(kV6Unreachable)) return kV6Unreachable[e.code];
        return {EPROTO, true, "destination unreachable (unknown code)"};
      case net::kIcmpv6PacketTooBig:
        return {EMSGSIZE, true, "packet too big"};
      case net::kIcmpv6ParameterProblem:
        return {EPROTO, true, "parameter problem"};
      case net::kIcmpv6TimeExceeded:
        return {EHOSTUNREACH, false, "time exceeded"};
    }
  } else {
    switch (e.type) {
      case net::kIcmpv4DestUnreachable:
        if (e.code < std::size(kV4Unreachable)) return kV4Unreachable[e.code];
        return {EHOSTUNREACH, false, "destination unreachable (unknown code)"};
      case net::kIcmpv4ParameterProblem:
        return {EPROTO, true, "parameter problem"};
      case net::kIcmpv4TimeExceeded:
        return {EHOSTUNREACH, false, "time exceeded"};
    }
  }
  return {EPROTO, false, "not an error message"};
}

const char* ErrnoName(int error) {
  switch (error) {
    case ENETUNREACH: return "ENETUNREACH";
    case EHOSTUNREACH: return "EHOSTUNREACH";
    case ENOPROTOOPT: return "ENOPROTOOPT";
    case ECONNREFUSED: return "ECONNREFUSED";
    case EMSGSIZE: return "EMSGSIZE";
    case EOPNOTSUPP: return "EOPNOTSUPP";
    case EHOSTDOWN: return "EHOSTDOWN";
    case ENONET: return "ENONET";
    case EACCES: return "EACCES";
    default: return "EPROTO";
  }
}

}  // namespace

int IcmpError::Errno() const { return MeaningOf(*this).error; }

bool IcmpError::Hard() const { return MeaningOf(*this).hard; }

std::string IcmpError::ToString() const {
  const Meaning m = MeaningOf(*this);
  return absl::StrCat(ErrnoName(m.error), " (ICMP", v6 ? "v6 " : " ", m.what, ")");
}

}  // namespace quadsock::stack
