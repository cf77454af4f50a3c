// The addresses that are the stack's own, with their connected networks, for the data path:
// fixed when the Stack is made, so poll threads read them without a lock. Internal to the stack.
//
//   LocalAddresses local({*net::IpPrefix::Parse("10.1.0.2/24")});
//   local.Contains(*net::IpAddress::Parse("10.1.0.2"));      // true
//   local.BroadcastOf(*net::IpAddress::Parse("10.1.0.255")); // the 10.1.0.2/24 prefix
//   local.NetworkAddressOf(*net::IpAddress::Parse("10.1.0.0"));  // the same prefix
//   local.IsMartianSource(*net::IpAddress::Parse("10.1.0.0")); // true: no host sends from it
#ifndef QUADSOCK_STACK_INTERNAL_LOCAL_ADDRESSES_H_
#define QUADSOCK_STACK_INTERNAL_LOCAL_ADDRESSES_H_

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "stack/net/address.h"

namespace quadsock::stack {

class LocalAddresses {
 public:
  explicit LocalAddresses(std::vector<net::IpPrefix> prefixes) : prefixes(std::move(prefixes)) {
    for (const net::IpPrefix& p : this->prefixes) {
      const net::IpAddress& a = p.address();
      if (a.is_v6()) {
        v6_own_.push_back(a);
        continue;
      }
      v4_own_.push_back(Word(a));
      v4_martians_.push_back(Word(a));
      if (p.length() <= 30) {  // a /31 or /32 has no network or broadcast address
        const uint32_t host_mask = ~0u >> p.length();
        const uint32_t network = a.v4_host_order() & ~host_mask;
        v4_martians_.push_back(Word(net::IpAddress::V4(network)));
        v4_martians_.push_back(Word(net::IpAddress::V4(network | host_mask)));
      }
    }
  }

  const std::vector<net::IpPrefix> prefixes;  // our addresses, with their connected networks

  bool Contains(const net::IpAddress& a) const {
    return a.is_v4() ? ContainsV4(a.data()) : ContainsV6(a.data());
  }
  // The connected network whose broadcast address `a` is, or null.
  const net::IpPrefix* BroadcastOf(const net::IpAddress& a) const {
    for (const net::IpPrefix& p : prefixes) {
      if (p.IsBroadcast(a)) return &p;
    }
    return nullptr;
  }

  // Contains, of an address's bytes in a packet's header (4 or 16, network order): the receive
  // fast path asks with the header's bytes, not an IpAddress it has just written (whose loads
  // would wait on the narrower stores that wrote it).
  bool ContainsV4(const uint8_t* a) const {
    uint32_t w;
    std::memcpy(&w, a, 4);
    return std::find(v4_own_.begin(), v4_own_.end(), w) != v4_own_.end();
  }
  bool ContainsV6(const uint8_t* a) const {
    for (const net::IpAddress& own : v6_own_) {
      if (std::memcmp(own.data(), a, 16) == 0) return true;
    }
    return false;
  }

  // The connected IPv4 network whose network address (host bits all zero) `a` is, or null: no
  // host has it (a /31 or /32 has none).
  const net::IpPrefix* NetworkAddressOf(const net::IpAddress& a) const {
    for (const net::IpPrefix& p : prefixes) {
      if (a.is_v4() && p.address().is_v4() && p.length() <= 30 && p.Contains(a) &&
          p.Network().address() == a) {
        return &p;
      }
    }
    return nullptr;
  }

  // Whether a packet from `src` cannot come from a host on the wire (a martian source), and is
  // dropped unread and unanswered. IPv4 (as the kernel's ip_route_input_slow, RFC 1122 3.2.1.3):
  // 0.0.0.0/8, 127.0.0.0/8, multicast, 240.0.0.0/4 with 255.255.255.255, and of our networks
  // the broadcast and network addresses. IPv6 (as ip6_rcv_core; RFC 4291 2.5.2, 2.5.3, 2.7):
  // ::, ::1, multicast, and v4-mapped addresses (one would let an IPv6-only sender pass for an
  // IPv4 peer of a dual-stack socket, and be answered over IPv4). And any of our own.
  // Inline, with the exact addresses listed at construction: every received datagram asks.
  bool IsMartianSource(const net::IpAddress& src) const {
    return src.is_v4() ? IsMartianV4(src.data()) : IsMartianV6(src.data());
  }
  // The same, of an address's bytes in a packet's header (as ContainsV4 and ContainsV6).
  bool IsMartianV4(const uint8_t* a) const {
    if (a[0] == 0 || a[0] == 127 || a[0] >= 224) return true;
    uint32_t w;
    std::memcpy(&w, a, 4);
    return std::find(v4_martians_.begin(), v4_martians_.end(), w) != v4_martians_.end();
  }
  bool IsMartianV6(const uint8_t* a) const {
    if (a[0] == 0xff) return true;
    uint64_t high, low;
    std::memcpy(&high, a, 8);
    std::memcpy(&low, a + 8, 8);
    if (high == 0) {
      // ::, ::1, and ::ffff:0:0/96 (v4-mapped).
      constexpr bool kLittle = std::endian::native == std::endian::little;
      constexpr uint64_t kOne = kLittle ? uint64_t{1} << 56 : 1;
      constexpr uint64_t kMappedMask = kLittle ? 0xffffffffu : uint64_t{0xffffffff} << 32;
      constexpr uint64_t kMapped = kLittle ? 0xffff0000u : uint64_t{0x0000ffff} << 32;
      if (low == 0 || low == kOne || (low & kMappedMask) == kMapped) return true;
    }
    return ContainsV6(a);
  }

 private:
  // An IPv4 address's four bytes as one word, in memory order.
  static uint32_t Word(const net::IpAddress& a) {
    uint32_t w;
    std::memcpy(&w, a.data(), 4);
    return w;
  }
  std::vector<uint32_t> v4_own_;       // our IPv4 addresses, as Word gives them
  std::vector<uint32_t> v4_martians_;  // the same, and our networks' and their broadcasts
  std::vector<net::IpAddress> v6_own_;
};

}  // namespace quadsock::stack

#endif  // QUADSOCK_STACK_INTERNAL_LOCAL_ADDRESSES_H_
