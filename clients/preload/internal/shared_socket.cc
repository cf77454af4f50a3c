#include "clients/preload/internal/shared_socket.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <new>

#include "clients/preload/internal/libc.h"
#include "stack/link/errno_status.h"

namespace quadsock::preload {
namespace {

// The slots of a socket's queue: Linux's default receive buffer (212,992 bytes) holds about
// this many small datagrams as the kernel counts them.
constexpr uint32_t kSlots = 256;
// What a queued datagram counts against SO_RCVBUF beyond its payload (the kernel charges an
// skb's truesize, a few hundred bytes more than a small payload).
constexpr size_t kDatagramOverhead = 768;
constexpr size_t kLine = 64;

size_t RoundUp(size_t n, size_t to) { return (n + to - 1) / to * to; }

}  // namespace

absl::StatusOr<std::shared_ptr<SharedSocket>> SharedSocket::Create(uint32_t max_payload,
                                                                   int event_fd,
                                                                   bool nonblocking) {
  const size_t slot_bytes = RoundUp(sizeof(Slot) + max_payload, kLine);
  const size_t size = RoundUp(sizeof(State) + kSlots * slot_bytes, 4096);
  void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    const int err = errno;
    Libc().close(event_fd);
    return link::ErrnoStatus(err, "mapping a socket's queue");
  }
  State* s = new (p) State();
  pthread_mutexattr_t a;
  pthread_mutexattr_init(&a);
  pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
  pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
  pthread_mutex_init(&s->mu, &a);
  pthread_mutexattr_destroy(&a);
  s->holders.store(1, std::memory_order_relaxed);
  s->slots = kSlots;
  s->slot_bytes = static_cast<uint32_t>(slot_bytes);
  s->nonblocking = nonblocking;
  return std::shared_ptr<SharedSocket>(new SharedSocket(s, size, event_fd));
}

SharedSocket::~SharedSocket() {
  munmap(state_, size_);
  Libc().close(event_fd_);
}

SharedSocket::Guard::Guard(SharedSocket& s) : s_(s) {
  if (pthread_mutex_lock(&s_.state_->mu) == EOWNERDEAD) pthread_mutex_consistent(&s_.state_->mu);
}

SharedSocket::Guard::~Guard() { pthread_mutex_unlock(&s_.state_->mu); }

bool SharedSocket::Push(const channel::ReceivedView& v, size_t receive_buffer) {
  State& s = *state_;
  const size_t charge = v.payload.size() + kDatagramOverhead;
  const size_t room = s.slot_bytes - sizeof(Slot);
  // As Linux: a datagram is taken while the buffer is not yet over its size.
  if (s.shut_read || s.count == s.slots || v.payload.size() > room ||
      (s.count > 0 && s.bytes + charge > receive_buffer)) {
    ++s.dropped;
    return false;
  }
  Slot* slot = SlotAt(s.head + s.count);
  slot->length = static_cast<uint32_t>(v.payload.size());
  slot->peer = v.peer;
  slot->local = v.local;
  slot->arrival_ns = absl::ToUnixNanos(v.arrival);
  std::memcpy(slot->payload(), v.payload.data(), v.payload.size());
  ++s.count;
  s.bytes += charge;
  return true;
}

void SharedSocket::Pop() {
  State& s = *state_;
  if (s.count == 0) return;
  s.bytes -= SlotAt(s.head)->length + kDatagramOverhead;
  s.head = (s.head + 1) % s.slots;
  --s.count;
  if (s.count == 0) ClearReadable();
}

void SharedSocket::Signal() {
  State& s = *state_;
  if (s.count == 0 && !s.shut_read && !s.down) return;
  const uint64_t one = 1;
  (void)!Libc().write(event_fd_, &one, sizeof(one));
  s.readable = true;
}

void SharedSocket::ClearReadable() {
  State& s = *state_;
  if (!s.readable || s.count > 0 || s.shut_read || s.down) return;
  uint64_t drain;
  (void)!Libc().read(event_fd_, &drain, sizeof(drain));
  s.readable = false;
}

}  // namespace quadsock::preload
