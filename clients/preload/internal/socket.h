// One of the program's UDP sockets, on quadsock: a RemoteSocket of a Link's session, the state
// every process holding it shares (SharedSocket: the datagrams waiting, endpoints, flags), and
// the Linux semantics of the calls a program makes on a UDP socket. Its descriptors (the
// program's, and their dups) are one eventfd, readable while a datagram waits; the kernel
// socket the program made is kept as its shadow, which holds and checks the socket options and
// answers interface queries, so that those are the kernel's own, errno for errno.
//
// One PreloadSocket per process: a child made by fork has its own copy (the FdTable's), which
// shares the SharedSocket and the parent's Link. Only the process that owns the Link talks to
// quadsockd about the socket (bind, connect, close); the last process to close its descriptors
// closes it there (or, when that is a child, quadsockd closes it with the parent's session).
// A child's own new sockets are the kernel's (Runtime).
//
// Every method returns what the system call would: a count or 0, or -errno (the kernel's own
// convention; the interposed entry point sets errno from it).
//
//   std::shared_ptr<PreloadSocket> s = Runtime::Get().Take(fd, AF_INET).value();
//   if (int r = s->Bind(local); r < 0) return r;
//   s->InstallAt(fd, cloexec);                // the program's descriptor is the socket now
//   ssize_t n = s->ReceiveMsg(&msg, flags);
#ifndef QUADSOCK_CLIENTS_PRELOAD_INTERNAL_SOCKET_H_
#define QUADSOCK_CLIENTS_PRELOAD_INTERNAL_SOCKET_H_

#include <sys/socket.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>

#include "absl/time/time.h"
#include "clients/cpp/client.h"
#include "clients/preload/internal/link.h"
#include "clients/preload/internal/shared_socket.h"
#include "stack/net/address.h"

namespace quadsock::preload {

class Runtime;

class PreloadSocket : public std::enable_shared_from_this<PreloadSocket> {
 public:
  // `shadow_fd`: the kernel socket (owned).
  PreloadSocket(Runtime& runtime, Link& link, int family, RemoteSocket remote, int shadow_fd,
                std::shared_ptr<SharedSocket> shared);
  ~PreloadSocket();
  PreloadSocket(const PreloadSocket&) = delete;
  PreloadSocket& operator=(const PreloadSocket&) = delete;

  uint32_t index() const { return remote_.index(); }
  // fork: the child holds it too.
  SharedSocket& shared() { return *shared_; }

  // Puts the socket at the program's descriptor `fd` (replacing the kernel socket there, which
  // lives on as the shadow), with close-on-exec as asked. 0 or -errno.
  int InstallAt(int fd, bool cloexec);

  int Bind(const net::Endpoint& local);
  int Connect(const net::Endpoint& peer);
  int Disconnect();
  int Shutdown(int how);
  int GetSockName(sockaddr* addr, socklen_t* len);
  int GetPeerName(sockaddr* addr, socklen_t* len);
  int GetSockOpt(int level, int name, void* value, socklen_t* len);
  int SetSockOpt(int level, int name, const void* value, socklen_t len);
  int Ioctl(unsigned long request, void* arg);
  // fcntl F_GETFL / F_SETFL: O_NONBLOCK is the socket's own (the eventfd stays non-blocking).
  int GetStatusFlags();
  int SetStatusFlags(int flags);

  // recvmsg, with its flags (MSG_DONTWAIT, MSG_PEEK, MSG_TRUNC) and control messages
  // (IP_PKTINFO, IPV6_PKTINFO, SO_TIMESTAMP, SO_TIMESTAMPNS) as the socket's options ask.
  ssize_t ReceiveMsg(msghdr* m, int flags);
  // sendmsg (MSG_DONTWAIT, MSG_NOSIGNAL).
  ssize_t SendMsg(const msghdr* m, int flags);

 private:
  // The options whose effect is ours, read back from the shadow (which holds what the program
  // set, as the kernel stored it). Each process reads them when it sets one.
  void RefreshOptions();
  // A call to quadsockd about this socket is the Link owner's: -ENETDOWN elsewhere (a child
  // using a socket it inherited), said once.
  bool CanCallQuadsockd() const;
  size_t WriteControl(msghdr* m, const SharedSocket::Slot& d) const;
  // The source address a send asks for in its control messages (send_control.h), checked as
  // Linux checks it, against quadsockd's addresses and interface: -EINVAL, -ENETUNREACH or
  // -ENODEV as the kernel's. `bound` is the socket's address (unspecified for none): a socket
  // bound to one sends from it only (-EINVAL), unlike Linux's.
  int SourceAsked(const msghdr* m, const net::IpAddress& bound, bool v4_destination,
                  std::optional<net::IpAddress>* from) const;
  // Waits for the eventfd until `deadline` (InfiniteFuture: no limit): -EINTR on a signal,
  // -EAGAIN when the deadline passes, 0 otherwise.
  int Wait(absl::Time deadline);

  Runtime& runtime_;
  Link& link_;
  const int family_;
  RemoteSocket remote_;
  const int shadow_fd_;
  std::shared_ptr<SharedSocket> shared_;
  std::mutex control_mu_;  // one call to quadsockd at a time for this socket

  // The options, as this process last read them from the shadow.
  std::atomic<bool> pktinfo_{false};
  std::atomic<bool> timestamp_{false};
  std::atomic<bool> timestamp_ns_{false};
  std::atomic<int64_t> receive_timeout_us_{0};  // 0: none
  std::atomic<int64_t> send_timeout_us_{0};
};

}  // namespace quadsock::preload

#endif  // QUADSOCK_CLIENTS_PRELOAD_INTERNAL_SOCKET_H_
