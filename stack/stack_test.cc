// The stack over MemoryLink: two stacks on one wire, or a stack and a test holding the far end.
// No privileges needed; the same code runs over AF_XDP in tests/ (root).
#include "stack/stack.h"

#include <gtest/gtest.h>

#include <thread>

#include <algorithm>
#include <cstring>
#include <string>

#include "absl/strings/match.h"
#include "stack/bounded_queue.h"
#include "stack/link/memory_link.h"
#include "stack/net/frame.h"
#include "stack/net/frame_builder.h"
#include "stack/testing/stack_fixtures.h"

namespace quadsock::stack {
namespace {

using net::Endpoint;
using net::IpAddress;
using testing_fixtures::Bytes;
using testing_fixtures::Ep;
using testing_fixtures::FakeClock;
using testing_fixtures::Ip;
using testing_fixtures::kMacA;
using testing_fixtures::kMacB;
using testing_fixtures::kMacPeer;
using testing_fixtures::Options;
using testing_fixtures::StackWireTest;
using testing_fixtures::Str;
using testing_fixtures::TwoStacksTest;

// The bytes of a receive queue's cells, `depth` deep: what an Open reserves of the budget.
size_t QueueCells(size_t depth) { return BoundedQueue<ReceivedDatagram*>::CellBytes(depth); }

TEST_F(TwoStacksTest, UdpOverIpv4ResolvesWithArpAndDelivers) {
  SocketId server = b_->Open(net::Family::kV4).value();
  ASSERT_TRUE(b_->Bind(server, Ep("0.0.0.0:4000")).ok());
  SocketId client = a_->Open(net::Family::kV4).value();
  ASSERT_EQ(a_->Send(client, Bytes("hello"), Ep("10.1.0.2:4000")), absl::OkStatus());
  Pump();
  std::optional<ReceivedDatagram> d = b_->Receive(server).value();
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->payload, "hello");
  EXPECT_EQ(d->source.address, Ip("10.1.0.1"));
  EXPECT_NE(d->source.port, 0);  // the client was bound to an ephemeral port
  EXPECT_EQ(d->destination, Ep("10.1.0.2:4000"));
  EXPECT_EQ(d->sequence, 1u);
  EXPECT_EQ(a_->Counters().neighbor_resolved, 1u);
  EXPECT_EQ(b_->Counters().arp_replies, 1u);
  // It waited for the neighbour, then went out: sent, once.
  const SocketCounters sent = a_->Get(client).value().counters;
  EXPECT_EQ(sent.tx_datagrams, 1u);
  EXPECT_EQ(sent.tx_bytes, 5u);
  EXPECT_EQ(sent.tx_dropped, 0u);

  // And back, to the source it came from: B already knows A from the ARP request.
  ASSERT_EQ(b_->Send(server, Bytes("world"), d->source), absl::OkStatus());
  Pump();
  std::optional<ReceivedDatagram> back = a_->Receive(client).value();
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->payload, "world");
  EXPECT_EQ(b_->Counters().neighbor_probes, 0u);
}

TEST_F(TwoStacksTest, UdpOverIpv6ResolvesWithNdp) {
  SocketId server = b_->Open(net::Family::kV6).value();
  ASSERT_TRUE(b_->Bind(server, Ep("[::]:4000")).ok());
  SocketId client = a_->Open(net::Family::kV6).value();
  ASSERT_TRUE(a_->Connect(client, Ep("[fd00:1::2]:4000")).ok());
  ASSERT_EQ(a_->Send(client, Bytes("v6")), absl::OkStatus());
  Pump();
  std::optional<ReceivedDatagram> d = b_->Receive(server).value();
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->payload, "v6");
  EXPECT_EQ(d->source.address, Ip("fd00:1::1"));
  EXPECT_EQ(b_->Counters().ndp_advertisements, 1u);
}

TEST_F(TwoStacksTest, DualStackSocketReceivesIpv4AsMapped) {
  SocketId server = b_->Open(net::Family::kV6).value();
  ASSERT_TRUE(b_->Bind(server, Ep("[::]:4000")).ok());
  SocketId client = a_->Open(net::Family::kV4).value();
  ASSERT_EQ(a_->Send(client, Bytes("mapped"), Ep("10.1.0.2:4000")), absl::OkStatus());
  Pump();
  std::optional<ReceivedDatagram> d = b_->Receive(server).value();
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->payload, "mapped");
  // As in Linux, the IPv6 socket sees the IPv4 peer and address v4-mapped.
  EXPECT_EQ(d->source.address, Ip("::ffff:10.1.0.1"));
  EXPECT_EQ(d->destination, Ep("[::ffff:10.1.0.2]:4000"));
  // It answers through that address: IPv4 on the wire.
  ASSERT_EQ(b_->Send(server, Bytes("reply"), d->source), absl::OkStatus());
  // A plain IPv4 destination works too on a dual-stack socket (udpv6_sendmsg allows it).
  ASSERT_EQ(b_->Send(server, Bytes("plain"), Endpoint{Ip("10.1.0.1"), d->source.port}),
            absl::OkStatus());
  Pump();
  std::optional<ReceivedDatagram> back = a_->Receive(client).value();
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->payload, "reply");
  EXPECT_EQ(back->source, Ep("10.1.0.2:4000"));
  EXPECT_EQ(a_->Receive(client).value()->payload, "plain");
}

TEST_F(TwoStacksTest, ConnectedSocketsEachGetTheirOwnFlow) {
  // Known neighbours: otherwise the first burst waits for ARP in a queue of 16 (as the kernel's
  // unres_qlen) and most of it is dropped.
  ASSERT_EQ(a_->SetNeighbor(Ip("10.1.0.2"), kMacB), absl::OkStatus());
  ASSERT_EQ(b_->SetNeighbor(Ip("10.1.0.1"), kMacA), absl::OkStatus());
  constexpr int kFlows = 50;
  std::vector<SocketId> servers, clients;
  for (int i = 0; i < kFlows; ++i) {
    SocketId c = a_->Open(net::Family::kV4).value();
    ASSERT_TRUE(a_->Bind(c, Endpoint{Ip("10.1.0.1"), static_cast<uint16_t>(5000 + i)}).ok());
    SocketId s = b_->Open(net::Family::kV4, {.reuse_port = true}).value();
    ASSERT_TRUE(b_->Bind(s, Ep("10.1.0.2:4000")).ok());
    ASSERT_TRUE(b_->Connect(s, Endpoint{Ip("10.1.0.1"), static_cast<uint16_t>(5000 + i)}).ok());
    clients.push_back(c);
    servers.push_back(s);
  }
  for (int round = 0; round < 3; ++round) {
    for (int i = 0; i < kFlows; ++i) {
      ASSERT_EQ(a_->Send(clients[i], Bytes("flow " + std::to_string(i)), Ep("10.1.0.2:4000")),
                absl::OkStatus());
    }
    Pump();
  }
  for (int i = 0; i < kFlows; ++i) {
    for (int round = 0; round < 3; ++round) {
      std::optional<ReceivedDatagram> d = b_->Receive(servers[i]).value();
      ASSERT_TRUE(d.has_value()) << "flow " << i << " round " << round;
      EXPECT_EQ(d->payload, "flow " + std::to_string(i));
    }
    EXPECT_FALSE(b_->Receive(servers[i]).value().has_value());
  }
  EXPECT_GE(b_->TableStats().hash4_hits, 3u * kFlows);
}

TEST_F(TwoStacksTest, RehashedSocketReceivesOnItsNewPort) {
  SocketId server = b_->Open(net::Family::kV4).value();
  ASSERT_TRUE(b_->Bind(server, Ep("10.1.0.2:4000")).ok());
  SocketId client = a_->Open(net::Family::kV4).value();
  ASSERT_EQ(a_->Send(client, Bytes("before"), Ep("10.1.0.2:4000")), absl::OkStatus());
  Pump();
  ASSERT_TRUE(b_->Rehash(server, std::nullopt, 4001).ok());
  ASSERT_EQ(a_->Send(client, Bytes("old port"), Ep("10.1.0.2:4000")), absl::OkStatus());
  ASSERT_EQ(a_->Send(client, Bytes("after"), Ep("10.1.0.2:4001")), absl::OkStatus());
  Pump();
  EXPECT_EQ(b_->Receive(server).value()->payload, "before");
  EXPECT_EQ(b_->Receive(server).value()->payload, "after");
  EXPECT_FALSE(b_->Receive(server).value().has_value());
  EXPECT_EQ(b_->Counters().udp_no_socket, 1u);
}

TEST_F(TwoStacksTest, UnansweredNeighbourDropsAndCounts) {
  SocketId s = a_->Open(net::Family::kV4).value();
  for (int i = 0; i < 20; ++i) {
    ASSERT_EQ(a_->Send(s, Bytes("lost"), Ep("10.1.0.77:9")), absl::OkStatus());
  }
  for (int i = 0; i < 10; ++i) {
    a_->PollOnce();
    clock_.now += absl::Milliseconds(500);
  }
  b_->PollOnce();  // B sees the probes and ignores them: 10.1.0.77 is not B's
  const StackCounters c = a_->Counters();
  EXPECT_EQ(c.neighbor_failed, 1u);
  EXPECT_EQ(c.neighbor_probes, 3u);
  EXPECT_EQ(c.neighbor_dropped, 20u);  // 16 waited in vain, 4 did not fit

  // And the socket says so: nothing sent, all 20 dropped.
  const SocketCounters sc = a_->Get(s).value().counters;
  EXPECT_EQ(sc.tx_datagrams, 0u);
  EXPECT_EQ(sc.tx_dropped, 20u);
}

// A link whose TX ring takes at most `room` frames a flush.
class NarrowTxLink : public link::Link {
 public:
  NarrowTxLink(std::unique_ptr<link::Link> inner, size_t room)
      : inner_(std::move(inner)), room_(room) {}
  const link::LinkInfo& info() const override { return inner_->info(); }
  size_t Receive(std::span<link::FrameBuffer> out) override { return inner_->Receive(out); }
  void Release(std::span<const link::FrameBuffer> f) override { inner_->Release(f); }
  std::optional<link::FrameBuffer> AllocateTx(uint32_t length) override {
    return inner_->AllocateTx(length);
  }
  size_t Transmit(std::span<const link::FrameBuffer> f) override {
    return inner_->Transmit(f.first(std::min(f.size(), room_)));
  }
  void Poll() override { inner_->Poll(); }
  int wait_fd() const override { return inner_->wait_fd(); }
  absl::Status CheckFrameAccounting() const override { return inner_->CheckFrameAccounting(); }
  link::LinkCounters counters() const override { return inner_->counters(); }

 private:
  std::unique_ptr<link::Link> inner_;
  const size_t room_;
};

TEST(StackOptionsTest, VlanIdsPastTheRangeAreRefused) {
  FakeClock clock;
  for (uint16_t vlan : {4095, 4096, 65535}) {
    link::MemoryLink::Pair p = link::MemoryLink::CreateWithTestEnd({.name = "s", .mac = kMacB});
    std::vector<std::unique_ptr<link::Link>> links;
    links.push_back(std::move(p.link));
    StackOptions o = Options(clock, "10.1.0.2/24", "fd00:1::2/64");
    o.vlan = vlan;
    absl::StatusOr<std::unique_ptr<Stack>> st = Stack::Create(std::move(o), std::move(links));
    EXPECT_EQ(st.status().code(), absl::StatusCode::kInvalidArgument) << vlan;
    EXPECT_TRUE(absl::StrContains(st.status().message(), "1-4094")) << st.status();
  }
}

// Datagrams count as sent when the TX ring takes them; those it has no room for, as dropped.
TEST(StackSendCountersTest, SentMeansTheRingTookIt) {
  FakeClock clock;
  link::MemoryLink::Pair p = link::MemoryLink::CreateWithTestEnd({.name = "s", .mac = kMacB});
  std::vector<std::unique_ptr<link::Link>> links;
  links.push_back(std::make_unique<NarrowTxLink>(std::move(p.link), 3));
  std::unique_ptr<Stack> st =
      Stack::Create(Options(clock, "10.1.0.2/24", "fd00:1::2/64"), std::move(links)).value();
  ASSERT_EQ(st->SetNeighbor(Ip("10.1.0.1"), kMacPeer), absl::OkStatus());
  SocketId s = st->Open(net::Family::kV4).value();
  for (int i = 0; i < 10; ++i) {
    ASSERT_EQ(st->Send(s, Bytes("datagram"), Ep("10.1.0.1:9")), absl::OkStatus());
  }
  st->PollOnce();  // one turn, one flush of all ten
  EXPECT_EQ(p.test_end->TakeSent().size(), 3u);
  const SocketCounters c = st->Get(s).value().counters;
  EXPECT_EQ(c.tx_datagrams, 3u);
  EXPECT_EQ(c.tx_bytes, 3u * 8);
  EXPECT_EQ(c.tx_dropped, 7u);
  EXPECT_EQ(st->CheckFrameAccounting(), absl::OkStatus());
}

TEST_F(TwoStacksTest, SendErrorsAreSpecific) {
  SocketId v4 = a_->Open(net::Family::kV4).value();
  EXPECT_EQ(a_->Send(v4, Bytes("x")).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(a_->Send(v4, Bytes("x"), Ep("[fd00:1::2]:1")).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(a_->Send(v4, Bytes("x"), Ep("10.1.0.2:0")).code(), absl::StatusCode::kInvalidArgument);
  // Over the largest UDP datagram (bigger than the MTU goes in fragments: fragmentation_test).
  EXPECT_EQ(a_->Send(v4, Bytes(std::string(65508, 'x')), Ep("10.1.0.2:1")).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(a_->Send(v4, Bytes(std::string(1472, 'x')), Ep("10.1.0.2:1")), absl::OkStatus());
  EXPECT_EQ(a_->Send(12345, Bytes("x"), Ep("10.1.0.2:1")).code(), absl::StatusCode::kNotFound);
  SocketId v6only = a_->Open(net::Family::kV6, {.v6only = true}).value();
  EXPECT_EQ(a_->Send(v6only, Bytes("x"), Ep("[::ffff:10.1.0.2]:1")).code(),
            absl::StatusCode::kInvalidArgument);
  // A connected socket sends to its peer only (an IPv4 peer in either form).
  SocketId connected = a_->Open(net::Family::kV6).value();
  ASSERT_TRUE(a_->Connect(connected, Ep("[::ffff:10.1.0.2]:7")).ok());
  EXPECT_EQ(a_->Send(connected, Bytes("x"), Ep("[::ffff:10.1.0.2]:8")).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(a_->Send(connected, Bytes("x"), Ep("10.1.0.2:7")), absl::OkStatus());
  EXPECT_EQ(a_->Bind(v4, Ep("10.9.9.9:1")).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(a_->Connect(v4, Ep("10.1.0.2:0")).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(a_->Close(v4), absl::OkStatus());
  EXPECT_EQ(a_->Close(v4).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(a_->Receive(v4).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(a_->Open(net::Family::kV4, {.receive_queue_depth = 1 << 30}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// Destinations no unicast datagram can go to are refused, not sent to a gateway or asked for
// with ARP: the unspecified address in any form, multicast, broadcast (limited, or a connected
// network's), and from a socket with an address of one IP version, the other.
TEST_F(TwoStacksTest, PeersThatAreNoUnicastHostAreRefused) {
  SocketId v4 = a_->Open(net::Family::kV4).value();
  SocketId dual = a_->Open(net::Family::kV6).value();
  SocketId bound6 = a_->Open(net::Family::kV6).value();
  ASSERT_TRUE(a_->Bind(bound6, Ep("[fd00:1::1]:4000")).ok());
  const struct {
    SocketId socket;
    const char* peer;
    const char* why;
  } cases[] = {
      {dual, "[::ffff:0.0.0.0]:53", "unspecified"},
      {v4, "224.0.0.251:5353", "multicast"},
      {dual, "[ff02::1]:9", "multicast"},
      {v4, "255.255.255.255:9", "broadcast"},
      {v4, "10.1.0.255:9", "broadcast address of 10.1.0.1/24"},
      {v4, "10.1.0.0:9", "network address of 10.1.0.1/24"},
      {dual, "[::ffff:10.1.0.0]:9", "network address of 10.1.0.1/24"},
      {bound6, "10.1.0.7:9", "IP version"},
      {bound6, "[::ffff:10.1.0.7]:9", "IP version"},
      {v4, "127.0.0.1:9", "loopback"},
      {dual, "[::1]:9", "loopback"},
      {v4, "10.1.0.1:9", "own addresses"},
      {dual, "[::ffff:10.1.0.1]:9", "own addresses"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.peer);
    absl::Status sent = a_->Send(c.socket, Bytes("x"), Ep(c.peer));
    EXPECT_EQ(sent.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_TRUE(absl::StrContains(sent.message(), c.why)) << sent;
    absl::Status connected = a_->Connect(c.socket, Ep(c.peer)).status();
    EXPECT_EQ(connected.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_TRUE(absl::StrContains(connected.message(), c.why)) << connected;
  }
  // Hosts of the network are fine. Off it, with no gateway, there is no route: as connect()'s
  // ENETUNREACH, never a datagram dropped later.
  EXPECT_EQ(a_->Send(v4, Bytes("x"), Ep("10.1.0.254:9")), absl::OkStatus());
  EXPECT_EQ(a_->Send(dual, Bytes("x"), Ep("10.1.0.7:9")), absl::OkStatus());
  EXPECT_EQ(a_->Send(v4, Bytes("x"), Ep("192.0.2.255:9")).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(a_->Connect(v4, Ep("192.0.2.7:9")).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

// The first callback lives in the socket, a replacement on the heap: each datagram goes to the
// callback set when it arrives, and the socket queues nothing while one is set.
TEST_F(TwoStacksTest, ReplacedReceiveCallbackTakesTheNextDatagrams) {
  SocketId server = b_->Open(net::Family::kV4).value();
  ASSERT_TRUE(b_->Bind(server, Ep("10.1.0.2:4000")).ok());
  SocketId client = a_->Open(net::Family::kV4).value();
  ASSERT_TRUE(a_->Connect(client, Ep("10.1.0.2:4000")).ok());
  std::vector<std::string> first, second;
  for (int round = 0; round < 3; ++round) {
    std::vector<std::string>* into = round == 0 ? &first : &second;
    if (round < 2) {
      ASSERT_EQ(b_->SetReceiveCallback(server, [into](const Endpoint&, std::span<const uint8_t> p) {
        into->push_back(Str(p));
      }), absl::OkStatus());
    }
    ASSERT_EQ(a_->Send(client, Bytes("d" + std::to_string(round))), absl::OkStatus());
    Pump();
  }
  EXPECT_EQ(first, std::vector<std::string>{"d0"});
  EXPECT_EQ(second, (std::vector<std::string>{"d1", "d2"}));
  EXPECT_FALSE(b_->Receive(server).value().has_value());
  EXPECT_EQ(b_->Get(server).value().counters.rx_datagrams, 3u);
}

TEST_F(TwoStacksTest, ThreadsCarryTrafficBothWays) {
  SocketId server = b_->Open(net::Family::kV4).value();
  ASSERT_TRUE(b_->Bind(server, Ep("10.1.0.2:4000")).ok());
  std::atomic<int> received{0};
  ASSERT_EQ(b_->SetReceiveCallback(server, [&](const Endpoint&, std::span<const uint8_t> p) {
    if (Str(p) == "ping") received.fetch_add(1);
  }), absl::OkStatus());
  SocketId client = a_->Open(net::Family::kV4).value();
  ASSERT_TRUE(a_->Connect(client, Ep("10.1.0.2:4000")).ok());
  ASSERT_EQ(a_->SetNeighbor(Ip("10.1.0.2"), kMacB), absl::OkStatus());
  ASSERT_EQ(a_->Start(), absl::OkStatus());
  ASSERT_EQ(b_->Start(), absl::OkStatus());
  // An administrator reads every counter while the poll threads write them (under TSan: no
  // data race).
  std::atomic<bool> done{false};
  std::thread reader([&] {
    while (!done.load()) {
      for (const link::LinkCounters& c : b_->LinkCounters()) EXPECT_GE(c.rx_frames, 0u);
      EXPECT_GE(b_->Counters().udp_delivered, 0u);
    }
  });
  constexpr int kCount = 2000;
  int sent = 0;
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  while (sent < kCount && absl::Now() < deadline) {
    // The memory wire holds 1024 frames: stay well within it.
    if (sent - received.load() > 256) {
      absl::SleepFor(absl::Microseconds(100));
      continue;
    }
    if (a_->Send(client, Bytes("ping")).ok()) ++sent;
  }
  while (received.load() < kCount && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(1));
  done = true;
  reader.join();
  a_->Stop();
  b_->Stop();
  EXPECT_GE(b_->LinkCounters()[0].rx_frames, static_cast<uint64_t>(kCount));
  EXPECT_EQ(sent, kCount);
  EXPECT_EQ(received.load(), kCount);
  EXPECT_EQ(b_->Get(server).value().counters.rx_datagrams, static_cast<uint64_t>(kCount));
}

TEST_F(StackWireTest, ClosedPortGetsPortUnreachableQuotingTheDatagram) {
  std::vector<uint8_t> frame = Udp("10.1.0.1:5000", "10.1.0.2:7", "knock");
  ASSERT_TRUE(wire_->Inject(frame));
  stack_->PollOnce();
  std::vector<std::vector<uint8_t>> keep;
  std::vector<net::ParsedFrame> sent = Sent(keep);
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].l4, net::L4::kIcmpv4);
  EXPECT_EQ(sent[0].icmp.type, net::kIcmpv4DestUnreachable);
  EXPECT_EQ(sent[0].icmp.code, net::kIcmpv4CodePortUnreachable);
  EXPECT_EQ(sent[0].dst, Ip("10.1.0.1"));
  EXPECT_EQ(sent[0].eth.dst, kMacPeer);
  // The quote is the offending IP packet, header first.
  std::span<const uint8_t> quote = sent[0].payload(keep[0]);
  ASSERT_EQ(quote.size(), frame.size() - 14);
  EXPECT_EQ(std::memcmp(quote.data(), frame.data() + 14, quote.size()), 0);
}

TEST_F(StackWireTest, PortUnreachableIsRateLimited) {
  for (int i = 0; i < 120; ++i) ASSERT_TRUE(wire_->Inject(Udp("10.1.0.1:5000", "10.1.0.2:7", "x")));
  while (stack_->PollOnce() > 0) {
  }
  std::vector<std::vector<uint8_t>> keep;
  EXPECT_EQ(Sent(keep).size(), 50u);  // the burst
  EXPECT_EQ(stack_->Counters().icmp_errors_rate_limited, 70u);
  clock_.now += absl::Milliseconds(10);  // 1000/s: ten more tokens
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(wire_->Inject(Udp("10.1.0.1:5000", "10.1.0.2:7", "x")));
  stack_->PollOnce();
  EXPECT_EQ(Sent(keep).size(), 10u);
}

TEST_F(StackWireTest, Ipv6ClosedPortAndEcho) {
  ASSERT_TRUE(wire_->Inject(Udp("[fd00:1::1]:5000", "[fd00:1::2]:7", "knock")));
  std::vector<uint8_t> buf(256);
  net::IcmpHeader echo;
  echo.type = net::kIcmpv6EchoRequest;
  echo.rest = net::IcmpHeader::EchoRest(7, 1);
  std::optional<size_t> n = net::BuildIcmp({kMacPeer, kMacB, std::nullopt}, Ip("fd00:1::1"),
                                           Ip("fd00:1::2"), echo, Bytes("ping6"), buf);
  ASSERT_TRUE(wire_->Inject({buf.data(), n.value()}));
  stack_->PollOnce();
  std::vector<std::vector<uint8_t>> keep;
  std::vector<net::ParsedFrame> sent = Sent(keep);
  ASSERT_EQ(sent.size(), 2u);
  EXPECT_EQ(sent[0].icmp.type, net::kIcmpv6DestUnreachable);
  EXPECT_EQ(sent[0].icmp.code, net::kIcmpv6CodePortUnreachable);
  EXPECT_EQ(sent[1].icmp.type, net::kIcmpv6EchoReply);
  EXPECT_EQ(sent[1].icmp.echo_id(), 7);
  EXPECT_EQ(Str(sent[1].payload(keep[1])), "ping6");
}

TEST_F(StackWireTest, EchoReplyV4AndArpReply) {
  std::vector<uint8_t> buf(256);
  net::ArpPacket who;
  who.sender_mac = kMacPeer;
  who.sender_ip = Ip("10.1.0.1");
  who.target_ip = Ip("10.1.0.2");
  std::optional<size_t> n = net::BuildArp({kMacPeer, net::MacAddress::Broadcast(), std::nullopt}, who, buf);
  ASSERT_TRUE(wire_->Inject({buf.data(), n.value()}));
  net::IcmpHeader echo;
  echo.type = net::kIcmpv4EchoRequest;
  echo.rest = net::IcmpHeader::EchoRest(9, 3);
  n = net::BuildIcmp({kMacPeer, kMacB, std::nullopt}, Ip("10.1.0.1"), Ip("10.1.0.2"), echo,
                     Bytes("ping"), buf);
  ASSERT_TRUE(wire_->Inject({buf.data(), n.value()}));
  stack_->PollOnce();
  std::vector<std::vector<uint8_t>> keep;
  std::vector<net::ParsedFrame> sent = Sent(keep);
  ASSERT_EQ(sent.size(), 2u);
  EXPECT_EQ(sent[0].l3, net::L3::kArp);
  EXPECT_EQ(sent[0].arp.op, net::ArpPacket::kReply);
  EXPECT_EQ(sent[0].arp.sender_mac, kMacB);
  EXPECT_EQ(sent[0].arp.sender_ip, Ip("10.1.0.2"));
  EXPECT_EQ(sent[1].icmp.type, net::kIcmpv4EchoReply);
  EXPECT_EQ(sent[1].icmp.echo_sequence(), 3);
  EXPECT_EQ(Str(sent[1].payload(keep[1])), "ping");
  EXPECT_EQ(stack_->Neighbors().size(), 1u);  // learned from the request
}

// No answer to a source that no host sends from: the answer would reach many hosts (a
// reflector). An echo request and a datagram to a closed port from each, and one from a
// multicast MAC.
TEST_F(StackWireTest, NoAnswerToBroadcastOrMulticastSources) {
  std::vector<uint8_t> buf(256);
  net::IcmpHeader echo;
  echo.type = net::kIcmpv4EchoRequest;
  echo.rest = net::IcmpHeader::EchoRest(9, 3);
  int injected = 0;
  for (const char* src : {"255.255.255.255", "224.0.0.1", "127.0.0.1"}) {
    std::optional<size_t> n = net::BuildIcmp({kMacPeer, kMacB, std::nullopt}, Ip(src),
                                             Ip("10.1.0.2"), echo, Bytes("ping"), buf);
    ASSERT_TRUE(wire_->Inject({buf.data(), n.value()}));
    ASSERT_TRUE(wire_->Inject(Udp((std::string(src) + ":5000").c_str(), "10.1.0.2:7", "x")));
    injected += 2;
  }
  const net::MacAddress group = *net::MacAddress::Parse("01:00:5e:00:00:01");
  std::optional<size_t> n = net::BuildIcmp({group, kMacB, std::nullopt}, Ip("10.1.0.1"),
                                           Ip("10.1.0.2"), echo, Bytes("ping"), buf);
  ASSERT_TRUE(wire_->Inject({buf.data(), n.value()}));
  n = net::BuildIcmp({kMacPeer, kMacB, std::nullopt}, Ip("ff02::1"), Ip("fd00:1::2"),
                     {.type = net::kIcmpv6EchoRequest, .rest = echo.rest}, Bytes("ping"), buf);
  ASSERT_TRUE(wire_->Inject({buf.data(), n.value()}));
  injected += 2;
  while (stack_->PollOnce() > 0) {
  }
  std::vector<std::vector<uint8_t>> keep;
  EXPECT_TRUE(Sent(keep).empty());
  const StackCounters c = stack_->Counters();
  EXPECT_EQ(c.icmp_echo_replies, 0u);
  EXPECT_EQ(c.icmp_errors_sent, 0u);
  EXPECT_EQ(c.rx_frames, static_cast<uint64_t>(injected));
  // And an ordinary peer still gets its answer.
  n = net::BuildIcmp({kMacPeer, kMacB, std::nullopt}, Ip("10.1.0.1"), Ip("10.1.0.2"), echo,
                     Bytes("ping"), buf);
  ASSERT_TRUE(wire_->Inject({buf.data(), n.value()}));
  stack_->PollOnce();
  EXPECT_EQ(Sent(keep).size(), 1u);
}

// ARP and NDP that speak for no neighbour (a group, broadcast, one of our own addresses) or come
// with a non-unicast MAC are neither learned nor answered; an ARP probe and duplicate address
// detection still are answered, and not learned.
TEST_F(StackWireTest, NeighbourMessagesForNoNeighbourAreIgnored) {
  std::vector<uint8_t> buf(256);
  const net::MacAddress group = *net::MacAddress::Parse("01:00:5e:00:00:01");
  auto arp = [&](const char* sender_ip, net::MacAddress sender_mac, net::MacAddress frame_src) {
    net::ArpPacket who;
    who.sender_mac = sender_mac;
    who.sender_ip = Ip(sender_ip);
    who.target_ip = Ip("10.1.0.2");
    std::optional<size_t> n =
        net::BuildArp({frame_src, net::MacAddress::Broadcast(), std::nullopt}, who, buf);
    ASSERT_TRUE(wire_->Inject({buf.data(), n.value()}));
  };
  auto ndp = [&](const char* src, uint8_t type, const char* target,
                 std::optional<net::MacAddress> link_address) {
    net::NdpMessage m;
    m.target = Ip(target);
    m.link_address = link_address;
    std::optional<size_t> n = net::BuildNdp({kMacPeer, kMacB, std::nullopt}, Ip(src),
                                            Ip("fd00:1::2"), type, m, buf);
    ASSERT_TRUE(wire_->Inject({buf.data(), n.value()}));
  };
  const uint8_t ns = net::kIcmpv6NeighborSolicitation;
  const uint8_t na = net::kIcmpv6NeighborAdvertisement;
  arp("224.0.0.1", kMacPeer, kMacPeer);         // a group
  arp("255.255.255.255", kMacPeer, kMacPeer);   // broadcast
  arp("10.1.0.255", kMacPeer, kMacPeer);        // the connected network's broadcast
  arp("10.1.0.2", kMacPeer, kMacPeer);          // our own address
  arp("10.1.0.1", net::MacAddress::Broadcast(), kMacPeer);
  arp("10.1.0.1", kMacPeer, group);             // from a group MAC
  ndp("ff02::1", ns, "fd00:1::2", kMacPeer);    // solicited from a group
  ndp("fd00:1::1", ns, "fd00:1::2", group);     // a group's link address
  ndp("fd00:1::7", na, "fd00:1::2", kMacPeer);  // another host says it has our address
  ndp("::", ns, "fd00:1::2", kMacPeer);         // address detection with a link address
  while (stack_->PollOnce() > 0) {
  }
  std::vector<std::vector<uint8_t>> keep;
  EXPECT_TRUE(Sent(keep).empty());
  EXPECT_TRUE(stack_->Neighbors().empty());
  EXPECT_EQ(stack_->Counters().neighbor_messages_ignored, 10u);

  arp("0.0.0.0", kMacPeer, kMacPeer);  // a probe (RFC 5227)
  ndp("::", ns, "fd00:1::2", std::nullopt);
  stack_->PollOnce();
  std::vector<net::ParsedFrame> sent = Sent(keep);
  ASSERT_EQ(sent.size(), 2u);
  EXPECT_EQ(sent[0].arp.op, net::ArpPacket::kReply);
  EXPECT_EQ(sent[0].arp.target_ip, Ip("0.0.0.0"));
  EXPECT_EQ(sent[1].icmp.type, na);
  EXPECT_EQ(sent[1].dst, Ip("ff02::1"));
  EXPECT_TRUE(stack_->Neighbors().empty());
  EXPECT_EQ(stack_->Counters().neighbor_messages_ignored, 10u);
}

// A stack on no VLAN takes untagged and priority-tagged frames (VLAN id 0) only: the same
// address on another VLAN is another host's.
TEST_F(StackWireTest, FramesOfAVlanAreNotOursWithoutOne) {
  SocketId s = stack_->Open(net::Family::kV4).value();
  ASSERT_TRUE(stack_->Bind(s, Ep("10.1.0.2:7")).ok());
  ASSERT_TRUE(wire_->Inject(Udp("10.1.0.1:5000", "10.1.0.2:7", "vlan 100",
                                net::VlanTag{.tpid = net::kEtherTypeVlan, .tci = 100})));
  ASSERT_TRUE(wire_->Inject(Udp("10.1.0.1:5000", "10.1.0.2:7", "priority",
                                net::VlanTag{.tpid = net::kEtherTypeVlan, .tci = 0xa000})));
  stack_->PollOnce();
  std::optional<ReceivedDatagram> d = stack_->Receive(s).value();
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->payload, "priority");
  EXPECT_FALSE(stack_->Receive(s).value().has_value());
  EXPECT_EQ(stack_->Counters().not_for_us, 1u);
  std::vector<std::vector<uint8_t>> keep;
  EXPECT_TRUE(Sent(keep).empty());  // not even port unreachable for the tagged one
}

// A stack on VLAN 100 takes frames with that one tag only, and tags all it sends: answers,
// datagrams, and the requests for neighbours it does not know yet.
TEST_F(StackWireTest, AStackOnAVlanTakesAndSendsThatTagOnly) {
  MakeStack(/*vlan=*/100);
  const net::VlanTag tag{.tpid = net::kEtherTypeVlan, .tci = 100};
  SocketId s = stack_->Open(net::Family::kV4).value();
  ASSERT_TRUE(stack_->Bind(s, Ep("10.1.0.2:7")).ok());
  ASSERT_TRUE(wire_->Inject(Udp("10.1.0.1:5000", "10.1.0.2:7", "untagged")));
  ASSERT_TRUE(wire_->Inject(Udp("10.1.0.1:5000", "10.1.0.2:7", "vlan 200",
                                net::VlanTag{.tpid = net::kEtherTypeVlan, .tci = 200})));
  std::vector<uint8_t> qinq = Udp("10.1.0.1:5000", "10.1.0.2:7", "qinq", tag);
  const uint8_t outer[] = {0x88, 0xa8, 0x00, 0x64};  // 802.1ad, service VLAN 100
  qinq.insert(qinq.begin() + 12, std::begin(outer), std::end(outer));
  ASSERT_TRUE(wire_->Inject(qinq));
  ASSERT_TRUE(wire_->Inject(Udp("10.1.0.1:5000", "10.1.0.2:7", "vlan 100", tag)));
  ASSERT_TRUE(wire_->Inject(Udp("10.1.0.1:5000", "10.1.0.2:7", "vlan 100, priority 5",
                                net::VlanTag{.tpid = net::kEtherTypeVlan, .tci = 0xa064})));
  stack_->PollOnce();
  EXPECT_EQ(stack_->Receive(s).value()->payload, "vlan 100");
  EXPECT_EQ(stack_->Receive(s).value()->payload, "vlan 100, priority 5");
  EXPECT_FALSE(stack_->Receive(s).value().has_value());
  EXPECT_EQ(stack_->Counters().not_for_us, 3u);
  std::vector<std::vector<uint8_t>> keep;
  EXPECT_TRUE(Sent(keep).empty());

  // A neighbour not known yet is asked on the VLAN; its answer sends the datagram, tagged.
  ASSERT_EQ(stack_->Send(s, Bytes("waited"), Ep("10.1.0.5:9")), absl::OkStatus());
  stack_->PollOnce();
  std::vector<net::ParsedFrame> sent = Sent(keep);
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].l3, net::L3::kArp);
  ASSERT_EQ(sent[0].eth.vlan_count, 1);
  EXPECT_EQ(sent[0].eth.vlans[0], tag);
  net::ArpPacket answer;
  answer.op = net::ArpPacket::kReply;
  answer.sender_mac = kMacPeer;
  answer.sender_ip = Ip("10.1.0.5");
  answer.target_mac = kMacB;
  answer.target_ip = Ip("10.1.0.2");
  std::vector<uint8_t> buf(256);
  std::optional<size_t> n = net::BuildArp({kMacPeer, kMacB, tag}, answer, buf);
  ASSERT_TRUE(wire_->Inject({buf.data(), n.value()}));
  // And a closed port's port unreachable goes back on the VLAN too.
  ASSERT_TRUE(wire_->Inject(Udp("10.1.0.1:5000", "10.1.0.2:8", "closed", tag)));
  stack_->PollOnce();
  sent = Sent(keep);
  ASSERT_EQ(sent.size(), 2u);
  EXPECT_EQ(Str(sent[0].payload(keep[0])), "waited");
  EXPECT_EQ(sent[1].icmp.type, net::kIcmpv4DestUnreachable);
  for (const net::ParsedFrame& f : sent) {
    ASSERT_EQ(f.eth.vlan_count, 1);
    EXPECT_EQ(f.eth.vlans[0], tag);
  }
}

// A neighbour made permanent while datagrams wait for it: they leave, to the MAC given.
TEST_F(StackWireTest, DatagramsWaitingForANeighbourLeaveWhenItIsSetByHand) {
  SocketId s = stack_->Open(net::Family::kV4).value();
  ASSERT_EQ(stack_->Send(s, Bytes("waited"), Ep("10.1.0.5:9")), absl::OkStatus());
  stack_->PollOnce();
  std::vector<std::vector<uint8_t>> keep;
  std::vector<net::ParsedFrame> sent = Sent(keep);
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].l3, net::L3::kArp);
  ASSERT_EQ(stack_->SetNeighbor(Ip("10.1.0.5"), kMacPeer), absl::OkStatus());
  stack_->PollOnce();
  sent = Sent(keep);
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(Str(sent[0].payload(keep[0])), "waited");
  EXPECT_EQ(sent[0].eth.dst, kMacPeer);
  EXPECT_EQ(stack_->Get(s).value().counters.tx_datagrams, 1u);
}

// The poll thread remembers answers for a while (no lock per datagram), but never past a change.
TEST_F(StackWireTest, ANeighboursNewMacIsUsedAtOnce) {
  SocketId s = stack_->Open(net::Family::kV4).value();
  const net::MacAddress other = *net::MacAddress::Parse("02:00:00:00:00:77");
  ASSERT_EQ(stack_->SetNeighbor(Ip("10.1.0.5"), kMacPeer), absl::OkStatus());
  ASSERT_EQ(stack_->Send(s, Bytes("one"), Ep("10.1.0.5:9")), absl::OkStatus());
  stack_->PollOnce();
  ASSERT_EQ(stack_->SetNeighbor(Ip("10.1.0.5"), other), absl::OkStatus());
  ASSERT_EQ(stack_->Send(s, Bytes("two"), Ep("10.1.0.5:9")), absl::OkStatus());
  stack_->PollOnce();
  std::vector<std::vector<uint8_t>> keep;
  std::vector<net::ParsedFrame> sent = Sent(keep);
  ASSERT_EQ(sent.size(), 2u);
  EXPECT_EQ(sent[0].eth.dst, kMacPeer);
  EXPECT_EQ(sent[1].eth.dst, other);
  // And past its time the table is asked again (a removed entry is not used any more).
  ASSERT_EQ(stack_->RemoveNeighbor(Ip("10.1.0.5")), absl::OkStatus());
  ASSERT_EQ(stack_->Send(s, Bytes("three"), Ep("10.1.0.5:9")), absl::OkStatus());
  stack_->PollOnce();
  sent = Sent(keep);
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].l3, net::L3::kArp);  // resolving anew, the datagram waits
}

TEST_F(StackWireTest, ManySocketsCloseAtOnce) {
  std::vector<SocketId> ids;
  for (int i = 0; i < 100; ++i) {
    ids.push_back(stack_->Open(net::Family::kV4).value());
    ASSERT_TRUE(stack_->Bind(ids.back(), Endpoint{Ip("10.1.0.2"), uint16_t(4000 + i)}).ok());
  }
  ids.push_back(ids.front());  // closed by then: NOT_FOUND, the others OK
  const std::vector<absl::Status> closed = stack_->Close(std::span<const SocketId>(ids));
  ASSERT_EQ(closed.size(), 101u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(closed[i], absl::OkStatus()) << i;
  EXPECT_EQ(closed[100].code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(stack_->List().empty());
  // Their ports are free again.
  SocketId again = stack_->Open(net::Family::kV4).value();
  EXPECT_TRUE(stack_->Bind(again, Ep("10.1.0.2:4000")).ok());
}

TEST_F(StackWireTest, DropsWhatIsNotOursAndCountsWhy) {
  ASSERT_TRUE(wire_->Inject(Udp("10.1.0.1:5000", "10.1.0.9:7", "elsewhere")));
  std::vector<uint8_t> bad = Udp("10.1.0.1:5000", "10.1.0.2:7", "bad");
  bad.back() ^= 1;  // UDP checksum
  ASSERT_TRUE(wire_->Inject(bad));
  std::vector<uint8_t> frag = Udp("10.1.0.1:5000", "10.1.0.2:7", "frag");
  frag[20] = 0x20;  // MF
  frag[24] = frag[25] = 0;
  uint16_t csum = 0;
  {
    uint32_t sum = 0;
    for (int i = 14; i < 34; i += 2) sum += frag[i] << 8 | frag[i + 1];
    while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
    csum = static_cast<uint16_t>(~sum);
  }
  frag[24] = csum >> 8;
  frag[25] = csum & 0xff;
  ASSERT_TRUE(wire_->Inject(frag));
  stack_->PollOnce();
  const StackCounters c = stack_->Counters();
  EXPECT_EQ(c.not_for_us, 1u);
  EXPECT_EQ(c.parse_errors[static_cast<int>(net::ParseError::kBadUdpChecksum)], 1u);
  EXPECT_EQ(c.fragments, 1u);
  EXPECT_EQ(c.udp_no_socket, 0u);
  std::vector<std::vector<uint8_t>> keep;
  EXPECT_TRUE(Sent(keep).empty());
}

TEST_F(StackWireTest, FullReceiveQueueDropsAndLeavesASequenceGap) {
  SocketId s = stack_->Open(net::Family::kV4, {.receive_queue_depth = 4}).value();
  ASSERT_TRUE(stack_->Bind(s, Ep("10.1.0.2:4000")).ok());
  for (int i = 0; i < 6; ++i) {
    ASSERT_TRUE(wire_->Inject(Udp("10.1.0.1:5000", "10.1.0.2:4000", std::to_string(i))));
  }
  stack_->PollOnce();
  for (int i = 0; i < 4; ++i) {
    std::optional<ReceivedDatagram> d = stack_->Receive(s).value();
    ASSERT_TRUE(d.has_value());
    EXPECT_EQ(d->payload, std::to_string(i));
  }
  EXPECT_EQ(stack_->Get(s).value().counters.rx_dropped, 2u);
  ASSERT_TRUE(wire_->Inject(Udp("10.1.0.1:5000", "10.1.0.2:4000", "later")));
  stack_->PollOnce();
  EXPECT_EQ(stack_->Receive(s).value()->sequence, 7u);  // 5 and 6 were dropped
}

// All sockets' queues together hold at most max_receive_bytes: past it datagrams are dropped and
// counted, per stack and per socket, and reading one gives its room back.
TEST_F(StackWireTest, ReceiveBudgetBoundsAllQueuesTogether) {
  const size_t each = sizeof(ReceivedDatagram) + 1;  // a record and a one-byte payload
  // The two sockets' queue cells, charged at Open, and three datagrams.
  const size_t cells = 2 * QueueCells(StackOptions().receive_queue_depth);
  MakeStack(/*vlan=*/0, /*max_receive_bytes=*/cells + 3 * each);
  SocketId a = stack_->Open(net::Family::kV4).value();
  SocketId b = stack_->Open(net::Family::kV4).value();
  ASSERT_TRUE(stack_->Bind(a, Ep("10.1.0.2:4000")).ok());
  ASSERT_TRUE(stack_->Bind(b, Ep("10.1.0.2:4001")).ok());
  for (const char* to : {"10.1.0.2:4000", "10.1.0.2:4000", "10.1.0.2:4001", "10.1.0.2:4001"}) {
    ASSERT_TRUE(wire_->Inject(Udp("10.1.0.1:5000", to, "x")));
  }
  stack_->PollOnce();
  EXPECT_EQ(stack_->Counters().receive_budget_full, 1u);
  EXPECT_EQ(stack_->Counters().receive_bytes_queued, cells + 3 * each);
  EXPECT_EQ(stack_->Get(b).value().counters.rx_dropped, 1u);
  ASSERT_TRUE(stack_->Receive(a).value().has_value());
  EXPECT_EQ(stack_->Counters().receive_bytes_queued, cells + 2 * each);
  ASSERT_TRUE(wire_->Inject(Udp("10.1.0.1:5000", "10.1.0.2:4001", "y")));
  stack_->PollOnce();
  EXPECT_EQ(stack_->Get(b).value().counters.queued, 2u);
}

// A receive queue's cells are charged to the same budget from the socket's Open: one client's
// deep queues cannot take memory past it (65,536 sockets of 65,536 cells were 64 GiB). An Open
// past it is refused, naming the flag, and is no datagram dropped; a close gives them back.
TEST_F(StackWireTest, ReceiveQueueCellsAreChargedToTheBudgetAtOpen) {
  const size_t deep = QueueCells(65536);
  MakeStack(/*vlan=*/0, /*max_receive_bytes=*/3 * deep);
  std::vector<SocketId> open;
  for (int i = 0; i < 3; ++i) {
    open.push_back(stack_->Open(net::Family::kV4, {.receive_queue_depth = 65536}).value());
  }
  EXPECT_EQ(stack_->Counters().receive_bytes_queued, 3 * deep);
  absl::StatusOr<SocketId> refused =
      stack_->Open(net::Family::kV4, {.receive_queue_depth = 65536});
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(absl::StrContains(refused.status().message(), "--max_receive_mib"))
      << refused.status();
  EXPECT_EQ(stack_->Counters().receive_budget_full, 0u);
  // Traffic to a socket with cells reserved but no queue made yet is still received.
  ASSERT_TRUE(stack_->Bind(open[0], Ep("10.1.0.2:4000")).ok());
  ASSERT_TRUE(wire_->Inject(Udp("10.1.0.1:5000", "10.1.0.2:4000", "x")));
  stack_->PollOnce();
  EXPECT_EQ(stack_->Counters().receive_bytes_queued, 3 * deep);  // the datagram is over it
  EXPECT_EQ(stack_->Counters().receive_budget_full, 1u);
  ASSERT_TRUE(stack_->Close(open[1]).ok());
  EXPECT_EQ(stack_->Counters().receive_bytes_queued, 2 * deep);
  EXPECT_TRUE(stack_->Open(net::Family::kV4, {.receive_queue_depth = 65536}).ok());
}

}  // namespace
}  // namespace quadsock::stack
