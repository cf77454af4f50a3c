// A quadsock socket's state as every process holding one of its descriptors sees it: a child
// made by fork shares it with its parent, as it shares a kernel socket. It lives in a
// MAP_SHARED mapping made when the socket is taken (before any fork), under a robust
// process-shared mutex: the datagrams waiting (a ring of fixed slots, filled by the session's
// hand-off thread, taken by whichever process receives first), the endpoints, the shutdown
// and O_NONBLOCK flags (both belong to the open file, which fork shares), and how many
// processes hold it.
//
// Its eventfd is readable exactly while a datagram waits (or the socket is shut down for
// reading, or quadsockd is gone): the program's own descriptor is that eventfd.
//
//   std::shared_ptr<SharedSocket> q = SharedSocket::Create(max_payload, event_fd).value();
//   { SharedSocket::Guard g(*q); q->Push(view, receive_buffer); q->Signal(); }
#ifndef QUADSOCK_CLIENTS_PRELOAD_INTERNAL_SHARED_SOCKET_H_
#define QUADSOCK_CLIENTS_PRELOAD_INTERNAL_SHARED_SOCKET_H_

#include <pthread.h>

#include <atomic>
#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "stack/channel/reader.h"
#include "stack/net/address.h"

namespace quadsock::preload {

class SharedSocket {
 public:
  // What the processes share, in the mapping. Plain data: no pointers.
  struct State {
    pthread_mutex_t mu;
    std::atomic<uint32_t> holders;  // processes with a descriptor of it
    uint32_t slots, slot_bytes;
    uint32_t head, count;  // the waiting datagrams: slots head .. head+count-1
    uint64_t bytes;        // what they count against SO_RCVBUF
    uint64_t dropped;      // datagrams that found the queue full
    uint64_t receive_buffer;  // SO_RCVBUF as the kernel keeps it for the shadow
    bool readable;         // the eventfd's counter is not zero
    bool bound, connected, shut_read, shut_write, nonblocking, down;
    net::Endpoint local, peer;
  };
  struct Slot {
    uint32_t length;
    net::Endpoint peer, local;
    int64_t arrival_ns;  // Unix time
    // The payload follows, up to the channel's largest.
    uint8_t* payload() { return reinterpret_cast<uint8_t*>(this + 1); }
  };

  // A mapping for datagrams of up to `max_payload` bytes; takes `event_fd` (closed with it).
  static absl::StatusOr<std::shared_ptr<SharedSocket>> Create(uint32_t max_payload, int event_fd,
                                                              bool nonblocking);
  ~SharedSocket();
  SharedSocket(const SharedSocket&) = delete;
  SharedSocket& operator=(const SharedSocket&) = delete;

  // Holds the shared mutex (a process that died holding it leaves it consistent: every change
  // under it is a few stores, and the worst left behind is one datagram half written).
  class Guard {
   public:
    explicit Guard(SharedSocket& s);
    ~Guard();

   private:
    SharedSocket& s_;
  };

  // With the Guard held:
  State& state() { return *state_; }
  // Queues a datagram unless the queue is full (`receive_buffer`, or every slot taken): false
  // then, and it is counted as dropped.
  bool Push(const channel::ReceivedView& v, size_t receive_buffer);
  Slot* Front() { return state_->count == 0 ? nullptr : SlotAt(state_->head); }
  void Pop();
  // The eventfd made readable (a new edge for edge-triggered epoll) when there is a reason to
  // read; made unreadable when there is none.
  void Signal();
  void ClearReadable();

  int event_fd() const { return event_fd_; }
  // The processes that hold it (fork adds one; the last descriptor of a process takes one).
  void AddHolder() { state_->holders.fetch_add(1, std::memory_order_relaxed); }
  // True for the last holder.
  bool DropHolder() { return state_->holders.fetch_sub(1, std::memory_order_acq_rel) == 1; }

 private:
  SharedSocket(State* state, size_t size, int event_fd)
      : state_(state), size_(size), event_fd_(event_fd) {}
  Slot* SlotAt(uint32_t i) {
    return reinterpret_cast<Slot*>(reinterpret_cast<uint8_t*>(state_ + 1) +
                                   size_t{i % state_->slots} * state_->slot_bytes);
  }
  // Copies in the payload only if it fits a slot (the channel never gives more).
  State* state_;
  size_t size_;
  int event_fd_;
};

}  // namespace quadsock::preload

#endif  // QUADSOCK_CLIENTS_PRELOAD_INTERNAL_SHARED_SOCKET_H_
