// A relay of Unix-socket connections that can be frozen, for keepalive tests: frozen, it keeps
// both sides' connections open but passes nothing more, so neither end ever sees a FIN or RST,
// as when a host loses power or a link is cut.
//
//   FreezableRelay relay(server->listening_on());     // "unix:PATH"
//   auto channel = grpc::CreateChannel(relay.target(), grpc::InsecureChannelCredentials());
//   ...                                               // calls pass through
//   relay.Freeze();                                   // now only keepalive notices
#ifndef QUADSOCK_SERVICE_TESTING_FREEZABLE_RELAY_H_
#define QUADSOCK_SERVICE_TESTING_FREEZABLE_RELAY_H_

#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace quadsock::service::testing {

inline int UnixSocket(const std::string& path, bool listen_on_it) {
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  auto* a = reinterpret_cast<sockaddr*>(&addr);
  const bool ok = listen_on_it ? bind(fd, a, sizeof(addr)) == 0 && listen(fd, 8) == 0
                               : connect(fd, a, sizeof(addr)) == 0;
  EXPECT_TRUE(ok) << path << ": " << std::strerror(errno);
  return fd;
}

// Relays Unix-socket connections to `server` ("unix:PATH") until frozen.
class FreezableRelay {
 public:
  explicit FreezableRelay(const std::string& server)
      : server_path_(server.substr(5)),
        path_("/tmp/quadsock-relay-" + std::to_string(getpid()) + ".sock") {
    unlink(path_.c_str());
    listen_fd_ = UnixSocket(path_, true);
    thread_ = std::thread([this] { Run(); });
  }
  ~FreezableRelay() {
    stop_ = true;
    thread_.join();
    for (int fd : fds_) close(fd);
    close(listen_fd_);
    unlink(path_.c_str());
  }
  std::string target() const { return "unix:" + path_; }
  void Freeze() { frozen_ = true; }

 private:
  void Run() {
    while (!stop_) {
      if (frozen_) {
        absl::SleepFor(absl::Milliseconds(20));
        continue;
      }
      std::vector<pollfd> p{{listen_fd_, POLLIN, 0}};
      for (int fd : fds_) p.push_back({fd, POLLIN, 0});
      if (poll(p.data(), p.size(), 20) <= 0) continue;
      if (p[0].revents & POLLIN) {
        fds_.push_back(accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC));
        fds_.push_back(UnixSocket(server_path_, false));
      }
      char buf[16384];
      for (size_t i = 1; i < p.size(); ++i) {
        if ((p[i].revents & POLLIN) == 0) continue;
        const ssize_t n = read(p[i].fd, buf, sizeof(buf));
        const int to = fds_[(i - 1) ^ 1];  // fds_ holds (client, server) pairs
        for (ssize_t done = 0; n > 0 && done < n;) {
          const ssize_t w = write(to, buf + done, n - done);
          if (w <= 0) break;
          done += w;
        }
      }
    }
  }

  const std::string server_path_;
  const std::string path_;
  int listen_fd_ = -1;
  std::vector<int> fds_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> frozen_{false};
  std::thread thread_;
};

}  // namespace quadsock::service::testing

#endif  // QUADSOCK_SERVICE_TESTING_FREEZABLE_RELAY_H_
