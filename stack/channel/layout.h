// The session data channel's shared memory: what quadsockd and an application on the same host
// both map (a memfd that quadsockd makes, seals against shrinking and growing, and passes over
// a Unix socket). This header is the whole contract between the two sides; channel.h is the
// stack's side (the producer of received datagrams), reader.h the application's.
//
// Layout (all offsets from the start of the memfd, every part 64-byte aligned):
//   ChannelHeader                   written once by quadsockd before the memfd is passed
//   RX ring 0 .. rings-1            stack -> application, one per poll thread (single producer,
//                                   single consumer: several RX queues need no lock)
//   TX ring (ring number `rings`)   application -> stack: datagrams to send (one producer, the
//                                   application; one consumer, a poll thread)
// Each ring: RingControl (the two indexes and the consumer's "sleeping" flag, a cache line
// each), `slots` ChannelDescriptors, then `slots` buffers of `buffer_bytes`. Slot i's buffer is
// buffer i, always: a descriptor names no buffer, so there is no buffer index to check.
//
// The descriptors that come with the memfd: one per RX ring, the read end of a pipe whose write
// end only quadsockd holds (it writes a byte to wake the application: the pipe holds a page, and
// a full one means a wake-up is pending anyway; whatever the application does to its end, its
// flags or its reading, cannot make that write wait), then an eventfd for the TX ring (the
// application writes it to wake the poll thread, under the same rule with the roles turned
// round; quadsockd only watches it, edge-triggered, and never reads or writes it). Nothing an
// application can do to a descriptor it shares with quadsockd blocks a thread of quadsockd's.
//
// Indexes run freely (uint32, wrapping); slot = index & (slots - 1). The producer writes slots
// in [consumer + (producer - consumer) ...) and publishes them by a release store of producer;
// the consumer reads slots up to producer (acquire) and gives them back by a release store of
// consumer. Wakeups: a consumer that wants to sleep sets `sleeping` to a new non-zero epoch (a
// counter of its sleeps), then looks at producer once more, and only then waits on the ring's
// wake-up descriptor, and clears `sleeping` once awake; a producer publishes a batch of datagrams and then
// (at once, or a few of its turns later, but before it sleeps) looks at `sleeping`, and writes
// the wake-up if it holds an epoch it has not woken yet (not only into a ring that looks empty:
// the consumer gives slots back after taking them, so it may be going to sleep on a ring whose
// consumer index still counts them). Those four accesses are sequentially consistent: one side
// always sees the other's. So a wake-up is written once per sleep of the consumer at most,
// never per datagram.
//
// Everything the application can write (RX consumer and sleeping, the TX ring's producer,
// descriptors and buffers) is untrusted input to quadsockd: an index it could not have written
// ends the channel; a TX descriptor is copied before it is checked (socket index, length,
// destination), and a bad one is dropped and counted; `sleeping` only decides whether a
// wake-up is written.
//
//   const ChannelHeader& h = *reinterpret_cast<const ChannelHeader*>(base);
//   if (absl::Status s = CheckHeader(h, memfd_size); !s.ok()) ...
//   RingView ring = RingAt(base, h, 0);
#ifndef QUADSOCK_STACK_CHANNEL_LAYOUT_H_
#define QUADSOCK_STACK_CHANNEL_LAYOUT_H_

#include <unistd.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace quadsock::channel {

inline constexpr uint64_t kMagic = 0x314e4148434b5351;  // "QSKCHAN1", little-endian
inline constexpr uint32_t kVersion = 1;
inline constexpr uint32_t kMaxRings = 64;
inline constexpr size_t kLine = 64;
// What an RX ring's wake-up pipe holds: one read of this many bytes empties it.
inline constexpr size_t kWakePipeBytes = 4096;

// Empties an RX ring's wake-up descriptor after it was readable (a pipe, or an eventfd: it
// takes 8 bytes of the buffer). Never blocks a reader that was told it is readable and is its
// only reader.
inline void DrainWakeups(int fd) {
  char drain[kWakePipeBytes];
  (void)!read(fd, drain, sizeof(drain));
}

struct ChannelHeader {
  uint64_t magic;
  uint32_t version;
  uint32_t rings;         // RX rings, one per poll thread (the TX ring comes after them)
  uint32_t slots;         // per ring, a power of two
  uint32_t buffer_bytes;  // per slot, a multiple of 64
  uint64_t ring_bytes;    // each ring's part: control, descriptors, buffers
  uint64_t total_bytes;   // the whole memfd
};
static_assert(sizeof(ChannelHeader) <= kLine);

struct RingControl {
  alignas(kLine) std::atomic<uint32_t> producer;  // written by the producer only
  alignas(kLine) std::atomic<uint32_t> consumer;  // written by the consumer only
  alignas(kLine) std::atomic<uint32_t> sleeping;  // non-zero: the consumer's sleep epoch
};
static_assert(sizeof(RingControl) == 3 * kLine);
static_assert(std::atomic<uint32_t>::is_always_lock_free, "atomics in shared memory");

// One datagram: received (RX rings) or to send (the TX ring: `peer` is the destination, with
// kHasPeer; without it the connected peer; `local` the source address asked for, as with
// IP_PKTINFO, with kHasLocal; without it the socket's own or the route's; local_port, arrival
// and sequence unused). Addresses are 16 bytes: IPv4 ones v4-mapped (::ffff:a.b.c.d), with
// kIpv4 set in flags for the peer's.
struct ChannelDescriptor {
  uint32_t socket;          // the socket's index in its session (OpenResponse.index)
  uint32_t length;          // payload bytes, at the start of the slot's buffer
  int64_t arrival_unix_ns;  // when the stack received it
  uint64_t sequence;        // per socket, from 1: a gap means datagrams were dropped
  uint8_t peer[16];
  uint8_t local[16];
  uint16_t peer_port;
  uint16_t local_port;
  uint32_t flags;
};
static_assert(sizeof(ChannelDescriptor) == kLine);
inline constexpr uint32_t kIpv4 = 1;
inline constexpr uint32_t kHasPeer = 2;
inline constexpr uint32_t kHasLocal = 4;

inline constexpr size_t kHeaderBytes = 4096;  // the header's page

inline constexpr size_t RoundUp(size_t n, size_t to) { return (n + to - 1) / to * to; }

// A ring's part of the memfd.
inline constexpr size_t RingBytes(uint32_t slots, uint32_t buffer_bytes) {
  return RoundUp(sizeof(RingControl) + size_t{slots} * sizeof(ChannelDescriptor) +
                     size_t{slots} * buffer_bytes,
                 4096);
}

// Whether a header describes a channel that fits in `size` bytes; the reader checks before it
// trusts a single offset.
inline absl::Status CheckHeader(const ChannelHeader& h, size_t size) {
  if (h.magic != kMagic || h.version != kVersion) {
    return absl::FailedPreconditionError("not a quadsock channel of this version");
  }
  if (h.rings == 0 || h.rings > kMaxRings || h.slots == 0 || (h.slots & (h.slots - 1)) != 0 ||
      h.slots > (1u << 20) || h.buffer_bytes == 0 || h.buffer_bytes % kLine != 0 ||
      h.buffer_bytes > (1u << 16)) {
    return absl::FailedPreconditionError("the channel's header has impossible sizes");
  }
  if (h.ring_bytes != RingBytes(h.slots, h.buffer_bytes) ||
      h.total_bytes != kHeaderBytes + (h.rings + 1) * h.ring_bytes || h.total_bytes > size) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the channel's header says ", h.total_bytes, " bytes; the memory has ", size));
  }
  return absl::OkStatus();
}

// One ring inside a mapped channel whose header was checked: RX rings 0..rings-1, the TX ring
// `rings`.
struct RingView {
  RingControl* control;
  ChannelDescriptor* descriptors;
  uint8_t* buffers;
  uint32_t mask;
  uint32_t buffer_bytes;

  ChannelDescriptor& descriptor(uint32_t index) const { return descriptors[index & mask]; }
  uint8_t* buffer(uint32_t index) const {
    return buffers + size_t{index & mask} * buffer_bytes;
  }
};

inline RingView RingAt(uint8_t* base, const ChannelHeader& h, uint32_t ring) {
  uint8_t* start = base + kHeaderBytes + size_t{ring} * h.ring_bytes;
  auto* control = reinterpret_cast<RingControl*>(start);
  auto* descriptors = reinterpret_cast<ChannelDescriptor*>(start + sizeof(RingControl));
  uint8_t* buffers = start + sizeof(RingControl) + size_t{h.slots} * sizeof(ChannelDescriptor);
  return {control, descriptors, buffers, h.slots - 1, h.buffer_bytes};
}

}  // namespace quadsock::channel

#endif  // QUADSOCK_STACK_CHANNEL_LAYOUT_H_
