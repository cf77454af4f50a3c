// The keyed hash of the socket table: hash2 of (local address, local port) and hash4 of the full
// 4-tuple, mixed with a per-process random 128-bit secret so that remote peers cannot aim
// collisions at one chain (the kernel keys jhash with net_hash_mix and udp_ehash_secret).
// Addresses enter as 16-byte keys (AddrKey): IPv4 in v4-mapped form, so an IPv4 lookup and a
// v6 socket bound to ::ffff:a.b.c.d meet in one slot, and both wildcards (0.0.0.0, ::) as
// sixteen zero bytes, as the kernel's ipv6_portaddr_hash does.
//
//   FlowHasher hasher(FlowHasher::RandomSecret());   // tests pass a fixed Secret
//   uint64_t h2 = hasher.Hash2(AddrKeyOf(local), 443);
//   uint64_t h4 = hasher.Hash4(AddrKeyOf(local), 443, AddrKeyOf(peer), 5353);
#ifndef QUADSOCK_STACK_DEMUX_FLOW_HASH_H_
#define QUADSOCK_STACK_DEMUX_FLOW_HASH_H_

#include <array>
#include <cstdint>
#include <cstring>

#include "stack/net/address.h"

namespace quadsock::demux {

using AddrKey = std::array<uint8_t, 16>;

// The 16-byte hash and match key of an address: zeros for a wildcard (also ::ffff:0.0.0.0),
// the v4-mapped form for IPv4.
inline AddrKey AddrKeyOf(const net::IpAddress& a) {
  return a.IsUnspecifiedInAnyForm() ? AddrKey{} : a.bytes16();
}

inline bool IsWildcardKey(const AddrKey& k) { return net::SameBytes16(k, AddrKey{}); }

class FlowHasher {
 public:
  struct Secret {
    uint64_t k0 = 0;
    uint64_t k1 = 0;
  };
  static Secret RandomSecret();

  explicit FlowHasher(Secret secret) : s_(secret) {}

  uint64_t Hash2(const AddrKey& local, uint16_t local_port) const {
    uint64_t h = Mum(Word(local, 0) ^ s_.k0, Word(local, 8) ^ s_.k1 ^ kC0);
    return Mum(h ^ local_port ^ s_.k1, s_.k0 ^ kC1);
  }

  uint64_t Hash4(const AddrKey& local, uint16_t local_port, const AddrKey& remote,
                 uint16_t remote_port) const {
    uint64_t a = Mum(Word(local, 0) ^ s_.k0, Word(local, 8) ^ s_.k1 ^ kC0);
    uint64_t b = Mum(Word(remote, 0) ^ s_.k1 ^ kC2, Word(remote, 8) ^ s_.k0 ^ kC3);
    uint64_t ports = (uint64_t{local_port} << 16) | remote_port;
    return Mum(a ^ ports ^ s_.k1, b ^ s_.k0 ^ kC1);
  }

 private:
  static constexpr uint64_t kC0 = 0x9e3779b97f4a7c15ULL;
  static constexpr uint64_t kC1 = 0xd6e8feb86659fd93ULL;
  static constexpr uint64_t kC2 = 0xa0761d6478bd642fULL;
  static constexpr uint64_t kC3 = 0xe7037ed1a0b428dbULL;

  static uint64_t Word(const AddrKey& k, int offset) {
    uint64_t w;
    std::memcpy(&w, k.data() + offset, sizeof w);
    return w;
  }
  // The 128-bit product folded to 64 bits (wyhash's "mum").
  static uint64_t Mum(uint64_t a, uint64_t b) {
    unsigned __int128 r = static_cast<unsigned __int128>(a) * b;
    return static_cast<uint64_t>(r) ^ static_cast<uint64_t>(r >> 64);
  }

  Secret s_;
};

}  // namespace quadsock::demux

#endif  // QUADSOCK_STACK_DEMUX_FLOW_HASH_H_
