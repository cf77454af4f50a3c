// quadsock on a real interface, against the kernel's own UDP sockets, ping and TCP (the
// fixture: afxdp_fixture.h). Needs root.
#include "tests/afxdp_fixture.h"

namespace quadsock {
namespace {

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
}  // namespace
}  // namespace quadsock
