// Path MTU discovery's memory (RFC 1191, RFC 8201): the MTU an ICMP "fragmentation needed" or
// "packet too big" reported for a destination, lower than the link's, for ten minutes. Bounded:
// at most `capacity` destinations; a new one over it replaces the entry that expires first.
// Read by every send (the callers' threads and the poll threads), written by the poll threads:
// a mutex, and one relaxed load when the cache is empty (the common case) instead.
//
//   PathMtuCache cache(4096);
//   cache.Lower(dst, 1400, now);   // from a validated ICMP message
//   size_t mtu = cache.Get(dst, link_mtu);
//   cache.Expire(now);             // every timer period: Get keeps entries until then
#ifndef QUADSOCK_STACK_INTERNAL_PATH_MTU_H_
#define QUADSOCK_STACK_INTERNAL_PATH_MTU_H_

#include <atomic>
#include <cstddef>
#include <mutex>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/time/time.h"
#include "stack/net/address.h"

namespace quadsock::stack {

class PathMtuCache {
 public:
  static constexpr absl::Duration kLifetime = absl::Minutes(10);  // RFC 1191 5, RFC 8201 4
  // The least MTU a report may set: IPv6's minimum link MTU (RFC 8200 5; a report below it is
  // discarded, RFC 8201 4), and for IPv4 Linux's min_pmtu (552): a forged report of 68 would
  // otherwise cut every datagram into 48-byte fragments.
  static constexpr size_t kMinV4 = 552;
  static constexpr size_t kMinV6 = 1280;

  explicit PathMtuCache(size_t capacity) : capacity_(capacity) {}

  // What a report of `mtu` for `dst` makes of it, given the link's MTU: the MTU to remember, or
  // 0 to ignore it (IPv6 below 1,280 or not below the link's; IPv4 below 68, which no link has,
  // or not below the link's). IPv4 reports between 68 and 552 count as 552.
  static size_t Validate(const net::IpAddress& dst, size_t mtu, size_t link_mtu);
  // Remembers `mtu` (validated) for `dst` until now + kLifetime, unless a lower one is held.
  void Lower(const net::IpAddress& dst, size_t mtu, absl::Time now);
  // The MTU to send to `dst` with: the one remembered, or `link_mtu`.
  size_t Get(const net::IpAddress& dst, size_t link_mtu) const;
  void Expire(absl::Time now);
  size_t size() const;

 private:
  struct Entry {
    size_t mtu;
    absl::Time expires;
  };
  const size_t capacity_;
  std::atomic<bool> empty_{true};
  mutable std::mutex mu_;
  absl::flat_hash_map<net::IpAddress, Entry> entries_ ABSL_GUARDED_BY(mu_);
};

}  // namespace quadsock::stack

#endif  // QUADSOCK_STACK_INTERNAL_PATH_MTU_H_
