#include "stack/link/memory_link.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>

namespace quadsock::link {
namespace {

std::span<const uint8_t> Bytes(const char* s) {
  return {reinterpret_cast<const uint8_t*>(s), std::strlen(s)};
}

TEST(MemoryLinkTest, PairCarriesFramesBothWays) {
  auto [a, b] = MemoryLink::CreatePair({.name = "a"}, {.name = "b"});
  std::optional<FrameBuffer> f = a->AllocateTx(64);
  ASSERT_TRUE(f.has_value());
  std::memcpy(f->data, "hello", 5);
  f->length = 5;
  ASSERT_EQ(a->Transmit({&*f, 1}), 1u);
  FrameBuffer in[4];
  ASSERT_EQ(b->Receive(in), 1u);
  EXPECT_EQ(std::string(reinterpret_cast<char*>(in[0].data), in[0].length), "hello");
  b->Release({in, 1});
  EXPECT_EQ(a->CheckFrameAccounting(), absl::OkStatus());
  EXPECT_EQ(b->CheckFrameAccounting(), absl::OkStatus());
  EXPECT_EQ(a->counters().tx_frames, 1u);
  EXPECT_EQ(b->counters().rx_frames, 1u);
}

TEST(MemoryLinkTest, TestEndInjectsAndCaptures) {
  MemoryLink::Pair p = MemoryLink::CreateWithTestEnd({.name = "stack"});
  ASSERT_TRUE(p.test_end->Inject(Bytes("frame")));
  FrameBuffer in[1];
  ASSERT_EQ(p.link->Receive(in), 1u);
  // Echo it back in place, as an ICMP echo reply would.
  in[0].data[0] = 'F';
  ASSERT_EQ(p.link->Transmit({in, 1}), 1u);
  std::vector<std::vector<uint8_t>> sent = p.test_end->TakeSent();
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(std::string(sent[0].begin(), sent[0].end()), "Frame");
  EXPECT_EQ(p.link->CheckFrameAccounting(), absl::OkStatus());
}

TEST(MemoryLinkTest, BoundedQueueDropsAndCounts) {
  MemoryLink::Pair p = MemoryLink::CreateWithTestEnd({.name = "stack", .rx_queue = 2});
  EXPECT_TRUE(p.test_end->Inject(Bytes("1")));
  EXPECT_TRUE(p.test_end->Inject(Bytes("2")));
  EXPECT_FALSE(p.test_end->Inject(Bytes("3")));
  EXPECT_EQ(p.link->counters().rx_dropped, 1u);
}

TEST(MemoryLinkTest, RxRingFillIsWhatWaitedAtTheLastReceive) {
  MemoryLink::Pair p = MemoryLink::CreateWithTestEnd({.name = "stack"});
  for (const char* f : {"1", "2", "3", "4", "5"}) ASSERT_TRUE(p.test_end->Inject(Bytes(f)));
  EXPECT_EQ(p.link->counters().rx_ring_fill, 0u);  // nobody has looked yet
  FrameBuffer in[2];
  for (uint64_t waiting : {5u, 3u, 1u}) {
    const size_t n = p.link->Receive(in);
    EXPECT_EQ(p.link->counters().rx_ring_fill, waiting);
    p.link->Release({in, n});
  }
  EXPECT_EQ(p.link->Receive(in), 0u);
  EXPECT_EQ(p.link->counters().rx_ring_fill, 0u);
  EXPECT_EQ(p.link->CheckFrameAccounting(), absl::OkStatus());
}

TEST(MemoryLinkTest, RunsOutOfBuffersGracefully) {
  MemoryLink::Pair p = MemoryLink::CreateWithTestEnd({.name = "stack", .frames = 2});
  std::optional<FrameBuffer> x = p.link->AllocateTx(64);
  std::optional<FrameBuffer> y = p.link->AllocateTx(64);
  ASSERT_TRUE(x && y);
  EXPECT_FALSE(p.link->AllocateTx(64).has_value());
  EXPECT_EQ(p.link->counters().no_tx_buffer, 1u);
  p.link->Release({&*x, 1});
  // A frame longer than a buffer: none, counted, and the free buffer stays free.
  EXPECT_FALSE(p.link->AllocateTx(2049).has_value());
  EXPECT_EQ(p.link->counters().no_tx_buffer, 2u);
  x = p.link->AllocateTx(2048);
  ASSERT_TRUE(x.has_value());
  EXPECT_GE(x->capacity, 2048u);
  p.link->Release({&*x, 1});
  p.link->Release({&*y, 1});
  EXPECT_EQ(p.link->CheckFrameAccounting(), absl::OkStatus());
}

// At rest every frame is free: one the stack took and kept is a leak, and the check says so.
TEST(MemoryLinkTest, AFrameHeldAtRestFailsTheCheck) {
  MemoryLink::Pair p = MemoryLink::CreateWithTestEnd({.name = "stack", .frames = 4});
  ASSERT_TRUE(p.test_end->Inject(Bytes("frame")));
  FrameBuffer in[1];
  ASSERT_EQ(p.link->Receive(in), 1u);
  absl::Status held = p.link->CheckFrameAccounting();
  EXPECT_EQ(held.code(), absl::StatusCode::kInternal);
  EXPECT_EQ(held.message(),
            "stack: 1 frames held at rest (taken by Receive or AllocateTx and never released or "
            "transmitted), frame " + std::to_string(in[0].handle) + " first");
  p.link->Release({in, 1});
  EXPECT_EQ(p.link->CheckFrameAccounting(), absl::OkStatus());

  std::optional<FrameBuffer> tx = p.link->AllocateTx(64);
  ASSERT_TRUE(tx.has_value());
  EXPECT_EQ(p.link->CheckFrameAccounting().code(), absl::StatusCode::kInternal);
  tx->length = 1;
  ASSERT_EQ(p.link->Transmit({&*tx, 1}), 1u);
  EXPECT_EQ(p.link->CheckFrameAccounting(), absl::OkStatus());
}

TEST(MemoryLinkDeathTest, DoubleReleaseAborts) {
  MemoryLink::Pair p = MemoryLink::CreateWithTestEnd({.name = "stack"});
  std::optional<FrameBuffer> x = p.link->AllocateTx(64);
  p.link->Release({&*x, 1});
  EXPECT_DEATH(p.link->Release({&*x, 1}), "frame accounting broken");
}

}  // namespace
}  // namespace quadsock::link
