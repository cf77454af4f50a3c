// Neighbour resolution: ARP (IPv4) and NDP (IPv6) on the wire, over the neighbour cache
// (stack/neighbors.h) and the datagrams that wait in it for a next hop's MAC address.
//
// On the poll threads it answers ARP requests and neighbour solicitations for our addresses,
// learns neighbours from what they send (RFC 826's merge rule; RFC 4861 for NDP), resolves a
// datagram's next hop or queues the datagram until the neighbour answers, and sends the probes
// the cache's timers ask for. The administration sets and removes permanent entries. The cache
// is shared by all poll threads and the control plane under one lock; the routes and our
// addresses are fixed for the stack's life and read without one. Internal to the stack.
//
//   NeighborResolution n(options, routes, local);
//   n.HandleArp(engine, frame, now);                              // poll thread
//   std::optional<net::MacAddress> mac = n.Resolve(engine, next_hop, now, [&] { return d; });
#ifndef QUADSOCK_STACK_INTERNAL_NEIGHBOR_RESOLUTION_H_
#define QUADSOCK_STACK_INTERNAL_NEIGHBOR_RESOLUTION_H_

#include <atomic>
#include <mutex>
#include <optional>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "stack/internal/local_addresses.h"
#include "stack/neighbors.h"
#include "stack/net/address.h"
#include "stack/net/ethernet.h"
#include "stack/net/frame.h"
#include "stack/routes.h"

namespace quadsock::stack {

class PollEngine;

// A poll thread's copy of recent answers of the neighbour cache, so that a datagram to a known
// next hop takes no lock: an entry holds for at most kTtl, and all go when the cache changes
// (NeighborResolution's generation moves: a neighbour learned, set or removed). Bounded: when
// full it starts again empty. One poll thread's own; no lock.
class NeighborShortcut {
 public:
  static constexpr absl::Duration kTtl = absl::Seconds(1);
  static constexpr size_t kMaxEntries = 4096;

  std::optional<net::MacAddress> Find(const net::IpAddress& ip, absl::Time now,
                                      uint64_t generation) {
    if (generation != generation_) {
      entries_.clear();
      generation_ = generation;
      return std::nullopt;
    }
    auto it = entries_.find(ip);
    if (it == entries_.end() || it->second.expires <= now) return std::nullopt;
    return it->second.mac;
  }
  void Put(const net::IpAddress& ip, const net::MacAddress& mac, absl::Time now,
           uint64_t generation) {
    if (generation != generation_ || entries_.size() >= kMaxEntries) {
      entries_.clear();
      generation_ = generation;
    }
    entries_[ip] = {mac, now + kTtl};
  }

 private:
  struct Entry {
    net::MacAddress mac;
    absl::Time expires;
  };
  absl::flat_hash_map<net::IpAddress, Entry> entries_;
  uint64_t generation_ = 0;
};

class NeighborResolution {
 public:
  // `routes` and `local` are fixed for the stack's life.
  NeighborResolution(NeighborTable::Options options, const RouteTable& routes,
                     const LocalAddresses& local)
      : routes_(routes), local_(local), table_(options, Gateways(routes)) {}

  // ---- Poll thread ----
  void HandleArp(PollEngine& engine, const net::ParsedFrame& f, absl::Time now);
  void HandleNdp(PollEngine& engine, const net::ParsedFrame& f, absl::Time now);
  // The MAC address of `next_hop`, when known (from the engine's NeighborShortcut without a
  // lock, else from the cache). When not, the datagram `waiting()` makes waits for the
  // neighbour (or is dropped and counted when it cannot), and a new neighbour is probed.
  std::optional<net::MacAddress> Resolve(PollEngine& engine, const net::IpAddress& next_hop,
                                         absl::Time now,
                                         absl::FunctionRef<PendingDatagram()> waiting);
  // The cache's timers: probes neighbours that are due, forgets those that never answered.
  void Tick(PollEngine& engine, absl::Time now);

  // ---- Administration, any thread ----
  // A permanent entry for a unicast host on a connected network (INVALID_ARGUMENT otherwise,
  // saying why; RESOURCE_EXHAUSTED when the table has no room). The datagrams that waited for
  // it go to `ready`, to be sent.
  absl::Status SetPermanent(const net::IpAddress& ip, const net::MacAddress& mac, absl::Time now,
                            std::vector<PendingDatagram>& ready);
  absl::Status Remove(const net::IpAddress& ip);
  std::vector<NeighborInfo> List() const;
  NeighborCounters counters() const;

 private:
  // Applies what a packet says of neighbour `ip` (NeighborTable::Learn), and sends the
  // datagrams that were waiting for it. A sender on none of our connected networks is counted
  // (neighbor_messages_off_link) and not learned.
  void Learn(PollEngine& engine, const net::IpAddress& ip, const NeighborAdvert& advert,
             absl::Time now);
  void SendProbe(PollEngine& engine, const net::IpAddress& target);
  // Whether an ARP or NDP message may speak for `ip`: a neighbour's address (not ours, not a
  // connected network's broadcast, no group).
  bool IsNeighborAddress(const net::IpAddress& ip) const;

  static std::vector<net::IpAddress> Gateways(const RouteTable& routes) {
    std::vector<net::IpAddress> g;
    for (net::Family f : {net::Family::kV4, net::Family::kV6}) {
      if (std::optional<net::IpAddress> a = routes.gateway(f)) g.push_back(*a);
    }
    return g;
  }

  // Moves whenever an entry is learned, set or removed: the engines' shortcuts start again.
  void Changed() { generation_.fetch_add(1, std::memory_order_release); }

  const RouteTable& routes_;
  const LocalAddresses& local_;
  std::atomic<uint64_t> generation_{1};
  // std::mutex, not absl::Mutex: ThreadSanitizer sees it unaided (sanitizers/tsan.cc).
  mutable std::mutex mu_;
  NeighborTable table_ ABSL_GUARDED_BY(mu_);
};

}  // namespace quadsock::stack

#endif  // QUADSOCK_STACK_INTERNAL_NEIGHBOR_RESOLUTION_H_
