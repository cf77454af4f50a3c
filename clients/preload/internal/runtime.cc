#include "clients/preload/internal/runtime.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "clients/preload/internal/libc.h"
#include "clients/preload/internal/log.h"
#include "clients/preload/internal/socket.h"
#include "stack/link/errno_status.h"

namespace quadsock::preload {
namespace {

constexpr size_t kBatch = 64;

int GetInt(int fd, int level, int name) {
  int v = 0;
  socklen_t len = sizeof(v);
  return Libc().getsockopt(fd, level, name, &v, &len) == 0 ? v : 0;
}

bool SameFamily(int family, const net::IpAddress& a) {
  return (family == AF_INET) == a.is_v4();
}

// Threads started while this lives (gRPC's, the hand-off thread) take no signal: the
// program's signals go to the program's threads, as they would without the library.
class SignalsBlocked {
 public:
  SignalsBlocked() {
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old_);
  }
  ~SignalsBlocked() { pthread_sigmask(SIG_SETMASK, &old_, nullptr); }

 private:
  sigset_t old_;
};

}  // namespace

Runtime& Runtime::Get() {
  static Runtime* runtime = new Runtime();  // never destroyed: the program may exit any time
  return *runtime;
}

Runtime::Runtime() : config_(ConfigFromEnvironment()) {
  SetLogLevel(config_.log_level);
  for (const std::string& p : config_.problems) Log(LogLevel::kError, p + " (the default is kept)");
}

bool Runtime::Start() {
  if (forked_.load(std::memory_order_acquire)) return false;
  std::lock_guard<std::mutex> lock(start_mu_);
  if (state_ == State::kNew) {
    absl::Status s;
    {
      SignalsBlocked blocked;
      s = StartOnce();
    }
    if (s.ok()) {
      state_ = State::kRunning;
      Log(LogLevel::kInfo, absl::StrCat("on quadsockd at ", config_.target, ": addresses ",
                                        absl::StrJoin(addresses_, " ", [](std::string* out,
                                                                           const net::IpAddress& a) {
                                          out->append(a.ToString());
                                        })));
    } else {
      state_ = State::kFailed;
      if (config_.required) {
        Log(LogLevel::kError, absl::StrCat("cannot use quadsockd at ", config_.target, ": ",
                                           s.message(), " (QUADSOCK_REQUIRE=1: exiting)"));
        _exit(EXIT_FAILURE);
      }
      Log(LogLevel::kError, absl::StrCat("cannot use quadsockd at ", config_.target, ": ",
                                         s.message(), "; this program's sockets stay the kernel's"));
    }
  }
  return state_ == State::kRunning;
}

absl::Status Runtime::StartOnce() {
  ClientOptions options;
  options.client_name = std::string("preload:").append(program_invocation_short_name).substr(0, 64);
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect(config_.target, options);
  if (!client.ok()) return client.status();
  client_ = std::move(*client);
  absl::StatusOr<std::vector<std::string>> prefixes = client_->Addresses();
  if (!prefixes.ok()) return prefixes.status();
  for (const std::string& text : *prefixes) {
    absl::StatusOr<net::IpPrefix> p = net::IpPrefix::Parse(text);
    if (!p.ok()) continue;
    addresses_.push_back(p->address());
    networks_.push_back(*p);
  }
  absl::StatusOr<std::vector<v1::Route>> routes = client_->Routes();
  if (!routes.ok()) return routes.status();
  for (const v1::Route& r : *routes) {
    absl::StatusOr<net::IpPrefix> p = net::IpPrefix::Parse(r.destination());
    if (p.ok() && p->length() > 0) networks_.push_back(*p);
  }
  absl::StatusOr<std::vector<v1::Interface>> interfaces = client_->Interfaces();
  if (!interfaces.ok()) return interfaces.status();
  if (!interfaces->empty()) ifindex_ = interfaces->front().ifindex();
  AttachOptions attach;
  attach.transport = ChannelTransport::kSharedMemory;
  absl::StatusOr<std::unique_ptr<DataChannel>> channel = client_->AttachChannel(attach);
  if (!channel.ok()) return channel.status();
  channel_ = std::move(*channel);
  max_payload_ = channel_->max_payload();
  pump_ = std::thread([this] { Pump(); });
  return absl::OkStatus();
}

bool Runtime::Serves(int family) const {
  return std::any_of(addresses_.begin(), addresses_.end(),
                     [family](const net::IpAddress& a) { return SameFamily(family, a); });
}

bool Runtime::TakesLocal(int family, const net::Endpoint& local) {
  const net::IpAddress a = local.address.Unmapped();
  if (!config_.TakesPort(local.port) || a.IsLoopback() || a.IsMulticast()) return false;
  if (!Start()) return false;
  if (a.IsUnspecifiedInAnyForm()) return config_.wildcard_to_quadsock && Serves(family);
  return std::find(addresses_.begin(), addresses_.end(), a) != addresses_.end();
}

bool Runtime::TakesPeer(int family, const net::Endpoint& peer) {
  const net::IpAddress a = peer.address.Unmapped();
  if (a.IsLoopback() || a.IsMulticast() || a.IsUnspecifiedInAnyForm()) return false;
  if (family == AF_INET && !a.is_v4()) return false;
  if (!Start()) return false;
  return std::any_of(networks_.begin(), networks_.end(), [&a](const net::IpPrefix& p) {
    return p.address().family() == a.family() && p.Contains(a);
  });
}

absl::StatusOr<std::shared_ptr<PreloadSocket>> Runtime::Take(int fd, int family) {
  OpenOptions o;
  o.family = family == AF_INET ? v1::FAMILY_IPV4 : v1::FAMILY_IPV6;
  o.v6only = family == AF_INET6 && GetInt(fd, IPPROTO_IPV6, IPV6_V6ONLY) != 0;
  o.reuse_port = GetInt(fd, SOL_SOCKET, SO_REUSEPORT) != 0;
  const int status_flags = Libc().fcntl(fd, F_GETFL);
  absl::StatusOr<RemoteSocket> remote = client_->Open(o);
  if (!remote.ok()) return remote.status();
  const int shadow = Libc().fcntl(fd, F_DUPFD_CLOEXEC, 0);
  if (shadow < 0) return link::ErrnoStatus(errno, "keeping the kernel socket");
  const int event = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (event < 0) {
    const int err = errno;
    Libc().close(shadow);
    return link::ErrnoStatus(err, "eventfd");
  }
  return std::make_shared<PreloadSocket>(*this, family, std::move(*remote), shadow, event,
                                         status_flags >= 0 && (status_flags & O_NONBLOCK) != 0);
}

bool Runtime::Send(uint32_t index, std::span<const uint8_t> payload,
                   const std::optional<net::Endpoint>& peer) {
  std::lock_guard<std::mutex> lock(tx_mu_);
  return channel_->Send(index, payload, peer);
}

void Runtime::Register(uint32_t index, PreloadSocket* s) {
  std::lock_guard<std::mutex> lock(sockets_mu_);
  sockets_[index] = s;
}

void Runtime::Unregister(uint32_t index) {
  std::lock_guard<std::mutex> lock(sockets_mu_);
  sockets_.erase(index);
}

void Runtime::Pump() {
  channel::ReceivedView batch[kBatch];
  std::vector<PreloadSocket*> touched;
  const absl::Duration spin = absl::Microseconds(config_.busy_poll_us);
  absl::Time last = absl::Now();
  for (;;) {
    const bool spinning = spin > absl::ZeroDuration() && absl::Now() - last < spin;
    const size_t n = channel_->Receive(batch, spinning ? absl::ZeroDuration() : absl::Seconds(1));
    if (n == 0) {
      if (!spinning && !channel_->ended().ok()) return MarkDown();
      continue;
    }
    if (spin > absl::ZeroDuration()) last = absl::Now();
    {
      std::lock_guard<std::mutex> lock(sockets_mu_);
      for (size_t i = 0; i < n; ++i) {
        auto it = sockets_.find(batch[i].socket);
        if (it == sockets_.end()) continue;  // closed a moment ago
        it->second->Enqueue(batch[i]);
        if (std::find(touched.begin(), touched.end(), it->second) == touched.end()) {
          touched.push_back(it->second);
        }
      }
      for (PreloadSocket* s : touched) s->Signal();
    }
    touched.clear();
    channel_->Release();
  }
}

void Runtime::MarkDown() {
  down_.store(true, std::memory_order_release);
  Log(LogLevel::kError, absl::StrCat("quadsockd ended the data channel (", channel_->ended().message(),
                                     "): the quadsock sockets fail with ENETDOWN from now on"));
  std::lock_guard<std::mutex> lock(sockets_mu_);
  for (auto& [index, s] : sockets_) s->MarkDown();
}

void Runtime::AfterForkInChild() {
  // The child has none of the parent's threads (gRPC's, the hand-off thread), and any lock
  // may have been held by one of them: only atomics from here.
  forked_.store(true, std::memory_order_release);
  down_.store(true, std::memory_order_release);
}

}  // namespace quadsock::preload
