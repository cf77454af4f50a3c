// The stack's side of one UDP socket: its receive queue, its consumer and its counters. The
// socket table (stack/demux) knows where the socket is bound; a lookup's cookie points here.
// Internal to the stack: applications see the types in stack/socket_types.h.
//
// A datagram for the socket goes to its callback, if one is set (on the poll thread, with the
// payload still in the link's buffer: zero-copy), or else to its session's data channel if it is
// on one (stack/channel: copied into the application's ring, published with the rest of the
// poll thread's batch: StagedChannels), or else into a bounded queue as a copy. A full queue or
// ring drops the datagram and counts it, like a full SO_RCVBUF; so does a full ReceiveBudget,
// the bytes all of the stack's queues may hold.
//
//   stack.SetReceiveCallback(id, [](const net::Endpoint& from, std::span<const uint8_t> p) {...});
//   // or
//   std::optional<ReceivedDatagram> d = stack.Receive(id).value();
#ifndef QUADSOCK_STACK_INTERNAL_UDP_SOCKET_H_
#define QUADSOCK_STACK_INTERNAL_UDP_SOCKET_H_

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <functional>
#include <memory>
#include <new>
#include <optional>
#include <span>
#include <string>

#include "absl/hash/hash.h"
#include "absl/time/time.h"
#include "stack/bounded_queue.h"
#include "stack/channel/channel.h"
#include "stack/demux/rcu.h"
#include "stack/demux/socket_table.h"
#include "stack/icmp_error.h"
#include "stack/internal/staged_channels.h"
#include "stack/net/address.h"
#include "stack/receive_budget.h"
#include "stack/socket_types.h"

namespace quadsock::stack {

class alignas(64) UdpSocket {
 public:
  // `one_poller`: only one poll thread delivers to the socket (the stack has one link), so its
  // receive counters are written with plain stores instead of atomic read-modify-writes.
  // `budget`: charged for each queued datagram (none: unbounded but for the depth).
  // `reserved`: what the caller reserved of `budget` for the queue's cells (QueueBytes), given
  // back when the socket goes.
  UdpSocket(net::Family family, size_t queue_depth, bool one_poller = false,
            std::shared_ptr<ReceiveBudget> budget = nullptr, size_t reserved = 0)
      : family_(family), one_poller_(one_poller), budget_(budget.get()),
        budget_owner_(std::move(budget)), queue_depth_(queue_depth),
        reserved_(budget_ == nullptr ? 0 : reserved) {
    static_assert(offsetof(UdpSocket, first_callback_) + sizeof(first_callback_) <= 64,
                  "a delivery to the first callback reads one cache line");
    static_assert(offsetof(UdpSocket, queue_) == 64 &&
                      offsetof(UdpSocket, target_index_) + sizeof(target_index_) <= 128,
                  "queued and channel delivery have the second line");
  }
  ~UdpSocket() {
    if (has_first_callback_) FirstCallback()->~ReceiveCallback();
    if (Queue* q = queue_.load()) {
      while (std::optional<ReceivedDatagram*> d = q->TryPop()) {
        Uncharge(**d);
        delete *d;
      }
      delete q;
    }
    if (reserved_ != 0) budget_->Release(reserved_);
    if (event_fd_ >= 0) close(event_fd_);
    delete info_.load();
  }

  // A data channel that takes the socket's datagrams instead of its queue, and the socket's
  // index in it (its session's index).
  struct ChannelBinding {
    std::shared_ptr<channel::Channel> channel;
    uint32_t index = 0;
  };
  // The same as the poll threads see it: valid until their next quiescent state.
  struct ChannelTarget {
    channel::Channel* channel = nullptr;
    uint32_t index = 0;
  };

  // The bytes of the cell array of a receive queue `depth` deep (made on its first datagram).
  static size_t QueueBytes(size_t depth) { return Queue::CellBytes(depth); }

  // What became of a datagram handed to the socket.
  enum class Delivery { kTaken, kFull, kOverBudget };

  // Poll thread: hands one datagram to the consumer. An IPv6 socket sees IPv4 datagrams with
  // v4-mapped addresses (::ffff:a.b.c.d), as in Linux, so that it can answer them. A datagram
  // dropped for want of room (its queue or channel ring full, kFull; the stack's receive budget
  // spent, kOverBudget) is the socket's rx_dropped. `staged`: the poll engine's, whose ring a
  // channel datagram goes to, published at the end of the batch (none: ring 0, at once).
  Delivery Deliver(const net::Endpoint& wire_source, const net::Endpoint& wire_destination,
                   std::span<const uint8_t> payload, absl::Time now,
                   StagedChannels* staged = nullptr) {
    const bool map = family_ == net::Family::kV6 && wire_source.address.is_v4();
    const net::Endpoint source =
        map ? net::Endpoint{wire_source.address.ToV6(), wire_source.port} : wire_source;
    if (const ReceiveCallback* cb = callback_.load(std::memory_order_acquire)) {
      (*cb)(source, payload);
    } else if (const ChannelTarget t = channel_target(); t.channel != nullptr) {
      const net::Endpoint destination =
          map ? net::Endpoint{wire_destination.address.ToV6(), wire_destination.port}
              : wire_destination;
      const uint32_t ring = staged != nullptr ? staged->ring() : 0;
      if (!t.channel->Stage(ring, t.index, source, destination, payload, now, NextSequence())) {
        Count(rx_dropped_, 1);  // the application's ring is full: never waited for
        return Delivery::kFull;
      }
      // Counted before it is published: the application may take it, and read the counters,
      // at once.
      Count(rx_datagrams_, 1);
      Count(rx_bytes_, payload.size());
      if (staged != nullptr) {
        staged->Add(t.channel);  // published with the rest of the batch
      } else {
        t.channel->Publish(ring);
        t.channel->Wake(ring);
      }
      return Delivery::kTaken;
    } else {
      // Only a queued datagram keeps its destination (callbacks are not given it).
      const net::Endpoint destination =
          map ? net::Endpoint{wire_destination.address.ToV6(), wire_destination.port}
              : wire_destination;
      const uint64_t seq = NextSequence();
      if (budget_ != nullptr && !budget_->TryCharge(Charge(payload.size()))) {
        Count(rx_dropped_, 1);
        return Delivery::kOverBudget;
      }
      auto* d = new ReceivedDatagram{source, destination, now, seq,
                                     std::string(payload.begin(), payload.end())};
      if (!MakeQueue().TryPush(d)) {
        Uncharge(*d);
        delete d;
        Count(rx_dropped_, 1);
        return Delivery::kFull;
      }
      // Wake a consumer blocked in WaitForData; costs a syscall only when one is waiting. The
      // flag is read with a read-modify-write, as the consumer sets it: one of the two comes
      // first on this one flag, so either it sees the datagram or we see it waiting (a plain
      // load, after the push's relaxed CAS, could miss both ways on a weakly ordered CPU).
      if (waiting_.fetch_add(0, std::memory_order_acq_rel) != 0) Wake();
    }
    Count(rx_datagrams_, 1);
    Count(rx_bytes_, payload.size());
    return Delivery::kTaken;
  }

  std::optional<ReceivedDatagram> Pop() {
    Queue* q = queue_.load(std::memory_order_acquire);
    if (q == nullptr) return std::nullopt;
    std::optional<ReceivedDatagram*> d = q->TryPop();
    if (!d.has_value()) return std::nullopt;
    Uncharge(**d);
    std::unique_ptr<ReceivedDatagram> owned(*d);
    return std::move(*owned);
  }

  // Blocks until a datagram is queued, the socket is shut down, or `timeout` passes. Returns
  // whether a datagram is (probably) there; nothing, at once, when the process has no
  // descriptor for the wait (EMFILE, ENFILE: errno is left set), which the caller must not
  // retry in a loop. One waiter at a time; any thread but a poll thread.
  std::optional<bool> WaitForData(int timeout_ms) {
    if (Queued() > 0) return true;
    int fd;
    {
      std::lock_guard<std::mutex> lock(wait_mu_);
      if (event_fd_ < 0) event_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
      fd = event_fd_;
    }
    if (fd < 0) return std::nullopt;
    waiting_.exchange(1, std::memory_order_acq_rel);  // see Deliver
    if (Queued() == 0 && !shut_down_.load()) {
      pollfd p{fd, POLLIN, 0};
      poll(&p, 1, timeout_ms);
    }
    waiting_.store(0, std::memory_order_relaxed);
    uint64_t drain;
    (void)!read(fd, &drain, sizeof(drain));
    return Queued() > 0;
  }
  // The waiter is gone for good (its stream ended): the descriptor WaitForData made goes too,
  // so that a socket between readers holds none. The next WaitForData makes another.
  void ReleaseWaitDescriptor() {
    std::lock_guard<std::mutex> lock(wait_mu_);
    if (event_fd_ >= 0) close(event_fd_);
    event_fd_ = -1;
  }
  // Wakes waiters for good: the socket is closing.
  void Shutdown() {
    shut_down_.store(true);
    Wake();
  }

  // Set once, before traffic: the old callback (if any) is kept until close, since a poll
  // thread may be running it. The first one is kept in the socket itself, next to what Deliver
  // reads. Control plane only.
  void SetCallback(ReceiveCallback cb) {
    if (!has_first_callback_) {
      new (first_callback_) ReceiveCallback(std::move(cb));
      has_first_callback_ = true;
      callback_.store(FirstCallback(), std::memory_order_release);
      return;
    }
    later_callbacks_.push_back(std::make_unique<const ReceiveCallback>(std::move(cb)));
    callback_.store(later_callbacks_.back().get(), std::memory_order_release);
  }

  // Control plane, under the stack's lock (one writer at a time): puts the socket on a channel
  // (null: takes it off, back to its queue). Returns the binding it replaces, whose channel a
  // poll thread may still be delivering to: let go of it after a grace period.
  ChannelBinding SwapChannel(ChannelBinding b) {
    // Linux's seqcount latch (raw_write_seqcount_latch): two copies of the target, and readers
    // use the one the version's low bit names; each copy changes only while the version sends
    // readers to the other. So a reader never waits for a writer (one preempted in the middle
    // leaves readers a whole copy); it reads again only if a change finished meanwhile. Release
    // stores: a reader that acquires a copy's new value sees the version that sent readers away
    // from it, and so reads again (and sees the channel the pointer names).
    const uint32_t v = target_version_.load(std::memory_order_relaxed);
    channel::Channel* const c = b.channel.get();
    target_version_.store(v + 1, std::memory_order_release);  // readers: copy 1
    target_channel_[0].store(c, std::memory_order_release);
    target_index_[0].store(b.index, std::memory_order_release);
    target_version_.store(v + 2, std::memory_order_release);  // readers: copy 0
    target_channel_[1].store(c, std::memory_order_release);
    target_index_[1].store(b.index, std::memory_order_release);
    std::swap(binding_, b);
    return b;
  }
  // Any thread, without a lock: the channel and index SwapChannel set last (or, during a
  // change, the one before). The channel lives until the reader's next quiescent state.
  ChannelTarget channel_target() const {
    for (;;) {
      // Acquire, all three: the copy's loads come after the version's, and the version's
      // second look after them (layout of the writes: SwapChannel).
      const uint32_t v = target_version_.load(std::memory_order_acquire);
      const ChannelTarget t{target_channel_[v & 1].load(std::memory_order_acquire),
                            target_index_[v & 1].load(std::memory_order_acquire)};
      if (target_version_.load(std::memory_order_relaxed) == v) return t;
    }
  }
  bool on_channel() const { return channel_target().channel != nullptr; }
  // Poll thread, for a batch of sockets a lookup found: the line a queued or channel delivery
  // reads after the first (the first line is the lookup's prefetch).
  void PrefetchDelivery() const { __builtin_prefetch(&queue_); }

  // The socket's addresses and state as the control plane last set them, for a poll thread
  // that sends from a data channel without the socket table's lock. Control plane: Publish (the
  // old copy is freed after an RCU grace period). Poll thread: info(), valid until its next
  // quiescent state; null before the first Publish.
  void PublishInfo(const demux::SocketInfo& info) {
    const demux::SocketInfo* old =
        info_.exchange(new demux::SocketInfo(info), std::memory_order_acq_rel);
    if (old != nullptr) demux::RcuDefer([old] { delete old; });
  }
  const demux::SocketInfo* info() const { return info_.load(std::memory_order_acquire); }

  void CountSent(size_t bytes) {
    tx_datagrams_.fetch_add(1, std::memory_order_relaxed);
    tx_bytes_.fetch_add(bytes, std::memory_order_relaxed);
  }
  void CountSendDrop() { tx_dropped_.fetch_add(1, std::memory_order_relaxed); }
  // A consumer popped `n` datagrams and lost them (its client went): rx_dropped too.
  void CountConsumerDrop(uint64_t n) { consumer_dropped_.fetch_add(n, std::memory_order_relaxed); }

  // Poll thread: an ICMP error quoted one of the socket's datagrams, sent to `peer`. A hard one
  // is kept with a tag of that peer (a later one replaces it); only a socket connected to that
  // peer hears of it (icmp_error.h). The tag, not the socket's state, decides: the poll thread
  // may have looked the socket up just before a Connect to another peer, and its error must
  // not blame the new one. (Release: publishes the count for a reader that acquires the error.)
  void ReportIcmpError(const IcmpError& e, const net::Endpoint& peer) {
    icmp_errors_.fetch_add(1, std::memory_order_relaxed);
    if (e.Hard()) {
      pending_error_.store(uint64_t{PeerTag(peer)} << 32 | e.Pack(), std::memory_order_release);
    }
  }
  // The kept error, taken, if it was about `peer`: a send reports it once (as Linux's
  // sock_error()). One about another peer is dropped.
  std::optional<IcmpError> TakeError(const net::Endpoint& peer) {
    if (pending_error_.load(std::memory_order_relaxed) == 0) return std::nullopt;
    return ErrorAbout(peer, pending_error_.exchange(0, std::memory_order_acquire));
  }
  std::optional<IcmpError> PendingError(const net::Endpoint& peer) const {
    return ErrorAbout(peer, pending_error_.load(std::memory_order_acquire));
  }
  // Control plane, once the socket is connected to another peer or disconnected. Linux keeps
  // sk_err across connect(); here an error about the earlier peer is forgotten, since it could
  // only fail a send to the new one.
  void ForgetError() { pending_error_.store(0, std::memory_order_release); }

  SocketCounters counters() const {
    SocketCounters c;
    c.rx_datagrams = rx_datagrams_.load(std::memory_order_relaxed);
    c.rx_bytes = rx_bytes_.load(std::memory_order_relaxed);
    c.rx_dropped = rx_dropped_.load(std::memory_order_relaxed) +
                   consumer_dropped_.load(std::memory_order_relaxed);
    c.tx_datagrams = tx_datagrams_.load(std::memory_order_relaxed);
    c.tx_bytes = tx_bytes_.load(std::memory_order_relaxed);
    c.tx_dropped = tx_dropped_.load(std::memory_order_relaxed);
    c.queued = Queued();
    c.icmp_errors = icmp_errors_.load(std::memory_order_relaxed);
    return c;
  }

 private:
  // 32 bits of a peer endpoint's hash (its 16-byte form, so that 10.1.0.1 and ::ffff:10.1.0.1
  // agree, and its port): a stale error meets a new peer's tag by chance once in 2^32.
  static uint32_t PeerTag(const net::Endpoint& peer) {
    return static_cast<uint32_t>(absl::HashOf(peer.address.bytes16(), peer.port));
  }
  static std::optional<IcmpError> ErrorAbout(const net::Endpoint& peer, uint64_t kept) {
    if (kept == 0 || kept >> 32 != PeerTag(peer)) return std::nullopt;
    return IcmpError::Unpack(static_cast<uint32_t>(kept));
  }

  void Wake() {
    std::lock_guard<std::mutex> lock(wait_mu_);
    if (event_fd_ < 0) return;
    const uint64_t one = 1;
    (void)!write(event_fd_, &one, sizeof(one));
  }

  using Queue = BoundedQueue<ReceivedDatagram*>;

  // What a queued datagram costs the budget: its record and its payload.
  static size_t Charge(size_t payload_bytes) { return sizeof(ReceivedDatagram) + payload_bytes; }
  // Gives back what a datagram leaving the queue was charged.
  void Uncharge(const ReceivedDatagram& d) {
    if (budget_ != nullptr) budget_->Release(Charge(d.payload.size()));
  }

  size_t Queued() const {
    const Queue* q = queue_.load(std::memory_order_acquire);
    return q == nullptr ? 0 : q->SizeApprox();
  }
  // The receive queue is made on the first datagram that needs it: a socket read through a
  // callback never has one, and a table of 100k idle sockets is not 100k queues of cells (each
  // several KiB) scattered between the sockets' hot fields. Poll threads race to make it; one
  // wins, the others free theirs.
  Queue& MakeQueue() {
    Queue* q = queue_.load(std::memory_order_acquire);
    if (q != nullptr) return *q;
    auto* fresh = new Queue(queue_depth_);
    if (queue_.compare_exchange_strong(q, fresh, std::memory_order_acq_rel)) return *fresh;
    delete fresh;
    return *q;
  }

  // The datagram's sequence number, from 1 (a plain load and store with one poll thread).
  uint64_t NextSequence() {
    if (one_poller_) {
      const uint64_t seq = next_sequence_.load(std::memory_order_relaxed);
      next_sequence_.store(seq + 1, std::memory_order_relaxed);
      return seq;
    }
    return next_sequence_.fetch_add(1, std::memory_order_relaxed);
  }

  // A receive counter: readers on other threads see whole values either way.
  void Count(std::atomic<uint64_t>& c, uint64_t n) {
    if (one_poller_) {
      c.store(c.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
    } else {
      c.fetch_add(n, std::memory_order_relaxed);
    }
  }

  ReceiveCallback* FirstCallback() {
    return std::launder(reinterpret_cast<ReceiveCallback*>(first_callback_));
  }

  // First line (the class is cache-line aligned): all that a delivery to the first callback
  // touches, the callback included. With 100k sockets every datagram's socket is cold, and
  // this is one miss.
  std::atomic<const ReceiveCallback*> callback_{nullptr};
  std::atomic<uint64_t> rx_datagrams_{0}, rx_bytes_{0};
  const net::Family family_;
  const bool one_poller_;
  bool has_first_callback_ = false;  // control plane only
  // The first receive callback, made in place by SetCallback (callback_ then points here).
  alignas(ReceiveCallback) unsigned char first_callback_[sizeof(ReceiveCallback)];
  // Second line: queued and channel delivery.
  alignas(64) std::atomic<Queue*> queue_{nullptr};
  std::atomic<uint64_t> next_sequence_{1};
  std::atomic<uint64_t> rx_dropped_{0};
  ReceiveBudget* const budget_;       // budget_owner_'s
  std::atomic<uint32_t> waiting_{0};  // 1 while a consumer waits in WaitForData
  // The channel target's latch (SwapChannel): the version, then the two copies.
  std::atomic<uint32_t> target_version_{0};
  std::array<std::atomic<channel::Channel*>, 2> target_channel_{};
  std::array<std::atomic<uint32_t>, 2> target_index_{};
  // The rest: the control plane, consumers, sends.
  const std::shared_ptr<ReceiveBudget> budget_owner_;
  ChannelBinding binding_;  // what SwapChannel set last (its lock's): owns the target's channel
  const size_t queue_depth_;
  const size_t reserved_;  // of budget_, for the queue's cells
  std::atomic<bool> shut_down_{false};
  std::mutex wait_mu_;  // guards creating event_fd_ (only waiters and wakers take it)
  int event_fd_ = -1;
  std::vector<std::unique_ptr<const ReceiveCallback>> later_callbacks_;
  std::atomic<uint64_t> tx_datagrams_{0}, tx_bytes_{0}, tx_dropped_{0};
  // Apart from rx_dropped_, which a single poll thread writes with plain stores.
  std::atomic<uint64_t> consumer_dropped_{0};
  std::atomic<uint64_t> icmp_errors_{0};
  // The kept error: PeerTag() << 32 | IcmpError::Pack(), or 0.
  std::atomic<uint64_t> pending_error_{0};
  std::atomic<const demux::SocketInfo*> info_{nullptr};
};

}  // namespace quadsock::stack

#endif  // QUADSOCK_STACK_INTERNAL_UDP_SOCKET_H_
