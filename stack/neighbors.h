// The neighbour cache: ARP (IPv4) and NDP (IPv6) resolution of next hops to MAC addresses.
//
// An entry is INCOMPLETE while probes go out (every `retransmit`, at most `max_probes`), then
// REACHABLE for `reachable_time` after an answer, then STALE: still used, and re-probed on use.
// Datagrams waiting for a resolution wait in a bounded queue per entry; when it is full, or
// the probes run out, they are dropped and counted. The table itself is bounded too: when it is
// full, a next hop we send to replaces the stale (or expired) entry updated longest ago, else
// the oldest reachable one; a neighbour learned from the wire takes only a stale one's place;
// permanent and unresolved entries stay. What finds no room is refused (counted).
//
// The caller supplies the time (absl::Time), so tests drive the clock. Not thread-safe: the
// Stack guards it.
//
//   NeighborTable n({});
//   if (auto mac = n.Lookup(next_hop, now)) Send(*mac); else if (n.Queue(next_hop, d, now)) Probe();
//   std::vector<PendingDatagram> ready = n.Learn(ip, mac, now, /*create=*/true);
#ifndef QUADSOCK_STACK_NEIGHBORS_H_
#define QUADSOCK_STACK_NEIGHBORS_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "stack/net/address.h"
#include "stack/net/ethernet.h"

namespace quadsock::stack {

class UdpSocket;

// A datagram that waits for its next hop's MAC address.
struct PendingDatagram {
  net::Endpoint src;
  net::Endpoint dst;
  net::IpAddress next_hop;
  std::string payload;
  // The socket that sent it: what the table drops counts as the socket's send drop. (Null in
  // tests of the table alone.)
  std::shared_ptr<UdpSocket> socket;
};

enum class NeighborState { kIncomplete, kReachable, kStale, kPermanent };
const char* NeighborStateName(NeighborState s);

struct NeighborInfo {
  net::IpAddress address;
  std::optional<net::MacAddress> mac;
  NeighborState state = NeighborState::kIncomplete;
  absl::Time updated;
  size_t pending = 0;
};

struct NeighborCounters {
  uint64_t probes_sent = 0;
  uint64_t resolved = 0;
  uint64_t failed = 0;             // entries whose probes ran out
  uint64_t dropped_unresolved = 0; // datagrams dropped because their neighbour failed
  uint64_t dropped_queue_full = 0; // datagrams dropped because the wait queue was full
  uint64_t table_full = 0;         // new neighbours refused: no room
};

// Why no neighbour can have this address (unspecified, multicast, loopback, the IPv4 broadcast
// address) or this MAC (all zeros, broadcast, multicast); null when one can.
const char* NotANeighborAddressReason(const net::IpAddress& ip);
const char* NotANeighborMacReason(const net::MacAddress& mac);
// INVALID_ARGUMENT, saying what is wrong, for an address no neighbour has.
absl::Status CheckNeighborAddress(const net::IpAddress& ip);

class NeighborTable {
 public:
  struct Options {
    absl::Duration reachable_time = absl::Seconds(30);
    absl::Duration retransmit = absl::Seconds(1);
    int max_probes = 3;
    size_t max_pending = 16;   // per neighbour
    size_t max_entries = 4096;
  };

  explicit NeighborTable(Options options) : options_(options) {}

  // The MAC to send to, if known. A stale entry is marked for a refreshing probe.
  std::optional<net::MacAddress> Lookup(const net::IpAddress& ip, absl::Time now);
  // Queues a datagram for an unresolved neighbour. Returns true when a probe should go out now
  // (a new entry). A full queue drops the datagram (counted).
  bool Queue(PendingDatagram datagram, absl::Time now);
  // Records an answer (ARP reply or request, neighbour advertisement). With create=false only
  // an existing entry is updated (RFC 826's merge rule). Returns the datagrams now sendable.
  std::vector<PendingDatagram> Learn(const net::IpAddress& ip, const net::MacAddress& mac,
                                     absl::Time now, bool create);
  // Timers: the neighbours to probe now. Entries whose probes ran out are removed and their
  // datagrams dropped (counted).
  std::vector<net::IpAddress> Tick(absl::Time now);

  // Administration: a permanent entry (never probed, never expires), and removal. Datagrams
  // that were waiting for the neighbour go to `ready`, now sendable (dropped and counted when
  // it is null). INVALID_ARGUMENT for an address that is not a unicast host's
  // (CheckNeighborAddress) or a MAC that is zero, multicast or broadcast; RESOURCE_EXHAUSTED
  // past max_entries / 2 permanent entries, or when the table is full of entries that may not go.
  absl::Status SetPermanent(const net::IpAddress& ip, const net::MacAddress& mac, absl::Time now,
                            std::vector<PendingDatagram>* ready = nullptr);
  absl::Status Remove(const net::IpAddress& ip);
  std::vector<NeighborInfo> List() const;
  const NeighborCounters& counters() const { return counters_; }

 private:
  struct Entry {
    std::optional<net::MacAddress> mac;
    NeighborState state = NeighborState::kIncomplete;
    absl::Time updated;
    absl::Time next_probe;
    int probes = 0;
    bool refresh = false;  // a stale entry was used: probe it once
    std::deque<PendingDatagram> pending;
  };
  bool Expired(const Entry& e, absl::Time now) const;
  // Room for one more entry: false (counted) when the table is full of what may not go.
  bool MakeRoom(absl::Time now, bool evict_reachable);

  Options options_;
  absl::flat_hash_map<net::IpAddress, Entry> entries_;
  NeighborCounters counters_;
};

}  // namespace quadsock::stack

#endif  // QUADSOCK_STACK_NEIGHBORS_H_
