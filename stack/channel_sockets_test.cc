// A data channel's socket table (stack/internal/channel_sockets.h): lookups by session index,
// and pages that go when their last socket does.
#include "stack/internal/channel_sockets.h"

#include <gtest/gtest.h>

#include <memory>

#include "stack/demux/rcu.h"
#include "stack/internal/udp_socket.h"

namespace quadsock::stack {
namespace {

TEST(ChannelSocketsTest, ASessionThatOpensAndClosesForEverHoldsOnlyThePagesOfItsSockets) {
  ChannelSockets table;
  auto held = std::make_shared<UdpSocket>(net::Family::kV4, 16);
  auto passing = std::make_shared<UdpSocket>(net::Family::kV4, 16);
  ASSERT_TRUE(table.Set(3, held));
  // A session's indexes only grow: 200 pages' worth of sockets, opened and closed one by one.
  for (uint32_t i = 4; i < 200 * ChannelSockets::kPageSize; ++i) {
    ASSERT_TRUE(table.Set(i, passing));
    ASSERT_EQ(table.Find(i)->get(), passing.get());
    ASSERT_TRUE(table.Set(i, nullptr));
  }
  EXPECT_EQ(table.pages(), 1u);  // the held socket's
  EXPECT_EQ(table.Find(3)->get(), held.get());
  EXPECT_EQ(table.Find(5), nullptr);
  EXPECT_EQ(table.Find(ChannelSockets::kMaxIndex), nullptr);
  EXPECT_FALSE(table.Set(ChannelSockets::kMaxIndex + 1, held));
  // Two in one page: the page stays until both are gone; a replaced entry is no new one.
  ASSERT_TRUE(table.Set(5000, held));
  ASSERT_TRUE(table.Set(5001, held));
  ASSERT_TRUE(table.Set(5001, passing));
  EXPECT_EQ(table.pages(), 2u);
  ASSERT_TRUE(table.Set(5000, nullptr));
  EXPECT_EQ(table.pages(), 2u);
  EXPECT_EQ(table.Find(5001)->get(), passing.get());
  ASSERT_TRUE(table.Set(5001, nullptr));
  ASSERT_TRUE(table.Set(5001, nullptr));  // taking out what is not there changes nothing
  EXPECT_EQ(table.pages(), 1u);
  ASSERT_TRUE(table.Set(3, nullptr));
  EXPECT_EQ(table.pages(), 0u);
  demux::RcuBarrier();  // what was deferred is freed (LeakSanitizer would see it otherwise)
}

}  // namespace
}  // namespace quadsock::stack
