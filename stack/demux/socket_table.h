// The UDP socket table: the kernel's three-level demultiplexer (hash by port, hash2 by local
// address and port, hash4 by the full 4-tuple; Linux 6.13+ net/ipv4/udp.c) for IPv4 and IPv6
// in one table, with lock-free lookups for data-plane threads and mutex-guarded writers.
//
//   SocketTable::Options options;
//   options.route = [](const net::IpAddress& peer) -> absl::StatusOr<net::IpAddress> {...};
//   std::unique_ptr<SocketTable> table = SocketTable::Create(options).value();
//   SocketId s = table->Open({.family = net::Family::kV4, .cookie = my_socket}).value();
//   table->Bind(s, *net::Endpoint::Parse("0.0.0.0:53")).value();
//   table->Connect(s, *net::Endpoint::Parse("10.1.0.9:4000"));   // enters hash4
//
//   // On a data-plane thread (see rcu.h for the reader rules):
//   RcuReaderThread reader;
//   LookupContext ctx(*table);
//   std::optional<LookupResult> r = table->Lookup(ctx, FlowKey{src, sport, dst, dport, ifindex});
//   reader.Quiescent();
//
// Lookup order, as __udp4_lib_lookup: hash4 (only when the hash2 slot's hash4_cnt is non-zero),
// then hash2 at the exact destination address with compute_score-style scoring, then hash2 at
// the wildcard address. Where quadsock differs from the kernel:
//   - with hash4 on, a connected socket lives only in hash4, not also in hash2, so new flows to
//     a port never score its connected sockets (with hash4 off they are scored in hash2);
//   - entries are immutable snapshots: a changing socket gets a new entry that is linked before
//     the old one is unlinked (with a grace period in between when lookups check the new place
//     first), so no lookup misses a socket while its address changes;
//   - the slot arrays grow and shrink online, so chains stay short up to millions of sockets;
//   - reconnect always rehashes hash4, and disconnect always leaves nothing in hash4;
//   - a reuseport group spreads over its unconnected members only.
//
// After Close(id) returns, no lookup that starts later returns `id`; lookups already running
// may. Free what a cookie points to only after WaitForReaders() (or with RcuDefer).
#ifndef QUADSOCK_STACK_DEMUX_SOCKET_TABLE_H_
#define QUADSOCK_STACK_DEMUX_SOCKET_TABLE_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "stack/demux/flow_hash.h"
#include "stack/demux/internal/buckets.h"
#include "stack/demux/internal/port_index.h"
#include "stack/demux/rcu.h"
#include "stack/net/address.h"

namespace quadsock::demux {

using SocketId = uint64_t;

// IP_MTU_DISCOVER / IPV6_MTU_DISCOVER (Linux's IP_PMTUDISC_*): whether IPv4 datagrams leave
// with DF set, and whether a datagram over the path MTU is cut into fragments or refused.
// kWant (Linux's default): DF set on a datagram that fits, fragments for one that does not;
// kDo: DF always, and a datagram over the path MTU is refused; kDont: DF never.
enum class PmtuDiscovery : uint8_t { kWant, kDo, kDont };

struct SocketOptions {
  net::Family family = net::Family::kV4;
  bool v6only = false;        // IPv6 only: an IPv6 socket bound to :: receives no IPv4
  bool reuse_port = false;    // SO_REUSEPORT: share (addr, port) in a reuseport group
  uint32_t bound_device = 0;  // SO_BINDTODEVICE: interface index, 0 = any
  uintptr_t cookie = 0;       // returned by lookups; the table never dereferences it
  // Who the socket belongs to (quadsockd: its session). reuse_port sockets share a port only
  // with sockets of the same owner, as Linux lets only sockets of one uid share one: another
  // owner's socket is ALREADY_EXISTS, and never joins (or takes flows from) the group.
  uint64_t owner = 0;
  // The owners' group (quadsockd: the session's peer, all its sessions): what a group may
  // hold together is capped beside what each owner may (the neighbour table's unresolved
  // entries). 0: none. The table ignores it.
  uint64_t group = 0;
  PmtuDiscovery pmtu_discovery = PmtuDiscovery::kWant;  // for sends; the table ignores it
};

// One received datagram's demultiplexing key. The family is that of `dst`.
struct FlowKey {
  net::IpAddress src;
  uint16_t src_port = 0;
  net::IpAddress dst;
  uint16_t dst_port = 0;
  uint32_t device = 0;  // interface index the datagram arrived on
};

struct LookupResult {
  SocketId id = 0;
  uintptr_t cookie = 0;
  friend bool operator==(const LookupResult&, const LookupResult&) = default;
};

enum class SocketState { kOpen, kBound, kConnected };

struct SocketInfo {
  SocketId id = 0;
  SocketOptions options;
  SocketState state = SocketState::kOpen;
  net::Endpoint local;   // unset (port 0) while open
  net::Endpoint remote;  // unset (port 0) unless connected
  bool in_hash4 = false;
};

// Lookup counters. Chain walks count entries visited per lookup, all stages together.
struct TableStats {
  static constexpr int kHistogramBuckets = 8;  // 0, 1, 2, 3, 4-7, 8-15, 16-31, 32+
  uint64_t lookups = 0;
  uint64_t misses = 0;  // no socket found
  uint64_t hash4_hits = 0;
  uint64_t hash4_misses = 0;   // hash4 tried (hash4_cnt non-zero) without a match
  uint64_t hash2_lookups = 0;  // hash2 chains walked (exact and wildcard passes)
  uint64_t chain_steps = 0;    // entries visited
  uint64_t scored = 0;         // hash2 entries run through the score function
  std::array<uint64_t, kHistogramBuckets> chain_histogram{};
  uint64_t resizes = 0;
  uint64_t slots = 0;  // current size of each slot array
  uint64_t sockets = 0;
  uint64_t hash4_entries = 0;
  uint64_t hash2_entries = 0;
};

class SocketTable;

// A reader thread's handle for lookups in one table: holds that thread's counters (so the
// lookup path writes only thread-local cache lines). Create one per table per data-plane thread,
// on a thread registered with RcuReaderThread; use it only on that thread.
class LookupContext {
 public:
  explicit LookupContext(SocketTable& table);
  ~LookupContext();
  LookupContext(const LookupContext&) = delete;
  LookupContext& operator=(const LookupContext&) = delete;

 private:
  friend class SocketTable;
  struct Counters {
    std::atomic<uint64_t> lookups{0}, misses{0}, hash4_hits{0}, hash4_misses{0}, hash2_lookups{0},
        chain_steps{0}, scored{0};
    std::array<std::atomic<uint64_t>, TableStats::kHistogramBuckets> histogram{};
  };
  // Single writer (the owning thread): a plain add, no atomic read-modify-write.
  static void Bump(std::atomic<uint64_t>& c, uint64_t d = 1) {
    c.store(c.load(std::memory_order_relaxed) + d, std::memory_order_relaxed);
  }
  void AddTo(TableStats& s) const;

  SocketTable& table_;
  Counters counters_;
};

class SocketTable {
 public:
  // Chooses the source address for a connect() on a wildcard-bound or unbound socket.
  using RouteFn = std::function<absl::StatusOr<net::IpAddress>(const net::IpAddress& peer)>;

  struct Options {
    bool hash4 = true;               // false: the kernel's CONFIG_BASE_SMALL
    uint16_t ephemeral_low = 32768;  // ephemeral port range, inclusive
    uint16_t ephemeral_high = 60999;
    std::optional<FlowHasher::Secret> secret;  // random per table when unset
    std::optional<uint64_t> seed;              // for the ephemeral port start; random if unset
    RouteFn route;                 // required for Connect on a socket without an address
    uint32_t min_log2_slots = 4;   // the slot arrays never shrink below this
    uint32_t max_log2_slots = 24;  // nor grow above this
    // What writers replace is freed by the writer itself, after one grace period per batch
    // (RcuSynchronize), not by liburcu's call_rcu thread. That thread sleeps 10 ms between
    // batches, and a table's destructor waits for it: fine for the daemon's few tables, the
    // whole cost of a short-lived one (a fuzzer makes one per input).
    bool reclaim_synchronously = false;
  };

  static absl::StatusOr<std::unique_ptr<SocketTable>> Create(Options options);
  // No reader may be inside Lookup on this table any more.
  ~SocketTable();
  SocketTable(const SocketTable&) = delete;
  SocketTable& operator=(const SocketTable&) = delete;

  // socket(): INVALID_ARGUMENT for v6only on an IPv4 socket.
  absl::StatusOr<SocketId> Open(const SocketOptions& options);
  // bind(): port 0 picks an ephemeral port. Returns the bound endpoint. ALREADY_EXISTS when
  // the address is in use, RESOURCE_EXHAUSTED when no ephemeral port is free,
  // INVALID_ARGUMENT for an address of the wrong family, FAILED_PRECONDITION when bound.
  absl::StatusOr<net::Endpoint> Bind(SocketId id, const net::Endpoint& local);
  // connect(): enters hash4. An unbound socket is bound to an ephemeral port, a socket without
  // a local address takes the route's source address. Connecting again moves to the new peer.
  // Returns the local endpoint.
  absl::StatusOr<net::Endpoint> Connect(SocketId id, const net::Endpoint& peer);
  // connect(AF_UNSPEC): leaves hash4; gives back an address chosen by connect, and the port if
  // it was chosen automatically (the kernel's bind locks). FAILED_PRECONDITION if not connected.
  absl::Status Disconnect(SocketId id);
  // Moves a live socket to a new local address and/or port (port 0: ephemeral), keeping its
  // peer. FAILED_PRECONDITION if unbound, ALREADY_EXISTS on conflict (the socket is unchanged).
  absl::StatusOr<net::Endpoint> Rehash(SocketId id, std::optional<net::IpAddress> address,
                                       std::optional<uint16_t> port);
  // SO_BINDTODEVICE on a live socket.
  absl::Status SetBoundDevice(SocketId id, uint32_t device);
  absl::Status Close(SocketId id);
  absl::StatusOr<SocketInfo> Get(SocketId id) const;

  // The data path: never locks, never blocks. `ctx` belongs to the calling thread.
  std::optional<LookupResult> Lookup(LookupContext& ctx, const FlowKey& flow) const;
  // Lookup for each of `flows` (out[i] is Lookup(ctx, flows[i])), in passes over the batch:
  // hash every flow and prefetch its slots, then prefetch the first entry of every hash4 chain,
  // then walk the hash4 chains one entry per flow and pass (an entry that is not the flow's has
  // its successor prefetched for the next pass), then finish each lookup. A batch of flows into
  // a large table then waits for memory about once per level instead of once per flow and level.
  // The line a found socket's cookie points to is prefetched as soon as it is found, for callers
  // whose cookie is what they touch next (the stack's is its socket); a prefetch never faults,
  // so other cookies cost a wasted prefetch. out.size() must be flows.size().
  void LookupBatch(LookupContext& ctx, std::span<const FlowKey> flows,
                   std::span<std::optional<LookupResult>> out) const;

  // Waits until no lookup that started before the call is still running.
  void WaitForReaders() const { RcuSynchronize(); }

  TableStats Stats() const;
  // Bytes of memory the table uses (slot arrays, entries, writer-side records and indexes).
  size_t MemoryBytes() const;
  bool hash4_enabled() const { return options_.hash4; }

 private:
  struct Socket;
  struct Group;
  struct GroupKey {
    AddrKey local;
    uint16_t port;
    uint32_t device;
    net::Family family;
    bool v6only;
    friend bool operator==(const GroupKey&, const GroupKey&) = default;
    template <typename H>
    friend H AbslHashValue(H h, const GroupKey& k) {
      return H::combine(std::move(h), k.local, k.port, k.device, k.family, k.v6only);
    }
  };

  explicit SocketTable(Options options);

  // Writer helpers; all need mu_.
  absl::StatusOr<Socket*> Find(SocketId id) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<net::IpAddress> LocalAddressFor(const Socket& s, const net::IpAddress& a) const;
  absl::StatusOr<uint16_t> PickEphemeral(const Socket& s, const net::IpAddress& local)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool PortConflicts(const Socket& s, const net::IpAddress& local, uint16_t port) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void PortsAdd(const Socket& s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void PortsRemove(const Socket& s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void JoinGroup(Socket& s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void LeaveGroup(Socket& s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Queues the freeing of emptied groups; call after the entries pointing at them are unlinked.
  void FlushDeadGroups() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Leaves and joins the reuseport group and publishes the socket's new entry (or none).
  void Republish(Socket& s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  internal::Entry* MakeEntry(const Socket& s) const;
  void Publish(Socket& s, internal::Entry* fresh) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::atomic<internal::Entry*>& ChainHead(internal::Buckets& b, const internal::Entry& e) const;
  // Recomputes a hash4 slot's filter from its chain (after an unlink). Writers only.
  static void RefilterHash4(internal::Buckets& b, size_t slot);
  void Link(internal::Buckets& b, internal::Entry* e) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Unlink(internal::Buckets& b, internal::Entry* e) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void MaybeResize() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Resize(uint32_t log2) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Runs `free` once no reader can hold what it frees: RcuDefer, or with
  // reclaim_synchronously kept in to_free_ until FreeRetired (a full batch, or the table goes).
  void Retire(std::function<void()> free) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void FreeRetired() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Read side. A Probe is one flow's keys, hashes and slots, made before any chain is walked.
  struct Probe {
    AddrKey dst;
    AddrKey src;
    uint64_t hash2;
    uint64_t hash4;
    const internal::Hslot2* slot2;
    const std::atomic<internal::Entry*>* slot4;
    const std::atomic<uint8_t>* filter4;
    uint8_t family_bit;
  };
  Probe MakeProbe(const internal::Buckets& b, const FlowKey& flow) const;
  // Whether the flow's hash4 slot may hold its entry (the slot's filter has the flow's bit).
  // Acquire: a writer clears a bit (release) only after it linked the entry's new place.
  static bool MayHaveHash4(const Probe& p) {
    return (p.filter4->load(std::memory_order_acquire) & internal::Buckets::FilterBit(p.hash4)) !=
           0;
  }
  // The hash4 stage of one lookup: tried (the slot2's hash4_cnt is non-zero), entries
  // compared, and the match.
  struct Hash4Walk {
    bool tried = false;
    uint32_t steps = 0;
    const internal::Entry* found = nullptr;
  };
  // Starts the flow's hash4 stage: sets w.tried when the stage is tried, and returns the entry
  // to compare first (null: nothing to walk).
  const internal::Entry* StartHash4Walk(const Probe& p, Hash4Walk& w) const;
  static bool Hash4Matches(const internal::Entry& e, const FlowKey& flow, const Probe& p);
  // The rest of a lookup after its hash4 walk: hash2 when that found nothing, counters, the
  // reuseport spread.
  std::optional<LookupResult> Conclude(LookupContext& ctx, const internal::Buckets& b,
                                       const FlowKey& flow, const Probe& p,
                                       const Hash4Walk& w) const;
  const internal::Entry* ScoreChain(LookupContext& ctx, const internal::Entry* head, uint64_t hash,
                                    const FlowKey& flow, const AddrKey& dst, const AddrKey& src,
                                    uint8_t family_bit, uint32_t* steps) const;

  const Options options_;
  const FlowHasher hasher_;

  std::atomic<internal::Buckets*> buckets_;

  // std::mutex, not absl::Mutex: the system Abseil is not built for TSAN, so TSAN would not see
  // absl::Mutex ordering; pthread mutexes it intercepts.
  mutable std::mutex mu_;
  absl::flat_hash_map<SocketId, std::unique_ptr<Socket>> sockets_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<GroupKey, std::unique_ptr<Group>> groups_ ABSL_GUARDED_BY(mu_);
  internal::PortIndex ports_ ABSL_GUARDED_BY(mu_);
  std::vector<internal::ReuseGroup*> dead_groups_ ABSL_GUARDED_BY(mu_);
  std::vector<std::function<void()>> to_free_ ABSL_GUARDED_BY(mu_);  // reclaim_synchronously
  SocketId next_id_ ABSL_GUARDED_BY(mu_) = 1;
  uint64_t rng_ ABSL_GUARDED_BY(mu_);
  size_t hash2_entries_ ABSL_GUARDED_BY(mu_) = 0;
  size_t hash4_entries_ ABSL_GUARDED_BY(mu_) = 0;
  std::atomic<uint64_t> resizes_{0};

  friend class LookupContext;
  mutable std::mutex contexts_mu_;
  absl::flat_hash_set<const LookupContext*> contexts_ ABSL_GUARDED_BY(contexts_mu_);
  TableStats retired_ ABSL_GUARDED_BY(contexts_mu_);
};

}  // namespace quadsock::demux

#endif  // QUADSOCK_STACK_DEMUX_SOCKET_TABLE_H_
