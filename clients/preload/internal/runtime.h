// What the preload library decides for the process: which sockets go to quadsock, and the
// Link (session and data channel) they are opened in, made on first need (the first datagram
// socket that binds or connects to one of quadsockd's networks), never before: a program that
// uses only kernel sockets never talks to quadsockd.
//
// After fork the sockets the child inherited keep their parent's Link; the sockets it opens stay
// the kernel's (a session of its own would need a gRPC client started anew after fork, which
// hangs on locks the parent's threads held).
//
//   Runtime& rt = Runtime::Get();
//   if (rt.TakesLocal(AF_INET, local)) {
//     absl::StatusOr<std::shared_ptr<PreloadSocket>> s = rt.Take(fd, AF_INET);
//     ...
#ifndef QUADSOCK_CLIENTS_PRELOAD_INTERNAL_RUNTIME_H_
#define QUADSOCK_CLIENTS_PRELOAD_INTERNAL_RUNTIME_H_

#include <atomic>
#include <memory>
#include <mutex>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "clients/preload/internal/config.h"
#include "clients/preload/internal/link.h"
#include "stack/net/address.h"

namespace quadsock::preload {

class PreloadSocket;

class Runtime {
 public:
  // The process's runtime (made with the configuration from the environment; never destroyed).
  static Runtime& Get();

  const Config& config() const { return config_; }

  // Whether a datagram socket of `family` bound to `local` belongs on quadsock: one of
  // quadsockd's addresses, or the wildcard (QUADSOCK_WILDCARD) of a family quadsockd serves,
  // on a port QUADSOCK_PORTS allows. Connects to quadsockd first if it has not.
  bool TakesLocal(int family, const net::Endpoint& local);
  // Whether an unbound datagram socket that connects or sends to `peer` belongs on quadsock:
  // the peer is in one of quadsockd's networks (its addresses' prefixes, and its routes other
  // than a default route). Loopback never is.
  bool TakesPeer(int family, const net::Endpoint& peer);

  // Moves the unbound kernel datagram socket `fd` (of `family`) onto quadsock: opens a socket
  // there with the kernel socket's options (SO_REUSEPORT, IPV6_V6ONLY, O_NONBLOCK), keeping
  // the kernel socket as the new socket's shadow. The caller binds or connects it, then
  // installs it at `fd` (PreloadSocket::InstallAt). quadsockd's error for Open, or the
  // system's for the descriptors and memory it needs.
  absl::StatusOr<std::shared_ptr<PreloadSocket>> Take(int fd, int family);

  // The Link a waiting thread of this process busy-polls (busy_poll.h): null without
  // QUADSOCK_BUSY_POLL, before the Link runs, and in a forked child (the channel is its
  // parent's to take from).
  Link* BusyPollLink() const {
    if (config_.busy_poll_us == 0) return nullptr;
    // A child forgets running_ at fork (AfterForkInChild): no getpid on every call.
    return running_.load(std::memory_order_acquire);
  }
  absl::Duration busy_poll() const { return absl::Microseconds(config_.busy_poll_us); }

  // pthread_atfork's three steps: no Link is being made across a fork, and the child has none
  // of its own.
  void BeforeFork() { start_mu_.lock(); }
  void AfterForkInParent() { start_mu_.unlock(); }
  void AfterForkInChild();

 private:
  Runtime();
  // This process's Link, made once; null when that failed (said once on stderr; the process
  // exits if QUADSOCK_REQUIRE=1).
  Link* Current();

  Config config_;
  std::mutex start_mu_;
  enum class State { kNew, kRunning, kFailed } state_ = State::kNew;
  bool forked_child_ = false;
  Link* link_ = nullptr;
  std::atomic<Link*> running_{nullptr};  // link_ once it runs, for BusyPollLink
};

}  // namespace quadsock::preload

#endif  // QUADSOCK_CLIENTS_PRELOAD_INTERNAL_RUNTIME_H_
