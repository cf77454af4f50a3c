// The Link seam: one queue of Ethernet frames in and out, as the stack's poll thread sees it.
//
// XskLink (xsk_link.h) is an AF_XDP socket on a NIC queue; MemoryLink (memory_link.h) joins
// two stacks, or a stack and a test, in memory. The stack is written against this interface
// only, so most of it is tested without privileges.
//
// Frames are buffers the link owns (UMEM frames for AF_XDP). Receive() lends them to the caller,
// which gives each back exactly once: Release() for a frame it is done with, Transmit() for a
// frame it rewrote in place (an echo reply) or built from AllocateTx(). A Link is used by one
// thread at a time (the queue's poll thread). A frame is always one contiguous buffer, however
// the link carries it (an XskLink with multi-buffer chains UMEM frames under the seam).
//
//   FrameBuffer frames[64];
//   size_t n = link.Receive(frames);
//   for (size_t i = 0; i < n; ++i) Handle(frames[i]);      // each ends in Release or Transmit
//   link.Poll();                                           // refill, reap completions, kick
#ifndef QUADSOCK_STACK_LINK_LINK_H_
#define QUADSOCK_STACK_LINK_LINK_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <iterator>
#include <optional>
#include <span>
#include <string>

#include "absl/status/status.h"
#include "stack/net/address.h"

namespace quadsock::link {

struct FrameBuffer {
  uint8_t* data = nullptr;
  uint32_t length = 0;    // bytes of frame in `data`
  uint32_t capacity = 0;  // bytes that may be written at `data`
  uint64_t handle = 0;    // the link's name for the buffer (a UMEM address for AF_XDP)
};

struct LinkInfo {
  std::string name;        // interface name, or a test's name for a memory link
  uint32_t ifindex = 0;
  uint32_t queue = 0;
  net::MacAddress mac;
  uint32_t mtu = 1500;     // IP MTU
  std::string mode;        // how frames move: "zerocopy", "copy", "skb", "memory"
};

struct LinkCounters {
  uint64_t rx_frames = 0;
  uint64_t tx_frames = 0;
  uint64_t tx_ring_full = 0;     // Transmit found no room; frames stayed the caller's
  uint64_t no_tx_buffer = 0;     // AllocateTx found no free buffer
  uint64_t fill_ring_empty = 0;  // times the kernel may have had no buffer to receive into
  uint64_t rx_dropped = 0;       // the kernel's count of frames it could not deliver
  uint64_t wakeups = 0;          // sendto()/recvfrom() kicks for need_wakeup
  uint64_t busy_polls = 0;       // recvfrom() calls made to run the device's NAPI here
  // 1 when busy polling was asked for but the socket has no NAPI id to poll (AF_XDP copy mode
  // on some drivers, veth among them): the kernel keeps doing the receive work, and the link
  // stopped busy polling.
  uint64_t busy_poll_unavailable = 0;
  // A gauge: frames waiting on the RX ring when the poll thread last looked, before it took its
  // batch (how far the poll thread lags the kernel; the ring holds XskLink's ring_size).
  uint64_t rx_ring_fill = 0;
  // Frames longer than one buffer of the link's (AF_XDP multi-buffer: jumbo frames), received
  // and sent as chains; and received chains dropped (no large buffer free, or a chain longer
  // than the interface's MTU allows).
  uint64_t rx_chained = 0;
  uint64_t tx_chained = 0;
  uint64_t rx_chains_dropped = 0;
  uint64_t tx_kicks_failed = 0;  // sendto() kicks refused (ENETDOWN, ENOBUFS): frames wait
};

// LinkCounters as a link keeps them: written by its poll thread alone, read by any thread
// (Snapshot) without a data race. A field is named as in LinkCounters:
//   counters_.Add(&LinkCounters::rx_frames, n);   LinkCounters c = counters_.Snapshot();
class LiveLinkCounters {
 public:
  void Add(uint64_t LinkCounters::*field, uint64_t n = 1) {
    std::atomic<uint64_t>& a = At(field);
    a.store(a.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);  // one writer
  }
  void Set(uint64_t LinkCounters::*field, uint64_t value) {
    At(field).store(value, std::memory_order_relaxed);
  }
  uint64_t Get(uint64_t LinkCounters::*field) const {
    return const_cast<LiveLinkCounters*>(this)->At(field).load(std::memory_order_relaxed);
  }
  LinkCounters Snapshot() const {
    LinkCounters c;
    for (size_t i = 0; i < kFields; ++i) {
      c.*kMembers[i] = fields_[i].load(std::memory_order_relaxed);
    }
    return c;
  }

 private:
  static constexpr uint64_t LinkCounters::*kMembers[] = {
      &LinkCounters::rx_frames,       &LinkCounters::tx_frames,   &LinkCounters::tx_ring_full,
      &LinkCounters::no_tx_buffer,    &LinkCounters::fill_ring_empty, &LinkCounters::rx_dropped,
      &LinkCounters::wakeups,         &LinkCounters::busy_polls,
      &LinkCounters::busy_poll_unavailable, &LinkCounters::rx_ring_fill,
      &LinkCounters::rx_chained,      &LinkCounters::tx_chained,  &LinkCounters::rx_chains_dropped,
      &LinkCounters::tx_kicks_failed};
  static constexpr size_t kFields = std::size(kMembers);
  static_assert(kFields * sizeof(uint64_t) == sizeof(LinkCounters), "every field, once");

  std::atomic<uint64_t>& At(uint64_t LinkCounters::*field) {
    for (size_t i = 0; i < kFields; ++i) {
      if (kMembers[i] == field) return fields_[i];
    }
    return fields_[0];  // unreachable: every field is listed (the static_assert)
  }
  std::array<std::atomic<uint64_t>, kFields> fields_{};
};

class Link {
 public:
  virtual ~Link() = default;

  virtual const LinkInfo& info() const = 0;

  // Lends up to out.size() received frames to the caller. Never blocks.
  virtual size_t Receive(std::span<FrameBuffer> out) = 0;
  // Gives back frames that Receive or AllocateTx lent and that will not be transmitted.
  virtual void Release(std::span<const FrameBuffer> frames) = 0;
  // Lends an empty buffer for an outgoing frame of up to `length` bytes (its capacity is at
  // least that), or nothing when none is free or none is that long (counted in no_tx_buffer).
  virtual std::optional<FrameBuffer> AllocateTx(uint32_t length) = 0;
  // Queues frames for sending and takes them back; returns how many it took, from the front.
  // Frames it did not take (ring full: counted) are still the caller's.
  virtual size_t Transmit(std::span<const FrameBuffer> frames) = 0;
  // Housekeeping, once per poll-loop turn: reaps completed transmissions, refills the receive
  // side, wakes the kernel if it asked to be woken.
  virtual void Poll() = 0;
  // A file descriptor that polls readable when frames may have arrived, for an idle poll loop.
  virtual int wait_fd() const = 0;

  // Checks the link at rest, between two poll-loop turns, when the caller holds no frame: every
  // buffer is free or on one of the kernel's rings. OK, or INTERNAL naming the discrepancy,
  // including any frame still held (lent by Receive or AllocateTx and never given back: a
  // leak). Same thread as the rest.
  virtual absl::Status CheckFrameAccounting() const = 0;
  virtual LinkCounters counters() const = 0;
  // True when Receive itself runs the device's receive work (busy polling): the caller should
  // keep calling it for a while when it finds nothing, instead of sleeping on wait_fd().
  virtual bool IsBusyPolling() const { return false; }
};

}  // namespace quadsock::link

#endif  // QUADSOCK_STACK_LINK_LINK_H_
