#include "stack/bounded_queue.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

namespace quadsock::stack {
namespace {

TEST(BoundedQueueTest, FifoAndBounded) {
  BoundedQueue<int> q(3);  // rounds up to 4
  EXPECT_EQ(q.capacity(), 4u);
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(q.TryPush(i));
  EXPECT_FALSE(q.TryPush(99));
  for (int i = 0; i < 4; ++i) EXPECT_EQ(q.TryPop(), i);
  EXPECT_FALSE(q.TryPop().has_value());
}

TEST(BoundedQueueTest, ManyProducersOneConsumerLoseNothing) {
  BoundedQueue<uint64_t> q(1024);
  constexpr int kProducers = 3;
  constexpr uint64_t kEach = 100000;
  std::vector<std::thread> producers;
  for (int p = 0; p < kProducers; ++p) {
    producers.emplace_back([&q, p] {
      for (uint64_t i = 0; i < kEach; ++i) {
        while (!q.TryPush(uint64_t{static_cast<uint64_t>(p)} << 32 | i)) std::this_thread::yield();
      }
    });
  }
  std::vector<uint64_t> next(kProducers, 0);
  uint64_t received = 0;
  while (received < kProducers * kEach) {
    std::optional<uint64_t> v = q.TryPop();
    if (!v.has_value()) continue;
    const int p = static_cast<int>(*v >> 32);
    ASSERT_EQ(*v & 0xffffffff, next[p]) << "producer " << p << " out of order";
    ++next[p];
    ++received;
  }
  for (auto& t : producers) t.join();
  EXPECT_FALSE(q.TryPop().has_value());
}

}  // namespace
}  // namespace quadsock::stack
