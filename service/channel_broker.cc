#include "service/channel_broker.h"

#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "service/service_context.h"
#include "service/sessions.h"
#include "service/unix_listener.h"
#include "stack/link/errno_status.h"

namespace quadsock::service {
namespace {

constexpr size_t kMaxTokenBytes = 64;
// A connection that has not sent its token by then is closed.
constexpr absl::Duration kClaimDeadline = absl::Seconds(5);
constexpr int kTickMs = 100;
constexpr int kMaxFds = 1 + channel::kMaxRings;  // the memfd and one eventfd per ring

// One message on `fd`, with `fds` passed alongside (SCM_RIGHTS). False when it did not go.
bool SendWithFds(int fd, absl::string_view text, const std::vector<int>& fds) {
  iovec iov{const_cast<char*>(text.data()), text.size()};
  msghdr m{};
  m.msg_iov = &iov;
  m.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFds)];
  if (!fds.empty()) {
    m.msg_control = control;
    m.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
    cmsghdr* c = CMSG_FIRSTHDR(&m);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
    std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
  }
  return sendmsg(fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT) == static_cast<ssize_t>(text.size());
}

}  // namespace

ChannelBroker::ChannelBroker(std::string path, stack::Stack& stack, ChannelLimits limits,
                             std::function<void(absl::string_view)> log,
                             std::function<void(const std::string& session)> renew,
                             std::function<absl::Time()> clock)
    : path_(std::move(path)),
      stack_(stack),
      limits_(limits),
      log_(std::move(log)),
      renew_(std::move(renew)),
      clock_(std::move(clock)) {}

absl::StatusOr<std::unique_ptr<ChannelBroker>> ChannelBroker::Start(
    std::string path, stack::Stack& stack, ChannelLimits limits,
    std::function<void(absl::string_view)> log,
    std::function<void(const std::string& session)> renew, std::function<absl::Time()> clock) {
  std::unique_ptr<ChannelBroker> b(new ChannelBroker(
      std::move(path), stack, limits, std::move(log), std::move(renew), std::move(clock)));
  b->epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  if (b->epoll_fd_ < 0) return link::ErrnoStatus(errno, "epoll_create1");
  if (!b->path_.empty()) {
    // Mode 0660, as the Unix listener: whoever may call may attach.
    absl::StatusOr<UniqueFd> fd = ListenUnix(b->path_, SOCK_SEQPACKET, 64, b->log_);
    if (!fd.ok()) {
      return absl::Status(fd.status().code(), absl::StrCat("the data channel's side socket: ",
                                                           fd.status().message()));
    }
    b->listen_fd_ = fd->release();
    epoll_event e{};
    e.events = EPOLLIN;
    e.data.fd = b->listen_fd_;
    if (epoll_ctl(b->epoll_fd_, EPOLL_CTL_ADD, b->listen_fd_, &e) != 0) {
      return link::ErrnoStatus(errno, "epoll_ctl");
    }
  }
  ChannelBroker* self = b.get();
  b->thread_ = std::thread([self] { self->Run(); });
  return b;
}

ChannelBroker::~ChannelBroker() {
  stopping_.store(true);
  if (thread_.joinable()) thread_.join();
  {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<std::string> sessions;
    for (const auto& [session, a] : attached_) sessions.push_back(session);
    for (const std::string& s : sessions) Detach(s, "quadsockd is stopping");
    for (const auto& [fd, u] : unclaimed_) close(fd);
    unclaimed_.clear();
  }
  if (epoll_fd_ >= 0) close(epoll_fd_);
  if (listen_fd_ >= 0) {
    close(listen_fd_);
    unlink(path_.c_str());
  }
}

absl::StatusOr<channel::ChannelOptions> ChannelBroker::Size(
    uint32_t slots, const std::atomic<size_t>* peer) const {
  if (slots == 0) slots = limits_.default_slots;
  if ((slots & (slots - 1)) != 0 || slots > limits_.max_slots) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ring_slots: ", slots, " is not a power of two of at most ", limits_.max_slots));
  }
  const auto rings = static_cast<uint32_t>(stack_.poll_threads());
  // A buffer takes the largest datagram any link carries.
  uint32_t mtu = 0;
  for (const link::LinkInfo& l : stack_.Links()) mtu = std::max(mtu, l.mtu);
  const channel::ChannelOptions o{.rings = rings, .slots = slots, .buffer_bytes = mtu};
  // The stack's rings to the application, and the application's ring of sends (layout.h).
  const size_t bytes = channel::kHeaderBytes +
                       (size_t{rings} + 1) * channel::RingBytes(slots, channel::RoundUp(mtu, 64));
  if (bytes > limits_.max_bytes_per_session) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "a channel of %u rings of %u slots takes %u bytes; the limit is %u per session "
        "(--max_channel_mib): ask for fewer ring_slots",
        rings, slots, bytes, limits_.max_bytes_per_session));
  }
  if (const size_t used = channel_bytes_->load(); used + bytes > limits_.max_bytes_total) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "a channel of %u rings of %u slots takes %u bytes, and all sessions' channels hold %u "
        "of the %u they may (--max_all_channels_mib): ask for fewer ring_slots, or later",
        rings, slots, bytes, used, limits_.max_bytes_total));
  }
  if (peer != nullptr && peer->load() + bytes > limits_.max_bytes_per_peer) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "a channel of %u rings of %u slots takes %u bytes, and this client's sessions' channels "
        "hold %u of the %u one client may (--max_channel_mib_per_peer): ask for fewer "
        "ring_slots, or end a channel",
        rings, slots, bytes, peer->load(), limits_.max_bytes_per_peer));
  }
  return o;
}

namespace {

// A channel and its charge to the broker's totals (all sessions', its peer's), given back when
// the last reference goes: the broker hands out shared_ptrs that alias the channel and own this.
class ChargedChannel {
 public:
  ChargedChannel(std::shared_ptr<channel::Channel> c,
                 std::vector<std::shared_ptr<std::atomic<size_t>>> totals)
      : channel_(std::move(c)), totals_(std::move(totals)) {
    for (const auto& t : totals_) t->fetch_add(channel_->bytes());
  }
  ~ChargedChannel() {
    for (const auto& t : totals_) t->fetch_sub(channel_->bytes());
  }
  ChargedChannel(const ChargedChannel&) = delete;
  ChargedChannel& operator=(const ChargedChannel&) = delete;
  channel::Channel* get() const { return channel_.get(); }

 private:
  const std::shared_ptr<channel::Channel> channel_;
  const std::vector<std::shared_ptr<std::atomic<size_t>>> totals_;
};

}  // namespace

absl::Status ChannelBroker::CheckNone(const std::string& session) const {
  if (attached_.contains(session)) {
    return absl::AlreadyExistsError("the session has a data channel already");
  }
  for (const auto& [token, p] : offers_) {
    if (p.session == session) {
      return absl::AlreadyExistsError("the session has a data channel offered already");
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<channel::Channel>> ChannelBroker::NewChannel(
    const std::string& session, uint32_t slots) {
  // The session's peer's total, made for its first channel.
  std::shared_ptr<std::atomic<size_t>> peer;
  if (limits_.max_bytes_per_peer != 0 && limits_.peer_of) {
    if (const std::string who = limits_.peer_of(session); !who.empty()) {
      peer = peer_bytes_.Get(who, [] { return std::make_shared<std::atomic<size_t>>(0); });
    }
  }
  absl::StatusOr<channel::ChannelOptions> o = Size(slots, peer.get());
  if (!o.ok()) return o.status();
  if (absl::Status s = CheckNone(session); !s.ok()) return s;
  absl::StatusOr<std::shared_ptr<channel::Channel>> c = channel::Channel::Create(*o);
  if (!c.ok()) return c.status();
  std::vector<std::shared_ptr<std::atomic<size_t>>> totals = {channel_bytes_};
  if (peer != nullptr) totals.push_back(std::move(peer));
  auto charged = std::make_shared<ChargedChannel>(std::move(*c), std::move(totals));
  return std::shared_ptr<channel::Channel>(charged, charged->get());
}

absl::StatusOr<ChannelBroker::Offer> ChannelBroker::MakeOffer(
    const std::string& session, std::vector<std::pair<uint32_t, stack::SocketId>> sockets,
    bool all, uint32_t slots, std::optional<uid_t> uid) {
  if (!has_side_socket()) {
    return absl::FailedPreconditionError(
        "a data channel in shared memory needs quadsockd's Unix listener (--listen=unix:...) "
        "and a client on the same host; use StreamChannel otherwise");
  }
  std::lock_guard<std::mutex> lock(mu_);
  absl::StatusOr<std::shared_ptr<channel::Channel>> c = NewChannel(session, slots);
  if (!c.ok()) return c.status();
  Offer offer{RandomToken(), path_, (*c)->rings(), (*c)->bytes()};
  offers_[offer.token] = Pending{session, std::move(*c), std::move(sockets), all,
                                 clock_() + limits_.offer_ttl, uid};
  return offer;
}

absl::StatusOr<std::shared_ptr<channel::Channel>> ChannelBroker::AttachStream(
    const std::string& session, std::vector<std::pair<uint32_t, stack::SocketId>> sockets,
    bool all, uint32_t slots, StreamHooks hooks) {
  std::lock_guard<std::mutex> lock(mu_);
  absl::StatusOr<std::shared_ptr<channel::Channel>> c = NewChannel(session, slots);
  if (!c.ok()) return c.status();
  for (int fd : (*c)->event_fds()) {
    epoll_event e{};
    e.events = EPOLLIN;
    e.data.fd = fd;
    if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &e) != 0) {
      for (int added : (*c)->event_fds()) epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, added, nullptr);
      return link::ErrnoStatus(errno, "epoll_ctl for a stream's channel");
    }
    stream_events_[fd] = session;
  }
  Attached a{*c, {}, all, -1, std::make_shared<StreamHooks>(std::move(hooks))};
  for (const auto& [index, id] : sockets) {
    if (stack_.PutOnChannel(id, *c, index).ok()) a.sockets.emplace_back(index, id);
  }
  Log(absl::StrFormat("session %s: data channel attached on a gRPC stream: %u rings, %u bytes, "
                      "%u sockets%s",
                      ShortId(session), (*c)->rings(), (*c)->bytes(), a.sockets.size(),
                      all ? " and every socket it opens" : ""));
  attached_[session] = std::move(a);
  return *c;
}

void ChannelBroker::DetachStream(const std::string& session, const channel::Channel* channel) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = attached_.find(session);
  if (it == attached_.end() || it->second.channel.get() != channel) return;  // ended already
  it->second.hooks = nullptr;  // the stream is going: nothing to tell it
  Detach(session, "the client ended the stream");
}

void ChannelBroker::SocketOpened(const std::string& session, uint32_t index, stack::SocketId id) {
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = attached_.find(session); it != attached_.end() && it->second.all) {
    if (stack_.PutOnChannel(id, it->second.channel, index).ok()) {
      it->second.sockets.emplace_back(index, id);
    }
    return;
  }
  for (auto& [token, p] : offers_) {
    if (p.session == session && p.all) p.sockets.emplace_back(index, id);
  }
}

void ChannelBroker::SessionEnded(const std::string& session) {
  std::lock_guard<std::mutex> lock(mu_);
  absl::erase_if(offers_, [&](const auto& o) { return o.second.session == session; });
  if (attached_.contains(session)) Detach(session, "the session ended", absl::StatusCode::kNotFound);
}

void ChannelBroker::Run() {
  epoll_event events[16];
  while (!stopping_.load()) {
    const int n = epoll_wait(epoll_fd_, events, 16, kTickMs);
    std::lock_guard<std::mutex> lock(mu_);
    for (int i = 0; i < n; ++i) {
      const int fd = events[i].data.fd;
      if (fd == listen_fd_) {
        Accept();
      } else if (unclaimed_.contains(fd)) {
        Claim(fd);
      } else if (auto ev = stream_events_.find(fd); ev != stream_events_.end()) {
        channel::DrainWakeups(fd);  // a stream's channel: its descriptors are ours alone
        auto a = attached_.find(ev->second);
        if (a != attached_.end() && a->second.hooks != nullptr) a->second.hooks->wake();
      } else if (auto it = sessions_by_fd_.find(fd); it != sessions_by_fd_.end()) {
        // An attached client speaks only by closing: anything else is a hang-up too.
        const std::string session = it->second;
        Detach(session, "the client closed its side connection");
      }
    }
    Tick();
  }
}

void ChannelBroker::Accept() {
  for (;;) {
    UniqueFd fd(accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
    if (fd.get() < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      if (errno == EINTR || errno == ECONNABORTED) continue;
      // No descriptor or memory: the connection stays queued and the socket readable. Stop
      // watching it until the next tick rather than spin on it.
      accept_failures_.fetch_add(1, std::memory_order_relaxed);
      throttled_log_(std::string(link::ErrnoStatus(errno, "cannot accept on " + path_).message()));
      epoll_event e{};
      e.data.fd = listen_fd_;
      (void)epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, listen_fd_, &e);
      accept_paused_until_ = absl::Now() + absl::Milliseconds(kTickMs);
      return;
    }
    ucred cred{};
    socklen_t len = sizeof(cred);
    if (getsockopt(fd.get(), SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) continue;
    if (const std::string why = OverLimit(cred.uid); !why.empty()) {
      refused_.fetch_add(1, std::memory_order_relaxed);
      (void)SendWithFds(fd.get(), absl::StrCat("error: ", why), {});
      throttled_log_(absl::StrCat("refused a side connection: ", why));
      continue;
    }
    epoll_event e{};
    e.events = EPOLLIN | EPOLLRDHUP;
    e.data.fd = fd.get();
    if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd.get(), &e) != 0) continue;
    unclaimed_[fd.release()] = Unclaimed{clock_() + kClaimDeadline, cred.uid};
  }
}

std::string ChannelBroker::OverLimit(uid_t uid) const {
  if (unclaimed_.size() >= kMaxUnclaimed) {
    return absl::StrCat(kMaxUnclaimed, " connections are waiting to claim an offer already");
  }
  size_t of_user = 0;
  for (const auto& [fd, u] : unclaimed_) of_user += u.uid == uid;
  if (of_user >= kMaxUnclaimedPerUser) {
    return absl::StrCat("uid ", uid, " has ", of_user,
                        " connections waiting to claim an offer already");
  }
  return "";
}

void ChannelBroker::Drop(int fd) {
  epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
  close(fd);
  unclaimed_.erase(fd);
  sessions_by_fd_.erase(fd);
}

void ChannelBroker::Claim(int fd) {
  char buf[kMaxTokenBytes + 1];
  const ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
  unclaimed_.erase(fd);
  auto it = n > 0 && static_cast<size_t>(n) <= kMaxTokenBytes
                ? offers_.find(std::string(buf, static_cast<size_t>(n)))
                : offers_.end();
  if (it == offers_.end() || it->second.expires < clock_()) {
    (void)SendWithFds(fd, "error: no such offer (unknown, used or expired token)", {});
    if (it != offers_.end()) offers_.erase(it);
    Drop(fd);
    return;
  }
  ucred cred{};
  socklen_t len = sizeof(cred);
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
    Drop(fd);  // the client is gone: the offer stays for another try
    return;
  }
  // A token that leaked to another local user is of no use to them: only the user who asked
  // (or root) may claim the channel. The offer stays for its owner.
  if (it->second.uid.has_value() && cred.uid != *it->second.uid && cred.uid != 0) {
    Log(absl::StrFormat("session %s: data channel claimed by pid %d (uid %d), not uid %d who "
                        "asked for it: refused",
                        ShortId(it->second.session), cred.pid, cred.uid, *it->second.uid));
    (void)SendWithFds(fd, "error: the offer is another user's", {});
    Drop(fd);
    return;
  }
  Pending p = std::move(it->second);
  offers_.erase(it);
  std::vector<int> fds = {p.channel->memfd()};
  for (int e : p.channel->event_fds()) fds.push_back(e);
  if (!SendWithFds(fd, "ok", fds)) {
    Log(absl::StrFormat("session %s: %s", ShortId(p.session),
                        link::ErrnoStatus(errno, "the data channel could not be passed").message()));
    Drop(fd);
    return;
  }
  Attached a{p.channel, {}, p.all, fd};
  for (const auto& [index, id] : p.sockets) {
    // A socket closed since the offer is simply not there any more.
    if (stack_.PutOnChannel(id, p.channel, index).ok()) a.sockets.emplace_back(index, id);
  }
  Log(absl::StrFormat(
      "session %s: data channel attached by pid %d (uid %d): %u rings, %u bytes, %u sockets%s",
      ShortId(p.session), cred.pid, cred.uid, p.channel->rings(), p.channel->bytes(),
      a.sockets.size(), a.all ? " and every socket it opens" : ""));
  sessions_by_fd_[fd] = p.session;
  attached_[p.session] = std::move(a);
}

void ChannelBroker::Detach(const std::string& session, absl::string_view why,
                           absl::StatusCode code) {
  auto it = attached_.find(session);
  if (it == attached_.end()) return;
  Attached a = std::move(it->second);
  attached_.erase(it);
  std::vector<stack::SocketId> ids;
  ids.reserve(a.sockets.size());
  for (const auto& [index, id] : a.sockets) ids.push_back(id);
  stack_.TakeOffChannels(ids);  // one grace period for them all
  stack_.RemoveChannel(a.channel.get());  // its TX ring too
  if (a.fd >= 0) {
    Drop(a.fd);
  } else {
    for (int fd : a.channel->event_fds()) {
      epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
      stream_events_.erase(fd);
    }
    if (a.hooks != nullptr) a.hooks->ended(absl::Status(code, why));
  }
  const channel::ChannelCounters c = a.channel->counters();
  Log(absl::StrFormat("session %s: data channel ended (%s): %u datagrams delivered, %u dropped "
                      "on a full ring",
                      ShortId(session), why, c.delivered, c.ring_full));
}

void ChannelBroker::Tick() {
  const absl::Time now = clock_();
  absl::erase_if(offers_, [now](const auto& o) { return o.second.expires < now; });
  std::vector<int> late;
  for (const auto& [fd, u] : unclaimed_) {
    if (u.deadline < now) late.push_back(fd);
  }
  for (int fd : late) Drop(fd);
  if (accept_paused_until_.has_value() && absl::Now() >= *accept_paused_until_) {
    epoll_event e{};  // Accept failed a tick ago: look at the socket again
    e.events = EPOLLIN;
    e.data.fd = listen_fd_;
    (void)epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, listen_fd_, &e);
    accept_paused_until_.reset();
  }
  std::vector<std::pair<std::string, std::string>> broken;
  for (const auto& [session, a] : attached_) {
    if (a.channel->broken()) broken.emplace_back(session, a.channel->broken_reason());
    if (renew_) renew_(session);
  }
  for (const auto& [session, reason] : broken) {
    Detach(session, absl::StrCat("the client broke it: ", reason));
  }
}

}  // namespace quadsock::service
