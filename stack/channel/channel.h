// A session's data channel, the stack's side: shared memory (layout.h) that carries the
// datagrams of every socket put on it to one application, a ring per poll thread. quadsockd
// makes it, passes memfd() and the rings' event_fds() to the application (SCM_RIGHTS), and puts
// the session's sockets on it (Stack::PutOnChannel); the poll threads then copy each datagram
// from the link's buffer into the channel, the one copy on the way to the application.
//
// A poll thread works in batches: Stage writes a datagram into the ring without showing it,
// Publish shows all the staged ones with one store of the producer index (once per RX batch,
// however many datagrams), and Wake writes a wake-up if the application sleeps. Wake may come
// turns later (the poll engine wakes at its idle turn, or every few busy turns: an application
// woken less often takes more per wake-up), but it must come: Publish wakes at once only when
// the ring is past a quarter full. Push is the three at once, for a single datagram.
//
// Never waits for the application: a full ring drops the datagram (counted here, and by the
// socket as rx_dropped). The application's writes are untrusted: a consumer index it could not
// have written ends the channel (broken(), with the reason), and nothing is delivered after.
// The memory is the producer's own view, computed at Create: a header the application scribbled
// over is never read back.
//
//   std::shared_ptr<Channel> c = Channel::Create({.rings = 2, .slots = 1024}).value();
//   SendFds(client, c->memfd(), c->event_fds());
//   for (each datagram of a batch) c->Stage(ring, socket_index, source, destination, payload,
//                                           now, sequence);           // poll thread `ring`
//   c->Publish(ring);
//   ... c->Wake(ring);                                                // before it sleeps
#ifndef QUADSOCK_STACK_CHANNEL_CHANNEL_H_
#define QUADSOCK_STACK_CHANNEL_CHANNEL_H_

#include <atomic>
#include <cstdint>
#include <cstring>
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
  uint64_t wakeups = 0;     // wake-ups written
  uint64_t publishes = 0;   // stores of an RX ring's producer index (a batch each)
  uint64_t sends = 0;       // datagrams taken from the TX ring
  uint64_t bad_sends = 0;   // TX descriptors that were no datagram (dropped)
};

// A datagram the application queued on the TX ring, checked. The payload is in the channel's
// memory, which the application may still scribble over: use it as bytes only.
struct OutgoingDatagram {
  uint32_t socket;  // the socket's session index
  std::optional<net::Endpoint> peer;  // none: the socket's connected peer
  std::span<const uint8_t> payload;
  std::optional<net::IpAddress> source;  // none: the socket's own address, or the route's
};

// A poll thread's turn on one channel's TX ring: what it may still read, and how many
// descriptors it refused on the way (NextSend adds them; the caller counts them once a turn).
struct SendTurn {
  size_t budget;
  size_t refused = 0;
};

class Channel {
 public:
  // Stage fetches the slot this many after the one it writes: a few datagrams' work ahead.
  static constexpr uint32_t kPrefetchSlots = 8;

  // INVALID_ARGUMENT for sizes the layout cannot take; the system's error when the memfd, its
  // mapping or the wake-up descriptors cannot be made.
  static absl::StatusOr<std::shared_ptr<Channel>> Create(const ChannelOptions& options);
  ~Channel();
  Channel(const Channel&) = delete;
  Channel& operator=(const Channel&) = delete;

  int memfd() const { return memfd_; }
  // What the application gets beside the memfd (layout.h): the read ends of the RX rings'
  // wake-up pipes (quadsockd keeps the write ends), then the TX ring's eventfd (the application
  // writes it; the poll thread watches it edge-triggered and never reads it).
  const std::vector<int>& event_fds() const { return event_fds_; }
  int tx_event_fd() const { return event_fds_.back(); }
  size_t bytes() const { return header_.total_bytes; }
  uint32_t rings() const { return header_.rings; }
  uint32_t buffer_bytes() const { return header_.buffer_bytes; }
  // The producer's own mapping of the memfd (fuzz/channel_fuzzer checks that what NextSend
  // returns lies where it should in it).
  const uint8_t* memory() const { return base_; }

  // ---- The RX rings: poll thread `ring` only (each ring has one producer) ----
  // Writes one datagram of the socket whose session index is `socket` into the ring, not yet
  // visible to the application (Publish). False when it was dropped: the ring is full
  // (counted), the payload is larger than a buffer, or the channel is broken.
  bool Stage(uint32_t ring, uint32_t socket, const net::Endpoint& source,
             const net::Endpoint& destination, std::span<const uint8_t> payload,
             absl::Time arrival, uint64_t sequence);
  // Shows the application what Stage wrote since the last Publish, with one store; wakes it at
  // once if it sleeps and the ring is past a quarter full (it has a quarter of a ring to take
  // before datagrams drop). Otherwise call Wake before the thread sleeps, or a few turns later.
  // False when the channel is broken (the application's consumer index, checked here once a
  // batch, or anything else it wrote): the staged datagrams are never shown.
  bool Publish(uint32_t ring);
  // Writes the ring's wake-up if the application sleeps, once per sleep.
  void Wake(uint32_t ring);
  // Stage, Publish and Wake: one datagram, the application woken at once if it sleeps.
  bool Push(uint32_t ring, uint32_t socket, const net::Endpoint& source,
            const net::Endpoint& destination, std::span<const uint8_t> payload,
            absl::Time arrival, uint64_t sequence) {
    if (!Stage(ring, socket, source, destination, payload, arrival, sequence) || !Publish(ring)) {
      return false;
    }
    Wake(ring);
    return true;
  }

  // ---- The TX ring: one poll thread at a time ----
  // The next datagram the application queued, if any; its slot stays the application's until
  // FinishSends. Every descriptor read is charged to the turn's budget, one that is no datagram
  // (a length over a buffer) too: it is skipped and counted (the turn's `refused`, and
  // bad_sends). None when the ring is empty or the budget spent.
  std::optional<OutgoingDatagram> NextSend(SendTurn& turn);
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
  // The producer's side of one ring: its own indexes, and the ring as computed at Create.
  struct alignas(kLine) Producer {
    RingView ring;
    uint32_t next = 0;       // the next index to write (Stage)
    uint32_t published = 0;  // the producer index the application was shown last (Publish)
    uint32_t consumer = 0;   // the consumer index seen last, checked: it only moves forward
    int wake_fd = -1;          // the write end of the ring's wake-up pipe (ours alone)
    uint32_t woken_epoch = 0;  // the application's sleep we wrote a wake-up for last
    // The arrival time Stage converted last: a batch's datagrams share one.
    absl::Time arrival = absl::InfinitePast();
    int64_t arrival_ns = 0;
    std::atomic<uint64_t> delivered{0}, ring_full{0}, wakeups{0}, publishes{0};
  };
  // One writer: a plain load and store, not a locked read-modify-write.
  static void Bump(std::atomic<uint64_t>& c) {
    c.store(c.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  }
  // Reads the application's consumer index again into p.consumer; false (and the channel
  // broken) when it is one the application could not have written.
  bool ReadConsumer(uint32_t ring, Producer& p);
  void WriteWakeup(Producer& p, uint32_t epoch);
  Channel() = default;
  void Break(std::string reason);

  ChannelHeader header_{};
  int memfd_ = -1;
  uint8_t* base_ = nullptr;
  std::vector<int> event_fds_;     // what the application gets (event_fds())
  std::vector<int> wake_writers_;  // the RX rings' wake-up pipes' write ends
  std::unique_ptr<Producer[]> producers_;
  // The TX ring's consumer: our index, and the ring as computed at Create.
  RingView tx_{};
  uint32_t tx_next_ = 0;      // the next slot to take
  uint32_t tx_released_ = 0;  // the consumer index published last
  uint32_t tx_epoch_ = 0;     // our sleeps on the TX ring
  std::atomic<uint64_t> sends_{0}, bad_sends_{0};
  std::atomic<bool> broken_{false};
  mutable std::mutex reason_mu_;  // std::mutex: TSan sees it unaided
  std::string reason_ ABSL_GUARDED_BY(reason_mu_);
};

// ---- The RX rings' operations, inline: they run per datagram (Stage) or per batch ----------

inline bool Channel::Stage(uint32_t ring, uint32_t socket, const net::Endpoint& source,
                           const net::Endpoint& destination, std::span<const uint8_t> payload,
                           absl::Time arrival, uint64_t sequence) {
  Producer& p = producers_[ring];
  // Full by our last look at the consumer index (Publish's): look again only then (it is the
  // application's cache line; reading it per datagram would pull it over from its CPU).
  if (payload.size() > header_.buffer_bytes || broken_.load(std::memory_order_relaxed) ||
      (p.next - p.consumer == header_.slots &&
       (!ReadConsumer(ring, p) || p.next - p.consumer == header_.slots))) {
    Bump(p.ring_full);
    return false;
  }
  // The slot is ours (ReadConsumer's acquire: the application is done with it). Plain stores into
  // the shared memory: Publish's release store makes them visible before the index does.
  ChannelDescriptor& d = p.ring.descriptor(p.next);
  // A slot's lines were last written a whole ring of datagrams ago and are cold by now: fetch
  // those of the slot kPrefetchSlots on, so that its stores, a few datagrams later, find them
  // (a miss there stalls the stores behind it, and every load waiting for one of them).
  __builtin_prefetch(&p.ring.descriptor(p.next + kPrefetchSlots), 1);
  __builtin_prefetch(p.ring.buffer(p.next + kPrefetchSlots), 1);
  if (arrival != p.arrival) {
    p.arrival = arrival;
    p.arrival_ns = absl::ToUnixNanos(arrival);
  }
  d.socket = socket;
  d.length = static_cast<uint32_t>(payload.size());
  d.arrival_unix_ns = p.arrival_ns;
  d.sequence = sequence;
  std::memcpy(d.peer, source.address.bytes16().data(), 16);
  std::memcpy(d.local, destination.address.bytes16().data(), 16);
  d.peer_port = source.port;
  d.local_port = destination.port;
  d.flags = source.address.is_v4() ? kIpv4 : 0;
  std::memcpy(p.ring.buffer(p.next), payload.data(), payload.size());
  ++p.next;
  Bump(p.delivered);
  return true;
}

inline bool Channel::Publish(uint32_t ring) {
  Producer& p = producers_[ring];
  // Broken since these were staged (by another ring's consumer index, or the TX ring's
  // producer index, as far as this thread has seen): they are not shown either.
  if (broken_.load(std::memory_order_relaxed)) return false;
  if (p.next == p.published) return true;
  // Once a batch, so that garbage there ends the channel at the next datagram, and the ring's
  // fill is known.
  if (!ReadConsumer(ring, p)) return false;
  // Sequentially consistent, one store for the whole batch: a release (the descriptors and
  // payloads Stage wrote are visible before the index that covers them), and ordered before
  // Wake's load of `sleeping` as the application's store of `sleeping` is before its load of
  // the producer index (layout.h): either it sees these datagrams, or Wake sees it sleeping.
  p.ring.control->producer.store(p.next, std::memory_order_seq_cst);
  p.published = p.next;
  Bump(p.publishes);
  // Past a quarter full: wake the application now, if it sleeps, not turns later.
  if (p.next - p.consumer > header_.slots / 4) Wake(ring);
  return true;
}

inline void Channel::Wake(uint32_t ring) {
  Producer& p = producers_[ring];
  // Sequentially consistent, after Publish's store (see there). The epoch is a sleep we have
  // not woken yet: a sleep counts once however many batches come into it. Not only into a ring
  // that looks empty: the application gives slots back (consumer) after it has taken them, so
  // it may be asleep while the consumer index still counts them.
  const uint32_t epoch = p.ring.control->sleeping.load(std::memory_order_seq_cst);
  if (epoch != 0 && epoch != p.woken_epoch) WriteWakeup(p, epoch);
}

}  // namespace quadsock::channel

#endif  // QUADSOCK_STACK_CHANNEL_CHANNEL_H_
