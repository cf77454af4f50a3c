// A data channel on a real interface: quadsock on a veth with two RX queues (two poll threads,
// so two rings feed the one channel), the kernel's own UDP sockets as the peers, datagrams
// both ways through the shared memory. Needs root; makes its own network namespace.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "stack/afxdp_stack.h"
#include "stack/channel/channel.h"
#include "stack/channel/reader.h"
#include "stack/testing/netns.h"

namespace quadsock {
namespace {

using net::Endpoint;
using stack::SocketId;
using testing::Shell;
using testing::SockAddr;

const ::testing::Environment* const kPrivateNamespace =
    ::testing::AddGlobalTestEnvironment(new testing::PrivateNamespaceEnvironment);

constexpr int kSockets = 64;
constexpr int kPerSocket = 20;

uint64_t Stat(const std::string& dev, const std::string& name) {
  std::ifstream f("/sys/class/net/" + dev + "/statistics/" + name);
  uint64_t v = 0;
  f >> v;
  return v;
}

TEST(AfXdpChannelTest, TwoQueuesFeedOneChannelAndItsSendsReachTheKernel) {
  testing::TestVeth veth("qc0", "qc1", /*queues=*/2);
  ASSERT_EQ(Shell("ip addr add 10.8.1.1/24 dev qc1 && ethtool -K qc1 tx off >/dev/null"), 0);
  stack::AfXdpOptions o;
  o.interface = "qc0";
  o.queues = 2;
  o.umem_frames = 8192;
  o.ring_size = 1024;
  o.stack.addresses = {*net::IpPrefix::Parse("10.8.1.2/24")};
  o.log = [](absl::string_view m) { std::printf("quadsock: %.*s\n", int(m.size()), m.data()); };
  absl::StatusOr<std::unique_ptr<stack::AfXdpStack>> afxdp = stack::AfXdpStack::Create(o);
  ASSERT_TRUE(afxdp.ok()) << afxdp.status();
  stack::Stack& st = (*afxdp)->stack();
  ASSERT_EQ(st.poll_threads(), 2u);
  auto c = channel::Channel::Create({.rings = 2, .slots = 2048}).value();
  std::vector<SocketId> sockets;
  for (int i = 0; i < kSockets; ++i) {
    const SocketId s = st.Open(net::Family::kV4).value();
    ASSERT_TRUE(st.Bind(s, *Endpoint::Parse(absl::StrCat("10.8.1.2:", 4000 + i))).ok());
    ASSERT_EQ(st.PutOnChannel(s, c, static_cast<uint32_t>(i + 1)), absl::OkStatus());
    sockets.push_back(s);
  }
  ASSERT_EQ(st.Start(), absl::OkStatus());
  std::vector<int> events;
  for (int fd : c->event_fds()) events.push_back(dup(fd));
  channel::ChannelReader r = channel::ChannelReader::Map(dup(c->memfd()), events).value();

  // The kernel's sockets, one per flow: many flows, so the veth spreads them over its queues.
  std::vector<int> kernel;
  for (int i = 0; i < kSockets; ++i) {
    const int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    SockAddr from("10.8.1.1", static_cast<uint16_t>(5000 + i));
    ASSERT_EQ(bind(fd, from.get(), from.len), 0);
    timeval tv{5, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    kernel.push_back(fd);
  }
  ASSERT_EQ(Shell("ping -c 1 -W 2 -I qc1 10.8.1.2 >/dev/null"), 0);  // the kernel resolves us
  uint64_t sent = 0;
  for (int round = 0; round < kPerSocket; ++round) {
    for (int i = 0; i < kSockets; ++i) {
      SockAddr to("10.8.1.2", static_cast<uint16_t>(4000 + i));
      const std::string msg = absl::StrCat(i, "/", round);
      ASSERT_EQ(sendto(kernel[i], msg.data(), msg.size(), 0, to.get(), to.len),
                static_cast<ssize_t>(msg.size()));
      ++sent;
    }
  }
  // Receive until the stack has delivered no more than we took, or time runs out.
  std::map<uint32_t, int> per_socket;
  uint64_t received = 0;
  channel::ReceivedView v[64];
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (received < sent && absl::Now() < deadline) {
    const size_t n = r.Receive(v, absl::Milliseconds(200));
    for (size_t k = 0; k < n; ++k) {
      ++per_socket[v[k].socket];
      EXPECT_EQ(v[k].peer, *Endpoint::Parse(absl::StrCat("10.8.1.1:", 5000 + v[k].socket - 1)));
      const std::string payload(v[k].payload.begin(), v[k].payload.end());
      EXPECT_EQ(payload.substr(0, payload.find('/')), std::to_string(v[k].socket - 1));
    }
    received += n;
    r.Release();
  }
  // Every datagram the stack delivered is here or counted as dropped; what did not reach the
  // stack was dropped before it, where the kernel counts it.
  const stack::StackCounters counters = st.Counters();
  uint64_t socket_drops = 0;
  for (SocketId s : sockets) socket_drops += st.Get(s).value().counters.rx_dropped;
  EXPECT_EQ(received + socket_drops, counters.udp_delivered);
  const uint64_t before_stack = Stat("qc1", "tx_dropped") + Stat("qc0", "rx_dropped");
  uint64_t xsk_drops = 0;
  for (const link::LinkCounters& l : st.LinkCounters()) xsk_drops += l.rx_dropped;
  EXPECT_EQ(counters.udp_delivered + before_stack + xsk_drops, sent);
  EXPECT_GT(received, 0u);
  // Both queues (both rings) carried datagrams.
  const std::vector<link::LinkCounters> links = st.LinkCounters();
  EXPECT_GT(links[0].rx_frames, 0u);
  EXPECT_GT(links[1].rx_frames, 0u);

  // And back: the application answers through the TX ring; the kernel's sockets hear it.
  for (int i = 0; i < 8; ++i) {
    const std::string answer = absl::StrCat("answer ", i);
    ASSERT_TRUE(r.Send(static_cast<uint32_t>(i + 1),
                       {reinterpret_cast<const uint8_t*>(answer.data()), answer.size()},
                       *Endpoint::Parse(absl::StrCat("10.8.1.1:", 5000 + i))));
  }
  for (int i = 0; i < 8; ++i) {
    char buf[256];
    // Skip anything left of the first part (nothing is expected: the kernel sent, not received).
    const ssize_t n = recv(kernel[i], buf, sizeof(buf), 0);
    ASSERT_GT(n, 0) << "the kernel's socket " << i << " heard no answer";
    EXPECT_EQ(std::string(buf, static_cast<size_t>(n)), absl::StrCat("answer ", i));
  }
  st.Stop();
  EXPECT_EQ(st.CheckFrameAccounting(), absl::OkStatus());
  for (int fd : kernel) close(fd);
  st.TakeOffChannels(sockets);
  st.RemoveChannel(c.get());
}

}  // namespace
}  // namespace quadsock
