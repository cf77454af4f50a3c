// Datagrams bigger than a frame on a real interface: the kernel's fragments reassembled, ours
// reassembled by the kernel, path MTU from a real router, and jumbo frames over AF_XDP
// multi-buffer (the fixture: afxdp_fixture.h). Needs root.
#include "tests/afxdp_fixture.h"

namespace quadsock {
namespace {

// ---- Datagrams bigger than a frame ----------------------------------------------------------

std::string Pattern(size_t n) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>('a' + (i * 31 + i / 251) % 26);
  return s;
}

// The kernel fragments what its sockets send over the 1,500-byte MTU; quadsock puts it back.
TEST_F(AfXdpTest, KernelSocketsFragmentedDatagramsArriveWhole) {
  for (const bool v6 : {false, true}) {
    const int peer = PeerUdp(v6 ? kPeerV6 : kPeerV4, 5000);
    SocketId s = stack().Open(v6 ? net::Family::kV6 : net::Family::kV4).value();
    ASSERT_TRUE(stack().Bind(s, Ep(v6 ? "[::]:4000" : "0.0.0.0:4000")).ok());
    for (const size_t n : {2000, 8000, 65000}) {
      const std::string payload = Pattern(n);
      SockAddr to(v6 ? kStackV6 : kStackV4, 4000);
      ASSERT_EQ(sendto(peer, payload.data(), n, 0, to.get(), to.len), static_cast<ssize_t>(n))
          << std::strerror(errno);
      std::optional<stack::ReceivedDatagram> d = ReceiveWithin(s, absl::Seconds(5));
      ASSERT_TRUE(d.has_value()) << n << " bytes over IPv" << (v6 ? 6 : 4) << " never came whole";
      EXPECT_EQ(d->payload.size(), n);
      EXPECT_TRUE(d->payload == payload) << n;
    }
    ASSERT_TRUE(stack().Close(s).ok());
  }
  const stack::StackCounters c = stack().Counters();
  EXPECT_EQ(c.reassembled, 6u);
  EXPECT_EQ(c.reassembly_overlap + c.reassembly_malformed + c.reassembly_evicted +
                c.reassembly_source_full + c.reassembly_budget_full,
            0u);
  EXPECT_EQ(stack().CheckFrameAccounting(), absl::OkStatus());
}

// And the other way: quadsock fragments, the kernel reassembles.
TEST_F(AfXdpTest, QuadsockFragmentsReachKernelSocketsWhole) {
  for (const bool v6 : {false, true}) {
    const int peer = PeerUdp(v6 ? kPeerV6 : kPeerV4, 5000);
    SocketId s = stack().Open(v6 ? net::Family::kV6 : net::Family::kV4).value();
    const Endpoint to = Ep(v6 ? "[fd00:7::1]:5000" : "10.7.0.1:5000");
    for (const size_t n : {2000, 8000, 65000}) {
      const std::string payload = Pattern(n);
      ASSERT_EQ(stack().Send(s, Bytes(payload), to), absl::OkStatus());
      EXPECT_TRUE(KernelRecv(peer) == payload) << n << " bytes over IPv" << (v6 ? 6 : 4);
    }
    EXPECT_EQ(stack().Get(s).value().counters.tx_dropped, 0u);
  }
  EXPECT_EQ(stack().Counters().tx_fragmented, 6u);
}

// A router between quadsock and the far host, whose far link has a smaller MTU: the peer
// namespace forwards to a third one over a veth of 1,400 bytes (1,280 for IPv6).
class AfXdpRouterTest : public AfXdpTest {
 protected:
  void Customize(stack::AfXdpOptions& o) override {
    o.stack.gateways = {*net::IpAddress::Parse(kPeerV4), *net::IpAddress::Parse(kPeerV6)};
  }
  void SetUp() override {
    AfXdpTest::SetUp();
    far_ = "qs-far-" + std::to_string(getpid());
    ASSERT_EQ(Shell("ip netns add " + far_), 0);
    net_->PeerShell("sysctl -qw net.ipv4.ip_forward=1 net.ipv6.conf.all.forwarding=1");
    ASSERT_EQ(Shell("ip link add qr0 netns " + net_->ns() + " type veth peer name qr1 netns " +
                    far_),
              0);
    net_->PeerShell(
        "ip link set qr0 up && ip addr add 10.20.0.1/24 dev qr0 && "
        "ip addr add fd00:20::1/64 dev qr0 nodad && ethtool -K qr0 tx off >/dev/null");
    FarShell(
        "ip link set lo up && ip link set qr1 up && ip addr add 10.20.0.2/24 dev qr1 && "
        "ip addr add fd00:20::2/64 dev qr1 nodad && ip route add default via 10.20.0.1 && "
        "ip -6 route add default via fd00:20::1");
  }
  void TearDown() override {
    AfXdpTest::TearDown();
    EXPECT_EQ(Shell("ip netns del " + far_), 0);
  }
  void SetFarMtu(int mtu) {
    net_->PeerShell("ip link set qr0 mtu " + std::to_string(mtu));
    FarShell("ip link set qr1 mtu " + std::to_string(mtu));
  }
  void FarShell(const std::string& command) {
    ASSERT_EQ(Shell("ip netns exec " + far_ + " sh -c '" + command + "'"), 0) << command;
  }
  int FarUdp(const char* ip, uint16_t port) {
    const int family = std::strchr(ip, ':') ? AF_INET6 : AF_INET;
    return BoundUdp(testing::SocketInNamespace(far_, family, SOCK_DGRAM), ip, port);
  }
  std::string far_;
};

TEST_F(AfXdpRouterTest, ARoutersPathMtuMakesTheNextSendsFitAndDfSendsFailClearly) {
  for (const bool v6 : {false, true}) {
    const size_t mtu = v6 ? 1280 : 1400;
    SetFarMtu(static_cast<int>(mtu));
    const char* far_ip = v6 ? "fd00:20::2" : "10.20.0.2";
    const int far = FarUdp(far_ip, 5000);
    const Endpoint far_end = Ep(v6 ? "[fd00:20::2]:5000" : "10.20.0.2:5000");
    SocketId s = stack().Open(v6 ? net::Family::kV6 : net::Family::kV4).value();
    ASSERT_TRUE(stack().Connect(s, far_end).ok());
    ASSERT_EQ(stack().Get(s).value().path_mtu, 1500u);
    // Fits our link, not the far one: the router drops it (IPv4: DF is set) and says why.
    const std::string payload = Pattern(1440);
    const absl::Time deadline = absl::Now() + absl::Seconds(10);
    while (stack().Get(s).value().path_mtu != mtu && absl::Now() < deadline) {
      (void)stack().Send(s, Bytes(payload));  // again, in case the router's ICMP was limited
      absl::SleepFor(absl::Milliseconds(200));
    }
    ASSERT_EQ(stack().Get(s).value().path_mtu, mtu) << "no report from the router";
    // The socket hears of it once, as in Linux (EMSGSIZE); then its datagrams go in fragments
    // that fit, and arrive whole.
    absl::Status st = stack().Send(s, Bytes(payload));
    if (!st.ok()) {
      EXPECT_EQ(st.code(), absl::StatusCode::kAborted) << st;
      EXPECT_NE(st.message().find("EMSGSIZE"), std::string::npos) << st;
      ASSERT_EQ(stack().Send(s, Bytes(payload)), absl::OkStatus());
    }
    EXPECT_TRUE(KernelRecv(far) == payload) << "IPv" << (v6 ? 6 : 4);
    // A socket that may not fragment is refused, saying why.
    stack::OpenOptions df;
    df.pmtu_discovery = demux::PmtuDiscovery::kDo;
    SocketId d = stack().Open(v6 ? net::Family::kV6 : net::Family::kV4, df).value();
    st = stack().Send(d, Bytes(payload), far_end);
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
    EXPECT_NE(st.message().find("EMSGSIZE"), std::string::npos) << st;
    EXPECT_NE(st.message().find("path MTU of " + std::to_string(mtu)), std::string::npos) << st;
    ASSERT_EQ(stack().Send(d, Bytes(Pattern(mtu - (v6 ? 48 : 28))), far_end), absl::OkStatus());
    EXPECT_EQ(KernelRecv(far).size(), mtu - (v6 ? 48 : 28));
  }
  EXPECT_GE(stack().Counters().path_mtu_reports, 2u);
}

// ---- Jumbo frames: AF_XDP multi-buffer ------------------------------------------------------

// Both ends of the veth at an MTU of 9,000: more than a UMEM frame holds, so the AF_XDP socket
// chains frames (XDP_USE_SG) and the program is loaded for frags. Frame size 4096 or 2048 (three
// or six frames a chain).
class AfXdpJumboTest : public AfXdpTest, public ::testing::WithParamInterface<uint32_t> {
 protected:
  static constexpr size_t kMtu = 9000;
  void Customize(stack::AfXdpOptions& o) override {
    o.frame_size = GetParam();
    ASSERT_EQ(Shell("ip link set qs0 mtu 9000"), 0);
    net_->PeerShell("ip link set qs1 mtu 9000");
  }
  uint64_t Chained(uint64_t link::LinkCounters::*field) {
    uint64_t n = 0;
    for (const link::LinkCounters& l : stack().LinkCounters()) n += l.*field;
    return n;
  }
};

TEST_P(AfXdpJumboTest, DatagramsOfTheWholeMtuGoInOneFrameEachWay) {
  for (const bool v6 : {false, true}) {
    const int peer = PeerUdp(v6 ? kPeerV6 : kPeerV4, 5000);
    SocketId s = stack().Open(v6 ? net::Family::kV6 : net::Family::kV4).value();
    ASSERT_TRUE(stack().Bind(s, Ep(v6 ? "[::]:4000" : "0.0.0.0:4000")).ok());
    const size_t largest = kMtu - (v6 ? 48 : 28);
    for (const size_t n : {size_t{8000}, largest}) {
      const std::string payload = Pattern(n);
      SockAddr to(v6 ? kStackV6 : kStackV4, 4000);
      ASSERT_EQ(sendto(peer, payload.data(), n, 0, to.get(), to.len), static_cast<ssize_t>(n))
          << std::strerror(errno);
      std::optional<stack::ReceivedDatagram> d = ReceiveWithin(s, absl::Seconds(5));
      ASSERT_TRUE(d.has_value()) << n << " bytes over IPv" << (v6 ? 6 : 4) << " never arrived";
      EXPECT_TRUE(d->payload == payload) << n << " bytes over IPv" << (v6 ? 6 : 4);
      ASSERT_EQ(stack().Send(s, Bytes(payload), d->source), absl::OkStatus());
      EXPECT_TRUE(KernelRecv(peer) == payload) << n << " bytes back over IPv" << (v6 ? 6 : 4);
    }
    ASSERT_TRUE(stack().Connect(s, Ep(v6 ? "[fd00:7::1]:5000" : "10.7.0.1:5000")).ok());
    EXPECT_EQ(stack().Get(s).value().path_mtu, kMtu);
    ASSERT_TRUE(stack().Close(s).ok());
  }
  // Each datagram in one frame: a chain of UMEM frames under the seam, no IP fragment.
  const stack::StackCounters c = stack().Counters();
  EXPECT_EQ(c.fragments, 0u);
  EXPECT_EQ(c.tx_fragmented, 0u);
  EXPECT_EQ(Chained(&link::LinkCounters::rx_chained), 4u);
  EXPECT_EQ(Chained(&link::LinkCounters::tx_chained), 4u);
  EXPECT_EQ(Chained(&link::LinkCounters::rx_chains_dropped), 0u);
}

TEST_P(AfXdpJumboTest, BiggerDatagramsGoInJumboFragmentsAndPingsAreAnswered) {
  const int peer = PeerUdp(kPeerV4, 5000);
  SocketId s = stack().Open(net::Family::kV4).value();
  ASSERT_TRUE(stack().Bind(s, Ep("0.0.0.0:4000")).ok());
  const std::string payload = Pattern(30000);  // four fragments of 9,000 bytes at most
  SockAddr to(kStackV4, 4000);
  ASSERT_EQ(sendto(peer, payload.data(), payload.size(), 0, to.get(), to.len),
            static_cast<ssize_t>(payload.size()));
  std::optional<stack::ReceivedDatagram> d = ReceiveWithin(s, absl::Seconds(5));
  ASSERT_TRUE(d.has_value());
  EXPECT_TRUE(d->payload == payload);
  ASSERT_EQ(stack().Send(s, Bytes(payload), d->source), absl::OkStatus());
  EXPECT_TRUE(KernelRecv(peer) == payload);
  const stack::StackCounters c = stack().Counters();
  EXPECT_EQ(c.fragments, 4u);
  EXPECT_EQ(c.tx_fragments, 4u);
  // An echo request of the whole MTU, not to be fragmented: answered in one frame.
  EXPECT_EQ(net_->PeerShell(std::string("ping -q -c 1 -W 3 -M do -s 8972 ") + kStackV4, false), 0);
  EXPECT_EQ(net_->PeerShell(std::string("ping -q -c 1 -W 3 -M do -s 8952 ") + kStackV6, false), 0);
  EXPECT_EQ(stack().Counters().icmp_echo_replies, 2u);
}

// A burst of jumbo frames: chains cross the edges of the poll thread's batches, and none is lost
// in the stack (what the veth or the RX ring dropped before it is told apart).
TEST_P(AfXdpJumboTest, ABurstOfChainsLosesNothingInTheStack) {
  std::atomic<uint64_t> whole{0}, damaged{0};
  SocketId s = stack().Open(net::Family::kV4).value();
  ASSERT_TRUE(stack().Bind(s, Ep("0.0.0.0:4000")).ok());
  const std::string payload = Pattern(8000);
  ASSERT_TRUE(stack().SetReceiveCallback(s, [&](const Endpoint&, std::span<const uint8_t> p) {
    const bool same = p.size() == payload.size() && std::memcmp(p.data(), payload.data(), p.size()) == 0;
    (same ? whole : damaged).fetch_add(1, std::memory_order_relaxed);
  }).ok());
  const int peer = PeerUdp(kPeerV4, 5000);
  SockAddr to(kStackV4, 4000);
  // The peer's kernel knows our MAC first: datagrams waiting for ARP are dropped there past a
  // few (unres_qlen_bytes), counted nowhere the test looks.
  ASSERT_EQ(net_->PeerShell(std::string("ping -q -c 1 -W 3 ") + kStackV4, false), 0);
  // In bursts of 100 (300 to 600 descriptors: the RX ring holds 1,024), each waited for, so
  // that a loaded machine drops little before the stack.
  constexpr uint64_t kBurst = 100, kBursts = 20, kSent = kBurst * kBursts;
  for (uint64_t burst = 1; burst <= kBursts; ++burst) {
    for (uint64_t i = 0; i < kBurst; ++i) {
      ASSERT_EQ(sendto(peer, payload.data(), payload.size(), 0, to.get(), to.len),
                static_cast<ssize_t>(payload.size()));
    }
    const absl::Time deadline = absl::Now() + absl::Seconds(5);
    while (whole + damaged + DroppedBeforeTheStack() < burst * kBurst && absl::Now() < deadline) {
      absl::SleepFor(absl::Milliseconds(5));
    }
  }
  const uint64_t before = DroppedBeforeTheStack();
  std::printf("%llu of %llu whole, %llu dropped before the stack\n",
              static_cast<unsigned long long>(whole.load()),
              static_cast<unsigned long long>(kSent), static_cast<unsigned long long>(before));
  EXPECT_EQ(damaged.load(), 0u);
  // Every datagram arrived, or was dropped (and counted) before the stack. (The kernel may
  // count a drop twice, in the veth's and the AF_XDP socket's counters: hence at least.)
  EXPECT_LE(whole.load(), kSent);
  if (before == 0) {
    EXPECT_EQ(whole.load(), kSent);
  }
  EXPECT_GE(whole + before, kSent);
  EXPECT_GT(whole.load(), 0u);
  EXPECT_EQ(Chained(&link::LinkCounters::rx_chains_dropped), 0u);
}

INSTANTIATE_TEST_SUITE_P(FrameSizes, AfXdpJumboTest, ::testing::Values(4096u, 2048u),
                         [](const ::testing::TestParamInfo<uint32_t>& p) {
                           return "Frames" + std::to_string(p.param);
                         });

}  // namespace
}  // namespace quadsock
