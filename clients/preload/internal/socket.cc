#include "clients/preload/internal/socket.h"

#include <fcntl.h>
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

#include "absl/strings/str_cat.h"
#include "clients/preload/internal/errno_of.h"
#include "clients/preload/internal/fd_table.h"
#include "clients/preload/internal/libc.h"
#include "clients/preload/internal/log.h"
#include "clients/preload/internal/runtime.h"
#include "clients/preload/internal/sockaddr.h"

namespace quadsock::preload {
namespace {

// What a queued datagram counts against SO_RCVBUF beyond its payload (the kernel charges an
// skb's truesize, a few hundred bytes more than a small payload).
constexpr size_t kDatagramOverhead = 256;

Endpoint ClientEndpoint(const net::Endpoint& e) { return {e.address.ToString(), e.port}; }

std::optional<net::Endpoint> NetEndpoint(const Endpoint& e) {
  absl::StatusOr<net::IpAddress> a = net::IpAddress::Parse(e.address);
  if (!a.ok()) return std::nullopt;
  return net::Endpoint{*a, e.port};
}

absl::Duration DurationOf(const timeval& tv) {
  return absl::Seconds(tv.tv_sec) + absl::Microseconds(tv.tv_usec);
}

int GetInt(int fd, int level, int name) {
  int v = 0;
  socklen_t len = sizeof(v);
  return Libc().getsockopt(fd, level, name, &v, &len) == 0 ? v : 0;
}

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

}  // namespace

PreloadSocket::PreloadSocket(Runtime& runtime, int family, RemoteSocket remote, int shadow_fd,
                             int event_fd, bool nonblocking)
    : runtime_(runtime),
      family_(family),
      remote_(std::move(remote)),
      shadow_fd_(shadow_fd),
      event_fd_(event_fd),
      nonblocking_(nonblocking) {
  RefreshOptions();
  runtime_.Register(index(), this);
}

PreloadSocket::~PreloadSocket() {
  runtime_.Unregister(index());
  if (absl::Status s = remote_.Close(); !s.ok() && !runtime_.down()) {
    Log(LogLevel::kInfo, absl::StrCat("closing socket ", index(), " on quadsockd: ", s.message()));
  }
  Libc().close(shadow_fd_);
  Libc().close(event_fd_);
}

int PreloadSocket::InstallAt(int fd, bool cloexec) {
  if (Libc().dup3(event_fd_, fd, cloexec ? O_CLOEXEC : 0) < 0) return -errno;
  Fds().Install(fd, shared_from_this());
  return 0;
}

void PreloadSocket::RefreshOptions() {
  int rcvbuf = GetInt(shadow_fd_, SOL_SOCKET, SO_RCVBUF);
  timeval rcv{}, snd{};
  socklen_t len = sizeof(rcv);
  Libc().getsockopt(shadow_fd_, SOL_SOCKET, SO_RCVTIMEO, &rcv, &len);
  len = sizeof(snd);
  Libc().getsockopt(shadow_fd_, SOL_SOCKET, SO_SNDTIMEO, &snd, &len);
  const bool ns = GetInt(shadow_fd_, SOL_SOCKET, SO_TIMESTAMPNS) != 0;
  const bool us = GetInt(shadow_fd_, SOL_SOCKET, SO_TIMESTAMP) != 0;
  const bool pktinfo = family_ == AF_INET ? GetInt(shadow_fd_, IPPROTO_IP, IP_PKTINFO) != 0
                                          : GetInt(shadow_fd_, IPPROTO_IPV6, IPV6_RECVPKTINFO) != 0;
  std::lock_guard<std::mutex> lock(mu_);
  if (rcvbuf > 0) receive_buffer_ = static_cast<size_t>(rcvbuf);
  receive_timeout_ = DurationOf(rcv);
  send_timeout_ = DurationOf(snd);
  timestamp_ns_ = ns;
  timestamp_ = us;
  pktinfo_ = pktinfo;
}

int PreloadSocket::Bind(const net::Endpoint& local) {
  std::lock_guard<std::mutex> control(control_mu_);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (bound_) return -EINVAL;
  }
  absl::StatusOr<Endpoint> got = remote_.Bind(ClientEndpoint(local));
  if (!got.ok()) {
    Log(LogLevel::kInfo, absl::StrCat("bind ", local.ToString(), ": ", got.status().message()));
    return -ErrnoOf(got.status(), Call::kBind);
  }
  std::lock_guard<std::mutex> lock(mu_);
  bound_ = true;
  local_ = NetEndpoint(*got);
  return 0;
}

int PreloadSocket::Connect(const net::Endpoint& peer) {
  std::lock_guard<std::mutex> control(control_mu_);
  absl::StatusOr<Endpoint> got = remote_.Connect(ClientEndpoint(peer));
  if (!got.ok()) {
    Log(LogLevel::kInfo, absl::StrCat("connect ", peer.ToString(), ": ", got.status().message()));
    return -ErrnoOf(got.status(), Call::kConnect);
  }
  std::lock_guard<std::mutex> lock(mu_);
  bound_ = true;
  local_ = NetEndpoint(*got);
  peer_ = peer;
  return 0;
}

int PreloadSocket::Disconnect() {
  std::lock_guard<std::mutex> control(control_mu_);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!peer_.has_value()) return 0;  // as Linux: connect(AF_UNSPEC) when not connected
  }
  if (absl::Status s = remote_.Disconnect(); !s.ok()) {
    if (int e = ErrnoOf(s, Call::kDisconnect); e != 0) return -e;
  }
  std::lock_guard<std::mutex> lock(mu_);
  peer_.reset();
  return 0;
}

int PreloadSocket::Shutdown(int how) {
  if (how != SHUT_RD && how != SHUT_WR && how != SHUT_RDWR) return -EINVAL;
  std::lock_guard<std::mutex> lock(mu_);
  if (how != SHUT_WR) shut_read_ = true;
  if (how != SHUT_RD) shut_write_ = true;
  if (shut_read_ && !readable_) {  // a reader waiting now gets end-of-file, as from Linux
    const uint64_t one = 1;
    (void)!Libc().write(event_fd_, &one, sizeof(one));
    readable_ = true;
  }
  // Linux marks an unconnected socket too, and says ENOTCONN.
  return peer_.has_value() ? 0 : -ENOTCONN;
}

int PreloadSocket::GetSockName(sockaddr* addr, socklen_t* len) {
  std::lock_guard<std::mutex> lock(mu_);
  const net::Endpoint any{family_ == AF_INET ? net::IpAddress::AnyV4() : net::IpAddress::AnyV6(),
                          0};
  WriteSockaddr(local_.value_or(any), family_, addr, len);
  return 0;
}

int PreloadSocket::GetPeerName(sockaddr* addr, socklen_t* len) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!peer_.has_value()) return -ENOTCONN;
  WriteSockaddr(*peer_, family_, addr, len);
  return 0;
}

int PreloadSocket::GetSockOpt(int level, int name, void* value, socklen_t* len) {
  if (level == SOL_SOCKET && name == SO_ERROR && value != nullptr && len != nullptr &&
      *len >= static_cast<socklen_t>(sizeof(int))) {
    // quadsockd keeps a connected socket's ICMP error for its next send; Get shows it.
    int error = 0;
    if (absl::StatusOr<v1::Socket> info = remote_.Get();
        info.ok() && !info->pending_error().empty()) {
      error = ECONNREFUSED;
    }
    std::memcpy(value, &error, sizeof(error));
    *len = sizeof(int);
    return 0;
  }
  return Libc().getsockopt(shadow_fd_, level, name, value, len) == 0 ? 0 : -errno;
}

int PreloadSocket::SetSockOpt(int level, int name, const void* value, socklen_t len) {
  if (level == IPPROTO_IPV6 && name == IPV6_V6ONLY) return -EINVAL;  // bound: Linux says EINVAL
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
      std::lock_guard<std::mutex> lock(mu_);
      const int n = queue_.empty() ? 0 : static_cast<int>(queue_.front().payload.size());
      std::memcpy(arg, &n, sizeof(n));
      return 0;
    }
    case FIONBIO: {
      int on;
      std::memcpy(&on, arg, sizeof(on));
      std::lock_guard<std::mutex> lock(mu_);
      nonblocking_ = on != 0;
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
  std::lock_guard<std::mutex> lock(mu_);
  return O_RDWR | (nonblocking_ ? O_NONBLOCK : 0);
}

int PreloadSocket::SetStatusFlags(int flags) {
  std::lock_guard<std::mutex> lock(mu_);
  nonblocking_ = (flags & O_NONBLOCK) != 0;
  return 0;
}

void PreloadSocket::ClearReadableLocked() {
  if (!readable_ || shut_read_ || down_) return;
  uint64_t drain;
  (void)!Libc().read(event_fd_, &drain, sizeof(drain));
  readable_ = false;
}

size_t PreloadSocket::WriteControl(msghdr* m, const Datagram& d) const {
  // As Linux orders them: the timestamp (sock_recv_cmsgs), then the IP level's.
  size_t used = 0;
  bool truncated = false;
  auto put = [&](int level, int type, const void* data, size_t size) {
    const size_t space = CMSG_SPACE(size);
    if (m->msg_control == nullptr || used + CMSG_LEN(size) > m->msg_controllen) {
      truncated = true;
      return;
    }
    cmsghdr* c = reinterpret_cast<cmsghdr*>(static_cast<char*>(m->msg_control) + used);
    c->cmsg_level = level;
    c->cmsg_type = type;
    c->cmsg_len = CMSG_LEN(size);
    std::memcpy(CMSG_DATA(c), data, size);
    used += std::min(space, m->msg_controllen - used);
  };
  const timespec ts = absl::ToTimespec(d.arrival);
  if (timestamp_ns_) {
    put(SOL_SOCKET, SCM_TIMESTAMPNS, &ts, sizeof(ts));
  } else if (timestamp_) {
    const timeval tv = absl::ToTimeval(d.arrival);
    put(SOL_SOCKET, SCM_TIMESTAMP, &tv, sizeof(tv));
  }
  if (pktinfo_ && family_ == AF_INET) {
    in_pktinfo p{};
    p.ipi_ifindex = static_cast<int>(runtime_.ifindex());
    std::memcpy(&p.ipi_spec_dst, d.local.address.bytes16().data() + 12, 4);
    std::memcpy(&p.ipi_addr, d.local.address.bytes16().data() + 12, 4);
    put(IPPROTO_IP, IP_PKTINFO, &p, sizeof(p));
  } else if (pktinfo_) {
    in6_pktinfo p{};
    p.ipi6_ifindex = runtime_.ifindex();
    std::memcpy(&p.ipi6_addr, d.local.address.ToV6().bytes16().data(), 16);
    put(IPPROTO_IPV6, IPV6_PKTINFO, &p, sizeof(p));
  }
  if (truncated) m->msg_flags |= MSG_CTRUNC;
  return used;
}

int PreloadSocket::Wait(absl::Time deadline) {
  const absl::Duration left = deadline - absl::Now();
  if (left <= absl::ZeroDuration()) return -EAGAIN;
  int ms = -1;
  if (deadline != absl::InfiniteFuture()) {
    ms = static_cast<int>(std::min<int64_t>(absl::ToInt64Milliseconds(absl::Ceil(left, absl::Milliseconds(1))), 1 << 30));
  }
  pollfd p{event_fd_, POLLIN, 0};
  if (poll(&p, 1, ms) < 0 && errno == EINTR) return -EINTR;
  return 0;
}

ssize_t PreloadSocket::ReceiveMsg(msghdr* m, int flags) {
  absl::Time deadline = absl::InfiniteFuture();
  bool dont_wait;
  {
    std::lock_guard<std::mutex> lock(mu_);
    dont_wait = nonblocking_ || (flags & MSG_DONTWAIT) != 0;
    if (receive_timeout_ > absl::ZeroDuration()) deadline = absl::Now() + receive_timeout_;
  }
  const absl::Time spin_until = absl::Now() + absl::Microseconds(runtime_.config().busy_poll_us);
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!queue_.empty()) {
        const Datagram& d = queue_.front();
        size_t copied = 0;
        for (size_t i = 0; i < m->msg_iovlen && copied < d.payload.size(); ++i) {
          const size_t n = std::min(m->msg_iov[i].iov_len, d.payload.size() - copied);
          std::memcpy(m->msg_iov[i].iov_base, d.payload.data() + copied, n);
          copied += n;
        }
        m->msg_flags = copied < d.payload.size() ? MSG_TRUNC : 0;
        if (m->msg_name != nullptr) {
          WriteSockaddr(d.peer, family_, static_cast<sockaddr*>(m->msg_name), &m->msg_namelen);
        } else {
          m->msg_namelen = 0;
        }
        m->msg_controllen = WriteControl(m, d);
        const ssize_t result = (flags & MSG_TRUNC) != 0 ? d.payload.size() : copied;
        if ((flags & MSG_PEEK) == 0) {
          queued_bytes_ -= d.payload.size() + kDatagramOverhead;
          queue_.pop_front();
          if (queue_.empty()) ClearReadableLocked();
        }
        return result;
      }
      if (down_) return -ENETDOWN;
      ClearReadableLocked();
      // As Linux's datagram receive: a shut-down socket ends a wait with end-of-file, but
      // one that would not wait says EAGAIN first.
      if (dont_wait) return -EAGAIN;
      if (shut_read_) return 0;
    }
    if (absl::Now() < spin_until) {
      sched_yield();
      continue;
    }
    if (int r = Wait(deadline); r < 0) return r;
  }
}

ssize_t PreloadSocket::SendMsg(const msghdr* m, int flags) {
  std::optional<net::Endpoint> to;
  absl::Time deadline = absl::InfiniteFuture();
  bool dont_wait;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (shut_write_) {
      if ((flags & MSG_NOSIGNAL) == 0) raise(SIGPIPE);
      return -EPIPE;
    }
    if (down_) return -ENETDOWN;
    dont_wait = nonblocking_ || (flags & MSG_DONTWAIT) != 0;
    if (send_timeout_ > absl::ZeroDuration()) deadline = absl::Now() + send_timeout_;
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
        if (!to.has_value()) return -EINVAL;
        if (to->port == 0) return -EINVAL;
      }
    }
    if (!to.has_value() && !peer_.has_value()) return -EDESTADDRREQ;
  }
  size_t total = 0;
  for (size_t i = 0; i < m->msg_iovlen; ++i) total += m->msg_iov[i].iov_len;
  if (total > runtime_.max_payload()) return -EMSGSIZE;
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
  for (int tries = 0;; ++tries) {
    if (runtime_.Send(index(), buffer, to)) return static_cast<ssize_t>(total);
    if (runtime_.down()) return -ENETDOWN;
    if (dont_wait || absl::Now() >= deadline) return -EAGAIN;
    if (tries < 64) {
      sched_yield();
    } else {
      usleep(50);
    }
  }
}

void PreloadSocket::Enqueue(const channel::ReceivedView& v) {
  std::lock_guard<std::mutex> lock(mu_);
  const size_t charge = v.payload.size() + kDatagramOverhead;
  if (shut_read_ || (!queue_.empty() && queued_bytes_ + charge > receive_buffer_)) {
    ++dropped_;  // as Linux drops into a full receive buffer
    return;
  }
  queue_.push_back(Datagram{std::vector<uint8_t>(v.payload.begin(), v.payload.end()), v.peer,
                            v.local, v.arrival});
  queued_bytes_ += charge;
}

void PreloadSocket::Signal() {
  std::lock_guard<std::mutex> lock(mu_);
  if (queue_.empty() && !shut_read_ && !down_) return;
  // Every batch: a new edge for edge-triggered epoll, as each datagram is from Linux.
  const uint64_t one = 1;
  (void)!Libc().write(event_fd_, &one, sizeof(one));
  readable_ = true;
}

void PreloadSocket::MarkDown() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    down_ = true;
  }
  Signal();
}

}  // namespace quadsock::preload
