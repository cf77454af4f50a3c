// Which of the process's descriptors are quadsock sockets. A quadsock socket's descriptor is a
// real kernel descriptor (an eventfd the library made, readable while datagrams wait), so the
// program's poll, select and epoll see it as the kernel's; this table says which socket stands
// behind it. dup, dup2, dup3 and F_DUPFD give the same socket more descriptors; the socket
// lives until its last one is closed.
//
// Every interposed call asks first, so the answer for a kernel descriptor is one atomic load.
//
//   if (std::shared_ptr<PreloadSocket> s = Fds().Find(fd)) return s->ReceiveMsg(m, flags);
//   return Libc().recvmsg(fd, m, flags);
#ifndef QUADSOCK_CLIENTS_PRELOAD_INTERNAL_FD_TABLE_H_
#define QUADSOCK_CLIENTS_PRELOAD_INTERNAL_FD_TABLE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>

#include "absl/container/flat_hash_map.h"

namespace quadsock::preload {

class PreloadSocket;

class FdTable {
 public:
  // Descriptors at or above this stay the kernel's (a socket there is never taken).
  static constexpr int kMaxFd = 1 << 16;

  std::shared_ptr<PreloadSocket> Find(int fd) const {
    if (fd < 0 || fd >= kMaxFd || state_[fd].load(std::memory_order_acquire) != kQuadsock) {
      return nullptr;
    }
    std::lock_guard<std::mutex> lock(mu_);
    auto it = sockets_.find(fd);
    return it == sockets_.end() ? nullptr : it->second;
  }
  // Whether `fd` can stand for a quadsock socket (below kMaxFd).
  static bool Trackable(int fd) { return fd >= 0 && fd < kMaxFd; }
  // The descriptor stands for `s` from now on; false (nothing done) past the table's end.
  bool Install(int fd, std::shared_ptr<PreloadSocket> s);
  // Forgets `fd` (closed, or about to be replaced); returns the socket it stood for, if any, so
  // that the caller drops the last reference after its own close.
  std::shared_ptr<PreloadSocket> Forget(int fd);

  // fork: the table stays as it is while the process is copied, and each socket in it gains
  // a holder (the child). AfterFork in both.
  void BeforeFork();
  void AfterFork() { mu_.unlock(); }

  // A datagram socket that is known to stay the kernel's (bound or connected there): sendto
  // on it is passed on with no further look. Forget clears it.
  void MarkKernel(int fd) {
    if (fd >= 0 && fd < kMaxFd) state_[fd].store(kKernel, std::memory_order_relaxed);
  }
  bool KnownKernel(int fd) const {
    return fd >= 0 && fd < kMaxFd && state_[fd].load(std::memory_order_relaxed) == kKernel;
  }

  // An epoll descriptor that watches a quadsock socket, or an epoll that does (epoll_ctl
  // says so; its close forgets it): busy polling spins in epoll_wait on it, and on nothing else.
  void MarkWatching(int epoll_fd) {
    if (epoll_fd >= 0 && epoll_fd < kMaxFd) {
      state_[epoll_fd].store(kWatches, std::memory_order_relaxed);
    }
  }
  // A quadsock socket, or an epoll that watches one.
  bool Spins(int fd) const {
    if (fd < 0 || fd >= kMaxFd) return false;
    const uint8_t s = state_[fd].load(std::memory_order_relaxed);
    return s == kQuadsock || s == kWatches;
  }

 private:
  enum : uint8_t { kUnknown = 0, kKernel = 1, kQuadsock = 2, kWatches = 3 };
  std::atomic<uint8_t> state_[kMaxFd] = {};
  mutable std::mutex mu_;
  absl::flat_hash_map<int, std::shared_ptr<PreloadSocket>> sockets_;
};

FdTable& Fds();

}  // namespace quadsock::preload

#endif  // QUADSOCK_CLIENTS_PRELOAD_INTERNAL_FD_TABLE_H_
