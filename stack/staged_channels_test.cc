// The poll engine's data channels between staging and wake-up (stack/internal/staged_channels.h):
// a batch is published once per channel, and sleeping applications are woken at the idle turn
// or every few busy turns, never per batch.
#include "stack/internal/staged_channels.h"

#include <unistd.h>

#include <memory>
#include <vector>

#include <gtest/gtest.h>

#include "stack/channel/reader.h"

namespace quadsock::stack {
namespace {

const net::Endpoint kPeer = *net::Endpoint::Parse("10.1.0.1:5000");
const net::Endpoint kLocal = *net::Endpoint::Parse("10.1.0.2:4000");
const absl::Time kWhen = absl::FromUnixSeconds(1700000000);
const uint8_t kPayload[4] = {1, 2, 3, 4};

channel::ChannelReader ReaderOf(const channel::Channel& c) {
  std::vector<int> events;
  for (int fd : c.event_fds()) events.push_back(dup(fd));
  return channel::ChannelReader::Map(dup(c.memfd()), std::move(events)).value();
}

// What a delivery does: stage on the engine's ring, then tell the set.
void Deliver(StagedChannels& staged, channel::Channel& c, uint64_t sequence) {
  ASSERT_TRUE(c.Stage(staged.ring(), 1, kPeer, kLocal, kPayload, kWhen, sequence));
  staged.Add(&c);
}

TEST(StagedChannelsTest, ABatchIsPublishedOnceAChannel) {
  auto a = channel::Channel::Create({.rings = 2, .slots = 64}).value();
  auto b = channel::Channel::Create({.rings = 2, .slots = 64}).value();
  channel::ChannelReader ra = ReaderOf(*a), rb = ReaderOf(*b);
  StagedChannels staged(1);  // the second engine: ring 1
  for (uint64_t i = 1; i <= 10; ++i) Deliver(staged, i % 3 == 0 ? *b : *a, i);
  channel::ReceivedView v[16];
  EXPECT_EQ(ra.Receive(v), 0u);
  staged.Publish();
  EXPECT_EQ(ra.Receive(v), 7u);
  EXPECT_EQ(rb.Receive(v), 3u);
  EXPECT_EQ(a->counters().publishes, 1u);
  EXPECT_EQ(b->counters().publishes, 1u);
}

TEST(StagedChannelsTest, AnIdleTurnWakesASleepingApplication) {
  auto c = channel::Channel::Create({.rings = 1, .slots = 64}).value();
  channel::ChannelReader r = ReaderOf(*c);
  channel::ReceivedView v[16];
  ASSERT_EQ(r.ReceiveOrArm(v), 0u);  // asleep
  StagedChannels staged(0);
  Deliver(staged, *c, 1);
  staged.Publish();
  staged.EndTurn(/*idle=*/false);
  EXPECT_EQ(c->counters().wakeups, 0u);
  staged.EndTurn(/*idle=*/true);
  EXPECT_EQ(c->counters().wakeups, 1u);
  EXPECT_TRUE(staged.empty());  // it holds the channel no longer
}

TEST(StagedChannelsTest, BusyTurnsWakeASleepingApplicationEveryFourth) {
  auto c = channel::Channel::Create({.rings = 1, .slots = 1024}).value();
  channel::ChannelReader r = ReaderOf(*c);
  channel::ReceivedView v[16];
  ASSERT_EQ(r.ReceiveOrArm(v), 0u);
  StagedChannels staged(0);
  uint64_t sequence = 0;
  for (uint32_t turn = 1; turn <= StagedChannels::kBusyTurnsPerWake; ++turn) {
    EXPECT_EQ(c->counters().wakeups, 0u) << turn;
    Deliver(staged, *c, ++sequence);
    staged.Publish();
    staged.EndTurn(/*idle=*/false);
  }
  EXPECT_EQ(c->counters().wakeups, 1u);
  EXPECT_EQ(c->counters().publishes, StagedChannels::kBusyTurnsPerWake);
  EXPECT_TRUE(staged.empty());
}

TEST(StagedChannelsTest, MoreChannelsThanItHoldsArePublishedAsTheyMakeRoom) {
  std::vector<std::shared_ptr<channel::Channel>> channels;
  std::vector<channel::ChannelReader> readers;
  for (size_t i = 0; i <= StagedChannels::kMax; ++i) {
    channels.push_back(channel::Channel::Create({.rings = 1, .slots = 16}).value());
    readers.push_back(ReaderOf(*channels.back()));
  }
  StagedChannels staged(0);
  for (size_t i = 0; i <= StagedChannels::kMax; ++i) Deliver(staged, *channels[i], 1);
  channel::ReceivedView v[4];
  EXPECT_EQ(readers[0].Receive(v), 1u);  // made room for the last one
  EXPECT_EQ(readers[1].Receive(v), 0u);
  staged.Publish();
  for (size_t i = 1; i <= StagedChannels::kMax; ++i) EXPECT_EQ(readers[i].Receive(v), 1u) << i;
}

TEST(StagedChannelsTest, ItTellsWhetherTheLastBatchStagedADatagram) {
  auto c = channel::Channel::Create({.rings = 1, .slots = 16}).value();
  StagedChannels staged(0);
  EXPECT_FALSE(staged.last_batch_staged());
  Deliver(staged, *c, 1);
  staged.Publish();
  EXPECT_TRUE(staged.last_batch_staged());
  staged.Publish();  // a batch of callbacks' datagrams, say
  EXPECT_FALSE(staged.last_batch_staged());
}

}  // namespace
}  // namespace quadsock::stack
