// Sockets on a data channel (Stack::PutOnChannel): their datagrams reach the application's
// ring, tagged with their index, and none is lost uncounted.
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <thread>

#include "stack/channel/channel.h"
#include "stack/channel/reader.h"
#include "stack/internal/udp_socket.h"
#include "stack/stack.h"
#include "stack/testing/stack_fixtures.h"

namespace quadsock::stack {
namespace {

using namespace testing_fixtures;  // NOLINT: the fixtures' short helpers

channel::ChannelReader ReaderOf(const channel::Channel& c) {
  std::vector<int> events;
  for (int fd : c.event_fds()) events.push_back(dup(fd));
  return channel::ChannelReader::Map(dup(c.memfd()), std::move(events)).value();
}

TEST_F(TwoStacksTest, SocketsOnAChannelDeliverThereTaggedWithTheirIndex) {
  const SocketId s1 = b_->Open(net::Family::kV4).value();
  const SocketId s2 = b_->Open(net::Family::kV6).value();
  ASSERT_TRUE(b_->Bind(s1, Ep("0.0.0.0:4000")).ok());
  ASSERT_TRUE(b_->Bind(s2, Ep("[::]:4001")).ok());
  auto c = channel::Channel::Create({.rings = 1, .slots = 16}).value();
  ASSERT_EQ(b_->PutOnChannel(s1, c, 11), absl::OkStatus());
  ASSERT_EQ(b_->PutOnChannel(s2, c, 12), absl::OkStatus());
  channel::ChannelReader r = ReaderOf(*c);

  const SocketId from = a_->Open(net::Family::kV4).value();
  ASSERT_EQ(a_->Send(from, Bytes("one"), Ep("10.1.0.2:4000")), absl::OkStatus());
  ASSERT_EQ(a_->Send(from, Bytes("two"), Ep("10.1.0.2:4001")), absl::OkStatus());
  Pump();
  channel::ReceivedView v[8];
  ASSERT_EQ(r.Receive(v), 2u);
  const Endpoint sender = a_->Get(from).value().info.local;
  EXPECT_EQ(v[0].socket, 11u);
  EXPECT_EQ(Str(v[0].payload), "one");
  EXPECT_EQ(v[0].peer, Endpoint({Ip("10.1.0.1"), sender.port}));
  EXPECT_EQ(v[0].local, Ep("10.1.0.2:4000"));
  EXPECT_EQ(v[0].sequence, 1u);
  EXPECT_EQ(v[0].arrival, clock_.now);
  // The dual-stack socket sees IPv4 as v4-mapped, as its queue would.
  EXPECT_EQ(v[1].socket, 12u);
  EXPECT_EQ(Str(v[1].payload), "two");
  EXPECT_EQ(v[1].peer, Endpoint({Ip("::ffff:10.1.0.1"), sender.port}));
  r.Release();
  // Nothing went to the sockets' queues.
  EXPECT_FALSE(b_->Receive(s1).value().has_value());
  EXPECT_EQ(b_->Get(s1).value().counters.rx_datagrams, 1u);
}

TEST_F(TwoStacksTest, ABatchOfDatagramsIsPublishedWithOneStore) {
  const SocketId s = b_->Open(net::Family::kV4).value();
  ASSERT_TRUE(b_->Bind(s, Ep("0.0.0.0:4000")).ok());
  auto c = channel::Channel::Create({.rings = 1, .slots = 64}).value();
  ASSERT_EQ(b_->PutOnChannel(s, c, 1), absl::OkStatus());
  const SocketId from = a_->Open(net::Family::kV4).value();
  ASSERT_EQ(a_->Send(from, Bytes("first"), Ep("10.1.0.2:4000")), absl::OkStatus());
  Pump();  // the neighbours know each other now: the next ones go out in one turn
  const uint64_t before = c->counters().publishes;
  for (int i = 0; i < 10; ++i) {
    ASSERT_EQ(a_->Send(from, Bytes("x"), Ep("10.1.0.2:4000")), absl::OkStatus());
  }
  Pump();
  EXPECT_EQ(c->counters().delivered, 11u);
  EXPECT_EQ(c->counters().publishes, before + 1);
  channel::ChannelReader r = ReaderOf(*c);
  channel::ReceivedView v[16];
  EXPECT_EQ(r.Receive(v), 11u);
}

// The socket's channel and index are read by poll threads without a lock while the control
// plane changes them (UdpSocket::SwapChannel): a reader sees one whole target, never the
// channel of one and the index of another.
TEST(ChannelTargetTest, ReadersSeeAWholeTargetWhileTheControlPlaneMovesTheSocket) {
  UdpSocket socket(net::Family::kV4, 16);
  auto c1 = channel::Channel::Create({.rings = 1, .slots = 4}).value();
  auto c2 = channel::Channel::Create({.rings = 1, .slots = 4}).value();
  std::atomic<bool> done{false};
  std::thread control([&] {
    for (uint32_t i = 0; i < 1000000; ++i) {
      (void)socket.SwapChannel(i % 2 == 0 ? UdpSocket::ChannelBinding{c1, 1}
                                          : UdpSocket::ChannelBinding{c2, 2});
    }
    done = true;
  });
  uint64_t reads = 0;
  while (!done.load()) {
    const UdpSocket::ChannelTarget t = socket.channel_target();
    ++reads;
    if (t.channel == nullptr) continue;  // before the first
    ASSERT_TRUE((t.channel == c1.get() && t.index == 1) || (t.channel == c2.get() && t.index == 2))
        << "channel " << (t.channel == c1.get() ? 1 : 2) << " with index " << t.index;
  }
  control.join();
  EXPECT_GT(reads, 0u);
  EXPECT_EQ(socket.channel_target().channel, c2.get());
}

TEST_F(TwoStacksTest, AFullChannelRingDropsAndTheSocketCountsIt) {
  const SocketId s = b_->Open(net::Family::kV4).value();
  ASSERT_TRUE(b_->Bind(s, Ep("0.0.0.0:4000")).ok());
  auto c = channel::Channel::Create({.rings = 1, .slots = 4}).value();
  ASSERT_EQ(b_->PutOnChannel(s, c, 1), absl::OkStatus());
  const SocketId from = a_->Open(net::Family::kV4).value();
  for (int i = 0; i < 6; ++i) {
    ASSERT_EQ(a_->Send(from, Bytes(std::to_string(i)), Ep("10.1.0.2:4000")), absl::OkStatus());
  }
  Pump();
  // Every datagram the stack delivered is in the ring or counted as dropped, by the socket and
  // by the channel.
  EXPECT_EQ(b_->Counters().udp_delivered, 6u);
  const SocketCounters sc = b_->Get(s).value().counters;
  EXPECT_EQ(sc.rx_datagrams, 4u);
  EXPECT_EQ(sc.rx_dropped, 2u);
  EXPECT_EQ(c->counters().ring_full, 2u);
  channel::ChannelReader r = ReaderOf(*c);
  channel::ReceivedView v[8];
  ASSERT_EQ(r.Receive(v), 4u);
  EXPECT_EQ(v[3].sequence, 4u);  // the drops come after: the next one received says 7
  r.Release();
  ASSERT_EQ(a_->Send(from, Bytes("after"), Ep("10.1.0.2:4000")), absl::OkStatus());
  Pump();
  ASSERT_EQ(r.Receive(v), 1u);
  EXPECT_EQ(v[0].sequence, 7u);
  // The stack counts the drops too, and its count outlives the socket.
  EXPECT_EQ(b_->Counters().udp_queue_full, 2u);
  ASSERT_EQ(b_->Close(s), absl::OkStatus());
  EXPECT_EQ(b_->Counters().udp_queue_full, 2u);
}

TEST_F(TwoStacksTest, ASocketTakenOffItsChannelUsesItsQueueAgain) {
  const SocketId s = b_->Open(net::Family::kV4).value();
  ASSERT_TRUE(b_->Bind(s, Ep("0.0.0.0:4000")).ok());
  auto c = channel::Channel::Create({.rings = 1, .slots = 4}).value();
  ASSERT_EQ(b_->PutOnChannel(s, c, 1), absl::OkStatus());
  const SocketId ids[] = {s};
  b_->TakeOffChannels(ids);
  EXPECT_EQ(b_->PutOnChannel(s, nullptr, 0).code(), absl::StatusCode::kInvalidArgument);
  const SocketId from = a_->Open(net::Family::kV4).value();
  ASSERT_EQ(a_->Send(from, Bytes("queued"), Ep("10.1.0.2:4000")), absl::OkStatus());
  Pump();
  std::optional<ReceivedDatagram> d = b_->Receive(s).value();
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->payload, "queued");
  EXPECT_EQ(c->counters().delivered, 0u);
}

TEST_F(TwoStacksTest, PutOnChannelTakesAnyChannelWithARingPerPollThread) {
  auto c = channel::Channel::Create({.rings = 1, .slots = 4}).value();
  EXPECT_EQ(b_->PutOnChannel(12345, c, 1).code(), absl::StatusCode::kNotFound);
  // (A stack of one poll thread takes a channel of one ring; more rings are fine.)
  auto wide = channel::Channel::Create({.rings = 2, .slots = 4}).value();
  const SocketId s = b_->Open(net::Family::kV4).value();
  EXPECT_EQ(b_->PutOnChannel(s, wide, 1), absl::OkStatus());
}

TEST_F(TwoStacksTest, EveryDatagramIsAccountedForWhileSocketsAreRehashedReconnectedAndClosed) {
  const SocketId moved = b_->Open(net::Family::kV4).value();
  ASSERT_TRUE(b_->Bind(moved, Ep("10.1.0.2:4000")).ok());
  const SocketId reconnected = b_->Open(net::Family::kV4).value();
  ASSERT_TRUE(b_->Bind(reconnected, Ep("10.1.0.2:4001")).ok());
  ASSERT_TRUE(b_->Connect(reconnected, Ep("10.1.0.1:5001")).ok());
  const SocketId closed = b_->Open(net::Family::kV4).value();
  ASSERT_TRUE(b_->Bind(closed, Ep("10.1.0.2:4002")).ok());
  auto c = channel::Channel::Create({.rings = 1, .slots = 1024}).value();
  ASSERT_EQ(b_->PutOnChannel(moved, c, 1), absl::OkStatus());
  ASSERT_EQ(b_->PutOnChannel(reconnected, c, 2), absl::OkStatus());
  ASSERT_EQ(b_->PutOnChannel(closed, c, 3), absl::OkStatus());
  channel::ChannelReader r = ReaderOf(*c);
  SocketId from[3];
  for (int i = 0; i < 3; ++i) {
    from[i] = a_->Open(net::Family::kV4).value();
    ASSERT_TRUE(a_->Bind(from[i], Endpoint{Ip("10.1.0.1"), static_cast<uint16_t>(5000 + i)}).ok());
  }
  // A round: each peer port sends to each of our ports it targets, 5 times.
  auto round = [&](const std::vector<std::pair<int, const char*>>& flows) {
    for (const auto& [peer, to] : flows) {
      for (int k = 0; k < 5; ++k) ASSERT_EQ(a_->Send(from[peer], Bytes("x"), Ep(to)), absl::OkStatus());
    }
    Pump();
  };
  round({{0, "10.1.0.2:4000"}, {1, "10.1.0.2:4001"}, {0, "10.1.0.2:4002"}});
  ASSERT_TRUE(b_->Rehash(moved, std::nullopt, 4100).ok());
  ASSERT_TRUE(b_->Connect(reconnected, Ep("10.1.0.1:5002")).ok());
  ASSERT_EQ(b_->Close(closed), absl::OkStatus());
  // The old port, the old peer and the closed socket take nothing now; the new ones do.
  round({{0, "10.1.0.2:4000"}, {0, "10.1.0.2:4100"}, {1, "10.1.0.2:4001"},
         {2, "10.1.0.2:4001"}, {0, "10.1.0.2:4002"}});
  std::map<uint32_t, int> got;
  channel::ReceivedView v[64];
  for (size_t n; (n = r.Receive(v)) > 0; r.Release()) {
    for (size_t i = 0; i < n; ++i) ++got[v[i].socket];
  }
  EXPECT_EQ(got[1], 10);  // 5 on 4000, then 5 on 4100
  EXPECT_EQ(got[2], 10);  // 5 from 5001, then 5 from 5002
  EXPECT_EQ(got[3], 5);   // until it closed
  // Everything the stack delivered, the application has; the rest had no socket.
  const StackCounters n = b_->Counters();
  EXPECT_EQ(n.udp_delivered, 25u);
  EXPECT_EQ(c->counters().delivered, 25u);
  EXPECT_EQ(c->counters().ring_full, 0u);
  EXPECT_EQ(n.udp_no_socket, 15u);  // the old port, the old peer (5001), the closed socket
  const SocketId ids[] = {moved, reconnected};
  b_->TakeOffChannels(ids);
  b_->RemoveChannel(c.get());
}

TEST_F(TwoStacksTest, WhatTheApplicationQueuesOnTheChannelIsSentFromItsSockets) {
  const SocketId bound = b_->Open(net::Family::kV4).value();
  ASSERT_TRUE(b_->Bind(bound, Ep("0.0.0.0:4000")).ok());
  const SocketId connected = b_->Open(net::Family::kV4).value();
  ASSERT_TRUE(b_->Connect(connected, Ep("10.1.0.1:5001")).ok());
  const SocketId unbound = b_->Open(net::Family::kV4).value();
  auto c = channel::Channel::Create({.rings = 1, .slots = 16}).value();
  ASSERT_EQ(b_->PutOnChannel(bound, c, 1), absl::OkStatus());
  ASSERT_EQ(b_->PutOnChannel(connected, c, 2), absl::OkStatus());
  ASSERT_EQ(b_->PutOnChannel(unbound, c, 3), absl::OkStatus());
  const SocketId peer = a_->Open(net::Family::kV4).value();
  ASSERT_TRUE(a_->Bind(peer, Ep("0.0.0.0:5000")).ok());
  const SocketId peer2 = a_->Open(net::Family::kV4).value();
  ASSERT_TRUE(a_->Bind(peer2, Ep("0.0.0.0:5001")).ok());
  channel::ChannelReader r = ReaderOf(*c);

  ASSERT_TRUE(r.Send(1, Bytes("from 4000"), Ep("10.1.0.1:5000")));
  ASSERT_TRUE(r.Send(2, Bytes("to my peer")));  // connected: no destination needed
  ASSERT_TRUE(r.Send(1, Bytes("no destination")));       // not connected: dropped, counted
  ASSERT_TRUE(r.Send(3, Bytes("unbound"), Ep("10.1.0.1:5000")));  // not bound: likewise
  ASSERT_TRUE(r.Send(9, Bytes("no such index"), Ep("10.1.0.1:5000")));
  ASSERT_TRUE(r.Send(1, Bytes("broadcast"), Ep("10.1.0.255:5000")));
  Pump();
  std::optional<ReceivedDatagram> d = a_->Receive(peer).value();
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->payload, "from 4000");
  EXPECT_EQ(d->source, Ep("10.1.0.2:4000"));
  EXPECT_FALSE(a_->Receive(peer).value().has_value());  // nothing else came
  d = a_->Receive(peer2).value();
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->payload, "to my peer");
  // Each datagram that could not go is counted where it belongs.
  EXPECT_EQ(b_->Get(bound).value().counters.tx_datagrams, 1u);
  EXPECT_EQ(b_->Get(bound).value().counters.tx_dropped, 2u);
  EXPECT_EQ(b_->Get(unbound).value().counters.tx_dropped, 1u);
  EXPECT_EQ(b_->Counters().tx_channel_no_socket, 1u);
  EXPECT_EQ(c->counters().sends, 6u);
  // The slots are the application's again.
  for (int i = 0; i < 16; ++i) EXPECT_TRUE(r.Send(1, Bytes("again"), Ep("10.1.0.1:5000"))) << i;
  b_->RemoveChannel(c.get());
}

// As IP_PKTINFO: a datagram leaves from the source address the application asked for, when
// it is one of the stack's, of the destination's family, and its socket is bound to the
// wildcard or to that address (the port on another address may be another session's);
// otherwise it is dropped, counted.
TEST(ChannelSourceTest, ADatagramLeavesFromTheSourceAskedForOnlyIfItIsTheStacks) {
  FakeClock clock;
  StackOptions two = Options(clock, "10.1.0.2/24", "fd00:1::2/64");
  two.addresses.push_back(*net::IpPrefix::Parse("10.1.0.3/24"));
  StackPair pair = StackPair::Create({.link = {.name = "a", .mac = kMacA},
                                      .options = Options(clock, "10.1.0.1/24", "fd00:1::1/64")},
                                     {.link = {.name = "b", .mac = kMacB}, .options = two})
                       .value();
  const SocketId s = pair.b->Open(net::Family::kV4).value();
  ASSERT_TRUE(pair.b->Bind(s, Ep("0.0.0.0:4000")).ok());
  const SocketId one = pair.b->Open(net::Family::kV4).value();
  ASSERT_TRUE(pair.b->Bind(one, Ep("10.1.0.2:4001")).ok());
  const SocketId other = pair.b->Open(net::Family::kV4).value();  // another session's, say
  ASSERT_TRUE(pair.b->Bind(other, Ep("10.1.0.3:4001")).ok());
  auto c = channel::Channel::Create({.rings = 1, .slots = 16}).value();
  ASSERT_EQ(pair.b->PutOnChannel(s, c, 1), absl::OkStatus());
  ASSERT_EQ(pair.b->PutOnChannel(one, c, 2), absl::OkStatus());
  const SocketId peer = pair.a->Open(net::Family::kV4).value();
  ASSERT_TRUE(pair.a->Bind(peer, Ep("0.0.0.0:5000")).ok());
  channel::ChannelReader r = ReaderOf(*c);
  const auto from = [](const char* a) { return net::IpAddress::Parse(a).value(); };
  ASSERT_TRUE(r.Send(1, Bytes("route's"), Ep("10.1.0.1:5000")));
  ASSERT_TRUE(r.Send(1, Bytes("second"), Ep("10.1.0.1:5000"), from("10.1.0.3")));
  ASSERT_TRUE(r.Send(1, Bytes("not ours"), Ep("10.1.0.1:5000"), from("10.1.0.9")));
  ASSERT_TRUE(r.Send(1, Bytes("other family"), Ep("10.1.0.1:5000"), from("fd00:1::2")));
  ASSERT_TRUE(r.Send(2, Bytes("its own"), Ep("10.1.0.1:5000"), from("10.1.0.2")));
  ASSERT_TRUE(r.Send(2, Bytes("as the other"), Ep("10.1.0.1:5000"), from("10.1.0.3")));
  for (int i = 0; i < 20; ++i) {
    pair.a->PollOnce();
    pair.b->PollOnce();
  }
  std::optional<ReceivedDatagram> d = pair.a->Receive(peer).value();
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->source, Ep("10.1.0.2:4000"));
  d = pair.a->Receive(peer).value();
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->payload, "second");
  EXPECT_EQ(d->source, Ep("10.1.0.3:4000"));
  d = pair.a->Receive(peer).value();
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->payload, "its own");
  EXPECT_EQ(d->source, Ep("10.1.0.2:4001"));
  EXPECT_FALSE(pair.a->Receive(peer).value().has_value());  // never as the other's 10.1.0.3:4001
  EXPECT_EQ(pair.b->Get(s).value().counters.tx_dropped, 2u);
  EXPECT_EQ(pair.b->Get(one).value().counters.tx_dropped, 1u);
  EXPECT_EQ(pair.b->Counters().tx_channel_refused, 3u);
  pair.b->RemoveChannel(c.get());
  EXPECT_EQ(pair.a->CheckFrameAccounting(), absl::OkStatus());
  EXPECT_EQ(pair.b->CheckFrameAccounting(), absl::OkStatus());
}

// Two sessions' channels on one stack: the first attached keeps its TX ring full, of datagrams
// or of descriptors to refuse, and the second's datagram still leaves in the very next turn.
TEST_F(TwoStacksTest, AChannelThatKeepsItsTxRingFullTakesItsShareOfATurnAndNoMore) {
  constexpr uint32_t kSlots = 1024;
  const SocketId flooder = b_->Open(net::Family::kV4).value();
  ASSERT_TRUE(b_->Bind(flooder, Ep("0.0.0.0:4000")).ok());
  const SocketId other = b_->Open(net::Family::kV4).value();
  ASSERT_TRUE(b_->Bind(other, Ep("0.0.0.0:4001")).ok());
  const SocketId sink = a_->Open(net::Family::kV4).value();
  ASSERT_TRUE(a_->Bind(sink, Ep("0.0.0.0:5000")).ok());
  const SocketId peer = a_->Open(net::Family::kV4).value();
  ASSERT_TRUE(a_->Bind(peer, Ep("0.0.0.0:5001")).ok());
  // The peer's MAC first, so that a datagram leaves in the turn that takes it.
  ASSERT_EQ(b_->Send(other, Bytes("hello"), Ep("10.1.0.1:5001")), absl::OkStatus());
  Pump();
  ASSERT_TRUE(a_->Receive(peer).value().has_value());
  auto flooding = channel::Channel::Create({.rings = 1, .slots = kSlots}).value();
  auto quiet = channel::Channel::Create({.rings = 1, .slots = 16}).value();
  ASSERT_EQ(b_->PutOnChannel(flooder, flooding, 1), absl::OkStatus());
  ASSERT_EQ(b_->PutOnChannel(other, quiet, 1), absl::OkStatus());
  channel::ChannelReader flood = ReaderOf(*flooding);
  channel::ChannelReader r = ReaderOf(*quiet);
  uint32_t flood_sent = 0;
  for (const bool refused : {false, true}) {
    SCOPED_TRACE(refused ? "a ring of descriptors to refuse" : "a ring of datagrams");
    for (uint32_t i = 0; i < kSlots; ++i) {
      ASSERT_TRUE(flood.Send(1, Bytes("flood"), Ep("10.1.0.1:5000"))) << i;
    }
    if (refused) {  // every descriptor's length past a buffer, written where the reader did
      const off_t tx_ring =
          channel::kHeaderBytes + channel::RingBytes(kSlots, flooding->buffer_bytes());
      const off_t first = tx_ring + sizeof(channel::RingControl);
      for (uint32_t i = 0; i < kSlots; ++i) {
        const uint32_t huge = 1 << 30;
        const off_t slot = (flood_sent + i) % kSlots;
        ASSERT_EQ(pwrite(flooding->memfd(), &huge, 4,
                         first + slot * sizeof(channel::ChannelDescriptor) + 4), 4);
      }
    }
    flood_sent += kSlots;
    const uint64_t refused_before = b_->Counters().tx_channel_bad_length;
    ASSERT_TRUE(r.Send(1, Bytes(refused ? "second" : "first"), Ep("10.1.0.1:5001")));
    b_->PollOnce();  // one turn
    while (a_->PollOnce() > 0) {
    }
    std::optional<ReceivedDatagram> d = a_->Receive(peer).value();
    ASSERT_TRUE(d.has_value()) << "the quiet channel's datagram waited for the flood";
    EXPECT_EQ(d->payload, refused ? "second" : "first");
    // The flood took its share of the turn: refused descriptors are charged like datagrams.
    const uint64_t refused_in_turn = b_->Counters().tx_channel_bad_length - refused_before;
    if (refused) {
      EXPECT_LE(refused_in_turn, 256u);
    }
    Pump();  // the rest of the flood
    while (a_->Receive(sink).value().has_value()) {
    }
  }
  EXPECT_EQ(b_->Counters().tx_channel_bad_length, kSlots);
  const SocketId ids[] = {flooder, other};
  b_->TakeOffChannels(ids);
  b_->RemoveChannel(flooding.get());
  b_->RemoveChannel(quiet.get());
}

// Taking a channel's sockets off it waits for the poll threads once for all of them (a channel
// that ends with 65,536 sockets once waited 65,536 grace periods, holding the broker's lock),
// and each socket's datagrams go to its queue again.
TEST_F(TwoStacksTest, TakingManySocketsOffAChannelWaitsOnce) {
  constexpr int kSockets = 2000;
  auto c = channel::Channel::Create({.rings = 1, .slots = 16}).value();
  std::vector<SocketId> ids;
  for (int i = 0; i < kSockets; ++i) {
    ids.push_back(b_->Open(net::Family::kV4).value());
    ASSERT_TRUE(b_->Bind(ids.back(), Ep(("0.0.0.0:" + std::to_string(10000 + i)).c_str())).ok());
    ASSERT_EQ(b_->PutOnChannel(ids.back(), c, static_cast<uint32_t>(i + 1)), absl::OkStatus());
  }
  const uint64_t before = b_->Counters().channel_waits;
  b_->TakeOffChannels(ids);
  EXPECT_EQ(b_->Counters().channel_waits, before + 1);
  for (SocketId id : ids) EXPECT_FALSE(b_->Get(id).value().on_channel);
  const SocketId from = a_->Open(net::Family::kV4).value();
  ASSERT_EQ(a_->Send(from, Bytes("queued"), Ep("10.1.0.2:10007")), absl::OkStatus());
  Pump();
  std::optional<ReceivedDatagram> d = b_->Receive(ids[7]).value();
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->payload, "queued");
  EXPECT_EQ(c->counters().delivered, 0u);
  b_->TakeOffChannels(ids);  // on none: no wait
  EXPECT_EQ(b_->Counters().channel_waits, before + 1);
  b_->RemoveChannel(c.get());
}

TEST_F(TwoStacksTest, AClosedSocketsIndexSendsNothing) {
  const SocketId s = b_->Open(net::Family::kV4).value();
  ASSERT_TRUE(b_->Bind(s, Ep("0.0.0.0:4000")).ok());
  auto c = channel::Channel::Create({.rings = 1, .slots = 4}).value();
  ASSERT_EQ(b_->PutOnChannel(s, c, 1), absl::OkStatus());
  ASSERT_EQ(b_->Close(s), absl::OkStatus());
  channel::ChannelReader r = ReaderOf(*c);
  ASSERT_TRUE(r.Send(1, Bytes("after close"), Ep("10.1.0.1:5000")));
  Pump();
  EXPECT_EQ(b_->Counters().tx_channel_no_socket, 1u);
  b_->RemoveChannel(c.get());
}

// Close racing PutOnChannel for the same socket: whichever wins, the channel's table never keeps
// the closed socket (once it did when Close came between PutOnChannel's lookup and its binding,
// and the index then sent from a port the socket no longer held).
TEST_F(TwoStacksTest, ACloseRacingPutOnChannelLeavesNothingInTheChannel) {
  constexpr int kRounds = 2000;
  auto c = channel::Channel::Create({.rings = 1, .slots = 16}).value();
  channel::ChannelReader r = ReaderOf(*c);
  const SocketId peer = a_->Open(net::Family::kV4).value();
  ASSERT_TRUE(a_->Bind(peer, Ep("0.0.0.0:5000")).ok());
  int put_first = 0;
  for (int i = 0; i < kRounds; ++i) {
    const SocketId s = b_->Open(net::Family::kV4).value();
    ASSERT_TRUE(b_->Bind(s, Ep("0.0.0.0:4000")).ok());
    std::atomic<int> ready{0};
    absl::Status put;
    std::thread putter([&] {
      ready.fetch_add(1);
      while (ready.load() < 2) {
      }
      put = b_->PutOnChannel(s, c, 1);
    });
    ready.fetch_add(1);
    while (ready.load() < 2) {
    }
    ASSERT_EQ(b_->Close(s), absl::OkStatus());
    putter.join();
    if (put.ok()) ++put_first;
    ASSERT_TRUE(put.ok() || put.code() == absl::StatusCode::kNotFound) << put;
    ASSERT_TRUE(r.Send(1, Bytes("from a closed socket"), Ep("10.1.0.1:5000")));
    Pump();
    ASSERT_FALSE(a_->Receive(peer).value().has_value())
        << "round " << i << ": the closed socket's index still sent (PutOnChannel " << put << ")";
  }
  EXPECT_EQ(b_->Counters().tx_channel_no_socket, static_cast<uint64_t>(kRounds));
  RecordProperty("put_before_close", put_first);
  b_->RemoveChannel(c.get());
}

}  // namespace
}  // namespace quadsock::stack
