// The C library's socket calls, as the program sees them under the preload library. Each asks
// the descriptor table first: a quadsock socket's call goes to its PreloadSocket, anything
// else straight to the C library (one atomic load more). bind, connect and the sends of an
// unbound datagram socket are where a kernel socket may move onto quadsock (Runtime decides).
//
// Nothing here holds state of its own; errno is set from the -errno the sockets return.
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "clients/preload/internal/busy_poll.h"
#include "clients/preload/internal/errno_of.h"
#include "clients/preload/internal/fd_table.h"
#include "clients/preload/internal/libc.h"
#include "clients/preload/internal/log.h"
#include "clients/preload/internal/runtime.h"
#include "clients/preload/internal/signal_handlers.h"
#include "clients/preload/internal/sockaddr.h"
#include "clients/preload/internal/socket.h"

extern "C" [[noreturn]] void __chk_fail(void);

namespace quadsock::preload {
namespace {

template <typename T>
T Result(T r) {
  if (r < 0) {
    errno = static_cast<int>(-r);
    return -1;
  }
  return r;
}

// The family of an IPv4/IPv6 UDP socket; AF_UNSPEC for any other descriptor.
int UdpFamily(int fd) {
  const int domain = IntOption(fd, SOL_SOCKET, SO_DOMAIN);
  if ((domain != AF_INET && domain != AF_INET6) ||
      IntOption(fd, SOL_SOCKET, SO_TYPE) != SOCK_DGRAM ||
      IntOption(fd, SOL_SOCKET, SO_PROTOCOL) != IPPROTO_UDP) {
    return AF_UNSPEC;
  }
  return domain;
}

bool Unbound(int fd) {
  sockaddr_storage a{};
  socklen_t len = sizeof(a);
  if (Libc().getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) return false;
  std::optional<net::Endpoint> e = EndpointOf(reinterpret_cast<sockaddr*>(&a), len);
  return e.has_value() && e->port == 0;
}

// Moves kernel socket `fd` onto quadsock and runs `first` (the bind or connect that made it
// move) on it; installs it at `fd` when that worked. The kernel socket is untouched otherwise.
template <typename First>
int TakeAndRun(int fd, int family, First first) {
  absl::StatusOr<std::shared_ptr<PreloadSocket>> s = Runtime::Get().Take(fd, family);
  if (!s.ok()) {
    Log(LogLevel::kWarn, absl::StrCat("descriptor ", fd, ": no quadsock socket: ",
                                      s.status().message()));
    return -ErrnoOf(s.status(), Call::kOpen);
  }
  if (int r = first(**s); r < 0) return r;
  const int fd_flags = Libc().fcntl(fd, F_GETFD);
  if (int r = (*s)->InstallAt(fd, fd_flags >= 0 && (fd_flags & FD_CLOEXEC) != 0); r < 0) return r;
  if (Logs(LogLevel::kDebug)) {
    sockaddr_storage a{};
    socklen_t len = sizeof(a);
    (*s)->GetSockName(reinterpret_cast<sockaddr*>(&a), &len);
    Log(LogLevel::kDebug, absl::StrCat("descriptor ", fd, " is on quadsock at ",
                                       EndpointOf(reinterpret_cast<sockaddr*>(&a), len)->ToString()));
  }
  return 0;
}

// An unbound kernel datagram socket sending to `to`: on quadsock (bound to the wildcard and an
// ephemeral port there, as the kernel binds it) when the peer is in quadsockd's networks.
std::shared_ptr<PreloadSocket> TakeForSend(int fd, const sockaddr* to, socklen_t to_len) {
  if (to == nullptr || Fds().KnownKernel(fd)) return nullptr;
  std::optional<net::Endpoint> peer = EndpointOf(to, to_len);
  if (!peer.has_value()) return nullptr;
  const int family = FdTable::Trackable(fd) ? UdpFamily(fd) : AF_UNSPEC;
  if (family == AF_UNSPEC || !Unbound(fd) || !Runtime::Get().TakesPeer(family, *peer)) {
    Fds().MarkKernel(fd);
    return nullptr;
  }
  const net::Endpoint any{family == AF_INET ? net::IpAddress::AnyV4() : net::IpAddress::AnyV6(),
                          0};
  if (TakeAndRun(fd, family, [&any](PreloadSocket& s) { return s.Bind(any); }) < 0) {
    return nullptr;  // the kernel sends it
  }
  return Fds().Find(fd);
}

// The new descriptor of a dup stands for the same socket. One past the table's end cannot:
// it is closed again, and the dup fails with EMFILE.
int Dup(int old_fd, int new_fd) {
  if (new_fd < 0) return new_fd;
  std::shared_ptr<PreloadSocket> s = Fds().Find(old_fd);
  if (s != nullptr && !Fds().Install(new_fd, s)) {
    Libc().close(new_fd);
    LogOnce(LogLevel::kWarn, "dup past the table",
            absl::StrCat("a quadsock socket duplicated to descriptor ", new_fd, " or above ",
                         FdTable::kMaxFd, ": refused (EMFILE)"));
    errno = EMFILE;
    return -1;
  }
  return new_fd;
}

ssize_t ReceiveInto(PreloadSocket& s, void* buf, size_t len, int flags, sockaddr* from,
                    socklen_t* from_len) {
  iovec v{buf, len};
  msghdr m{};
  m.msg_iov = &v;
  m.msg_iovlen = 1;
  m.msg_name = from;
  m.msg_namelen = from_len != nullptr ? *from_len : 0;
  const ssize_t r = s.ReceiveMsg(&m, flags);
  if (r >= 0 && from_len != nullptr && from != nullptr) *from_len = m.msg_namelen;
  return r;
}

ssize_t SendFrom(PreloadSocket& s, const void* buf, size_t len, int flags, const sockaddr* to,
                 socklen_t to_len) {
  iovec v{const_cast<void*>(buf), len};
  msghdr m{};
  m.msg_iov = &v;
  m.msg_iovlen = 1;
  m.msg_name = const_cast<sockaddr*>(to);
  m.msg_namelen = to != nullptr ? to_len : 0;
  return s.SendMsg(&m, flags);
}

// fork: the child holds every quadsock socket the parent holds (one more holder each), and
// no Link is being made or descriptor installed while it is made.
__attribute__((constructor)) void Init() {
  Libc();
  pthread_atfork(
      [] {
        Runtime::Get().BeforeFork();
        Fds().BeforeFork();
      },
      [] {
        Fds().AfterFork();
        Runtime::Get().AfterForkInParent();
      },
      [] {
        Fds().AfterFork();
        Runtime::Get().AfterForkInChild();
      });
}

}  // namespace
// Readiness waits (poll, epoll_wait) in milliseconds, as durations (libc.h: and back).
absl::Duration FromMilliseconds(int ms) {
  return ms < 0 ? absl::InfiniteDuration() : absl::Milliseconds(ms);
}

// The Link to busy-poll when a wait on descriptors that `spins` says hold a quadsock socket
// would sleep: null without QUADSOCK_BUSY_POLL (asked first: nothing else is looked at then).
template <typename Spins>
Link* BusyPollFor(Spins spins) {
  Runtime& rt = Runtime::Get();
  if (rt.config().busy_poll_us == 0 || !spins()) return nullptr;
  return rt.BusyPollLink();
}

}  // namespace quadsock::preload

using namespace quadsock::preload;  // NOLINT: the entry points below are the C library's names

extern "C" {

int bind(int fd, const sockaddr* addr, socklen_t len) noexcept {
  std::shared_ptr<PreloadSocket> s = Fds().Find(fd);
  if (s != nullptr) return Result(-EINVAL);  // bound already
  std::optional<quadsock::net::Endpoint> local = EndpointOf(addr, len);
  if (!local.has_value()) return Libc().bind(fd, addr, len);
  const int family = FdTable::Trackable(fd) ? UdpFamily(fd) : AF_UNSPEC;
  if (family == AF_UNSPEC || (family == AF_INET && FamilyOf(addr, len) != AF_INET) ||
      !Runtime::Get().TakesLocal(family, *local)) {
    return Libc().bind(fd, addr, len);
  }
  return Result(TakeAndRun(fd, family, [&local](PreloadSocket& s) { return s.Bind(*local); }));
}

int connect(int fd, const sockaddr* addr, socklen_t len) {
  std::shared_ptr<PreloadSocket> s = Fds().Find(fd);
  if (s != nullptr) {
    if (addr != nullptr && len >= static_cast<socklen_t>(sizeof(sa_family_t)) &&
        addr->sa_family == AF_UNSPEC) {
      return Result(s->Disconnect());
    }
    std::optional<quadsock::net::Endpoint> peer = EndpointOf(addr, len);
    if (!peer.has_value()) return Result(-EINVAL);
    return Result(s->Connect(*peer));
  }
  std::optional<quadsock::net::Endpoint> peer = EndpointOf(addr, len);
  if (!peer.has_value()) return Libc().connect(fd, addr, len);
  const int family = FdTable::Trackable(fd) ? UdpFamily(fd) : AF_UNSPEC;
  if (family == AF_UNSPEC || !Unbound(fd) || !Runtime::Get().TakesPeer(family, *peer)) {
    return Libc().connect(fd, addr, len);
  }
  return Result(TakeAndRun(fd, family, [&peer](PreloadSocket& s) { return s.Connect(*peer); }));
}

int close(int fd) {
  std::shared_ptr<PreloadSocket> s = Fds().Forget(fd);
  const int r = Libc().close(fd);
  const int err = errno;
  s.reset();  // the last descriptor: the socket closes on quadsockd too
  errno = err;
  return r;
}

int dup(int fd) noexcept { return Dup(fd, Libc().dup(fd)); }

int dup2(int old_fd, int new_fd) noexcept {
  if (old_fd == new_fd) return Libc().dup2(old_fd, new_fd);
  std::shared_ptr<PreloadSocket> replaced = Fds().Forget(new_fd);
  return Dup(old_fd, Libc().dup2(old_fd, new_fd));
}

int dup3(int old_fd, int new_fd, int flags) noexcept {
  std::shared_ptr<PreloadSocket> replaced =
      old_fd == new_fd ? nullptr : Fds().Forget(new_fd);
  return Dup(old_fd, Libc().dup3(old_fd, new_fd, flags));
}

int fcntl(int fd, int cmd, ...) {
  va_list ap;
  va_start(ap, cmd);
  const unsigned long arg = va_arg(ap, unsigned long);
  va_end(ap);
  if (cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC) return Dup(fd, Libc().fcntl(fd, cmd, arg));
  if (cmd == F_GETFL || cmd == F_SETFL) {
    std::shared_ptr<PreloadSocket> s = Fds().Find(fd);
    if (s != nullptr) {
      return cmd == F_GETFL ? s->GetStatusFlags() : s->SetStatusFlags(static_cast<int>(arg));
    }
  }
  return Libc().fcntl(fd, cmd, arg);
}

int fcntl64(int fd, int cmd, ...) {
  va_list ap;
  va_start(ap, cmd);
  const unsigned long arg = va_arg(ap, unsigned long);
  va_end(ap);
  return fcntl(fd, cmd, arg);
}

int ioctl(int fd, unsigned long request, ...) noexcept {
  va_list ap;
  va_start(ap, request);
  void* arg = va_arg(ap, void*);
  va_end(ap);
  std::shared_ptr<PreloadSocket> s = Fds().Find(fd);
  if (s != nullptr) return Result(s->Ioctl(request, arg));
  return Libc().ioctl(fd, request, arg);
}

int getsockname(int fd, sockaddr* addr, socklen_t* len) noexcept {
  std::shared_ptr<PreloadSocket> s = Fds().Find(fd);
  if (s != nullptr) return Result(s->GetSockName(addr, len));
  return Libc().getsockname(fd, addr, len);
}

int getpeername(int fd, sockaddr* addr, socklen_t* len) noexcept {
  std::shared_ptr<PreloadSocket> s = Fds().Find(fd);
  if (s != nullptr) return Result(s->GetPeerName(addr, len));
  return Libc().getpeername(fd, addr, len);
}

int getsockopt(int fd, int level, int name, void* value, socklen_t* len) noexcept {
  std::shared_ptr<PreloadSocket> s = Fds().Find(fd);
  if (s != nullptr) return Result(s->GetSockOpt(level, name, value, len));
  return Libc().getsockopt(fd, level, name, value, len);
}

int setsockopt(int fd, int level, int name, const void* value, socklen_t len) noexcept {
  std::shared_ptr<PreloadSocket> s = Fds().Find(fd);
  if (s != nullptr) return Result(s->SetSockOpt(level, name, value, len));
  return Libc().setsockopt(fd, level, name, value, len);
}

int shutdown(int fd, int how) noexcept {
  std::shared_ptr<PreloadSocket> s = Fds().Find(fd);
  if (s != nullptr) return Result(s->Shutdown(how));
  return Libc().shutdown(fd, how);
}

ssize_t send(int fd, const void* buf, size_t len, int flags) {
  std::shared_ptr<PreloadSocket> s = Fds().Find(fd);
  if (s != nullptr) return Result(SendFrom(*s, buf, len, flags, nullptr, 0));
  return Libc().send(fd, buf, len, flags);
}

ssize_t sendto(int fd, const void* buf, size_t len, int flags, const sockaddr* to,
               socklen_t to_len) {
  std::shared_ptr<PreloadSocket> s = Fds().Find(fd);
  if (s == nullptr) s = TakeForSend(fd, to, to_len);
  if (s != nullptr) return Result(SendFrom(*s, buf, len, flags, to, to_len));
  return Libc().sendto(fd, buf, len, flags, to, to_len);
}

ssize_t sendmsg(int fd, const msghdr* m, int flags) {
  std::shared_ptr<PreloadSocket> s = Fds().Find(fd);
  if (s == nullptr) s = TakeForSend(fd, static_cast<const sockaddr*>(m->msg_name), m->msg_namelen);
  if (s != nullptr) return Result(s->SendMsg(m, flags));
  return Libc().sendmsg(fd, m, flags);
}

int sendmmsg(int fd, mmsghdr* v, unsigned int n, int flags) {
  std::shared_ptr<PreloadSocket> s = Fds().Find(fd);
  if (s == nullptr && n > 0) {
    s = TakeForSend(fd, static_cast<const sockaddr*>(v[0].msg_hdr.msg_name),
                    v[0].msg_hdr.msg_namelen);
  }
  if (s == nullptr) return Libc().sendmmsg(fd, v, n, flags);
  unsigned int sent = 0;
  for (; sent < n && sent < UIO_MAXIOV; ++sent) {
    const ssize_t r = s->SendMsg(&v[sent].msg_hdr, flags);
    if (r < 0) return sent > 0 ? static_cast<int>(sent) : static_cast<int>(Result(r));
    v[sent].msg_len = static_cast<unsigned int>(r);
  }
  return static_cast<int>(sent);
}

ssize_t write(int fd, const void* buf, size_t len) {
  std::shared_ptr<PreloadSocket> s = Fds().Find(fd);
  if (s != nullptr) return Result(SendFrom(*s, buf, len, 0, nullptr, 0));
  return Libc().write(fd, buf, len);
}

ssize_t writev(int fd, const iovec* iov, int count) {
  std::shared_ptr<PreloadSocket> s = Fds().Find(fd);
  if (s == nullptr) return Libc().writev(fd, iov, count);
  if (count < 0 || count > UIO_MAXIOV) return Result<ssize_t>(-EINVAL);
  msghdr m{};
  m.msg_iov = const_cast<iovec*>(iov);
  m.msg_iovlen = static_cast<size_t>(count);
  return Result(s->SendMsg(&m, 0));
}

ssize_t recv(int fd, void* buf, size_t len, int flags) {
  std::shared_ptr<PreloadSocket> s = Fds().Find(fd);
  if (s != nullptr) return Result(ReceiveInto(*s, buf, len, flags, nullptr, nullptr));
  return Libc().recv(fd, buf, len, flags);
}

ssize_t recvfrom(int fd, void* buf, size_t len, int flags, sockaddr* from, socklen_t* from_len) {
  std::shared_ptr<PreloadSocket> s = Fds().Find(fd);
  if (s != nullptr) return Result(ReceiveInto(*s, buf, len, flags, from, from_len));
  return Libc().recvfrom(fd, buf, len, flags, from, from_len);
}

ssize_t recvmsg(int fd, msghdr* m, int flags) {
  std::shared_ptr<PreloadSocket> s = Fds().Find(fd);
  if (s != nullptr) return Result(s->ReceiveMsg(m, flags));
  return Libc().recvmsg(fd, m, flags);
}

int recvmmsg(int fd, mmsghdr* v, unsigned int n, int flags, struct timespec* timeout) {
  std::shared_ptr<PreloadSocket> s = Fds().Find(fd);
  if (s == nullptr) return Libc().recvmmsg(fd, v, n, flags, timeout);
  // As Linux: the timeout is looked at after each datagram; MSG_WAITFORONE waits for the
  // first only.
  const absl::Time deadline =
      timeout == nullptr ? absl::InfiniteFuture() : absl::Now() + absl::DurationFromTimespec(*timeout);
  unsigned int got = 0;
  for (; got < n && got < UIO_MAXIOV; ++got) {
    int f = flags & ~MSG_WAITFORONE;
    if (got > 0 && (flags & MSG_WAITFORONE) != 0) f |= MSG_DONTWAIT;
    const ssize_t r = s->ReceiveMsg(&v[got].msg_hdr, f);
    if (r < 0) return got > 0 ? static_cast<int>(got) : static_cast<int>(Result(r));
    v[got].msg_len = static_cast<unsigned int>(r);
    if (absl::Now() >= deadline) {
      ++got;
      break;
    }
  }
  return static_cast<int>(got);
}

ssize_t read(int fd, void* buf, size_t len) {
  std::shared_ptr<PreloadSocket> s = Fds().Find(fd);
  if (s != nullptr) return Result(ReceiveInto(*s, buf, len, 0, nullptr, nullptr));
  return Libc().read(fd, buf, len);
}

ssize_t readv(int fd, const iovec* iov, int count) {
  std::shared_ptr<PreloadSocket> s = Fds().Find(fd);
  if (s == nullptr) return Libc().readv(fd, iov, count);
  if (count < 0 || count > UIO_MAXIOV) return Result<ssize_t>(-EINVAL);
  msghdr m{};
  m.msg_iov = const_cast<iovec*>(iov);
  m.msg_iovlen = static_cast<size_t>(count);
  return Result(s->ReceiveMsg(&m, 0));
}

// The same calls as programs built with _FORTIFY_SOURCE make them (Debian builds its packages
// so): the buffer's size is checked as the C library would, then the call above.
ssize_t __recv_chk(int fd, void* buf, size_t len, size_t buf_len, int flags) {
  if (len > buf_len) __chk_fail();
  return recv(fd, buf, len, flags);
}

ssize_t __recvfrom_chk(int fd, void* buf, size_t len, size_t buf_len, int flags, sockaddr* from,
                       socklen_t* from_len) {
  if (len > buf_len) __chk_fail();
  return recvfrom(fd, buf, len, flags, from, from_len);
}

ssize_t __read_chk(int fd, void* buf, size_t len, size_t buf_len) {
  if (len > buf_len) __chk_fail();
  return read(fd, buf, len);
}


// Readiness: a quadsock socket's descriptor is an eventfd (readable while datagrams wait), so
// these are the C library's own calls; with QUADSOCK_BUSY_POLL a wait on a set that holds a
// quadsock socket spins first (busy_poll.h). The variants that take a signal mask (ppoll,
// pselect, epoll_pwait with one, epoll_pwait2) swap it in as they sleep: they never spin.
int epoll_ctl(int ep, int op, int fd, epoll_event* event) noexcept {
  const int r = Libc().epoll_ctl(ep, op, fd, event);
  if (r == 0 && op != EPOLL_CTL_DEL && Fds().Spins(fd)) Fds().MarkWatching(ep);
  return r;
}

int epoll_wait(int ep, epoll_event* events, int max, int timeout) {
  Link* link = BusyPollFor([ep] { return Fds().Spins(ep); });
  if (link == nullptr) return Libc().epoll_wait(ep, events, max, timeout);
  return SpinThenWait(*link, Runtime::Get().busy_poll(), FromMilliseconds(timeout),
                      [&](absl::Duration t) {
                        return Libc().epoll_wait(ep, events, max, PollMilliseconds(t));
                      });
}

int epoll_pwait(int ep, epoll_event* events, int max, int timeout, const sigset_t* mask) {
  if (mask != nullptr) return Libc().epoll_pwait(ep, events, max, timeout, mask);
  return epoll_wait(ep, events, max, timeout);
}

int poll(pollfd* fds, nfds_t n, int timeout) {
  Link* link = BusyPollFor([fds, n] {
    for (nfds_t i = 0; i < n; ++i) {
      if (Fds().Spins(fds[i].fd)) return true;
    }
    return false;
  });
  if (link == nullptr) return Libc().poll(fds, n, timeout);
  return SpinThenWait(*link, Runtime::Get().busy_poll(), FromMilliseconds(timeout),
                      [&](absl::Duration t) { return Libc().poll(fds, n, PollMilliseconds(t)); });
}

int select(int n, fd_set* read, fd_set* write, fd_set* except, timeval* tv) {
  // Sets past FD_SETSIZE (which glibc allows) are not copied here: such a select never spins;
  // nor one with a timeout the kernel refuses (EINVAL).
  const bool invalid =
      tv != nullptr && (tv->tv_sec < 0 || tv->tv_usec < 0 || tv->tv_usec >= 1'000'000);
  Link* link = n > FD_SETSIZE || invalid ? nullptr : BusyPollFor([&] {
    for (int fd = 0; fd < n; ++fd) {
      if (((read != nullptr && FD_ISSET(fd, read)) || (write != nullptr && FD_ISSET(fd, write)) ||
           (except != nullptr && FD_ISSET(fd, except))) &&
          Fds().Spins(fd)) {
        return true;
      }
    }
    return false;
  });
  if (link == nullptr) return Libc().select(n, read, write, except, tv);
  // Each look rewrites the sets: every wait starts from the program's.
  const fd_set asked[3] = {read != nullptr ? *read : fd_set{}, write != nullptr ? *write : fd_set{},
                           except != nullptr ? *except : fd_set{}};
  const absl::Duration timeout =
      tv != nullptr ? absl::DurationFromTimeval(*tv) : absl::InfiniteDuration();
  const absl::Time start = absl::Now();
  const int r = SpinThenWait(*link, Runtime::Get().busy_poll(), timeout, [&](absl::Duration t) {
    if (read != nullptr) *read = asked[0];
    if (write != nullptr) *write = asked[1];
    if (except != nullptr) *except = asked[2];
    timeval left;
    if (t != absl::InfiniteDuration()) left = absl::ToTimeval(absl::Ceil(t, absl::Microseconds(1)));
    return Libc().select(n, read, write, except, t == absl::InfiniteDuration() ? nullptr : &left);
  });
  const int err = errno;
  // As Linux's select: the timeout left is what was not slept.
  if (tv != nullptr) *tv = absl::ToTimeval(std::max(timeout - (absl::Now() - start),
                                                    absl::ZeroDuration()));
  errno = err;
  return r;
}

int __poll_chk(pollfd* fds, nfds_t n, int timeout, size_t fds_len) {
  if (fds_len / sizeof(*fds) < n) __chk_fail();
  return poll(fds, n, timeout);
}

// Signal handlers: each behind the library's trampoline (signal_handlers.h), so that a receive
// knows whether the handlers that interrupted its sleep had SA_RESTART. The C library's signal,
// siginterrupt and sigset call its own sigaction, not this one, so they are stood in for too.
int sigaction(int sig, const struct sigaction* act, struct sigaction* old) noexcept {
  return ProgramSigaction(sig, act, old);
}
sighandler_t signal(int sig, sighandler_t handler) noexcept {
  return ProgramBsdSignal(sig, handler);
}
sighandler_t bsd_signal(int sig, sighandler_t handler) noexcept {
  return ProgramBsdSignal(sig, handler);
}
sighandler_t ssignal(int sig, sighandler_t handler) noexcept {
  return ProgramBsdSignal(sig, handler);
}
sighandler_t sysv_signal(int sig, sighandler_t handler) noexcept {
  return ProgramSysvSignal(sig, handler);
}
sighandler_t __sysv_signal(int sig, sighandler_t handler) noexcept {
  return ProgramSysvSignal(sig, handler);
}
int siginterrupt(int sig, int interrupt) noexcept { return ProgramSiginterrupt(sig, interrupt); }
sighandler_t sigset(int sig, sighandler_t disposition) noexcept {
  return ProgramSigset(sig, disposition);
}

}  // extern "C"
