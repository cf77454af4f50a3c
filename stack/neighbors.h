// The neighbour cache: ARP (IPv4) and NDP (IPv6) resolution of next hops to MAC addresses.
//
// An entry is INCOMPLETE while probes go out (every `retransmit`, at most `max_probes`), then
// REACHABLE for `reachable_time` after a solicited answer, then STALE: still used, and re-probed
// `delay_first_probe` after its first use. What the wire says changes entries as RFC 4861 7.2.3 and 7.2.5 say (Learn): an
// unsolicited message makes or leaves an entry STALE, an advertisement without the override
// flag never replaces a MAC, and a neighbour is made only from a request or solicitation for
// us. Datagrams waiting for a resolution wait in a bounded queue per entry; when it is full,
// or the probes run out, they are dropped and counted.
//
// Everything is bounded, so that one sender (a session sending to thousands of made-up
// on-link addresses, or a flood of ARP from the wire) cannot take the table from the others:
//   - unresolved (INCOMPLETE) entries: at most `max_unresolved` in all and
//     `max_unresolved_per_owner` made by one owner's datagrams (PendingDatagram::owner, the
//     session: stack::OpenOptions::owner) and `max_unresolved_per_group` by one group's (the
//     session's peer: OpenOptions::group); a datagram past any is refused and counted;
//   - probes: a token bucket (`probes_per_second`, `probe_burst`) for every ARP request and
//     solicitation; a new resolution without a token is refused, a retransmission put off;
//   - entries: `max_entries`. When full, a next hop we send to takes the place of the oldest
//     INCOMPLETE entry, else the stale (or expired) one updated longest ago, else the oldest
//     reachable one; a neighbour learned from the wire takes only the place of the oldest
//     other neighbour learned from the wire that is stale (or expired), found in O(1) (a flood
//     of solicitations from made-up sources costs a frame no scan of the table);
//   - neighbours learned from the wire: a token bucket (`learned_per_second`, `learn_burst`);
//     past it a sender is answered but not learned (counted), so a flood makes at most so many
//     entries (and tells on_entry, and makes the poll threads look up again) a second.
// The gateways' entries are never evicted nor refused (by a cap or the bucket), and permanent
// entries, set by the administration, are neither evicted nor changed by the wire: they are
// the protection against a forged ARP or NDP message.
//
// The caller supplies the time, on a monotonic clock (stack/monotonic_clock.h), so tests drive
// it. Not thread-safe: the Stack guards it.
//
//   NeighborTable n({}, /*gateways=*/{gw});
//   if (auto mac = n.Lookup(next_hop, now)) Send(*mac); else if (n.Queue(d, now)) Probe();
//   std::vector<PendingDatagram> ready = n.Learn(ip, {.mac = mac, .solicited = true}, now);
#ifndef QUADSOCK_STACK_NEIGHBORS_H_
#define QUADSOCK_STACK_NEIGHBORS_H_

#include <cstdint>
#include <deque>
#include <functional>
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
  // Who sent it (the socket's OpenOptions::owner: its session; 0 for none): the unresolved
  // entries it makes count against that owner's cap, and its group's (OpenOptions::group: the
  // session's peer; 0 for none) against the group's.
  uint64_t owner = 0;
  uint64_t group = 0;
};

// What an ARP or NDP message says of a neighbour, and how much it may change (Learn).
struct NeighborAdvert {
  // Its MAC: an ARP sender's, a solicitation's source or an advertisement's target link-layer
  // option. An advertisement without the option only confirms or refreshes.
  std::optional<net::MacAddress> mac;
  bool solicited = false;  // an answer to our probe: the NA's S flag, an ARP reply to us
  bool override = true;    // may replace a different MAC: the NA's O flag; always for ARP, NS
  bool create = false;     // may make an entry: a request or solicitation for one of ours
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
  // Datagrams refused a new resolution: their owner had max_unresolved_per_owner pending (or
  // its group max_unresolved_per_group), or the table max_unresolved.
  uint64_t refused_owner_unresolved = 0;
  uint64_t refused_unresolved = 0;
  // Probes not sent at once for want of a token: a new resolution refused (its datagram
  // dropped), or a retransmission put off to a later tick.
  uint64_t probes_rate_limited = 0;
  uint64_t evicted = 0;  // entries pushed out to make room
  uint64_t learn_rate_limited = 0;  // senders on the wire not learned for the learning bucket
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
    // A stale entry used waits this long before its refreshing probe (RFC 4861's DELAY state):
    // an answer meanwhile (a neighbour we just heard from) spares the probe.
    absl::Duration delay_first_probe = absl::Seconds(5);
    int max_probes = 3;
    size_t max_pending = 16;   // per neighbour
    size_t max_entries = 4096;
    size_t max_unresolved = 256;           // INCOMPLETE entries in all
    size_t max_unresolved_per_owner = 64;  // INCOMPLETE entries one owner's datagrams made
    size_t max_unresolved_per_group = 128;  // INCOMPLETE entries one group's owners made
    uint32_t probes_per_second = 256;      // ARP requests and solicitations, all together
    uint32_t probe_burst = 256;
    uint32_t learned_per_second = 1024;    // new entries from requests for us, all together
    uint32_t learn_burst = 1024;
    // Told of every entry the table makes (present) and drops (not present), as it does: the
    // AF_XDP stack steers the announcements about its neighbours to itself so (afxdp_stack.cc).
    std::function<void(const net::IpAddress& ip, bool present)> on_entry;
  };

  // `gateways`: the next hops of the default routes, whose entries are never evicted nor
  // refused.
  explicit NeighborTable(Options options, std::vector<net::IpAddress> gateways = {})
      : options_(options),
        gateways_(std::move(gateways)),
        probes_{static_cast<double>(options.probe_burst)},
        learning_{static_cast<double>(options.learn_burst)} {}

  // The MAC to send to, if known. A stale entry is marked for a refreshing probe.
  std::optional<net::MacAddress> Lookup(const net::IpAddress& ip, absl::Time now);
  // Queues a datagram for an unresolved neighbour. Returns true when a probe should go out now
  // (a new entry). A full queue drops the datagram (counted), and so does a new resolution
  // past the unresolved caps, the probe bucket or the table's room (each counted).
  bool Queue(PendingDatagram datagram, absl::Time now);
  // Records what an ARP or NDP message says (see NeighborAdvert), as RFC 4861 7.2.5 says for
  // an advertisement and 7.2.3 for a solicitation (ARP alike, with override always set):
  //   - no entry: made, STALE, only when `create` (and there is room); else nothing;
  //   - INCOMPLETE: takes the MAC (none: ignored), REACHABLE if solicited, else STALE;
  //   - with a MAC: a different one without override leaves the MAC, and a REACHABLE entry
  //     becomes STALE; otherwise the MAC is taken, and the entry becomes REACHABLE if
  //     solicited, STALE if the MAC changed, and else keeps its state;
  //   - permanent: never changed.
  // Returns the datagrams now sendable (those that waited for an INCOMPLETE entry).
  std::vector<PendingDatagram> Learn(const net::IpAddress& ip, const NeighborAdvert& advert,
                                     absl::Time now);
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
  // Counts the changes that may make a MAC looked up before wrong or stale (an entry erased,
  // its MAC or state changed); not new entries. Callers that keep lookups (the poll threads'
  // shortcuts) need to look again only when it moved.
  uint64_t changes() const { return changes_; }

 private:
  struct Entry {
    std::optional<net::MacAddress> mac;
    NeighborState state = NeighborState::kIncomplete;
    absl::Time updated;
    absl::Time next_probe;
    int probes = 0;
    bool refresh = false;  // a stale entry was used: probe it once
    bool gateway = false;  // never evicted nor refused
    uint64_t owner = 0;    // whose datagram made it, while INCOMPLETE
    uint64_t group = 0;    // and the owner's group
    uint64_t learned = 0;  // its place in learned_ when the wire made it (0: not the wire's)
    std::deque<PendingDatagram> pending;
  };
  using Iterator = absl::flat_hash_map<net::IpAddress, Entry>::iterator;

  bool Expired(const Entry& e, absl::Time now) const;
  // Room for one more next hop: false (counted) when the table is full of what may not go. It
  // may push out an INCOMPLETE, stale or reachable entry (a scan: next hops are bounded by the
  // unresolved caps and the probe bucket, not by what the wire sends).
  bool MakeRoom(absl::Time now);
  // Room for a neighbour from the wire: the oldest one the wire made that is still there,
  // still the wire's and stale (or expired) goes; false (counted) when there is none. O(1)
  // amortized: each entry the wire made is looked at once here.
  bool MakeRoomForLearned(absl::Time now);
  // A token bucket: takes a token, refilling first; false when there is none.
  struct Bucket {
    double tokens;
    absl::Time refill = absl::InfinitePast();
    bool Take(absl::Time now, double per_second, double burst);
  };
  // A new resolution for `d`: false (counted, `d` dropped) past a cap or the probe bucket.
  bool MayResolve(const PendingDatagram& d, bool gateway, absl::Time now);
  bool TakeProbeToken(absl::Time now) {
    return probes_.Take(now, options_.probes_per_second, options_.probe_burst);
  }
  // An entry leaves INCOMPLETE (resolved, made permanent or erased): the caps count it no more.
  void Resolved(Entry& e);
  // Makes an entry (state INCOMPLETE, nothing else set) and tells on_entry.
  Iterator Insert(const net::IpAddress& ip);
  // Erases an entry, dropping (counted) the datagrams that waited there, and tells on_entry.
  void Erase(Iterator it);

  Options options_;
  const std::vector<net::IpAddress> gateways_;
  absl::flat_hash_map<net::IpAddress, Entry> entries_;
  size_t unresolved_ = 0;                                  // INCOMPLETE entries
  absl::flat_hash_map<uint64_t, size_t> unresolved_by_owner_;  // of them, by owner
  absl::flat_hash_map<uint64_t, size_t> unresolved_by_group_;  // of them, by group (not 0)
  Bucket probes_;
  Bucket learning_;
  // The entries the wire made, oldest first: (address, Entry::learned). One that was erased,
  // or made again since, is skipped when it comes to the front; compacted past twice the
  // table's size.
  std::deque<std::pair<net::IpAddress, uint64_t>> learned_;
  uint64_t next_learned_ = 1;
  uint64_t changes_ = 0;
  NeighborCounters counters_;
};

}  // namespace quadsock::stack

#endif  // QUADSOCK_STACK_NEIGHBORS_H_
