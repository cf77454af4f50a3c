#include "service/unix_listener.h"

#include <grpcpp/server_posix.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "absl/strings/strip.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "stack/link/errno_status.h"

namespace quadsock::service {

namespace {
// Linux 6.16's SO_PASSRIGHTS (asm-generic/socket.h), which Debian 12's headers lack.
#ifndef SO_PASSRIGHTS
constexpr int SO_PASSRIGHTS = 83;
#endif
}  // namespace

absl::StatusOr<UniqueFd> ListenUnix(const std::string& path, int type, int backlog,
                                    const std::function<void(absl::string_view)>& log) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof(a.sun_path)) {
    return absl::InvalidArgumentError(absl::StrCat("bad Unix socket path \"", path, "\" (1 to ",
                                                   sizeof(a.sun_path) - 1, " characters)"));
  }
  std::memcpy(a.sun_path, path.data(), path.size());
  UniqueFd fd(socket(AF_UNIX, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (fd.get() < 0) {
    return link::ErrnoStatus(errno, "socket(AF_UNIX)");
  }
  // Set before listen(): a connection takes its listener's setting when it is made, so no
  // client can pass a descriptor before accept() either.
  const int off = 0;
  if (setsockopt(fd.get(), SOL_SOCKET, SO_PASSRIGHTS, &off, sizeof(off)) != 0 && log) {
    log(absl::StrCat(link::ErrnoStatus(errno, "SO_PASSRIGHTS").message(), ": this kernel "
                     "(before Linux 6.16) lets a client of \"", path, "\" pass descriptors, "
                     "and one whose close blocks would hold the quadsockd thread that reads it"));
  }
  unlink(path.c_str());  // a stale one from an earlier run
  // bind() makes the socket file: under umask 0177 it is born 0600, so nobody but the owner
  // can connect before the chmod below. The umask is the process's: a file another thread
  // makes meanwhile is born owner-only too, never wider.
  const mode_t umask_before = umask(0177);
  const int bound = bind(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof(a));
  const int bind_errno = errno;
  umask(umask_before);
  if (bound != 0) {
    return link::ErrnoStatus(bind_errno, absl::StrCat("cannot bind \"", path, "\""));
  }
  if (chmod(path.c_str(), 0660) != 0 || listen(fd.get(), backlog) != 0) {
    const int e = errno;
    unlink(path.c_str());
    return link::ErrnoStatus(e, absl::StrCat("cannot listen on \"", path, "\""));
  }
  return fd;
}

UnixListener::UnixListener(std::string path, UniqueFd listen_fd, UniqueFd wake_fd,
                           std::function<void(absl::string_view)> log, ConnectionLimits limits)
    : path_(std::move(path)),
      listen_fd_(std::move(listen_fd)),
      wake_fd_(std::move(wake_fd)),
      log_(std::move(log)),
      limits_(limits) {}

absl::StatusOr<std::unique_ptr<UnixListener>> UnixListener::Listen(
    const std::string& path, std::function<void(absl::string_view)> log,
    ConnectionLimits limits) {
  absl::StatusOr<UniqueFd> fd = ListenUnix(path, SOCK_STREAM, SOMAXCONN, log);
  if (!fd.ok()) return fd.status();
  UniqueFd wake(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (wake.get() < 0) {
    unlink(path.c_str());
    return link::ErrnoStatus(errno, "eventfd");
  }
  return std::unique_ptr<UnixListener>(
      new UnixListener(path, std::move(*fd), std::move(wake), std::move(log), limits));
}

void UnixListener::Serve(grpc::Server* server) {
  if (thread_.joinable() || stopping_.load()) return;
  server_ = server;
  thread_ = std::thread([this] { Run(); });
}

UnixListener::~UnixListener() { Stop(); }

void UnixListener::Stop() {
  if (stopping_.exchange(true)) return;
  const uint64_t one = 1;
  (void)!write(wake_fd_.get(), &one, sizeof(one));
  if (thread_.joinable()) thread_.join();
  listen_fd_.reset();
  unlink(path_.c_str());
}

void UnixListener::Run() {
  bool backing_off = false;
  while (!stopping_.load()) {
    // While accept lacks fds or memory, the listening socket stays readable: look again later.
    pollfd fds[2] = {{wake_fd_.get(), POLLIN, 0},
                     {listen_fd_.get(), static_cast<short>(backing_off ? 0 : POLLIN), 0}};
    if (poll(fds, 2, backing_off ? 100 : -1) < 0 && errno != EINTR) continue;
    if (stopping_.load()) return;
    backing_off = !AcceptAll();
  }
}

bool UnixListener::AcceptAll() {
  for (;;) {
    UniqueFd fd(accept4(listen_fd_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
    if (fd.get() < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) return true;
      if (errno == EINTR || errno == ECONNABORTED) continue;
      accept_failures_.fetch_add(1, std::memory_order_relaxed);
      if (log_) log_(link::ErrnoStatus(errno, "cannot accept on " + path_).message());
      return false;
    }
    ucred cred{};
    socklen_t len = sizeof(cred);
    struct stat st;
    if (getsockopt(fd.get(), SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 ||
        fstat(fd.get(), &st) != 0) {
      continue;  // closed: a client we cannot name is not served
    }
    std::string over;
    {
      std::lock_guard<std::mutex> lock(mu_);
      over = OverLimit(cred.uid);
      if (over.empty()) {
        // Keyed by fd number: a reused number replaces what it named. The rest are forgotten
        // in batches, so that accepting stays O(1) amortized.
        auto [it, added] = clients_.try_emplace(fd.get(), Client{cred.uid, st.st_ino});
        if (!added) {
          --per_user_[it->second.uid];
          it->second = Client{cred.uid, st.st_ino};
        }
        ++per_user_[cred.uid];
        if (clients_.size() >= 2 * pruned_size_ + 64) Prune();
      }
    }
    if (!over.empty()) {
      refused_.fetch_add(1, std::memory_order_relaxed);
      refusals_(absl::StrCat("refused a connection on ", path_, ": ", over));
      continue;  // closed: the client sees its connection end before any answer
    }
    // gRPC owns the fd from here, and closes it when the connection ends.
    grpc::AddInsecureChannelFromFd(server_, fd.release());
  }
}

bool UnixListener::Same(int fd, const Client& c) {
  struct stat st;
  return fstat(fd, &st) == 0 && S_ISSOCK(st.st_mode) && st.st_ino == c.inode;
}

void UnixListener::Prune() {
  absl::erase_if(clients_, [](const auto& entry) { return !Same(entry.first, entry.second); });
  per_user_.clear();
  for (const auto& [fd, c] : clients_) ++per_user_[c.uid];
  pruned_size_ = clients_.size();
}

std::string UnixListener::OverLimit(uid_t uid) {
  auto over = [&] {
    if (limits_.max_connections != 0 && clients_.size() >= limits_.max_connections) {
      return absl::StrCat("quadsockd has its maximum of ", limits_.max_connections,
                          " connections (--max_clients)");
    }
    auto it = per_user_.find(uid);
    if (limits_.max_per_user != 0 && it != per_user_.end() && it->second >= limits_.max_per_user) {
      return absl::StrCat("uid ", uid, " has its maximum of ", limits_.max_per_user,
                          " connections (--max_sessions_per_peer)");
    }
    return std::string();
  };
  std::string why = over();
  if (why.empty()) return why;
  // Some of those counted may have ended since (gRPC closes them without a word to us).
  const absl::Time now = absl::Now();
  if (now - last_cap_prune_ < absl::Milliseconds(100)) return why;
  last_cap_prune_ = now;
  Prune();
  return over();
}

std::optional<uid_t> UnixListener::UidOf(absl::string_view peer) const {
  int fd = -1;
  if (!absl::ConsumePrefix(&peer, "fd:") || !absl::SimpleAtoi(peer, &fd)) return std::nullopt;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = clients_.find(fd);
  if (it == clients_.end() || !Same(fd, it->second)) return std::nullopt;
  return it->second.uid;
}

std::optional<std::string> UnixListener::PeerOf(absl::string_view peer) const {
  std::optional<uid_t> uid = UidOf(peer);
  if (!uid.has_value()) return std::nullopt;
  return absl::StrCat("uid:", *uid);
}

absl::flat_hash_map<int, uid_t> UnixListener::Connections() const {
  std::lock_guard<std::mutex> lock(mu_);
  absl::flat_hash_map<int, uid_t> out;
  for (const auto& [fd, c] : clients_) {
    if (Same(fd, c)) out[fd] = c.uid;
  }
  return out;
}

}  // namespace quadsock::service
