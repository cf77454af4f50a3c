// The read-side structures of the socket table: what a lookup walks without a lock.
//
// An Entry is an immutable snapshot of one socket's lookup state (its tuple, device, flags,
// id and cookie); only its `next` link changes. A socket has at most one Entry in the table at
// a time: in a hash4 chain when it is connected (and hash4 is on), in a hash2 chain otherwise.
// When a socket's state changes the writer makes a new Entry, links it, and only then unlinks
// the old one, which is freed after a grace period. An entry never moves between chains, so a
// reader never follows a pointer into the wrong chain (the problem the kernel's hlist_nulls end
// markers and its CVE-2024-57974 fallback exist for).
//
// Buckets holds the two slot arrays of one size (as the kernel: hash2 and hash4 are the same
// size). Growing or shrinking builds a complete new Buckets with copies of every Entry and
// publishes it with one release store; readers keep using whichever Buckets they loaded, which
// stays complete and unchanged until freed after a grace period.
#ifndef QUADSOCK_STACK_DEMUX_INTERNAL_BUCKETS_H_
#define QUADSOCK_STACK_DEMUX_INTERNAL_BUCKETS_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "stack/demux/flow_hash.h"

namespace quadsock::demux::internal {

inline constexpr uint8_t kAcceptV4 = 1;
inline constexpr uint8_t kAcceptV6 = 2;

// What a reuseport group's spread returns: immutable, one per socket, freed after a grace
// period once the socket is closed.
struct SocketRef {
  uint64_t id;
  uintptr_t cookie;
};

// The unconnected members of a reuseport group, in a fixed-capacity array that grows by
// replacement. Writers append at `size` and remove by moving the last member into the hole
// (the kernel's sock_reuseport socks[] does the same).
struct ReuseMembers {
  explicit ReuseMembers(uint32_t cap)
      : capacity(cap), slots(new std::atomic<const SocketRef*>[cap]) {
    for (uint32_t i = 0; i < cap; ++i) slots[i].store(nullptr, std::memory_order_relaxed);
  }
  const uint32_t capacity;
  std::atomic<uint32_t> size{0};
  std::unique_ptr<std::atomic<const SocketRef*>[]> slots;
};

struct ReuseGroup {
  std::atomic<ReuseMembers*> members{nullptr};
};

// A socket's place in one chain. What a lookup reads of an entry is in its first cache line
// (the class is cache-line aligned): with 100k connected sockets each packet's entry is cold,
// and one line is one miss. The rest is read on a hash2 chain (hash), when the device or the
// reuseport group flag says so, and by writers.
struct alignas(64) Entry {
  std::atomic<Entry*> next{nullptr};
  AddrKey local{};     // zeros for the wildcard
  AddrKey remote{};    // zeros unless connected
  uint64_t id = 0;
  uintptr_t cookie = 0;
  uint16_t local_port = 0;
  uint16_t remote_port = 0;
  uint8_t accepts : 2 = 0;     // kAcceptV4 | kAcceptV6: which packet families can match
  uint8_t family_bit : 2 = 0;  // kAcceptV4 for an IPv4 socket, kAcceptV6 for IPv6
  bool connected : 1 = false;
  bool in_hash4 : 1 = false;
  bool device_bound : 1 = false;  // bound_device != 0
  bool grouped : 1 = false;       // group != nullptr
  // Second cache line.
  uint64_t hash = 0;   // the chain's hash: hash4 for a hash4 entry, hash2 otherwise
  uint64_t hash2 = 0;  // hash2 of (local, local_port): names the hash4_cnt slot
  uint32_t bound_device = 0;    // 0: any device
  ReuseGroup* group = nullptr;  // set for an unconnected member of a reuseport group
};
static_assert(offsetof(Entry, hash) == 64, "a lookup's fields fill the first cache line");

struct Hslot2 {
  std::atomic<Entry*> head{nullptr};
  // Number of hash4 entries whose (local, local_port) hash to this slot; a lookup tries
  // hash4 only when it is non-zero (the kernel's hslot2->hash4_cnt).
  std::atomic<uint32_t> hash4_cnt{0};
};

struct Buckets {
  explicit Buckets(uint32_t log2_slots)
      : log2(log2_slots),
        size(size_t{1} << log2_slots),
        hash2(new Hslot2[size]),
        hash4(new std::atomic<Entry*>[size]),
        filter4(new std::atomic<uint8_t>[size]) {
    for (size_t i = 0; i < size; ++i) {
      hash4[i].store(nullptr, std::memory_order_relaxed);
      filter4[i].store(0, std::memory_order_relaxed);
    }
  }
  size_t Index(uint64_t hash) const { return static_cast<size_t>(hash >> (64 - log2)); }
  // A hash4 chain's filter bit for an entry or a flow: from the hash's low bits, which the
  // slot's index (its high bits) does not use.
  static uint8_t FilterBit(uint64_t hash4) { return static_cast<uint8_t>(1u << (hash4 & 7)); }

  const uint32_t log2;
  const size_t size;
  std::unique_ptr<Hslot2[]> hash2;
  std::unique_ptr<std::atomic<Entry*>[]> hash4;
  // Per hash4 slot, the OR of its entries' FilterBits (writers keep it a superset: a bit is
  // set before its entry is linked, and cleared only by recomputing from the chain after an
  // unlink). A flow whose bit is clear has no entry there, and the lookup reads none: a
  // datagram of a new flow to a port with 100k connected sockets would otherwise load a cold
  // entry of another flow in most slots. One byte per slot: 128 KiB for 100k sockets.
  std::unique_ptr<std::atomic<uint8_t>[]> filter4;
};

}  // namespace quadsock::demux::internal

#endif  // QUADSOCK_STACK_DEMUX_INTERNAL_BUCKETS_H_
