// A relay of Unix-socket connections that can be frozen, for keepalive tests: frozen, it keeps
// both sides' connections open but passes nothing more, so neither end ever sees a FIN or RST,
// as when a host loses power or a link is cut.
//
//   FreezableRelay relay(server->listening_on());     // "unix:PATH"
//   auto channel = grpc::CreateChannel(relay.target(), grpc::InsecureChannelCredentials());
//   ...                                               // calls pass through
//   relay.Freeze();                                   // now only keepalive notices
//
// It also counts the HTTP/2 PING acknowledgements the server sends its clients (ping_acks()):
// a keepalive test waits for answered pings instead of sleeping.
#ifndef QUADSOCK_SERVICE_TESTING_FREEZABLE_RELAY_H_
#define QUADSOCK_SERVICE_TESTING_FREEZABLE_RELAY_H_

#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
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
  // PING frames with the ACK flag that passed from the server to a client: the client's pings
  // the server answered.
  int ping_acks() const { return ping_acks_.load(); }
  // Client connections accepted so far (a client that lost its connection makes another).
  int connections() const { return connections_.load(); }

 private:
  // Follows the frames of one server-to-client byte stream (HTTP/2: a 9-byte header, then
  // `length` bytes of payload; the server's side has no connection preface of its own).
  struct FrameScanner {
    uint8_t header[9];
    size_t have = 0;  // header bytes so far
    size_t skip = 0;  // payload bytes left of the current frame
    // The PING ACK frames that end in `data`.
    int Scan(const char* data, size_t n) {
      int acks = 0;
      while (n > 0) {
        if (skip > 0) {
          const size_t k = std::min(skip, n);
          skip -= k;
          data += k;
          n -= k;
          continue;
        }
        header[have++] = static_cast<uint8_t>(*data++);
        --n;
        if (have < sizeof(header)) continue;
        have = 0;
        skip = size_t{header[0]} << 16 | size_t{header[1]} << 8 | header[2];
        constexpr uint8_t kPing = 6, kAck = 1;
        if (header[3] == kPing && (header[4] & kAck) != 0) ++acks;
      }
      return acks;
    }
  };

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
        scanners_.emplace_back();
        ++connections_;
      }
      char buf[16384];
      for (size_t i = 1; i < p.size(); ++i) {
        if ((p[i].revents & POLLIN) == 0) continue;
        const ssize_t n = read(p[i].fd, buf, sizeof(buf));
        const int to = fds_[(i - 1) ^ 1];  // fds_ holds (client, server) pairs
        if (n > 0 && (i - 1) % 2 == 1) ping_acks_ += scanners_[(i - 1) / 2].Scan(buf, n);
        for (ssize_t done = 0; n > 0 && done < n;) {
          // MSG_NOSIGNAL: a side that closed is no reason to end the test (SIGPIPE).
          const ssize_t w = send(to, buf + done, n - done, MSG_NOSIGNAL);
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
  std::vector<FrameScanner> scanners_;  // one a (client, server) pair, for the server's side
  std::atomic<int> ping_acks_{0};
  std::atomic<int> connections_{0};
  std::atomic<bool> stop_{false};
  std::atomic<bool> frozen_{false};
  std::thread thread_;
};

}  // namespace quadsock::service::testing

#endif  // QUADSOCK_SERVICE_TESTING_FREEZABLE_RELAY_H_
