// One of the program's UDP sockets, on quadsock: a RemoteSocket of the process's session, a
// queue of the datagrams the channel brought it, and the Linux semantics of the calls a
// program makes on a UDP socket. Its descriptors (the program's, and their dups) are one
// eventfd, readable while the queue holds a datagram; the kernel socket the program made is
// kept as its shadow, which holds and checks the socket options and answers interface
// queries, so that those are the kernel's own, errno for errno.
//
// Every method returns what the system call would: a count or 0, or -errno (the kernel's own
// convention; the interposed entry point sets errno from it).
//
//   std::shared_ptr<PreloadSocket> s = Runtime::Get().Take(fd, AF_INET).value();
//   if (int r = s->Bind(local); r < 0) return r;
//   s->InstallAt(fd);                         // the program's descriptor is the socket now
//   ssize_t n = s->ReceiveMsg(&msg, flags);
#ifndef QUADSOCK_CLIENTS_PRELOAD_INTERNAL_SOCKET_H_
#define QUADSOCK_CLIENTS_PRELOAD_INTERNAL_SOCKET_H_

#include <sys/socket.h>

#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "absl/time/time.h"
#include "clients/cpp/client.h"
#include "stack/channel/reader.h"
#include "stack/net/address.h"

namespace quadsock::preload {

class Runtime;

class PreloadSocket : public std::enable_shared_from_this<PreloadSocket> {
 public:
  // `shadow_fd`: the kernel socket (owned); `event_fd`: a fresh eventfd (owned).
  PreloadSocket(Runtime& runtime, int family, RemoteSocket remote, int shadow_fd, int event_fd,
                bool nonblocking);
  ~PreloadSocket();
  PreloadSocket(const PreloadSocket&) = delete;
  PreloadSocket& operator=(const PreloadSocket&) = delete;

  uint32_t index() const { return remote_.index(); }

  // Puts the socket at the program's descriptor `fd` (replacing the kernel socket there, which
  // lives on as the shadow), keeping its close-on-exec flag. 0 or -errno.
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

  // The hand-off thread's side (Runtime::Pump), under Runtime's socket lock.
  void Enqueue(const channel::ReceivedView& v);
  // Once per batch for a socket that got datagrams in it; and when the channel ends.
  void Signal();
  void MarkDown();

 private:
  struct Datagram {
    std::vector<uint8_t> payload;
    net::Endpoint peer;
    net::Endpoint local;
    absl::Time arrival;
  };
  // The options whose effect is ours, read back from the shadow (which holds what the program
  // set, as the kernel stored it).
  void RefreshOptions();
  // With mu_ held: the queue is empty, so the eventfd must not be readable.
  void ClearReadableLocked();
  size_t WriteControl(msghdr* m, const Datagram& d) const;
  // Waits for the eventfd until `deadline` (InfiniteFuture: no limit): -EINTR on a signal,
  // -EAGAIN when the deadline passes, 0 otherwise.
  int Wait(absl::Time deadline);

  Runtime& runtime_;
  const int family_;
  RemoteSocket remote_;
  const int shadow_fd_;
  const int event_fd_;
  std::mutex control_mu_;  // one call to quadsockd at a time for this socket

  std::mutex mu_;  // what follows
  std::deque<Datagram> queue_;
  size_t queued_bytes_ = 0;
  uint64_t dropped_ = 0;
  bool readable_ = false;  // the eventfd's counter is not zero
  bool bound_ = false;
  std::optional<net::Endpoint> local_;
  std::optional<net::Endpoint> peer_;
  bool shut_read_ = false;
  bool shut_write_ = false;
  bool down_ = false;
  bool nonblocking_ = false;
  bool pktinfo_ = false;
  bool timestamp_ = false;
  bool timestamp_ns_ = false;
  size_t receive_buffer_ = 212992;
  absl::Duration receive_timeout_ = absl::ZeroDuration();  // zero: none
  absl::Duration send_timeout_ = absl::ZeroDuration();
};

}  // namespace quadsock::preload

#endif  // QUADSOCK_CLIENTS_PRELOAD_INTERNAL_SOCKET_H_
