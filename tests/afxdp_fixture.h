// The fixture of the AF_XDP tests: quadsock on a real interface, against the kernel's own UDP
// sockets: a veth pair between the test's private network namespace (quadsock's side, AF_XDP
// with our XDP program) and a peer namespace where the kernel plays the other host. Needs root.
//
//   TEST_F(AfXdpTest, Something) {
//     const int peer = PeerUdp(kPeerV4, 5000);           // the kernel's socket on the peer
//     SocketId s = stack().Open(net::Family::kV4).value();
//     ...
//   }
#ifndef QUADSOCK_TESTS_AFXDP_FIXTURE_H_
#define QUADSOCK_TESTS_AFXDP_FIXTURE_H_

#include <arpa/inet.h>
#include <fcntl.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <bpf/libbpf.h>
#include <net/if.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "stack/afxdp_stack.h"
#include "stack/link/nic_features.h"
#include "stack/link/xsk_link.h"
#include "stack/net/frame.h"
#include "stack/net/frame_builder.h"
#include "stack/testing/netns.h"

namespace quadsock {

using net::Endpoint;
using stack::SocketId;
using testing::PeerNetwork;
using testing::Shell;
using testing::SockAddr;

inline constexpr char kStackV4[] = "10.7.0.2";
inline constexpr char kStackV6[] = "fd00:7::2";
inline constexpr char kPeerV4[] = "10.7.0.1";
inline constexpr char kPeerV6[] = "fd00:7::1";
inline constexpr char kKernelV4[] = "10.7.0.3";  // the kernel's own address on quadsock's interface

inline std::span<const uint8_t> Bytes(const std::string& s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}
inline Endpoint Ep(const std::string& text) { return *Endpoint::Parse(text); }

// Every test binary that includes this runs in a private network namespace of its own.
inline const ::testing::Environment* const kPrivateNamespace =
    ::testing::AddGlobalTestEnvironment(new testing::PrivateNamespaceEnvironment);

class AfXdpTest : public ::testing::Test {
 protected:
  void SetUp() override {
    net_ = std::make_unique<PeerNetwork>("qs0", "qs1");
    net_->PeerShell(std::string("ip addr add ") + kPeerV4 + "/24 dev qs1 && ip addr add " +
                    kPeerV6 + "/64 dev qs1 nodad");
    ASSERT_EQ(Shell(std::string("ip addr add ") + kKernelV4 + "/24 dev qs0"), 0);
    stack::AfXdpOptions o;
    o.interface = "qs0";
    o.umem_frames = 4096;
    o.ring_size = 1024;
    o.stack.addresses = {*net::IpPrefix::Parse(std::string(kStackV4) + "/24"),
                         *net::IpPrefix::Parse(std::string(kStackV6) + "/64")};
    o.log = [](absl::string_view m) { std::printf("quadsock: %.*s\n", int(m.size()), m.data()); };
    Customize(o);
    absl::StatusOr<std::unique_ptr<stack::AfXdpStack>> s = stack::AfXdpStack::Create(o);
    ASSERT_TRUE(s.ok()) << s.status();
    afxdp_ = std::move(*s);
    ASSERT_EQ(stack().Start(), absl::OkStatus());
  }

  void TearDown() override {
    if (afxdp_ != nullptr) {
      stack().Stop();
      EXPECT_EQ(stack().CheckFrameAccounting(), absl::OkStatus());
      afxdp_.reset();
    }
    net_.reset();
  }

  virtual void Customize(stack::AfXdpOptions& o) {}
  stack::Stack& stack() { return afxdp_->stack(); }

  // Frames dropped on their way to the stack, as the veth pair and the AF_XDP sockets count
  // them: the peer's veth could not hand them over, or qs0's XDP found no room in a ring.
  uint64_t DroppedBeforeTheStack() {
    uint64_t n = 0;
    for (const link::LinkCounters& l : stack().LinkCounters()) n += l.rx_dropped;
    // /proc/net/dev is this network namespace's (/sys/class/net is the one sysfs was mounted
    // in). After "name:", a device's 4th figure is its receive drops, its 12th transmit drops.
    n += ReadNumber("sed -n 's/^ *qs0://p' /proc/net/dev | awk '{print $4}'");
    n += ReadNumber("ip netns exec " + net_->ns() +
                    " sed -n 's/^ *qs1://p' /proc/net/dev | awk '{print $12}'");
    return n;
  }
  static uint64_t ReadNumber(const std::string& command) {
    FILE* f = popen(command.c_str(), "r");
    EXPECT_NE(f, nullptr) << command;
    if (f == nullptr) return 0;
    unsigned long long n = 0;
    EXPECT_EQ(fscanf(f, "%llu", &n), 1) << command;
    EXPECT_EQ(pclose(f), 0) << command;
    return n;
  }

  // A kernel UDP socket in the peer namespace, bound, with a receive timeout.
  int PeerUdp(const char* ip, uint16_t port) {
    return BoundUdp(net_->PeerSocket(std::strchr(ip, ':') ? AF_INET6 : AF_INET, SOCK_DGRAM), ip,
                    port);
  }
  // `fd` (a kernel UDP socket, closed with the test) bound to ip:port, with a receive timeout.
  int BoundUdp(int fd, const char* ip, uint16_t port) {
    timeval tv{3, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    SockAddr a(ip, port);
    EXPECT_EQ(bind(fd, a.get(), a.len), 0) << std::strerror(errno);
    fds_.push_back(fd);
    return fd;
  }

  std::optional<stack::ReceivedDatagram> ReceiveWithin(SocketId id, absl::Duration d) {
    const absl::Time deadline = absl::Now() + d;
    while (absl::Now() < deadline) {
      absl::StatusOr<std::optional<stack::ReceivedDatagram>> r = stack().Receive(id);
      EXPECT_TRUE(r.ok()) << r.status();
      if (r.ok() && r->has_value()) return std::move(**r);
      absl::SleepFor(absl::Milliseconds(1));
    }
    return std::nullopt;
  }

  std::string KernelRecv(int fd, std::string* from = nullptr) {
    char buf[65536];
    sockaddr_storage ss{};
    socklen_t len = sizeof(ss);
    const ssize_t n = recvfrom(fd, buf, sizeof(buf), 0, reinterpret_cast<sockaddr*>(&ss), &len);
    if (n < 0) return "error: " + std::string(std::strerror(errno));
    if (from != nullptr) {
      char ip[INET6_ADDRSTRLEN];
      const void* addr = ss.ss_family == AF_INET
                             ? static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(&ss)->sin_addr)
                             : static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(&ss)->sin6_addr);
      inet_ntop(ss.ss_family, addr, ip, sizeof(ip));
      *from = ip;
    }
    return std::string(buf, static_cast<size_t>(n));
  }

  // A socket on `port` whose consumer takes 20 us a datagram (counted in slow_received_, which
  // outlives the poll thread): flooded, it keeps the poll thread busy, never idle.
  SocketId SlowSink(uint16_t port) {
    SocketId sink = stack().Open(net::Family::kV4).value();
    EXPECT_TRUE(stack().Bind(sink, Endpoint{*net::IpAddress::Parse("0.0.0.0"), port}).ok());
    EXPECT_TRUE(stack().SetReceiveCallback(sink, [this](const Endpoint&, std::span<const uint8_t>) {
      slow_received_.fetch_add(1, std::memory_order_relaxed);
      const absl::Time until = absl::Now() + absl::Microseconds(20);
      while (absl::Now() < until) {
      }
    }).ok());
    return sink;
  }

  void ExchangeWithKernel(net::Family family, const char* stack_ip, const char* peer_ip,
                          size_t mtu_payload) {
    const bool v6 = family == net::Family::kV6;
    const int peer = PeerUdp(peer_ip, 5000);
    SocketId s = stack().Open(family).value();
    ASSERT_TRUE(stack().Bind(s, Ep(v6 ? "[::]:4000" : "0.0.0.0:4000")).ok());
    for (const std::string& payload : {std::string("hello"), std::string(mtu_payload, 'm')}) {
      // Kernel -> quadsock, unconnected.
      SockAddr to(stack_ip, 4000);
      ASSERT_EQ(sendto(peer, payload.data(), payload.size(), 0, to.get(), to.len),
                static_cast<ssize_t>(payload.size()))
          << std::strerror(errno);
      std::optional<stack::ReceivedDatagram> d = ReceiveWithin(s, absl::Seconds(3));
      ASSERT_TRUE(d.has_value()) << "quadsock received nothing of " << payload.size() << " bytes";
      EXPECT_EQ(d->payload, payload);
      EXPECT_EQ(d->source.address.ToString(), peer_ip);
      EXPECT_EQ(d->source.port, 5000);
      // quadsock -> kernel, to the source.
      ASSERT_EQ(stack().Send(s, Bytes(payload), d->source), absl::OkStatus());
      std::string from;
      EXPECT_EQ(KernelRecv(peer, &from), payload);
      EXPECT_EQ(from, stack_ip);
    }
    // Connected both ways.
    SockAddr to(stack_ip, 4000);
    ASSERT_EQ(connect(peer, to.get(), to.len), 0);
    ASSERT_TRUE(stack().Connect(s, Endpoint{*net::IpAddress::Parse(peer_ip), 5000}).ok());
    ASSERT_EQ(send(peer, "connected", 9, 0), 9);
    std::optional<stack::ReceivedDatagram> d = ReceiveWithin(s, absl::Seconds(3));
    ASSERT_TRUE(d.has_value());
    EXPECT_EQ(d->payload, "connected");
    ASSERT_EQ(stack().Send(s, Bytes("back")), absl::OkStatus());
    EXPECT_EQ(KernelRecv(peer), "back");
  }

  std::atomic<uint64_t> slow_received_{0};
  std::unique_ptr<PeerNetwork> net_;
  std::unique_ptr<stack::AfXdpStack> afxdp_;
  std::vector<int> fds_;

 public:
  ~AfXdpTest() override {
    for (int fd : fds_) close(fd);
  }
};

}  // namespace quadsock

#endif  // QUADSOCK_TESTS_AFXDP_FIXTURE_H_
