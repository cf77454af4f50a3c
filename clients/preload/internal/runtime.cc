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
#include "clients/preload/internal/shared_socket.h"
#include "clients/preload/internal/socket.h"
#include "stack/link/errno_status.h"

namespace quadsock::preload {
namespace {

bool SameFamily(int family, const net::IpAddress& a) { return (family == AF_INET) == a.is_v4(); }

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

Link* Runtime::Current() {
  std::lock_guard<std::mutex> lock(start_mu_);
  if (forked_child_) {
    LogOnce(LogLevel::kWarn, "forked child",
            "a process made by fork opens sockets on the kernel only (the sockets it inherited "
            "stay on quadsock)");
  }
  if (state_ != State::kNew) return link_;
  absl::StatusOr<Link*> link;
  {
    SignalsBlocked blocked;
    link = Link::Start(config_);
  }
  if (!link.ok()) {
    state_ = State::kFailed;
    if (config_.required) {
      Log(LogLevel::kError, absl::StrCat("cannot use quadsockd at ", config_.target, ": ",
                                         link.status().message(), " (QUADSOCK_REQUIRE=1: exiting)"));
      _exit(EXIT_FAILURE);
    }
    Log(LogLevel::kError, absl::StrCat("cannot use quadsockd at ", config_.target, ": ",
                                       link.status().message(),
                                       "; this program's sockets stay the kernel's"));
    return nullptr;
  }
  state_ = State::kRunning;
  link_ = *link;
  running_.store(link_, std::memory_order_release);
  Log(LogLevel::kInfo,
      absl::StrCat("on quadsockd at ", config_.target, ": addresses ",
                   absl::StrJoin(link_->addresses(), " ",
                                 [](std::string* out, const net::IpAddress& a) {
                                   out->append(a.ToString());
                                 })));
  return link_;
}

void Runtime::AfterForkInChild() {
  // The lock was taken before the fork (BeforeFork): nothing was half made. A child cannot
  // start a session of its own: the parent's gRPC threads, and the locks they held, are not
  // in the child, and a new gRPC client there hangs. Its new sockets stay the kernel's.
  forked_child_ = true;
  state_ = State::kFailed;
  link_ = nullptr;
  running_.store(nullptr, std::memory_order_release);
  start_mu_.unlock();
}

bool Runtime::TakesLocal(int family, const net::Endpoint& local) {
  const net::IpAddress a = local.address.Unmapped();
  if (!config_.TakesPort(local.port) || a.IsLoopback() || a.IsMulticast()) return false;
  Link* link = Current();
  if (link == nullptr) return false;
  const std::vector<net::IpAddress>& ours = link->addresses();
  if (a.IsUnspecifiedInAnyForm()) {
    return config_.wildcard_to_quadsock &&
           std::any_of(ours.begin(), ours.end(),
                       [family](const net::IpAddress& o) { return SameFamily(family, o); });
  }
  return std::find(ours.begin(), ours.end(), a) != ours.end();
}

bool Runtime::TakesPeer(int family, const net::Endpoint& peer) {
  const net::IpAddress a = peer.address.Unmapped();
  if (a.IsLoopback() || a.IsMulticast() || a.IsUnspecifiedInAnyForm()) return false;
  if (family == AF_INET && !a.is_v4()) return false;
  Link* link = Current();
  if (link == nullptr) return false;
  return std::any_of(link->networks().begin(), link->networks().end(),
                     [&a](const net::IpPrefix& p) {
                       return p.address().family() == a.family() && p.Contains(a);
                     });
}

absl::StatusOr<std::shared_ptr<PreloadSocket>> Runtime::Take(int fd, int family) {
  Link* link = Current();
  if (link == nullptr) return absl::UnavailableError("no session with quadsockd");
  OpenOptions o;
  o.family = family == AF_INET ? v1::FAMILY_IPV4 : v1::FAMILY_IPV6;
  o.v6only = family == AF_INET6 && IntOption(fd, IPPROTO_IPV6, IPV6_V6ONLY) != 0;
  o.reuse_port = IntOption(fd, SOL_SOCKET, SO_REUSEPORT) != 0;
  const int status_flags = Libc().fcntl(fd, F_GETFL);
  const int event = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (event < 0) return link::ErrnoStatus(errno, "eventfd");
  absl::StatusOr<std::shared_ptr<SharedSocket>> shared = SharedSocket::Create(
      link->max_payload(), event, status_flags >= 0 && (status_flags & O_NONBLOCK) != 0);
  if (!shared.ok()) return shared.status();
  const int shadow = Libc().fcntl(fd, F_DUPFD_CLOEXEC, 0);
  if (shadow < 0) return link::ErrnoStatus(errno, "keeping the kernel socket");
  absl::StatusOr<RemoteSocket> remote = link->client().Open(o);
  if (!remote.ok()) {
    Libc().close(shadow);
    return remote.status();
  }
  return std::make_shared<PreloadSocket>(*this, *link, family, std::move(*remote), shadow,
                                         std::move(*shared));
}

}  // namespace quadsock::preload
