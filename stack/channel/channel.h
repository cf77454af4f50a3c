// A session's data channel, the stack's side: shared memory (layout.h) that carries the
// datagrams of every socket put on it to one application, a ring per poll thread. quadsockd
// makes it, passes memfd() and the rings' event_fds() to the application (SCM_RIGHTS), and puts
// the session's sockets on it (Stack::PutOnChannel); the poll threads then copy each datagram
// from the link's buffer into the channel, the one copy on the way to the application.
//
// Never waits for the application: a full ring drops the datagram (counted here, and by the
// socket as rx_dropped). The application's writes are untrusted: a consumer index it could not
// have written ends the channel (broken(), with the reason), and nothing is delivered after.
// The memory is the producer's own view, computed at Create: a header the application scribbled
// over is never read back.
//
//   std::shared_ptr<Channel> c = Channel::Create({.rings = 2, .slots = 1024}).value();
//   SendFds(client, c->memfd(), c->event_fds());
//   c->Push(ring, socket_index, source, destination, payload, now, sequence);  // poll thread
#ifndef QUADSOCK_STACK_CHANNEL_CHANNEL_H_
#define QUADSOCK_STACK_CHANNEL_CHANNEL_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "stack/channel/layout.h"
#include "stack/net/address.h"

namespace quadsock::channel {

struct ChannelOptions {
  uint32_t rings = 1;            // one per poll thread
  uint32_t slots = 1024;         // per ring, a power of two
  uint32_t buffer_bytes = 2048;  // per slot: at least the largest payload the link carries
};

struct ChannelCounters {
  uint64_t delivered = 0;   // datagrams put into an RX ring
  uint64_t ring_full = 0;   // dropped: the application had not made room
  uint64_t wakeups = 0;     // eventfd writes
  uint64_t sends = 0;       // datagrams taken from the TX ring
  uint64_t bad_sends = 0;   // TX descriptors that were no datagram (dropped)
};

// A datagram the application queued on the TX ring, checked. The payload is in the channel's
// memory, which the application may still scribble over: use it as bytes only.
struct OutgoingDatagram {
  uint32_t socket;  // the socket's session index
  std::optional<net::Endpoint> peer;  // none: the socket's connected peer
  std::span<const uint8_t> payload;
};

class Channel {
 public:
  // INVALID_ARGUMENT for sizes the layout cannot take; the system's error when the memfd, its
  // mapping or the eventfds cannot be made.
  static absl::StatusOr<std::shared_ptr<Channel>> Create(const ChannelOptions& options);
  ~Channel();
  Channel(const Channel&) = delete;
  Channel& operator=(const Channel&) = delete;

  int memfd() const { return memfd_; }
  // The RX rings' eventfds (quadsockd writes them), then the TX ring's (the application does).
  const std::vector<int>& event_fds() const { return event_fds_; }
  int tx_event_fd() const { return event_fds_.back(); }
  size_t bytes() const { return header_.total_bytes; }
  uint32_t rings() const { return header_.rings; }
  uint32_t buffer_bytes() const { return header_.buffer_bytes; }

  // Poll thread `ring` only (each ring has one producer): one datagram of the socket whose
  // session index is `socket`. False when it was dropped: the ring is full (counted), the
  // payload is larger than a buffer, or the channel is broken.
  bool Push(uint32_t ring, uint32_t socket, const net::Endpoint& source,
            const net::Endpoint& destination, std::span<const uint8_t> payload,
            absl::Time arrival, uint64_t sequence);

  // ---- The TX ring: one poll thread at a time ----
  // The next datagram the application queued, if any; its slot stays the application's until
  // FinishSends. A descriptor that is no datagram (a length over a buffer) is skipped and counted.
  std::optional<OutgoingDatagram> NextSend();
  // Gives the slots of the datagrams NextSend returned back to the application.
  void FinishSends();
  // Before the poll thread sleeps: marks the TX ring sleeping (so that the application's next
  // datagram writes tx_event_fd) and looks once more: true when a datagram came meanwhile.
  bool ArmSends();
  // The poll thread is awake again: the application need not write tx_event_fd.
  void DisarmSends();

  // Why the channel was ended by what the application wrote ("" while it is whole).
  bool broken() const { return broken_.load(std::memory_order_acquire); }
  std::string broken_reason() const;
  ChannelCounters counters() const;

 private:
  // The producer's side of one ring: its own index, and the ring as computed at Create.
  struct alignas(kLine) Producer {
    RingView ring;
    uint32_t next = 0;           // the next index to write (the published producer index)
    uint32_t last_consumer = 0;  // the consumer index seen last: it only moves forward
    int event_fd = -1;
    uint32_t woken_epoch = 0;  // the application's sleep we wrote the eventfd for last
    std::atomic<uint64_t> delivered{0}, ring_full{0}, wakeups{0};
  };
  Channel() = default;
  void Break(std::string reason);

  ChannelHeader header_{};
  int memfd_ = -1;
  uint8_t* base_ = nullptr;
  std::vector<int> event_fds_;
  std::unique_ptr<Producer[]> producers_;
  // The TX ring's consumer: our index, and the ring as computed at Create.
  RingView tx_{};
  uint32_t tx_next_ = 0;      // the next slot to take
  uint32_t tx_released_ = 0;  // the consumer index published last
  uint32_t tx_epoch_ = 0;     // our sleeps on the TX ring
  std::atomic<uint64_t> sends_{0}, bad_sends_{0};
  std::atomic<bool> broken_{false};
  mutable std::mutex reason_mu_;  // std::mutex: Debian's Abseil is not built for TSan
  std::string reason_ ABSL_GUARDED_BY(reason_mu_);
};

}  // namespace quadsock::channel

#endif  // QUADSOCK_STACK_CHANNEL_CHANNEL_H_
