// The channel's two sides in one process: quadsockd's Channel writes, ChannelReader reads the
// same memfd, as an application would after the fds were passed.
#include "stack/channel/channel.h"

#include <unistd.h>

#include <random>
#include <thread>

#include <gtest/gtest.h>

#include "stack/channel/reader.h"

namespace quadsock::channel {
namespace {

// The next datagram, with a budget of its own (a poll thread's turn charges its own).
std::optional<OutgoingDatagram> Next(Channel& c) {
  SendTurn turn{.budget = size_t{1} << 20};
  return c.NextSend(turn);
}

const net::Endpoint kPeer = *net::Endpoint::Parse("10.1.0.1:5000");
const net::Endpoint kLocal = *net::Endpoint::Parse("10.1.0.2:4000");
const absl::Time kWhen = absl::FromUnixSeconds(1700000000);

std::span<const uint8_t> Bytes(const std::string& s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}
std::string Text(std::span<const uint8_t> b) { return {b.begin(), b.end()}; }

// The application's end: the memfd and eventfds as quadsockd would pass them (dup'ed).
ChannelReader ReaderOf(const Channel& c) {
  std::vector<int> events;
  for (int fd : c.event_fds()) events.push_back(dup(fd));
  absl::StatusOr<ChannelReader> r = ChannelReader::Map(dup(c.memfd()), std::move(events));
  EXPECT_TRUE(r.ok()) << r.status();
  return std::move(*r);
}

TEST(ChannelTest, ADatagramArrivesWithItsSocketEndpointsAndSequence) {
  auto c = Channel::Create({.rings = 2, .slots = 8}).value();
  ChannelReader r = ReaderOf(*c);
  ASSERT_TRUE(c->Push(1, 7, kPeer, kLocal, Bytes("hello"), kWhen, 42));
  const net::Endpoint peer6 = *net::Endpoint::Parse("[fd00:1::1]:6000");
  const net::Endpoint local6 = *net::Endpoint::Parse("[fd00:1::2]:4000");
  ASSERT_TRUE(c->Push(0, 3, peer6, local6, Bytes(""), kWhen, 1));
  ReceivedView v[4];
  ASSERT_EQ(r.Receive(v), 2u);
  // Rings take turns; within a ring, order is kept.
  const ReceivedView& a = v[0].socket == 7 ? v[0] : v[1];
  const ReceivedView& b = v[0].socket == 7 ? v[1] : v[0];
  EXPECT_EQ(a.socket, 7u);
  EXPECT_EQ(a.peer, kPeer);
  EXPECT_EQ(a.local, kLocal);
  EXPECT_EQ(a.arrival, kWhen);
  EXPECT_EQ(a.sequence, 42u);
  EXPECT_EQ(Text(a.payload), "hello");
  EXPECT_EQ(b.socket, 3u);
  EXPECT_EQ(b.peer, peer6);
  EXPECT_EQ(b.local, local6);
  EXPECT_TRUE(b.payload.empty());
  r.Release();
  EXPECT_EQ(r.Receive(v), 0u);
  EXPECT_EQ(c->counters().delivered, 2u);
}

// Waiting() looks without taking: what is published and not yet taken, in any ring.
TEST(ChannelTest, WaitingSaysWhetherARingHoldsDatagramsNotYetTaken) {
  auto c = Channel::Create({.rings = 2, .slots = 8}).value();
  ChannelReader r = ReaderOf(*c);
  EXPECT_FALSE(r.Waiting());
  ASSERT_TRUE(c->Stage(1, 7, kPeer, kLocal, Bytes("a"), kWhen, 1));
  EXPECT_FALSE(r.Waiting()) << "staged, not yet published";
  ASSERT_TRUE(c->Publish(1));
  EXPECT_TRUE(r.Waiting());
  EXPECT_TRUE(r.Waiting()) << "a look takes nothing";
  ReceivedView v[4];
  ASSERT_EQ(r.Receive(v), 1u);
  EXPECT_FALSE(r.Waiting()) << "taken, not yet released";
  r.Release();
  EXPECT_FALSE(r.Waiting());
}

TEST(ChannelTest, AFullRingDropsAndCountsAndNeverWaits) {
  auto c = Channel::Create({.rings = 1, .slots = 4}).value();
  ChannelReader r = ReaderOf(*c);
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(c->Push(0, 1, kPeer, kLocal, Bytes(std::to_string(i)), kWhen, i + 1), i < 4) << i;
  }
  EXPECT_EQ(c->counters().ring_full, 2u);
  ReceivedView v[8];
  ASSERT_EQ(r.Receive(v), 4u);
  EXPECT_EQ(Text(v[3].payload), "3");
  // Taken but not released: the slots are still the application's.
  EXPECT_FALSE(c->Push(0, 1, kPeer, kLocal, Bytes("x"), kWhen, 7));
  r.Release();
  EXPECT_TRUE(c->Push(0, 1, kPeer, kLocal, Bytes("x"), kWhen, 8));
  EXPECT_FALSE(c->broken());
}

// Where ring 0's control words are in the memfd (layout.h: producer, consumer, sleeping).
constexpr off_t kConsumerAt = kHeaderBytes + kLine;
constexpr off_t kSleepingAt = kHeaderBytes + 2 * kLine;

TEST(ChannelTest, ASleepingReaderIsWokenWhenItsRingGetsADatagram) {
  auto c = Channel::Create({.rings = 1, .slots = 16}).value();
  ChannelReader r = ReaderOf(*c);
  size_t got = 0;
  absl::Duration waited;
  std::thread reader([&] {
    ReceivedView v[4];
    const absl::Time start = absl::Now();
    got = r.Receive(v, absl::Seconds(120));
    waited = absl::Now() - start;
  });
  // Once the reader said it sleeps, a datagram into its empty ring must write the eventfd.
  uint32_t sleeping = 0;
  while (sleeping == 0) {
    ASSERT_EQ(pread(c->memfd(), &sleeping, sizeof(sleeping), kSleepingAt), 4);
    std::this_thread::yield();
  }
  ASSERT_TRUE(c->Push(0, 1, kPeer, kLocal, Bytes("wake"), kWhen, 1));
  reader.join();
  EXPECT_EQ(got, 1u);
  EXPECT_EQ(c->counters().wakeups, 1u);
  // Woken, not timed out (the timeout is far beyond any scheduling delay).
  EXPECT_LT(waited, absl::Seconds(60));
  // Awake readers are not woken: the next datagram writes no eventfd.
  ASSERT_TRUE(c->Push(0, 1, kPeer, kLocal, Bytes("again"), kWhen, 2));
  EXPECT_EQ(c->counters().wakeups, 1u);
}

// The reader took everything but has not given it back, and goes to sleep: the ring does not
// look empty to the producer, which must still wake it, and only once for that sleep.
TEST(ChannelTest, AReaderAsleepOnSlotsItHasNotGivenBackIsWokenOncePerSleep) {
  auto c = Channel::Create({.rings = 1, .slots = 16}).value();
  ChannelReader r = ReaderOf(*c);
  ASSERT_TRUE(c->Push(0, 1, kPeer, kLocal, Bytes("a"), kWhen, 1));
  ASSERT_TRUE(c->Push(0, 1, kPeer, kLocal, Bytes("b"), kWhen, 2));
  ReceivedView v[8];
  ASSERT_EQ(r.ReceiveOrArm(v), 2u);   // taken, not released
  ASSERT_EQ(r.ReceiveOrArm(v), 0u);   // nothing more: armed
  ASSERT_TRUE(c->Push(0, 1, kPeer, kLocal, Bytes("c"), kWhen, 3));
  ASSERT_TRUE(c->Push(0, 1, kPeer, kLocal, Bytes("d"), kWhen, 4));
  EXPECT_EQ(c->counters().wakeups, 1u);
  ASSERT_EQ(r.ReceiveOrArm(v), 2u);   // awake again: no more writes
  ASSERT_TRUE(c->Push(0, 1, kPeer, kLocal, Bytes("e"), kWhen, 5));
  EXPECT_EQ(c->counters().wakeups, 1u);
}

TEST(ChannelTest, StagedDatagramsAreSeenOncePublishedWithOneStore) {
  auto c = Channel::Create({.rings = 1, .slots = 16}).value();
  ChannelReader r = ReaderOf(*c);
  for (int i = 1; i <= 3; ++i) {
    ASSERT_TRUE(c->Stage(0, 1, kPeer, kLocal, Bytes(std::to_string(i)), kWhen, i));
  }
  ReceivedView v[8];
  EXPECT_EQ(r.Receive(v), 0u);  // written, not shown
  EXPECT_EQ(c->counters().delivered, 3u);
  EXPECT_TRUE(c->Publish(0));
  EXPECT_TRUE(c->Publish(0));  // nothing new: no store
  ASSERT_EQ(r.Receive(v), 3u);
  EXPECT_EQ(Text(v[2].payload), "3");
  EXPECT_EQ(c->counters().publishes, 1u);
}

TEST(ChannelTest, PublishLeavesASleepingReaderToWakeUnlessItsRingIsPastAQuarterFull) {
  auto c = Channel::Create({.rings = 1, .slots = 16}).value();
  ChannelReader r = ReaderOf(*c);
  ReceivedView v[16];
  ASSERT_EQ(r.ReceiveOrArm(v), 0u);  // asleep
  ASSERT_TRUE(c->Stage(0, 1, kPeer, kLocal, Bytes("a"), kWhen, 1));
  ASSERT_TRUE(c->Publish(0));
  EXPECT_EQ(c->counters().wakeups, 0u);
  c->Wake(0);
  EXPECT_EQ(c->counters().wakeups, 1u);
  c->Wake(0);  // the same sleep
  EXPECT_EQ(c->counters().wakeups, 1u);
  ASSERT_EQ(r.ReceiveOrArm(v), 1u);  // awake, took it (not given back)
  ASSERT_EQ(r.ReceiveOrArm(v), 0u);  // asleep again
  // 4 of 16 in use: a quarter, not past it; one more is.
  for (int i = 2; i <= 4; ++i) ASSERT_TRUE(c->Stage(0, 1, kPeer, kLocal, Bytes("b"), kWhen, i));
  ASSERT_TRUE(c->Publish(0));
  EXPECT_EQ(c->counters().wakeups, 1u);
  ASSERT_TRUE(c->Stage(0, 1, kPeer, kLocal, Bytes("c"), kWhen, 5));
  ASSERT_TRUE(c->Publish(0));
  EXPECT_EQ(c->counters().wakeups, 2u);
}

TEST(ChannelTest, AScribbledConsumerIndexEndsTheChannelAndNothingElse) {
  auto c = Channel::Create({.rings = 1, .slots = 8}).value();
  ChannelReader r = ReaderOf(*c);
  ASSERT_TRUE(c->Push(0, 1, kPeer, kLocal, Bytes("a"), kWhen, 1));
  ReceivedView v[8];
  ASSERT_EQ(r.Receive(v), 1u);
  r.Release();
  // The application writes a consumer index it could not have: past what was published.
  const uint32_t bad = 1000;
  ASSERT_EQ(pwrite(c->memfd(), &bad, sizeof(bad), kConsumerAt), 4);
  EXPECT_FALSE(c->Push(0, 1, kPeer, kLocal, Bytes("b"), kWhen, 2));
  EXPECT_TRUE(c->broken());
  EXPECT_NE(c->broken_reason().find("consumer index 1000"), std::string::npos)
      << c->broken_reason();
  EXPECT_FALSE(c->Push(0, 1, kPeer, kLocal, Bytes("c"), kWhen, 3));  // ended for good
  // Another channel does not notice.
  auto other = Channel::Create({.rings = 1, .slots = 8}).value();
  EXPECT_TRUE(other->Push(0, 1, kPeer, kLocal, Bytes("d"), kWhen, 1));
}

TEST(ChannelTest, RandomBytesOverTheWholeChannelNeverHurtTheProducer) {
  std::mt19937 rng(7);
  for (int round = 0; round < 50; ++round) {
    auto c = Channel::Create({.rings = 2, .slots = 8}).value();
    std::vector<uint8_t> junk(c->bytes());
    for (uint8_t& b : junk) b = static_cast<uint8_t>(rng());
    ASSERT_EQ(pwrite(c->memfd(), junk.data(), junk.size(), 0),
              static_cast<ssize_t>(junk.size()));
    // The producer keeps its own view: it drops, or it breaks the channel, never more.
    for (int i = 0; i < 20; ++i) (void)c->Push(i % 2, 1, kPeer, kLocal, Bytes("x"), kWhen, i);
    const ChannelCounters n = c->counters();
    EXPECT_LE(n.delivered + n.ring_full, 20u);
    // The TX ring's garbage is dropped, or ends the channel: at most a ring's worth of sends,
    // each within a buffer.
    int taken = 0;
    while (std::optional<OutgoingDatagram> d = Next(*c)) {
      EXPECT_LE(d->payload.size(), c->buffer_bytes());
      ASSERT_LE(++taken, 8);
    }
    // And a reader refuses memory whose header is not a channel's.
    std::vector<int> events;
    for (int fd : c->event_fds()) events.push_back(dup(fd));
    EXPECT_EQ(ChannelReader::Map(dup(c->memfd()), std::move(events)).status().code(),
              absl::StatusCode::kFailedPrecondition);
  }
}

TEST(ChannelTest, AProducerAndAConsumerThreadLoseNothingUncounted) {
  auto c = Channel::Create({.rings = 1, .slots = 64}).value();
  ChannelReader r = ReaderOf(*c);
  constexpr uint64_t kDatagrams = 200000;
  std::atomic<bool> done{false};
  std::thread producer([&] {
    for (uint64_t i = 1; i <= kDatagrams; ++i) {
      const std::string p = std::to_string(i);
      (void)c->Push(0, static_cast<uint32_t>(i % 5), kPeer, kLocal, Bytes(p), kWhen, i);
    }
    done = true;
  });
  uint64_t received = 0, last = 0;
  ReceivedView v[32];
  for (;;) {
    const bool finished = done.load();
    const size_t n = r.Receive(v, absl::Milliseconds(1));
    for (size_t i = 0; i < n; ++i) {
      ASSERT_GT(v[i].sequence, last);  // in order, each once
      ASSERT_EQ(Text(v[i].payload), std::to_string(v[i].sequence));
      ASSERT_EQ(v[i].socket, v[i].sequence % 5);
      last = v[i].sequence;
    }
    received += n;
    r.Release();
    if (finished && n == 0) break;
  }
  producer.join();
  const ChannelCounters n = c->counters();
  EXPECT_EQ(n.delivered, received);
  EXPECT_EQ(n.delivered + n.ring_full, kDatagrams);
  EXPECT_FALSE(c->broken());
}

TEST(ChannelTest, TheApplicationsSendsComeOutInOrderWithTheirDestinations) {
  auto c = Channel::Create({.rings = 2, .slots = 4}).value();
  ChannelReader r = ReaderOf(*c);
  EXPECT_TRUE(r.Send(3, Bytes("to peer"), kPeer));
  EXPECT_TRUE(r.Send(4, Bytes("connected")));
  const net::Endpoint peer6 = *net::Endpoint::Parse("[fd00:1::1]:6000");
  EXPECT_TRUE(r.Send(5, Bytes("six"), peer6));
  std::optional<OutgoingDatagram> d = Next(*c);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->socket, 3u);
  EXPECT_EQ(Text(d->payload), "to peer");
  EXPECT_EQ(d->peer, kPeer);
  d = Next(*c);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->socket, 4u);
  EXPECT_FALSE(d->peer.has_value());
  d = Next(*c);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->peer, peer6);
  EXPECT_FALSE(d->source.has_value());
  EXPECT_FALSE(Next(*c).has_value());
  // 3 of 4 slots are still quadsockd's until FinishSends: one more fits, then none.
  EXPECT_TRUE(r.Send(6, Bytes("d"), kPeer));
  EXPECT_FALSE(r.Send(7, Bytes("e"), kPeer));
  ASSERT_TRUE(Next(*c).has_value());
  c->FinishSends();
  EXPECT_TRUE(r.Send(7, Bytes("e"), kPeer));
  EXPECT_FALSE(r.Send(8, std::vector<uint8_t>(r.buffer_bytes() + 1), kPeer));  // too big
  EXPECT_EQ(c->counters().sends, 4u);
}

TEST(ChannelTest, ASendCarriesTheSourceAddressTheApplicationAskedFor) {
  auto c = Channel::Create({.rings = 1, .slots = 2}).value();
  ChannelReader r = ReaderOf(*c);
  const net::IpAddress v6 = *net::IpAddress::Parse("fd00:1::2");
  EXPECT_TRUE(r.Send(1, Bytes("four"), kPeer, kLocal.address));
  EXPECT_TRUE(r.Send(2, Bytes("six, connected"), std::nullopt, v6));
  std::optional<OutgoingDatagram> d = Next(*c);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->source, kLocal.address);
  EXPECT_TRUE(d->source->is_v4());
  d = Next(*c);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->source, v6);
  EXPECT_FALSE(d->peer.has_value());
  c->FinishSends();
  // The first slot again, without a source: the one it held before is not read.
  EXPECT_TRUE(r.Send(3, Bytes("none"), kPeer));
  d = Next(*c);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->socket, 3u);
  EXPECT_FALSE(d->source.has_value());
}

TEST(ChannelTest, ASleepingPollThreadIsWokenByTheApplicationsSend) {
  auto c = Channel::Create({.rings = 1, .slots = 4}).value();
  ChannelReader r = ReaderOf(*c);
  uint64_t kicks = 0;
  EXPECT_FALSE(c->ArmSends());  // nothing to send: the poll thread may sleep
  ASSERT_TRUE(r.Send(1, Bytes("wake up"), kPeer));
  ASSERT_EQ(read(c->tx_event_fd(), &kicks, sizeof(kicks)), 8);
  EXPECT_EQ(kicks, 1u);
  c->DisarmSends();
  ASSERT_TRUE(r.Send(1, Bytes("awake"), kPeer));  // the ring was not empty: no write
  EXPECT_EQ(read(c->tx_event_fd(), &kicks, sizeof(kicks)), -1);
  // And a datagram that came before the thread armed itself is seen by ArmSends.
  EXPECT_TRUE(c->ArmSends());
}

// A batch is published with one store and wakes a sleeping poll thread once; it stops where
// the ring is full, or before a payload too big for a buffer.
TEST(ChannelTest, ABatchOfSendsIsPublishedAtOnceAndStopsWhereTheRingIsFull) {
  auto c = Channel::Create({.rings = 1, .slots = 4}).value();
  ChannelReader r = ReaderOf(*c);
  EXPECT_FALSE(c->ArmSends());
  const std::string names[] = {"a", "b", "c", "d", "e"};
  std::vector<SendView> batch;
  for (const std::string& n : names) batch.push_back({1, Bytes(n), kPeer});
  EXPECT_EQ(r.SendBatch(batch), 4u);  // 4 slots
  uint64_t kicks = 0;
  ASSERT_EQ(read(c->tx_event_fd(), &kicks, sizeof(kicks)), 8);
  EXPECT_EQ(kicks, 1u);
  c->DisarmSends();
  for (const char* want : {"a", "b", "c", "d"}) {
    std::optional<OutgoingDatagram> d = Next(*c);
    ASSERT_TRUE(d.has_value());
    EXPECT_EQ(Text(d->payload), want);
  }
  EXPECT_FALSE(Next(*c).has_value());
  c->FinishSends();
  const std::vector<uint8_t> big(r.buffer_bytes() + 1);
  const std::string f = "f", g = "g";  // the views point into them
  const SendView stops[] = {{2, Bytes(f), std::nullopt}, {2, big, kPeer}, {2, Bytes(g), kPeer}};
  EXPECT_EQ(r.SendBatch(stops), 1u);
  std::optional<OutgoingDatagram> d = Next(*c);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(Text(d->payload), "f");
  EXPECT_FALSE(d->peer.has_value());
  EXPECT_FALSE(Next(*c).has_value());
  EXPECT_EQ(r.SendBatch({}), 0u);
}

// Every descriptor read is charged to the turn's budget, a refused one too: a ring of bad
// descriptors cannot make one turn walk more than its budget.
TEST(ChannelTest, EveryTxDescriptorReadIsChargedToTheBudget) {
  auto c = Channel::Create({.rings = 1, .slots = 8}).value();
  ChannelReader r = ReaderOf(*c);
  const off_t tx_ring = kHeaderBytes + RingBytes(8, c->buffer_bytes());  // after 1 RX ring
  for (int i = 0; i < 6; ++i) ASSERT_TRUE(r.Send(1, Bytes("x"), kPeer));
  // The first five descriptors' lengths past a buffer; the sixth is a datagram.
  for (int i = 0; i < 5; ++i) {
    const uint32_t huge = 1 << 30;
    const off_t length = tx_ring + sizeof(RingControl) + i * sizeof(ChannelDescriptor) + 4;
    ASSERT_EQ(pwrite(c->memfd(), &huge, 4, length), 4);
  }
  SendTurn turn{.budget = 3};
  EXPECT_FALSE(c->NextSend(turn).has_value());
  EXPECT_EQ(turn.budget, 0u);
  EXPECT_EQ(turn.refused, 3u);
  EXPECT_EQ(c->counters().bad_sends, 3u);
  turn = {.budget = 3};
  ASSERT_TRUE(c->NextSend(turn).has_value());
  EXPECT_EQ(turn.budget, 0u);  // two refused, one datagram
  EXPECT_EQ(turn.refused, 2u);
  EXPECT_EQ(c->counters().bad_sends, 5u);
  turn = {.budget = 3};
  EXPECT_FALSE(c->NextSend(turn).has_value());
  EXPECT_EQ(turn.budget, 3u);  // an empty ring costs nothing
  EXPECT_EQ(turn.refused, 0u);
}

TEST(ChannelTest, ABadTxDescriptorIsDroppedAndAnImpossibleProducerEndsTheChannel) {
  auto c = Channel::Create({.rings = 1, .slots = 8}).value();
  ChannelReader r = ReaderOf(*c);
  ASSERT_TRUE(r.Send(1, Bytes("fine"), kPeer));
  ASSERT_TRUE(r.Send(1, Bytes("bad length"), kPeer));
  // The application rewrites the second descriptor's length past a buffer.
  const off_t tx_ring = kHeaderBytes + RingBytes(8, c->buffer_bytes());  // after 1 RX ring
  const off_t second_length = tx_ring + sizeof(RingControl) + sizeof(ChannelDescriptor) + 4;
  const uint32_t huge = 1 << 30;
  ASSERT_EQ(pwrite(c->memfd(), &huge, 4, second_length), 4);
  ASSERT_TRUE(Next(*c).has_value());
  EXPECT_FALSE(Next(*c).has_value());
  EXPECT_EQ(c->counters().bad_sends, 1u);
  EXPECT_FALSE(c->broken());
  // Then a producer index more than a ring ahead.
  const uint32_t far = 1000;
  ASSERT_EQ(pwrite(c->memfd(), &far, 4, tx_ring), 4);
  EXPECT_FALSE(Next(*c).has_value());
  EXPECT_TRUE(c->broken());
  EXPECT_NE(c->broken_reason().find("producer index 1000"), std::string::npos)
      << c->broken_reason();
}

TEST(ChannelTest, CreateRefusesImpossibleSizes) {
  EXPECT_EQ(Channel::Create({.rings = 1, .slots = 1000}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Channel::Create({.rings = 0}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Channel::Create({.rings = kMaxRings + 1}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace quadsock::channel
