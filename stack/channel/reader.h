// A session's data channel, the application's side: maps the memfd quadsockd passed, checks
// its header, and takes datagrams from its rings (layout.h). One ChannelReader serves one
// thread at a time (each ring has a single consumer); it does not allocate per datagram.
//
//   ChannelReader r = ChannelReader::Map(memfd, event_fds).value();
//   ReceivedView batch[64];
//   size_t n = r.Receive(batch, absl::Milliseconds(100));  // waits on the eventfds when empty
//   for (size_t i = 0; i < n; ++i) Use(batch[i].socket, batch[i].payload);
//   r.Release();                                            // gives the slots back
#ifndef QUADSOCK_STACK_CHANNEL_READER_H_
#define QUADSOCK_STACK_CHANNEL_READER_H_

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "stack/channel/layout.h"
#include "stack/net/address.h"

namespace quadsock::channel {

// A datagram in the channel: valid until Release().
struct ReceivedView {
  uint32_t socket;  // the socket's index in the session
  net::Endpoint peer;
  net::Endpoint local;
  absl::Time arrival;
  uint64_t sequence;
  std::span<const uint8_t> payload;
};

// A datagram to send, from the socket of session index `socket` to `peer` (none: the socket's
// connected peer), from `source` if given (IP_PKTINFO: one of the stack's addresses, of the
// peer's family; quadsockd drops it otherwise). The payload is copied when it is queued.
struct SendView {
  uint32_t socket = 0;
  std::span<const uint8_t> payload;
  std::optional<net::Endpoint> peer;
  std::optional<net::IpAddress> source;
};

// The view of a received datagram's descriptor, with its payload (written in place: `v` is
// usually a slot of the caller's batch).
void ViewOf(const ChannelDescriptor& d, std::span<const uint8_t> payload, ReceivedView& v);

class ChannelReader {
 public:
  // Takes ownership of the fds: the memfd, then the eventfds as they came (one per RX ring, then
  // the TX ring's). FAILED_PRECONDITION when the memory is no channel (or one of another
  // version), INVALID_ARGUMENT when the eventfds do not match its rings.
  static absl::StatusOr<ChannelReader> Map(int memfd, std::vector<int> event_fds);
  ChannelReader(ChannelReader&& other) noexcept;
  ChannelReader& operator=(ChannelReader&& other) noexcept;
  ~ChannelReader();

  // Up to out.size() datagrams from all rings, taken in turn. Waits up to `timeout` when none
  // is there (zero: never waits; busy polling is calling it with zero). The views stay valid,
  // and their slots taken, until Release().
  size_t Receive(std::span<ReceivedView> out, absl::Duration timeout = absl::ZeroDuration());
  // Queues a datagram to send from the socket of session index `socket`, to `peer` (none: the
  // socket's connected peer), and wakes quadsockd's poll thread if it sleeps. False when the TX
  // ring is full or the payload is larger than a buffer. quadsockd checks it as it sends: a
  // datagram it refuses (no such socket, a bad destination) is counted on the socket or the
  // channel, not reported here.
  bool Send(uint32_t socket, std::span<const uint8_t> payload,
            const std::optional<net::Endpoint>& peer = std::nullopt,
            const std::optional<net::IpAddress>& source = std::nullopt);
  // Send for a batch: queues datagrams in order until one does not fit (the TX ring full, or
  // a payload larger than a buffer), publishes them with one store and wakes the poll thread
  // at most once. Returns how many were queued. It starts from the producer index in the ring,
  // so processes sharing the mapping (fork) may send in turn, one at a time.
  size_t SendBatch(std::span<const SendView> datagrams);
  // The largest payload a buffer takes.
  uint32_t buffer_bytes() const { return header_.buffer_bytes; }

  // Receive without waiting, for a reader whose eventfds someone else watches (quadsockd's own
  // StreamChannel): when there is nothing, it marks the rings as sleeping (and looks once more),
  // so that the next datagram writes an eventfd.
  size_t ReceiveOrArm(std::span<ReceivedView> out);
  // ReceiveOrArm for a reader that passes datagrams on rather than use them (quadsockd's
  // StreamChannel packs them for its client): up to `max`, each handed to `forward` as the ring
  // holds it (the payload no longer than a buffer), nothing decoded.
  using Forward =
      absl::FunctionRef<void(const ChannelDescriptor& d, std::span<const uint8_t> payload)>;
  size_t ForwardOrArm(size_t max, Forward forward);
  // Gives back every slot that Receive handed out.
  void Release();
  // Whether a ring holds datagrams not yet taken: a look, nothing taken or armed.
  bool Waiting() const;
  // An fd that is readable when a ring may have datagrams (an epoll set of the eventfds), for
  // applications with their own event loop: after it fires, call Receive with a zero timeout.
  int wait_fd() const { return epoll_fd_; }
  uint32_t rings() const { return header_.rings; }
  // The channel's memory, as mapped here.
  int memfd() const { return memfd_; }
  // The descriptors that came with it (layout.h): the RX rings' wake-ups, then the TX ring's.
  const std::vector<int>& event_fds() const { return event_fds_; }

 private:
  ChannelReader() = default;
  // Up to `max` datagrams from all rings, taken in turn, each given to sink(descriptor, payload).
  template <typename Sink>
  size_t Take(size_t max, Sink&& sink);
  size_t Take(std::span<ReceivedView> out);
  // Take; with none there, Arm and Take once more (ReceiveOrArm, ForwardOrArm).
  template <typename Sink>
  size_t TakeOrArm(size_t max, Sink&& sink);
  // Marks every RX ring sleeping, with a new epoch (layout.h).
  void Arm();
  void Close();

  ChannelHeader header_{};
  uint8_t* base_ = nullptr;
  int memfd_ = -1;
  int epoll_fd_ = -1;
  std::vector<int> event_fds_;
  std::vector<RingView> rings_;
  std::vector<uint32_t> taken_;  // per ring: the consumer index Release() will publish
  RingView tx_{};
  uint32_t tx_next_ = 0;  // the TX ring's next slot (the published producer index)
  int tx_event_fd_ = -1;
  uint32_t tx_woken_epoch_ = 0;  // the poll thread's sleep we wrote tx_event_fd_ for last
  uint32_t sleep_epoch_ = 0;     // our sleeps
  uint32_t next_ring_ = 0;       // where the next Receive starts: rings take turns
};

}  // namespace quadsock::channel

#endif  // QUADSOCK_STACK_CHANNEL_READER_H_
