#include "clients/preload/internal/socket.h"

#include <fcntl.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "clients/preload/internal/busy_poll.h"
#include "clients/preload/internal/errno_of.h"
#include "clients/preload/internal/fd_table.h"
#include "clients/preload/internal/libc.h"
#include "clients/preload/internal/log.h"
#include "clients/preload/internal/runtime.h"
#include "clients/preload/internal/send_control.h"
#include "clients/preload/internal/signal_handlers.h"
#include "clients/preload/internal/sockaddr.h"

namespace quadsock::preload {
namespace {

Endpoint ClientEndpoint(const net::Endpoint& e) { return {e.address.ToString(), e.port}; }

std::optional<net::Endpoint> NetEndpoint(const Endpoint& e) {
  absl::StatusOr<net::IpAddress> a = net::IpAddress::Parse(e.address);
  if (!a.ok()) return std::nullopt;
  return net::Endpoint{*a, e.port};
}

int64_t Microseconds(const timeval& tv) { return int64_t{tv.tv_sec} * 1'000'000 + tv.tv_usec; }

// Options the socket honours, or that only the kernel's bookkeeping needs; setting any other
// is said once (the shadow still takes and checks it).
bool Honoured(int level, int name) {
  switch (level) {
    case SOL_SOCKET:
      switch (name) {
        case SO_RCVBUF: case SO_RCVBUFFORCE: case SO_SNDBUF: case SO_SNDBUFFORCE:
        case SO_RCVTIMEO: case SO_SNDTIMEO: case SO_TIMESTAMP: case SO_TIMESTAMPNS:
        case SO_REUSEADDR: case SO_REUSEPORT: case SO_KEEPALIVE: case SO_RCVLOWAT:
          return true;
        default:
          return false;
      }
    case IPPROTO_IP:
      return name == IP_PKTINFO || name == IP_RECVERR;
    case IPPROTO_IPV6:
      return name == IPV6_RECVPKTINFO || name == IPV6_V6ONLY || name == IPV6_RECVERR;
    default:
      return false;
  }
}

// Options whose effect quadsock would have to provide and does not (multicast groups, a device,
// socket filters): refused with ENOPROTOOPT, the kernel's errno for an option it does not
// support, so that a program knows rather than waits for what never comes.
bool Refused(int level, int name) {
  switch (level) {
    case SOL_SOCKET:
      return name == SO_BINDTODEVICE || name == SO_ATTACH_FILTER || name == SO_ATTACH_BPF ||
             name == SO_ATTACH_REUSEPORT_CBPF || name == SO_ATTACH_REUSEPORT_EBPF;
    case IPPROTO_IP:
      return name == IP_ADD_MEMBERSHIP || name == IP_ADD_SOURCE_MEMBERSHIP ||
             name == MCAST_JOIN_GROUP || name == MCAST_JOIN_SOURCE_GROUP ||
             name == IP_TRANSPARENT;
    case IPPROTO_IPV6:
      return name == IPV6_ADD_MEMBERSHIP || name == MCAST_JOIN_GROUP ||
             name == MCAST_JOIN_SOURCE_GROUP || name == IPV6_TRANSPARENT;
    default:
      return false;
  }
}

}  // namespace

PreloadSocket::PreloadSocket(Runtime& runtime, Link& link, int family, RemoteSocket remote,
                             int shadow_fd, std::shared_ptr<SharedSocket> shared)
    : runtime_(runtime),
      link_(link),
      family_(family),
      remote_(std::move(remote)),
      shadow_fd_(shadow_fd),
      shared_(std::move(shared)) {
  RefreshOptions();
  link_.Register(index(), shared_);
}

PreloadSocket::~PreloadSocket() {
  // This process's last descriptor of the socket is closed.
  const bool last = shared_->DropHolder();
  if (last && link_.owned_here()) {
    link_.Unregister(index());
    if (absl::Status s = remote_.Close(); !s.ok()) {
      Log(LogLevel::kInfo, absl::StrCat("closing socket ", index(), " on quadsockd: ", s.message()));
    }
  } else {
    // Another process still holds it, or only the Link's owner may talk to quadsockd (the
    // parent's session closes it when it ends).
    remote_.Release();
  }
  Libc().close(shadow_fd_);
}

int PreloadSocket::InstallAt(int fd, bool cloexec) {
  if (!FdTable::Trackable(fd)) return -EMFILE;
  if (Libc().dup3(shared_->event_fd(), fd, cloexec ? O_CLOEXEC : 0) < 0) return -errno;
  Fds().Install(fd, shared_from_this());
  return 0;
}

bool PreloadSocket::CanCallQuadsockd() const {
  if (link_.owned_here()) return true;
  LogOnce(LogLevel::kError, "inherited control",
          "bind, connect or shutdown of a quadsock socket inherited across fork: only the "
          "process that opened it can (ENETDOWN)");
  return false;
}

void PreloadSocket::RefreshOptions() {
  timeval rcv{}, snd{};
  socklen_t len = sizeof(rcv);
  Libc().getsockopt(shadow_fd_, SOL_SOCKET, SO_RCVTIMEO, &rcv, &len);
  len = sizeof(snd);
  Libc().getsockopt(shadow_fd_, SOL_SOCKET, SO_SNDTIMEO, &snd, &len);
  receive_timeout_us_.store(Microseconds(rcv), std::memory_order_relaxed);
  send_timeout_us_.store(Microseconds(snd), std::memory_order_relaxed);
  timestamp_ns_.store(IntOption(shadow_fd_, SOL_SOCKET, SO_TIMESTAMPNS) != 0);
  timestamp_.store(IntOption(shadow_fd_, SOL_SOCKET, SO_TIMESTAMP) != 0);
  pktinfo_.store(family_ == AF_INET ? IntOption(shadow_fd_, IPPROTO_IP, IP_PKTINFO) != 0
                                    : IntOption(shadow_fd_, IPPROTO_IPV6, IPV6_RECVPKTINFO) != 0);
  const int rcvbuf = IntOption(shadow_fd_, SOL_SOCKET, SO_RCVBUF);
  SharedSocket::Guard g(*shared_);
  if (rcvbuf > 0) shared_->state().receive_buffer = static_cast<uint64_t>(rcvbuf);
}

int PreloadSocket::Bind(const net::Endpoint& local) {
  std::lock_guard<std::mutex> control(control_mu_);
  {
    SharedSocket::Guard g(*shared_);
    if (shared_->state().bound) return -EINVAL;
  }
  if (!CanCallQuadsockd()) return -ENETDOWN;
  absl::StatusOr<Endpoint> got = remote_.Bind(ClientEndpoint(local));
  if (!got.ok()) {
    Log(LogLevel::kInfo, absl::StrCat("bind ", local.ToString(), ": ", got.status().message()));
    return -ErrnoOf(got.status(), Call::kBind);
  }
  SharedSocket::Guard g(*shared_);
  shared_->state().bound = true;
  shared_->state().local = NetEndpoint(*got).value_or(local);
  return 0;
}

int PreloadSocket::Connect(const net::Endpoint& peer) {
  std::lock_guard<std::mutex> control(control_mu_);
  if (!CanCallQuadsockd()) return -ENETDOWN;
  absl::StatusOr<Endpoint> got = remote_.Connect(ClientEndpoint(peer));
  if (!got.ok()) {
    Log(LogLevel::kInfo, absl::StrCat("connect ", peer.ToString(), ": ", got.status().message()));
    return -ErrnoOf(got.status(), Call::kConnect);
  }
  SharedSocket::Guard g(*shared_);
  SharedSocket::State& s = shared_->state();
  s.bound = true;
  if (std::optional<net::Endpoint> local = NetEndpoint(*got)) s.local = *local;
  s.peer = peer;
  s.connected = true;
  return 0;
}

int PreloadSocket::Disconnect() {
  std::lock_guard<std::mutex> control(control_mu_);
  {
    SharedSocket::Guard g(*shared_);
    if (!shared_->state().connected) return 0;  // as Linux: AF_UNSPEC when not connected
  }
  if (!CanCallQuadsockd()) return -ENETDOWN;
  if (absl::Status s = remote_.Disconnect(); !s.ok()) {
    if (int e = ErrnoOf(s, Call::kDisconnect); e != 0) return -e;
  }
  SharedSocket::Guard g(*shared_);
  shared_->state().connected = false;
  return 0;
}

int PreloadSocket::Shutdown(int how) {
  if (how != SHUT_RD && how != SHUT_WR && how != SHUT_RDWR) return -EINVAL;
  SharedSocket::Guard g(*shared_);
  SharedSocket::State& s = shared_->state();
  if (how != SHUT_WR) s.shut_read = true;
  if (how != SHUT_RD) s.shut_write = true;
  shared_->Signal();  // a reader waiting now gets end-of-file, as from Linux
  // Linux marks an unconnected socket too, and says ENOTCONN.
  return s.connected ? 0 : -ENOTCONN;
}

int PreloadSocket::GetSockName(sockaddr* addr, socklen_t* len) {
  SharedSocket::Guard g(*shared_);
  const SharedSocket::State& s = shared_->state();
  const net::Endpoint any{family_ == AF_INET ? net::IpAddress::AnyV4() : net::IpAddress::AnyV6(),
                          0};
  WriteSockaddr(s.bound ? s.local : any, family_, addr, len);
  return 0;
}

int PreloadSocket::GetPeerName(sockaddr* addr, socklen_t* len) {
  SharedSocket::Guard g(*shared_);
  if (!shared_->state().connected) return -ENOTCONN;
  WriteSockaddr(shared_->state().peer, family_, addr, len);
  return 0;
}

int PreloadSocket::GetSockOpt(int level, int name, void* value, socklen_t* len) {
  if (level == SOL_SOCKET && name == SO_ERROR && value != nullptr && len != nullptr &&
      *len >= static_cast<socklen_t>(sizeof(int))) {
    // quadsockd keeps a connected socket's ICMP error for its next send; Get shows it.
    int error = 0;
    if (link_.owned_here()) {
      if (absl::StatusOr<v1::Socket> info = remote_.Get();
          info.ok() && !info->pending_error().empty()) {
        error = ECONNREFUSED;
      }
    }
    std::memcpy(value, &error, sizeof(error));
    *len = sizeof(int);
    return 0;
  }
  return Libc().getsockopt(shadow_fd_, level, name, value, len) == 0 ? 0 : -errno;
}

int PreloadSocket::SetSockOpt(int level, int name, const void* value, socklen_t len) {
  if (level == IPPROTO_IPV6 && name == IPV6_V6ONLY) return -EINVAL;  // bound: Linux says EINVAL
  if (Refused(level, name)) {
    LogOnce(LogLevel::kWarn, absl::StrCat("refused ", level, " ", name),
            absl::StrCat("setsockopt(level ", level, ", option ", name,
                         "): not supported on a quadsock socket (ENOPROTOOPT)"));
    return -ENOPROTOOPT;
  }
  if (Libc().setsockopt(shadow_fd_, level, name, value, len) != 0) return -errno;
  if (!Honoured(level, name)) {
    LogOnce(LogLevel::kWarn, absl::StrCat("setsockopt ", level, " ", name),
            absl::StrCat("setsockopt(level ", level, ", option ", name,
                         ") has no effect on a quadsock socket (the kernel's checks passed it)"));
  }
  RefreshOptions();
  return 0;
}

int PreloadSocket::Ioctl(unsigned long request, void* arg) {
  switch (request) {
    case FIONREAD: {
      if (runtime_.BusyPollLink() == &link_) link_.Poll();  // busy_poll.h
      SharedSocket::Guard g(*shared_);
      const SharedSocket::Slot* front = shared_->Front();
      const int n = front == nullptr ? 0 : static_cast<int>(front->length);
      std::memcpy(arg, &n, sizeof(n));
      return 0;
    }
    case FIONBIO: {
      int on;
      std::memcpy(&on, arg, sizeof(on));
      SharedSocket::Guard g(*shared_);
      shared_->state().nonblocking = on != 0;
      return 0;
    }
    case TIOCOUTQ: {  // SIOCOUTQ: what waits to be sent (our sends are queued at once)
      const int n = 0;
      std::memcpy(arg, &n, sizeof(n));
      return 0;
    }
    default:  // interface queries and the rest: the kernel's, on the shadow
      return Libc().ioctl(shadow_fd_, request, arg) == 0 ? 0 : -errno;
  }
}

int PreloadSocket::GetStatusFlags() {
  SharedSocket::Guard g(*shared_);
  return O_RDWR | (shared_->state().nonblocking ? O_NONBLOCK : 0);
}

int PreloadSocket::SetStatusFlags(int flags) {
  SharedSocket::Guard g(*shared_);
  shared_->state().nonblocking = (flags & O_NONBLOCK) != 0;
  return 0;
}

size_t PreloadSocket::WriteControl(msghdr* m, const SharedSocket::Slot& d) const {
  // As Linux orders them: the timestamp (sock_recv_cmsgs), then the IP level's.
  size_t used = 0;
  bool truncated = false;
  auto put = [&](int level, int type, const void* data, size_t size) {
    if (m->msg_control == nullptr || used + CMSG_LEN(size) > m->msg_controllen) {
      truncated = true;
      return;
    }
    cmsghdr* c = reinterpret_cast<cmsghdr*>(static_cast<char*>(m->msg_control) + used);
    c->cmsg_level = level;
    c->cmsg_type = type;
    c->cmsg_len = CMSG_LEN(size);
    std::memcpy(CMSG_DATA(c), data, size);
    used += std::min(CMSG_SPACE(size), m->msg_controllen - used);
  };
  const absl::Time arrival = absl::FromUnixNanos(d.arrival_ns);
  if (timestamp_ns_.load(std::memory_order_relaxed)) {
    const timespec ts = absl::ToTimespec(arrival);
    put(SOL_SOCKET, SCM_TIMESTAMPNS, &ts, sizeof(ts));
  } else if (timestamp_.load(std::memory_order_relaxed)) {
    const timeval tv = absl::ToTimeval(arrival);
    put(SOL_SOCKET, SCM_TIMESTAMP, &tv, sizeof(tv));
  }
  if (pktinfo_.load(std::memory_order_relaxed)) {
    if (family_ == AF_INET) {
      in_pktinfo p{};
      p.ipi_ifindex = static_cast<int>(link_.ifindex());
      std::memcpy(&p.ipi_spec_dst, d.local.address.bytes16().data() + 12, 4);
      std::memcpy(&p.ipi_addr, d.local.address.bytes16().data() + 12, 4);
      put(IPPROTO_IP, IP_PKTINFO, &p, sizeof(p));
    } else {
      in6_pktinfo p{};
      p.ipi6_ifindex = link_.ifindex();
      std::memcpy(&p.ipi6_addr, d.local.address.ToV6().bytes16().data(), 16);
      put(IPPROTO_IPV6, IPV6_PKTINFO, &p, sizeof(p));
    }
  }
  if (truncated) m->msg_flags |= MSG_CTRUNC;
  return used;
}

int PreloadSocket::Wait(absl::Time deadline) {
  const absl::Duration left = deadline - absl::Now();  // infinite for no deadline
  if (left <= absl::ZeroDuration()) return -EAGAIN;
  const int ms = PollMilliseconds(left);
  // With the program's own mask: a signal sent to the process goes to this thread, as it would
  // to one blocked in the kernel's recv. As Linux's recv, it goes on after handlers that all
  // had SA_RESTART, unless the socket has a receive timeout.
  pollfd p{shared_->event_fd(), POLLIN, 0};
  const HandlerRuns before = HandlerRuns::Now();
  if (Libc().poll(&p, 1, ms) < 0 && errno == EINTR) {
    const bool restart = RanSince(before) == AfterHandlers::kRestart;
    return (restart && deadline == absl::InfiniteFuture()) ? 0 : -EINTR;
  }
  return 0;
}

ssize_t PreloadSocket::ReceiveMsg(msghdr* m, int flags) {
  const int64_t timeout_us = receive_timeout_us_.load(std::memory_order_relaxed);
  const absl::Time deadline =
      timeout_us > 0 ? absl::Now() + absl::Microseconds(timeout_us) : absl::InfiniteFuture();
  // Busy polling: the channel first (the hand-off thread may be keeping out of the way), and
  // a spin from the first time the queue is found empty.
  Link* busy = runtime_.BusyPollLink() == &link_ ? &link_ : nullptr;
  if (busy != nullptr) busy->Poll();
  std::optional<BusyPoll> spin;
  for (;;) {
    {
      SharedSocket::Guard g(*shared_);
      const SharedSocket::State& s = shared_->state();
      if (SharedSocket::Slot* d = shared_->Front()) {
        size_t copied = 0;
        for (size_t i = 0; i < m->msg_iovlen && copied < d->length; ++i) {
          const size_t n = std::min<size_t>(m->msg_iov[i].iov_len, d->length - copied);
          std::memcpy(m->msg_iov[i].iov_base, d->payload() + copied, n);
          copied += n;
        }
        m->msg_flags = copied < d->length ? MSG_TRUNC : 0;
        if (m->msg_name != nullptr) {
          WriteSockaddr(d->peer, family_, static_cast<sockaddr*>(m->msg_name), &m->msg_namelen);
        } else {
          m->msg_namelen = 0;
        }
        m->msg_controllen = WriteControl(m, *d);
        const ssize_t result = (flags & MSG_TRUNC) != 0 ? d->length : copied;
        if ((flags & MSG_PEEK) == 0) shared_->Pop();
        return result;
      }
      if (s.down) return -ENETDOWN;
      shared_->ClearReadable();
      // As Linux's datagram receive: a shut-down socket ends a wait with end-of-file, but
      // one that would not wait says EAGAIN first.
      if (s.nonblocking || (flags & MSG_DONTWAIT) != 0) return -EAGAIN;
      if (s.shut_read) return 0;
    }
    if (busy != nullptr) {
      if (!spin.has_value()) spin.emplace(*busy, runtime_.busy_poll(), deadline);
      // As Linux's recv: a handler ends the wait with EINTR, but one with SA_RESTART
      // restarts it when the socket has no receive timeout. Looked for before every turn and
      // after the last.
      const HeldSignals::Outcome o = spin->signals().LetThrough();
      if (o == HeldSignals::Outcome::kInterrupt ||
          (o == HeldSignals::Outcome::kRestart && timeout_us > 0)) {
        return -EINTR;
      }
      if (!spin->Turn()) {
        spin.reset();  // the program's signals, before it sleeps
        busy = nullptr;
      }
      continue;  // the queue, which the turn may have filled
    }
    if (int r = Wait(deadline); r < 0) return r;
  }
}

int PreloadSocket::SourceAsked(const msghdr* m, const net::IpAddress& bound, bool v4_destination,
                               std::optional<net::IpAddress>* from) const {
  SendControl c;
  if (int r = ReadSendControl(*m, family_, v4_destination, &c); r < 0) return r;
  // An interface no one has, as the kernel's (IPv6 looks before the address, IPv4 after);
  // another than quadsockd's, which quadsock cannot send by.
  const auto interface_error = [&] {
    char name[IF_NAMESIZE];
    if (c.ifindex == 0 || static_cast<uint32_t>(c.ifindex) == link_.ifindex()) return 0;
    return if_indextoname(static_cast<unsigned>(c.ifindex), name) == nullptr ? -ENODEV
                                                                             : -ENETUNREACH;
  };
  if (!v4_destination) {
    if (int r = interface_error(); r < 0) return r;
  }
  if (c.source.has_value()) {
    const net::IpAddress& a = *c.source;
    const bool zero_network = a.is_v4() && a.bytes16()[12] == 0;  // 0.0.0.0/8
    // No host's address (IPv4), or a link-local one without its interface (IPv6): invalid.
    if ((a.is_v4() && (a.NotAHostReason() != nullptr || zero_network)) ||
        (a.is_v6() && a.IsLinkLocal() && c.ifindex == 0)) {
      return -EINVAL;
    }
    // Another host's: IPv4 finds no route from it, IPv6 calls it invalid.
    const std::vector<net::IpAddress>& ours = link_.addresses();
    if (std::find(ours.begin(), ours.end(), a) == ours.end()) {
      return a.is_v4() ? -ENETUNREACH : -EINVAL;
    }
    // Unlike Linux, a socket bound to one address sends from that one only: quadsockd holds
    // the port on it alone, and another session may hold it on the other (the datagram
    // would be theirs to send).
    if (!bound.IsUnspecifiedInAnyForm() && bound.Unmapped() != a) return -EINVAL;
  }
  if (v4_destination) {
    if (int r = interface_error(); r < 0) return r;
  }
  *from = c.source;
  return 0;
}

ssize_t PreloadSocket::SendMsg(const msghdr* m, int flags) {
  std::optional<net::Endpoint> to;
  bool dont_wait;
  net::IpAddress bound;           // the socket's address; unspecified for none
  net::IpAddress destination;     // where the datagram goes (the connected peer's, or `to`)
  {
    SharedSocket::Guard g(*shared_);
    const SharedSocket::State& s = shared_->state();
    if (s.shut_write) {
      if ((flags & MSG_NOSIGNAL) == 0) raise(SIGPIPE);
      return -EPIPE;
    }
    if (s.down) return -ENETDOWN;
    dont_wait = s.nonblocking || (flags & MSG_DONTWAIT) != 0;
    if (m->msg_name != nullptr && m->msg_namelen != 0) {
      const sockaddr* name = static_cast<const sockaddr*>(m->msg_name);
      if (m->msg_namelen < static_cast<socklen_t>(sizeof(sa_family_t))) return -EINVAL;
      if (family_ == AF_INET6 && name->sa_family == AF_UNSPEC) {
        // IPv6: an AF_UNSPEC address means none (udpv6_sendmsg).
      } else if (family_ == AF_INET && name->sa_family != AF_INET &&
                 name->sa_family != AF_UNSPEC) {
        return -EAFNOSUPPORT;
      } else {
        to = EndpointOf(name, m->msg_namelen);
        if (!to.has_value() || to->port == 0) return -EINVAL;
      }
    }
    if (!to.has_value() && !s.connected) return -EDESTADDRREQ;
    if (s.bound) bound = s.local.address;
    destination = to.has_value() ? to->address : s.peer.address;
  }
  std::optional<net::IpAddress> from;
  if (int r = SourceAsked(m, bound, family_ == AF_INET || destination.Unmapped().is_v4(), &from);
      r < 0) {
    return r;
  }
  size_t total = 0;
  for (size_t i = 0; i < m->msg_iovlen; ++i) total += m->msg_iov[i].iov_len;
  if (total > link_.max_payload()) return -EMSGSIZE;
  thread_local std::vector<uint8_t> buffer;
  buffer.resize(total);
  size_t at = 0;
  for (size_t i = 0; i < m->msg_iovlen; ++i) {
    std::memcpy(buffer.data() + at, m->msg_iov[i].iov_base, m->msg_iov[i].iov_len);
    at += m->msg_iov[i].iov_len;
  }
  if (to.has_value()) to->address = to->address.Unmapped();
  // The TX ring full: quadsockd's poll thread is behind. Linux blocks a blocking socket until
  // its send buffer has room (or SO_SNDTIMEO passes); a non-blocking one says EAGAIN.
  const int64_t timeout_us = send_timeout_us_.load(std::memory_order_relaxed);
  const absl::Time deadline =
      timeout_us > 0 ? absl::Now() + absl::Microseconds(timeout_us) : absl::InfiniteFuture();
  for (int tries = 0;; ++tries) {
    if (link_.Send(index(), buffer, to, from)) return static_cast<ssize_t>(total);
    {
      SharedSocket::Guard g(*shared_);
      if (shared_->state().down) return -ENETDOWN;
    }
    if (dont_wait || absl::Now() >= deadline) return -EAGAIN;
    if (tries < 64) {
      sched_yield();
    } else {
      usleep(50);
    }
  }
}

}  // namespace quadsock::preload
