#include "stack/receive_budget.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "stack/internal/udp_socket.h"

namespace quadsock::stack {
namespace {

const net::Endpoint kFrom{*net::IpAddress::Parse("10.1.0.1"), 5000};
const net::Endpoint kTo{*net::IpAddress::Parse("10.1.0.2"), 7};

void Deliver(UdpSocket& s, const std::string& payload) {
  s.Deliver(kFrom, kTo, {reinterpret_cast<const uint8_t*>(payload.data()), payload.size()},
            absl::UnixEpoch());
}

TEST(ReceiveBudgetTest, ChargesUpToTheLimitAndTakesReleasesBack) {
  ReceiveBudget b(1000);
  EXPECT_TRUE(b.TryCharge(600));
  EXPECT_FALSE(b.TryCharge(401));
  EXPECT_TRUE(b.TryCharge(400));
  EXPECT_EQ(b.used(), 1000u);
  EXPECT_FALSE(b.TryCharge(1));
  EXPECT_EQ(b.refused(), 2u);
  b.Release(600);
  EXPECT_EQ(b.used(), 400u);
  EXPECT_TRUE(b.TryCharge(600));
}

// A peer's share: what it takes counts against both; its full share leaves the rest to others.
TEST(ReceiveBudgetTest, AShareTakesFromBothAndLeavesTheRestToOthers) {
  auto whole = std::make_shared<ReceiveBudget>(1000);
  ReceiveBudget greedy(500, whole), other(500, whole);
  EXPECT_TRUE(greedy.TryReserve(400));
  EXPECT_FALSE(greedy.TryCharge(101));  // over its share, though the whole has room
  EXPECT_EQ(greedy.used(), 400u);
  EXPECT_EQ(whole->used(), 400u);
  EXPECT_TRUE(other.TryCharge(500));
  EXPECT_EQ(whole->used(), 900u);
  EXPECT_EQ(whole->refused(), 1u);  // the share's refusal counts in the whole
  // A share bigger than what the whole has left: the whole refuses, and gives nothing back.
  ReceiveBudget third(1000, whole);
  EXPECT_FALSE(third.TryCharge(200));
  EXPECT_EQ(third.used(), 0u);
  EXPECT_EQ(whole->used(), 900u);
  greedy.Release(400);
  other.Release(500);
  EXPECT_EQ(whole->used(), 0u);
}

// Queues deep enough for everything: the budget, not the depth, drops. What a datagram costs is
// found by queueing one.
TEST(ReceiveBudgetTest, SocketsShareTheBudgetAndGiveItBack) {
  auto budget = std::make_shared<ReceiveBudget>(size_t{1} << 20);
  const std::string payload(100, 'x');
  size_t each = 0;
  {
    UdpSocket probe(net::Family::kV4, 256, false, budget);
    Deliver(probe, payload);
    each = budget->used();
    ASSERT_GT(each, payload.size());
  }
  EXPECT_EQ(budget->used(), 0u);  // the socket's destructor freed the queued datagram

  budget = std::make_shared<ReceiveBudget>(3 * each);
  auto a = std::make_unique<UdpSocket>(net::Family::kV4, 256, false, budget);
  UdpSocket b(net::Family::kV4, 256, false, budget);
  for (int i = 0; i < 3; ++i) Deliver(*a, payload);
  Deliver(*a, payload);
  Deliver(b, payload);
  EXPECT_EQ(a->counters().queued, 3u);
  EXPECT_EQ(a->counters().rx_dropped, 1u);
  EXPECT_EQ(b.counters().queued, 0u);
  EXPECT_EQ(b.counters().rx_dropped, 1u);
  EXPECT_EQ(budget->refused(), 2u);
  EXPECT_EQ(budget->used(), 3 * each);

  // A datagram read makes room for one more, anywhere; its payload comes out whole.
  std::optional<ReceivedDatagram> d = a->Pop();
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->payload, payload);
  EXPECT_EQ(d->sequence, 1u);
  EXPECT_EQ(budget->used(), 2 * each);
  Deliver(b, payload);
  EXPECT_EQ(b.counters().queued, 1u);
  EXPECT_EQ(b.Pop()->sequence, 2u);  // the dropped one left a gap
  a.reset();                         // closing gives back what the socket still held
  EXPECT_EQ(budget->used(), 0u);
}

// What the successful charges hold at once never passes the limit, however they race.
TEST(ReceiveBudgetTest, RacingChargesNeverPassTheLimit) {
  ReceiveBudget b(100);
  std::atomic<size_t> held{0};  // raised after a charge succeeds, lowered before its release
  std::atomic<size_t> most{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 20000; ++i) {
        if (!b.TryCharge(7)) continue;
        const size_t now = held.fetch_add(7) + 7;
        size_t m = most.load();
        while (now > m && !most.compare_exchange_weak(m, now)) {
        }
        held.fetch_sub(7);
        b.Release(7);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_LE(most.load(), 100u);
  EXPECT_EQ(b.used(), 0u);
}

}  // namespace
}  // namespace quadsock::stack
