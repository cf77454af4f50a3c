// quadsockd's Unix listening sockets, and a gRPC listener that knows which user each client is.
//
// ListenUnix makes every Unix socket quadsockd listens on by way of this file (the gRPC
// listener's, the data channels' side socket): a stale file of the path is removed, the socket
// file is born with mode 0600 and made 0660 before listen(), so that at no moment may anyone
// connect whom the mode 0660 (the README's promise: the owner and the group) keeps out.
//
// gRPC 1.51 tells one client of a Unix socket from another by nothing: ServerContext::peer() is
// "unix:" for all, and its auth context carries no SO_PEERCRED. So UnixListener accepts the
// connections itself, reads each one's SO_PEERCRED, and only then hands the connection to the
// gRPC server (grpc::AddInsecureChannelFromFd), whose calls on it name their peer "fd:N".
// PeerOf turns that back into "uid:N", for the per-peer limits and the sessions' owners.
//
// Connections are capped, in all and per user (ConnectionLimits: quadsockd passes --max_clients and
// --max_sessions_per_peer): one user's connections cannot take the descriptors every other
// user needs to connect. A connection over a cap is closed at once, logged and counted.
//
//   auto listener = UnixListener::Listen("/run/quadsock/quadsock.sock").value();
//   ... server = builder.BuildAndStart(); listener->Serve(server.get());
//   std::optional<std::string> who = listener->PeerOf(ctx->peer());  // "uid:1000"
//   listener->Stop();          // before server->Shutdown(): no connection arrives after it
#ifndef QUADSOCK_SERVICE_UNIX_LISTENER_H_
#define QUADSOCK_SERVICE_UNIX_LISTENER_H_

#include <grpcpp/server.h>
#include <sys/types.h>
#include <unistd.h>

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "service/throttled_log.h"

namespace quadsock::service {

// A file descriptor that closes itself.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& other) noexcept : fd_(other.release()) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    if (this != &other) reset(other.release());
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd() { reset(); }

  int get() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }
  void reset(int fd = -1) {
    if (fd_ >= 0) close(fd_);
    fd_ = fd;
  }

 private:
  int fd_ = -1;
};

// A listening Unix socket of `type` (SOCK_STREAM, SOCK_SEQPACKET; non-blocking, close-on-exec)
// on `path`, whose file has mode 0660. A file left at `path` is removed first (the caller checks
// that nobody listens there). INVALID_ARGUMENT for a path too long for a socket address,
// UNAVAILABLE when the socket cannot be made (no such folder, not permitted).
//
// Its connections refuse passed file descriptors (SO_PASSRIGHTS off; a client's SCM_RIGHTS
// message fails with EPERM in the client). quadsockd never asks a client for a descriptor, and
// one it received would be closed by the thread that read it (or closed the connection), and a
// close can block: a TCP socket with SO_LINGER whose peer's window is shut blocks its last
// close for the linger time, so any client could hold the broker's or a gRPC thread for as
// long as it liked. A kernel before Linux 6.16 has no such option: `log` says so, once a socket.
absl::StatusOr<UniqueFd> ListenUnix(const std::string& path, int type, int backlog,
                                    const std::function<void(absl::string_view)>& log);

// Connections a UnixListener keeps open at once.
struct ConnectionLimits {
  size_t max_connections = 0;  // all users; 0: no limit
  size_t max_per_user = 0;     // one uid; 0: no limit
};

class UnixListener {
 public:
  // Listens on `path` (ListenUnix); connections wait in the backlog until Serve. `log` hears
  // what went wrong with accepting, and the connections refused.
  static absl::StatusOr<std::unique_ptr<UnixListener>> Listen(
      const std::string& path, std::function<void(absl::string_view)> log = nullptr,
      ConnectionLimits limits = {});
  // Accepts from now on, handing each connection to `server`, which must be started and
  // outlive the listener's Stop. Once.
  void Serve(grpc::Server* server);
  ~UnixListener();  // Stop()

  // Stops accepting and removes the socket file. Connections handed over stay the server's.
  void Stop();

  // "uid:N" for the peer of a call (ServerContext::peer(), "fd:N") on a connection this listener
  // accepted and that is still open; nullopt for any other. The connection's socket is known by
  // its inode too, so an fd number that gRPC closed and something else reused names nobody.
  std::optional<std::string> PeerOf(absl::string_view peer) const;
  // The same, as a number.
  std::optional<uid_t> UidOf(absl::string_view peer) const;
  // The open connections: fd -> uid (what PeerOf would answer for "fd:N").
  absl::flat_hash_map<int, uid_t> Connections() const;
  // Connections closed at once for a cap (ConnectionLimits), and accept()s that failed (no descriptor or
  // memory left: the listener backs off for 100 ms, never spins).
  uint64_t refused() const { return refused_.load(std::memory_order_relaxed); }
  uint64_t accept_failures() const { return accept_failures_.load(std::memory_order_relaxed); }

 private:
  struct Client {
    uid_t uid;
    ino_t inode;  // of the accepted socket
  };
  UnixListener(std::string path, UniqueFd listen_fd, UniqueFd wake_fd,
               std::function<void(absl::string_view)> log, ConnectionLimits limits);
  void Run();
  // Takes the connections waiting; false when accept failed for want of resources (try later).
  bool AcceptAll();
  // Whether `fd` is still the socket `c` was (mu_ held).
  static bool Same(int fd, const Client& c);
  // Forgets connections that gRPC has closed (mu_ held).
  void Prune();
  // Why a new connection of `uid` is over a cap ("" when it is not); may Prune first (mu_ held).
  std::string OverLimit(uid_t uid);

  const std::string path_;
  UniqueFd listen_fd_;
  UniqueFd wake_fd_;  // an eventfd: Stop wakes the thread
  grpc::Server* server_ = nullptr;  // Serve's; before the thread starts
  const std::function<void(absl::string_view)> log_;
  const ConnectionLimits limits_;
  std::atomic<bool> stopping_{false};
  std::atomic<uint64_t> refused_{0};
  std::atomic<uint64_t> accept_failures_{0};
  ThrottledLog refusals_{log_};  // the listener's thread only
  std::thread thread_;
  // std::mutex, not absl::Mutex: ThreadSanitizer sees it unaided (sanitizers/tsan.cc).
  mutable std::mutex mu_;
  absl::flat_hash_map<int, Client> clients_;  // by fd; guarded by mu_
  absl::flat_hash_map<uid_t, size_t> per_user_;  // clients_ counted by uid; mu_
  size_t pruned_size_ = 0;                    // clients_.size() after the last Prune; mu_
  // When a cap last made it Prune: at most every 100 ms, so that a user at its cap who keeps
  // connecting costs a check of its count, not a look at every connection each time. mu_
  absl::Time last_cap_prune_ = absl::InfinitePast();
};

}  // namespace quadsock::service

#endif  // QUADSOCK_SERVICE_UNIX_LISTENER_H_
