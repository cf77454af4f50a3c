// quadsock on a real interface, against the kernel's own UDP sockets, ping and TCP: a veth pair
// between this process's private network namespace (quadsock's side, AF_XDP with our XDP
// program) and a peer namespace where the kernel plays the other host. Needs root.
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
namespace {

using net::Endpoint;
using stack::SocketId;
using testing::PeerNetwork;
using testing::Shell;
using testing::SockAddr;

constexpr char kStackV4[] = "10.7.0.2";
constexpr char kStackV6[] = "fd00:7::2";
constexpr char kPeerV4[] = "10.7.0.1";
constexpr char kPeerV6[] = "fd00:7::1";
constexpr char kKernelV4[] = "10.7.0.3";  // the kernel's own address on quadsock's interface

std::span<const uint8_t> Bytes(const std::string& s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}
Endpoint Ep(const std::string& text) { return *Endpoint::Parse(text); }

const ::testing::Environment* const kPrivateNamespace =
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
    const int family = std::strchr(ip, ':') ? AF_INET6 : AF_INET;
    const int fd = net_->PeerSocket(family, SOCK_DGRAM);
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

TEST_F(AfXdpTest, KernelPeerExchangesUdpOverIpv4) {
  ExchangeWithKernel(net::Family::kV4, kStackV4, kPeerV4, 1500 - 28);
}

TEST_F(AfXdpTest, KernelPeerExchangesUdpOverIpv6) {
  ExchangeWithKernel(net::Family::kV6, kStackV6, kPeerV6, 1500 - 48);
}

class AfXdpBusyPollTest : public AfXdpTest {
 protected:
  void Customize(stack::AfXdpOptions& o) override { o.busy_poll = true; }
};

// Busy polling asked for on veth: AF_XDP in copy mode there has no NAPI id to poll (the
// kernel's veth NAPI does the receive work), so the link must notice, stop its recvfrom calls
// and say so, and traffic must flow as without it.
TEST_F(AfXdpBusyPollTest, FallsBackWhereTheQueueHasNoNapiAndTrafficFlows) {
  ExchangeWithKernel(net::Family::kV4, kStackV4, kPeerV4, 1500 - 28);
  const std::vector<link::LinkCounters> links = stack().LinkCounters();
  ASSERT_EQ(links.size(), 1u);
  EXPECT_GT(links[0].busy_polls, 0u);  // it did try, until the first frames came
  EXPECT_EQ(links[0].busy_poll_unavailable, 1u);
  const uint64_t polls = links[0].busy_polls;
  EXPECT_EQ(net_->PeerShell(std::string("ping -c 2 -i 0.2 -W 2 ") + kStackV4 + " >/dev/null"), 0);
  EXPECT_EQ(stack().LinkCounters()[0].busy_polls, polls);  // and then stopped
}

// 2048-byte UMEM frames on an interface of the largest MTU they hold (1,774): datagrams of
// that size go out of frames that received before (the kernel writes those 256 bytes into their
// chunk), whole and accounted for; one byte more goes in fragments.
class AfXdpSmallFramesTest : public AfXdpTest {
  void Customize(stack::AfXdpOptions& o) override {
    const std::string mtu = std::to_string(link::MaxMtu(2048));
    ASSERT_EQ(Shell("ip link set qs0 mtu " + mtu), 0);
    net_->PeerShell("ip link set qs1 mtu " + mtu);
    o.frame_size = 2048;
  }
};

TEST_F(AfXdpSmallFramesTest, LargestDatagramsLeaveFromRecycledFrames) {
  const std::vector<link::LinkInfo> links = stack().Links();
  ASSERT_EQ(links.size(), 1u);
  EXPECT_EQ(links[0].mtu, link::MaxMtu(2048));
  const size_t largest = links[0].mtu - 28;  // IPv4 and UDP headers
  const int peer = PeerUdp(kPeerV4, 5000);
  SocketId s = stack().Open(net::Family::kV4).value();
  ASSERT_TRUE(stack().Bind(s, Ep("0.0.0.0:4000")).ok());
  const Endpoint to = Ep(std::string(kPeerV4) + ":5000");
  ASSERT_EQ(stack().Send(s, Bytes(std::string(largest + 1, 'x')), to), absl::OkStatus());
  EXPECT_EQ(KernelRecv(peer), std::string(largest + 1, 'x'));
  EXPECT_EQ(stack().Counters().tx_fragmented, 1u);
  SockAddr at(kStackV4, 4000);
  for (int i = 0; i < 100; ++i) {
    ASSERT_EQ(sendto(peer, "ping", 4, 0, at.get(), at.len), 4) << std::strerror(errno);
    ASSERT_TRUE(ReceiveWithin(s, absl::Seconds(3)).has_value()) << "round " << i;
    const std::string payload(largest, static_cast<char>('a' + i % 26));
    ASSERT_EQ(stack().Send(s, Bytes(payload), to), absl::OkStatus());
    const std::string got = KernelRecv(peer);
    ASSERT_EQ(got.size(), payload.size()) << "round " << i << ": " << got.substr(0, 60);
    ASSERT_TRUE(got == payload) << "round " << i;
  }
}

// Copy mode sends at most 32 frames per kick: the rest must not wait for the poll thread to
// go idle, which it never does while frames keep arriving.
TEST_F(AfXdpTest, BurstOfSendsLeavesWhileReceiving) {
  const int peer = PeerUdp(kPeerV4, 5000);
  const int flood = net_->PeerSocket(AF_INET, SOCK_DGRAM);
  fds_.push_back(flood);
  // Room for the whole burst at the peer, which reads it only afterwards.
  const int big = 8 << 20;
  ASSERT_EQ(setsockopt(peer, SOL_SOCKET, SO_RCVBUFFORCE, &big, sizeof(big)), 0);
  SlowSink(4001);
  const std::atomic<uint64_t>& flooded = slow_received_;
  std::atomic<bool> stop{false};
  std::thread flooder([&] {
    SockAddr to(kStackV4, 4001);
    const absl::Time end = absl::Now() + absl::Seconds(8);  // bounded, whatever happens
    while (!stop.load() && absl::Now() < end) (void)sendto(flood, "f", 1, 0, to.get(), to.len);
  });
  while (flooded.load() < 100) absl::SleepFor(absl::Milliseconds(1));
  SocketId s = stack().Open(net::Family::kV4).value();
  ASSERT_TRUE(stack().Bind(s, Ep("0.0.0.0:4000")).ok());
  const Endpoint to = Ep(std::string(kPeerV4) + ":5000");
  constexpr int kBurst = 500;
  for (int i = 0; i < kBurst;) {
    const absl::Status st = stack().Send(s, Bytes(std::to_string(i)), to);
    if (st.code() == absl::StatusCode::kResourceExhausted) continue;  // send queue full
    ASSERT_EQ(st, absl::OkStatus());
    ++i;
  }
  int got = 0;
  for (; got < kBurst; ++got) {
    if (KernelRecv(peer).rfind("error", 0) == 0) break;  // 3 s without one
  }
  const uint64_t flooded_during = flooded.load();
  stop = true;
  flooder.join();
  EXPECT_EQ(got, kBurst) << "while the flood went on (" << flooded_during << " received)";
  EXPECT_EQ(stack().LinkCounters()[0].tx_ring_full, 0u);
}

// The smallest UMEM a queue may have (twice the ring size): under a flood that a slow consumer
// cannot keep up with, the fill and RX rings could hold every frame, and the answers a turn
// sends before it releases what it received (here: port unreachable) found no frame.
class AfXdpSmallUmemTest : public AfXdpTest {
  void Customize(stack::AfXdpOptions& o) override { o.umem_frames = 2 * o.ring_size; }
};

TEST_F(AfXdpSmallUmemTest, AnswersFindFramesUnderAFlood) {
  const int flood = net_->PeerSocket(AF_INET, SOCK_DGRAM);
  fds_.push_back(flood);
  SlowSink(4001);
  // Nine datagrams to the slow socket, one to a closed port, for 1.5 s.
  SockAddr open_port(kStackV4, 4001), closed_port(kStackV4, 4999);
  const absl::Time end = absl::Now() + absl::Milliseconds(1500);
  for (uint64_t i = 0; absl::Now() < end; ++i) {
    const SockAddr& to = i % 10 == 9 ? closed_port : open_port;
    (void)sendto(flood, "f", 1, 0, to.get(), to.len);
  }
  const stack::StackCounters c = stack().Counters();
  const link::LinkCounters l = stack().LinkCounters()[0];
  EXPECT_GT(l.rx_dropped + l.fill_ring_empty, 0u) << "the flood did not back up";
  EXPECT_GT(c.icmp_errors_sent, 0u);
  EXPECT_EQ(c.tx_no_buffer, 0u) << slow_received_.load() << " received";
}

TEST_F(AfXdpTest, PingAndNeighbourResolutionBothWays) {
  EXPECT_EQ(net_->PeerShell(std::string("ping -c 2 -i 0.2 -W 2 ") + kStackV4 + " >/dev/null"), 0);
  EXPECT_EQ(net_->PeerShell(std::string("ping -6 -c 2 -i 0.2 -W 2 ") + kStackV6 + " >/dev/null"), 0);
  EXPECT_GE(stack().Counters().icmp_echo_replies, 4u);
  EXPECT_GE(stack().Counters().arp_replies, 1u);
  EXPECT_GE(stack().Counters().ndp_advertisements, 1u);
  // The pings made the peer a neighbour of both families (it asked for us, we answered it);
  // forgotten, quadsock resolves the peer itself when it sends first.
  ASSERT_EQ(stack().RemoveNeighbor(*net::IpAddress::Parse(kPeerV4)), absl::OkStatus());
  ASSERT_EQ(stack().RemoveNeighbor(*net::IpAddress::Parse(kPeerV6)), absl::OkStatus());
  const int peer4 = PeerUdp(kPeerV4, 5001);
  const int peer6 = PeerUdp(kPeerV6, 5001);
  SocketId s4 = stack().Open(net::Family::kV4).value();
  SocketId s6 = stack().Open(net::Family::kV6).value();
  ASSERT_EQ(stack().Send(s4, Bytes("arp first"), Endpoint{*net::IpAddress::Parse(kPeerV4), 5001}),
            absl::OkStatus());
  ASSERT_EQ(stack().Send(s6, Bytes("ndp first"), Endpoint{*net::IpAddress::Parse(kPeerV6), 5001}),
            absl::OkStatus());
  EXPECT_EQ(KernelRecv(peer4), "arp first");
  EXPECT_EQ(KernelRecv(peer6), "ndp first");
  EXPECT_GE(stack().Counters().neighbor_resolved, 2u);
}

// quadsock on VLAN 100 of its interface. This kernel has no 802.1Q devices (CONFIG_VLAN_8021Q
// is off), so the peer is a packet socket on qs1: it sends tagged frames made here and reads
// quadsock's answers with their tags (the kernel's receive path moves a tag into the packet's
// auxiliary data; a tag still in the frame counts as well).
constexpr char kVlanStackV4[] = "10.7.100.2";
constexpr char kVlanPeerV4[] = "10.7.100.1";
constexpr uint16_t kVlan = 100;

class AfXdpVlanTest : public AfXdpTest {
 protected:
  struct Answer {
    net::ParsedFrame frame;
    std::vector<uint8_t> bytes;
    int vlan = 0;  // the tag's VLAN id; 0 untagged
  };

  void Customize(stack::AfXdpOptions& o) override {
    o.stack.vlan = kVlan;
    o.stack.addresses = {*net::IpPrefix::Parse(std::string(kVlanStackV4) + "/24")};
    // The peer sends nothing but what the test makes: no IPv6 (router and neighbour
    // solicitations, MLD), which the XDP program would count as not owned too.
    net_->PeerShell("sysctl -qw net.ipv6.conf.qs1.disable_ipv6=1 && ip link set qs1 promisc on");
    raw_ = net_->PeerSocket(AF_PACKET, SOCK_RAW, htons(ETH_P_ALL));
    fds_.push_back(raw_);
    const int on = 1;
    EXPECT_EQ(setsockopt(raw_, SOL_PACKET, PACKET_AUXDATA, &on, sizeof(on)), 0);
    timeval tv{0, 200 * 1000};
    setsockopt(raw_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    sockaddr_ll at{};
    at.sll_family = AF_PACKET;
    at.sll_protocol = htons(ETH_P_ALL);
    at.sll_ifindex = net_->PeerIfindex();
    EXPECT_EQ(bind(raw_, reinterpret_cast<sockaddr*>(&at), sizeof(at)), 0) << std::strerror(errno);
    ifindex_ = at.sll_ifindex;
    // quadsock's MAC is qs0's (this namespace's /sys is the host's: ask the kernel instead).
    const int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    ifreq r{};
    std::strncpy(r.ifr_name, "qs0", IFNAMSIZ - 1);
    EXPECT_EQ(ioctl(fd, SIOCGIFHWADDR, &r), 0) << std::strerror(errno);
    close(fd);
    mac_ = net::MacAddress::FromBytes(reinterpret_cast<const uint8_t*>(r.ifr_hwaddr.sa_data));
  }

  static net::LinkAddresses Link(std::optional<uint16_t> vlan, const net::MacAddress& dst) {
    std::optional<net::VlanTag> tag;
    if (vlan.has_value()) tag = net::VlanTag{.tpid = net::kEtherTypeVlan, .tci = *vlan};
    return {kPeerMac, dst, tag};
  }

  void SendRaw(std::span<const uint8_t> frame) {
    sockaddr_ll to{};
    to.sll_family = AF_PACKET;
    to.sll_ifindex = ifindex_;
    to.sll_halen = 6;
    ASSERT_EQ(sendto(raw_, frame.data(), frame.size(), 0, reinterpret_cast<sockaddr*>(&to),
                     sizeof(to)),
              static_cast<ssize_t>(frame.size()))
        << std::strerror(errno);
  }

  void SendUdp(std::optional<uint16_t> vlan, const std::string& payload) {
    std::vector<uint8_t> buf(2048);
    std::optional<size_t> n = net::BuildUdp(
        Link(vlan, mac_), {Ep(std::string(kVlanPeerV4) + ":5000"),
                                 Ep(std::string(kVlanStackV4) + ":4000")},
        Bytes(payload), buf);
    SendRaw({buf.data(), n.value()});
  }

  // The next frame quadsock sent to the peer, within 3 s.
  std::optional<Answer> NextAnswer() {
    const absl::Time deadline = absl::Now() + absl::Seconds(3);
    while (absl::Now() < deadline) {
      Answer a;
      a.bytes.resize(2048);
      iovec iov{a.bytes.data(), a.bytes.size()};
      sockaddr_ll from{};
      alignas(cmsghdr) char control[CMSG_SPACE(sizeof(tpacket_auxdata))];
      msghdr m{};
      m.msg_name = &from;
      m.msg_namelen = sizeof(from);
      m.msg_iov = &iov;
      m.msg_iovlen = 1;
      m.msg_control = control;
      m.msg_controllen = sizeof(control);
      const ssize_t n = recvmsg(raw_, &m, 0);
      if (n <= 0 || from.sll_pkttype == PACKET_OUTGOING) continue;
      a.bytes.resize(static_cast<size_t>(n));
      for (cmsghdr* c = CMSG_FIRSTHDR(&m); c != nullptr; c = CMSG_NXTHDR(&m, c)) {
        if (c->cmsg_level != SOL_PACKET || c->cmsg_type != PACKET_AUXDATA) continue;
        tpacket_auxdata aux;
        std::memcpy(&aux, CMSG_DATA(c), sizeof(aux));
        if (aux.tp_status & TP_STATUS_VLAN_VALID) a.vlan = aux.tp_vlan_tci & 0x0fff;
      }
      if (net::ParseFrame(a.bytes, a.frame) != net::ParseError::kOk) continue;
      if (a.frame.eth.vlan_count == 1) a.vlan = a.frame.eth.vlans[0].vlan_id();
      // qs0's MAC is the kernel's too: its IPv6 on qs0 (router solicitations, MLD reports)
      // leaves from it. This stack has no IPv6 address, so what it sends is never IPv6.
      if (a.frame.eth.src != mac_ || a.frame.l3 == net::L3::kIpv6) continue;
      return a;
    }
    return std::nullopt;
  }

  static inline const net::MacAddress kPeerMac = *net::MacAddress::Parse("02:00:00:07:00:01");
  int raw_ = -1;
  int ifindex_ = 0;
  net::MacAddress mac_;
};

TEST_F(AfXdpVlanTest, PeerOnTheVlanIsAnsweredOnItAndUntaggedFramesAreNotTheStacks) {
  SocketId s = stack().Open(net::Family::kV4).value();
  ASSERT_TRUE(stack().Bind(s, Ep("0.0.0.0:4000")).ok());

  // ARP on the VLAN: answered on it.
  net::ArpPacket who;
  who.sender_mac = kPeerMac;
  who.sender_ip = *net::IpAddress::Parse(kVlanPeerV4);
  who.target_ip = *net::IpAddress::Parse(kVlanStackV4);
  std::vector<uint8_t> buf(128);
  std::optional<size_t> n = net::BuildArp(Link(kVlan, net::MacAddress::Broadcast()), who, buf);
  SendRaw({buf.data(), n.value()});
  std::optional<Answer> a = NextAnswer();
  ASSERT_TRUE(a.has_value()) << "no ARP reply";
  EXPECT_EQ(a->frame.l3, net::L3::kArp);
  EXPECT_EQ(a->vlan, kVlan);

  // UDP both ways on the VLAN.
  SendUdp(kVlan, "tagged");
  std::optional<stack::ReceivedDatagram> d = ReceiveWithin(s, absl::Seconds(3));
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->payload, "tagged");
  ASSERT_EQ(stack().Send(s, Bytes("back"), d->source), absl::OkStatus());
  a = NextAnswer();
  ASSERT_TRUE(a.has_value()) << "no datagram back";
  EXPECT_EQ(a->frame.l4, net::L4::kUdp);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(a->frame.payload(a->bytes).data()),
                        a->frame.payload(a->bytes).size()),
            "back");
  EXPECT_EQ(a->vlan, kVlan);

  // Untagged, or on VLAN 200, the address is not the stack's: the XDP program passes the frames
  // to the kernel, and the socket gets nothing.
  const uint64_t not_owned = afxdp_->xdp_program().Counters().value().pass_not_owned;
  SendUdp(std::nullopt, "untagged");
  SendUdp(200, "vlan 200");
  EXPECT_FALSE(ReceiveWithin(s, absl::Milliseconds(300)).has_value());
  EXPECT_EQ(afxdp_->xdp_program().Counters().value().pass_not_owned, not_owned + 2);
}

// veth strips VLAN tags on receive by default, as most NICs do, which would hide them from XDP.
TEST_F(AfXdpVlanTest, TagStrippingIsOffWhileTheStackRunsAndBackOnAfter) {
  EXPECT_EQ(link::GetNicFeature("qs0", link::kRxVlanStripping).value(), false);
  stack().Stop();
  EXPECT_EQ(stack().CheckFrameAccounting(), absl::OkStatus());
  afxdp_.reset();
  EXPECT_EQ(link::GetNicFeature("qs0", link::kRxVlanStripping).value(), true);
}

// Untagged too: a tag the NIC stripped would make a frame for another VLAN look like the stack's.
TEST_F(AfXdpTest, AStackOnNoVlanKeepsTagsVisibleToo) {
  EXPECT_EQ(link::GetNicFeature("qs0", link::kRxVlanStripping).value(), false);
  EXPECT_EQ(link::GetNicFeature("qs0", link::kRxStagStripping).value(), false);
  stack().Stop();
  EXPECT_EQ(stack().CheckFrameAccounting(), absl::OkStatus());
  afxdp_.reset();
  EXPECT_EQ(link::GetNicFeature("qs0", link::kRxVlanStripping).value(), true);
  EXPECT_EQ(link::GetNicFeature("qs0", link::kRxStagStripping).value(), true);
}

TEST_F(AfXdpTest, FiveHundredConnectedSocketsEachGetTheirOwnDatagrams) {
  constexpr int kFlows = 500;
  std::vector<SocketId> sockets;
  std::vector<int> peers;
  for (int i = 0; i < kFlows; ++i) {
    const uint16_t port = static_cast<uint16_t>(20000 + i);
    SocketId s = stack().Open(net::Family::kV4, {.reuse_port = true}).value();
    ASSERT_TRUE(stack().Bind(s, Ep(std::string(kStackV4) + ":4000")).ok());
    ASSERT_TRUE(stack().Connect(s, Endpoint{*net::IpAddress::Parse(kPeerV4), port}).ok());
    sockets.push_back(s);
    const int fd = PeerUdp(kPeerV4, port);
    SockAddr to(kStackV4, 4000);
    ASSERT_EQ(connect(fd, to.get(), to.len), 0);
    peers.push_back(fd);
  }
  // The peer's kernel resolves us first: its queue for unresolved neighbours is short.
  net_->PeerShell(std::string("ping -c 1 -W 2 ") + kStackV4 + " >/dev/null");
  // In chunks far smaller than the veth's XDP ring (256 frames) and our RX ring, each sent
  // once the stack has delivered the last: a loaded machine that leaves the veth's NAPI thread
  // or our poll thread waiting loses nothing before the stack, and a loss is the stack's.
  constexpr int kRounds = 3;
  constexpr int kChunk = 50;
  const uint64_t delivered_before = stack().Counters().udp_delivered;
  uint64_t sent = 0;
  for (int round = 0; round < kRounds; ++round) {
    for (int first = 0; first < kFlows; first += kChunk) {
      for (int i = first; i < std::min(first + kChunk, kFlows); ++i) {
        const std::string msg = std::to_string(i);
        ASSERT_EQ(send(peers[i], msg.data(), msg.size(), 0), static_cast<ssize_t>(msg.size()));
        ++sent;
      }
      const absl::Time deadline = absl::Now() + absl::Seconds(30);
      while (stack().Counters().udp_delivered - delivered_before < sent &&
             absl::Now() < deadline) {
        absl::SleepFor(absl::Milliseconds(1));
      }
    }
  }
  for (int i = 0; i < kFlows; ++i) {
    for (int round = 0; round < kRounds; ++round) {
      std::optional<stack::ReceivedDatagram> d = ReceiveWithin(sockets[i], absl::Seconds(3));
      ASSERT_TRUE(d.has_value()) << "socket " << i << " round " << round;
      EXPECT_EQ(d->payload, std::to_string(i)) << "socket " << i << " got another flow's datagram";
    }
  }
  const demux::TableStats t = stack().TableStats();
  EXPECT_GE(t.hash4_hits, uint64_t{kFlows} * kRounds);
  EXPECT_EQ(stack().Counters().udp_no_socket, 0u);
}

TEST_F(AfXdpTest, SocketRehashedMidTrafficMissesNothing) {
  SocketId s = stack().Open(net::Family::kV4).value();
  ASSERT_TRUE(stack().Bind(s, Ep("0.0.0.0:4000")).ok());
  const int peer = PeerUdp(kPeerV4, 5002);
  SockAddr to(kStackV4, 4000);
  ASSERT_EQ(connect(peer, to.get(), to.len), 0);
  constexpr int kCount = 3000;
  std::atomic<int> received{0};
  std::atomic<int> last{-1};
  std::atomic<bool> in_order{true};
  std::atomic<bool> warmed{false};
  ASSERT_EQ(stack().SetReceiveCallback(s, [&](const Endpoint&, std::span<const uint8_t> p) {
    const std::string text(p.begin(), p.end());
    if (text == "warm") {
      warmed = true;
      return;
    }
    const int n = std::stoi(text);
    if (n <= last.load()) in_order = false;
    last = n;
    received.fetch_add(1);
  }), absl::OkStatus());
  // The peer's ARP entry first: while it resolves, the kernel holds the first datagrams in the
  // neighbour's queue and may send later ones ahead of them (a reordering not ours to test).
  ASSERT_EQ(send(peer, "warm", 4, 0), 4);
  const absl::Time warm_deadline = absl::Now() + absl::Seconds(5);
  while (!warmed.load() && absl::Now() < warm_deadline) absl::SleepFor(absl::Milliseconds(1));
  ASSERT_TRUE(warmed.load());
  const uint64_t dropped_before = DroppedBeforeTheStack();
  std::thread sender([&] {
    for (int i = 0; i < kCount; ++i) {
      const std::string msg = std::to_string(i);
      while (send(peer, msg.data(), msg.size(), 0) < 0) absl::SleepFor(absl::Microseconds(50));
      if (i % 64 == 0) absl::SleepFor(absl::Microseconds(200));
    }
  });
  // Mid-stream: the wildcard-bound socket takes the specific address (hash2 slot changes).
  while (received.load() < kCount / 3) absl::SleepFor(absl::Microseconds(100));
  ASSERT_TRUE(stack().Rehash(s, *net::IpAddress::Parse(kStackV4), std::nullopt).ok());
  sender.join();
  const absl::Time deadline = absl::Now() + absl::Seconds(5);
  while (received.load() < kCount && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(1));
  // On a loaded machine the veth or the AF_XDP rings may drop some (counted there): not the
  // stack's loss. The stack's own would be a datagram that found no socket, or one uncounted.
  const uint64_t lost = static_cast<uint64_t>(kCount - received.load());
  const uint64_t dropped = DroppedBeforeTheStack() - dropped_before;
  EXPECT_LE(lost, dropped) << lost << " datagrams lost, " << dropped
                           << " dropped before the stack (veth, AF_XDP rings)";
  EXPECT_TRUE(in_order.load());
  EXPECT_EQ(stack().Counters().udp_no_socket, 0u);
  EXPECT_EQ(stack().Get(s).value().info.local, Ep(std::string(kStackV4) + ":4000"));
}

TEST_F(AfXdpTest, ClosedPortIsRefusedToAConnectedKernelSocket) {
  const int peer = PeerUdp(kPeerV4, 5003);
  SockAddr to(kStackV4, 9999);
  ASSERT_EQ(connect(peer, to.get(), to.len), 0);
  ASSERT_EQ(send(peer, "anyone?", 7, 0), 7);
  char buf[16];
  errno = 0;
  EXPECT_LT(recv(peer, buf, sizeof(buf), 0), 0);
  EXPECT_EQ(errno, ECONNREFUSED) << std::strerror(errno);
  EXPECT_EQ(stack().Counters().icmp_errors_sent, 1u);
  // The same over IPv6.
  const int peer6 = PeerUdp(kPeerV6, 5003);
  SockAddr to6(kStackV6, 9999);
  ASSERT_EQ(connect(peer6, to6.get(), to6.len), 0);
  ASSERT_EQ(send(peer6, "anyone?", 7, 0), 7);
  errno = 0;
  EXPECT_LT(recv(peer6, buf, sizeof(buf), 0), 0);
  EXPECT_EQ(errno, ECONNREFUSED) << std::strerror(errno);
}

// The other way round: the kernel answers quadsock's datagram to a closed port with port
// unreachable, and quadsock's connected socket hears of it on its next send, as a kernel one
// would (send() fails with ECONNREFUSED).
TEST_F(AfXdpTest, ConnectedSocketHearsOfTheKernelsClosedPort) {
  for (const char* peer : {kPeerV4, kPeerV6}) {
    SCOPED_TRACE(peer);
    const Endpoint closed{*net::IpAddress::Parse(peer), 5998};
    SocketId s = stack().Open(closed.address.family()).value();
    ASSERT_TRUE(stack().Connect(s, closed).ok());
    ASSERT_EQ(stack().Send(s, Bytes("anyone?")), absl::OkStatus());
    const absl::Time deadline = absl::Now() + absl::Seconds(5);
    while (!stack().Get(s).value().pending_error.has_value() && absl::Now() < deadline) {
      absl::SleepFor(absl::Milliseconds(1));
    }
    absl::Status refused = stack().Send(s, Bytes("still there?"));
    EXPECT_EQ(refused.code(), absl::StatusCode::kAborted) << refused;
    EXPECT_TRUE(absl::StrContains(refused.message(), "ECONNREFUSED")) << refused;
    EXPECT_EQ(stack().Get(s).value().counters.icmp_errors, 1u);
    EXPECT_EQ(stack().Send(s, Bytes("once more")), absl::OkStatus());  // reported once
  }
  EXPECT_EQ(stack().Counters().icmp_errors_unmatched, 0u);
}

TEST_F(AfXdpTest, KernelTcpOnTheSameInterfaceKeepsWorking) {
  const int listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(listener, 0);
  fds_.push_back(listener);
  SockAddr at(kKernelV4, 7000);
  ASSERT_EQ(bind(listener, at.get(), at.len), 0) << std::strerror(errno);
  ASSERT_EQ(listen(listener, 1), 0);
  const int client = net_->PeerSocket(AF_INET, SOCK_STREAM);
  fds_.push_back(client);
  ASSERT_EQ(connect(client, at.get(), at.len), 0) << std::strerror(errno);
  const int conn = accept(listener, nullptr, nullptr);
  ASSERT_GE(conn, 0);
  fds_.push_back(conn);
  ASSERT_EQ(send(client, "tcp ok", 6, 0), 6);
  char buf[16] = {};
  ASSERT_EQ(recv(conn, buf, sizeof(buf), 0), 6);
  EXPECT_STREQ(buf, "tcp ok");
  const xdp::XdpProgramCounters c = afxdp_->xdp_program().Counters().value();
  EXPECT_GT(c.pass_not_owned, 0u);
}

// Two RX queues: the second AF_XDP socket shares the UMEM (xsk_socket__create_shared) with
// fill and completion rings of its own, and each queue has its own poll thread.
TEST(AfXdpQueuesTest, TwoQueuesShareOneUmem) {
  testing::TestVeth veth("qs4", "qs5", /*queues=*/2);
  ASSERT_EQ(Shell("ip addr add 10.7.1.1/24 dev qs5 && ethtool -K qs5 tx off >/dev/null"), 0);
  {
    stack::AfXdpOptions o;
    o.interface = "qs4";
    o.queues = 2;
    o.umem_frames = 4096;
    o.ring_size = 512;
    o.stack.addresses = {*net::IpPrefix::Parse("10.7.1.2/24")};
    o.log = [](absl::string_view m) { std::printf("quadsock: %.*s\n", int(m.size()), m.data()); };
    absl::StatusOr<std::unique_ptr<stack::AfXdpStack>> s = stack::AfXdpStack::Create(o);
    ASSERT_TRUE(s.ok()) << s.status();
    stack::Stack& st = (*s)->stack();
    ASSERT_EQ(st.Links().size(), 2u);
    EXPECT_EQ(st.Links()[1].queue, 1u);
    // As the kernel bound them (veth has no zero-copy), the queue sharing the UMEM too.
    EXPECT_EQ(st.Links()[0].mode, "copy");
    EXPECT_EQ(st.Links()[1].mode, "copy");
    EXPECT_EQ((*s)->bind_mode(), "copy");
    ASSERT_EQ(st.Start(), absl::OkStatus());
    // Both ends are in this namespace: the kernel side (qs5) pings quadsock's address.
    EXPECT_EQ(Shell("ping -c 3 -i 0.2 -W 2 -I qs5 10.7.1.2 >/dev/null"), 0);
    st.Stop();
    EXPECT_GE(st.Counters().icmp_echo_replies, 3u);
    EXPECT_EQ(st.CheckFrameAccounting(), absl::OkStatus());
  }
}

// A queue that fails to open (another socket holds it) leaves the port's other queues as they
// were: queue 0, open, is still refused a second time.
TEST(AfXdpQueuesTest, AQueueThatFailsToOpenLeavesTheOpenOnesHeld) {
  testing::TestVeth veth("qs6", "qs7", /*queues=*/2);
  {
    const link::XskPort::Options o{.interface = "qs6", .frames = 2048, .ring_size = 512,
                                   .queues = 2, .bind_mode = link::XskBindMode::kCopy};
    std::unique_ptr<link::XskPort> port = link::XskPort::Create(o).value();
    std::unique_ptr<link::XskPort> other = link::XskPort::Create(o).value();
    absl::StatusOr<std::unique_ptr<link::XskLink>> q0 = port->OpenQueue(0);
    ASSERT_TRUE(q0.ok()) << q0.status();
    absl::StatusOr<std::unique_ptr<link::XskLink>> held = other->OpenQueue(1);
    ASSERT_TRUE(held.ok()) << held.status();
    EXPECT_FALSE(port->OpenQueue(1).ok());  // the kernel: busy
    EXPECT_EQ(port->OpenQueue(0).status().code(), absl::StatusCode::kAlreadyExists);
  }
}

// Without the fixture's stack: a process holds one and is killed with SIGKILL.
TEST(AfXdpKillTest, SigkillLeavesNoProgramAndTheKernelAnswers) {
  PeerNetwork net("qs2", "qs3");
  net.PeerShell(std::string("ip addr add ") + kPeerV4 + "/24 dev qs3");
  ASSERT_EQ(Shell(std::string("ip addr add ") + kKernelV4 + "/24 dev qs2"), 0);
  const std::string holder = testing::Runfile("tests/afxdp_holder");
  int out[2];
  ASSERT_EQ(pipe2(out, O_CLOEXEC), 0);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    dup2(out[1], STDOUT_FILENO);
    execl(holder.c_str(), holder.c_str(), "qs2", "10.7.0.2/24", static_cast<char*>(nullptr));
    _exit(127);
  }
  close(out[1]);
  FILE* child = fdopen(out[0], "r");
  char line[64] = {};
  ASSERT_NE(fgets(line, sizeof(line), child), nullptr) << "the holder did not start";
  ASSERT_STREQ(line, "ready\n");
  const int ifindex = static_cast<int>(if_nametoindex("qs2"));
  bpf_xdp_query_opts q{};
  q.sz = sizeof(q);
  ASSERT_EQ(bpf_xdp_query(ifindex, 0, &q), 0);
  EXPECT_NE(q.prog_id, 0u) << "no XDP program while the holder runs";
  EXPECT_EQ(net.PeerShell("ping -c 1 -W 2 10.7.0.2 >/dev/null"), 0);  // the stack answers
  ASSERT_EQ(kill(pid, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  fclose(child);
  // The bpf_link dies with the process; give the kernel a moment to release it.
  for (int i = 0; i < 50; ++i) {
    q = bpf_xdp_query_opts{};
    q.sz = sizeof(q);
    ASSERT_EQ(bpf_xdp_query(ifindex, 0, &q), 0);
    if (q.prog_id == 0) break;
    absl::SleepFor(absl::Milliseconds(100));
  }
  EXPECT_EQ(q.prog_id, 0u) << "an XDP program outlived the process";
  EXPECT_EQ(net.PeerShell(std::string("ping -c 1 -W 2 ") + kKernelV4 + " >/dev/null"), 0);
  // And the stack's address is nobody's now.
  EXPECT_NE(net.PeerShell("ping -c 1 -W 1 10.7.0.2 >/dev/null 2>&1", false), 0);
}


// An interface whose MTU a UMEM frame cannot hold (a jumbo 9,000 with 4,096-byte frames): the
// stack refuses it, saying what to change, and leaves the interface as it found it.
TEST(AfXdpMtuTest, AnMtuOverTheFramesIsRefusedSayingWhy) {
  PeerNetwork net("qs4", "qs5");
  ASSERT_EQ(Shell("ip link set qs4 mtu 9000"), 0);
  stack::AfXdpOptions o;
  o.interface = "qs4";
  o.stack.addresses = {*net::IpPrefix::Parse("10.7.0.2/24")};
  o.log = [](absl::string_view) {};
  absl::StatusOr<std::unique_ptr<stack::AfXdpStack>> s = stack::AfXdpStack::Create(o);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(s.status().message(), "MTU of 9000 does not fit a 4096-byte"))
      << s.status();
  EXPECT_TRUE(absl::StrContains(s.status().message(), "ip link set qs4 mtu 3822")) << s.status();
  bpf_xdp_query_opts q{};
  q.sz = sizeof(q);
  ASSERT_EQ(bpf_xdp_query(static_cast<int>(if_nametoindex("qs4")), 0, &q), 0);
  EXPECT_EQ(q.prog_id, 0u);
  // At the largest MTU the frames hold, it runs.
  ASSERT_EQ(Shell("ip link set qs4 mtu 3822"), 0);
  s = stack::AfXdpStack::Create(o);
  ASSERT_TRUE(s.ok()) << s.status();
}

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
    int fd = -1;
    std::thread t([&] {
      const int ns = open(("/run/netns/" + far_).c_str(), O_RDONLY | O_CLOEXEC);
      if (ns < 0 || setns(ns, CLONE_NEWNET) != 0) return;
      close(ns);
      fd = socket(std::strchr(ip, ':') ? AF_INET6 : AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    });
    t.join();
    EXPECT_GE(fd, 0);
    timeval tv{3, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    SockAddr a(ip, port);
    EXPECT_EQ(bind(fd, a.get(), a.len), 0) << std::strerror(errno);
    fds_.push_back(fd);
    return fd;
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

}  // namespace
}  // namespace quadsock
