// The addresses that are the stack's own, with their connected networks, for the data path:
// fixed when the Stack is made, so poll threads read them without a lock. Internal to the stack.
//
//   LocalAddresses local{.prefixes = {*net::IpPrefix::Parse("10.1.0.2/24")}};
//   local.Contains(*net::IpAddress::Parse("10.1.0.2"));      // true
//   local.BroadcastOf(*net::IpAddress::Parse("10.1.0.255")); // the 10.1.0.2/24 prefix
#ifndef QUADSOCK_STACK_INTERNAL_LOCAL_ADDRESSES_H_
#define QUADSOCK_STACK_INTERNAL_LOCAL_ADDRESSES_H_

#include <algorithm>
#include <vector>

#include "stack/net/address.h"

namespace quadsock::stack {

struct LocalAddresses {
  std::vector<net::IpPrefix> prefixes;  // our addresses, with their connected networks

  bool Contains(const net::IpAddress& a) const {
    return std::any_of(prefixes.begin(), prefixes.end(),
                       [&a](const net::IpPrefix& p) { return p.address() == a; });
  }
  // The connected network whose broadcast address `a` is, or null.
  const net::IpPrefix* BroadcastOf(const net::IpAddress& a) const {
    for (const net::IpPrefix& p : prefixes) {
      if (p.IsBroadcast(a)) return &p;
    }
    return nullptr;
  }
};

}  // namespace quadsock::stack

#endif  // QUADSOCK_STACK_INTERNAL_LOCAL_ADDRESSES_H_
