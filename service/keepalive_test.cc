// The server's HTTP/2 keepalive: a client that stops answering (its host lost power, its link
// was cut) loses its streams, and so its session, well within a lease instead of 2 hours. A
// relay between client and server that can be frozen plays the vanished client: it keeps both
// connections open but passes nothing more, so no FIN or RST ever reaches the server.
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

#include "service/testing/service_fixture.h"

namespace quadsock::service {
namespace {

int UnixSocket(const std::string& path, bool listen_on_it) {
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

TEST(KeepaliveForLeaseTest, AThirdOfTheLeaseAtLeastTenSeconds) {
  const Keepalive usual = Keepalive::ForLease(absl::Seconds(30));
  EXPECT_EQ(usual.time, absl::Seconds(10));
  EXPECT_EQ(usual.timeout, absl::Seconds(10));
  const Keepalive brief = Keepalive::ForLease(absl::Seconds(3));
  EXPECT_EQ(brief.time, absl::Seconds(10));
  const Keepalive long_lease = Keepalive::ForLease(absl::Seconds(600));
  EXPECT_EQ(long_lease.time, absl::Seconds(200));
  EXPECT_EQ(long_lease.timeout, absl::Seconds(20));
  // The C++ client library pings every 20 s: the server must take that.
  EXPECT_LT(usual.min_client_interval, absl::Seconds(20));
}

class KeepaliveTest : public ServiceTest {
 protected:
  void Configure(ServerOptions& o) override {
    o.keepalive = Keepalive{.time = absl::Milliseconds(200),
                            .timeout = absl::Milliseconds(300),
                            .min_client_interval = absl::Milliseconds(100)};
  }
};

// A Session stream holds its session for as long as it is open: when its client vanishes, only
// keepalive ends it.
TEST_F(KeepaliveTest, TheStreamOfAClientThatStoppedAnsweringEnds) {
  FreezableRelay relay(server_->listening_on());
  std::unique_ptr<v1::SocketService::Stub> stub = v1::SocketService::NewStub(
      grpc::CreateChannel(relay.target(), grpc::InsecureChannelCredentials()));
  const std::string held = NewSession("vanishing", 1);
  OpenBound(held, "10.1.0.2", 4900);
  TestStream<SessionStream> stream = OpenSession(held, absl::Seconds(30), stub.get());
  v1::SessionEvent hello;
  ASSERT_TRUE(stream->Read(&hello));
  relay.Freeze();
  const absl::Time deadline = absl::Now() + absl::Seconds(5);
  while (!stack_->List().empty() && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(50));
  EXPECT_TRUE(stack_->List().empty()) << "a client that no longer answers still holds its session";
}

// A client's own keepalive, as often as min_client_interval allows, is not taken for abuse
// (gRPC's default takes one ping in 5 minutes, and answers more with GOAWAY "too_many_pings").
TEST_F(KeepaliveTest, ClientPingsAtTheAllowedRateAreTaken) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 150);
  args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  args.SetInt(GRPC_ARG_HTTP2_MIN_SENT_PING_INTERVAL_WITHOUT_DATA_MS, 150);
  std::shared_ptr<grpc::Channel> channel = grpc::CreateCustomChannel(
      server_->listening_on(), grpc::InsecureChannelCredentials(), args);
  std::unique_ptr<v1::SocketService::Stub> stub = v1::SocketService::NewStub(channel);
  const std::string held = NewSession("pinging", 1);
  OpenBound(held, "10.1.0.2", 4901);
  TestStream<SessionStream> stream = OpenSession(held, absl::Seconds(30), stub.get());
  v1::SessionEvent hello;
  ASSERT_TRUE(stream->Read(&hello));
  absl::SleepFor(absl::Seconds(5));  // several pings (gRPC sends at most one a second)
  // A GOAWAY leaves the open stream be, but takes the connection from the channel.
  EXPECT_EQ(channel->GetState(false), GRPC_CHANNEL_READY)
      << "the server sent GOAWAY for the client's keepalive pings";
  EXPECT_EQ(stack_->List().size(), 1u);
}

}  // namespace
}  // namespace quadsock::service
