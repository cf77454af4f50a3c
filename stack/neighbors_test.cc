#include "stack/neighbors.h"

#include <gtest/gtest.h>

namespace quadsock::stack {
namespace {

const net::IpAddress kPeer = *net::IpAddress::Parse("10.1.0.1");
const net::MacAddress kMac = *net::MacAddress::Parse("02:00:00:00:00:01");
const absl::Time kT0 = absl::FromUnixSeconds(1000);

PendingDatagram Datagram(const std::string& payload) {
  return {*net::Endpoint::Parse("10.1.0.2:1"), *net::Endpoint::Parse("10.1.0.1:2"), kPeer, payload};
}

TEST(NeighborTableTest, QueueThenLearnReleasesInOrder) {
  NeighborTable n({});
  EXPECT_FALSE(n.Lookup(kPeer, kT0).has_value());
  EXPECT_TRUE(n.Queue(Datagram("1"), kT0));   // new entry: probe now
  EXPECT_FALSE(n.Queue(Datagram("2"), kT0));  // already probing
  std::vector<PendingDatagram> ready = n.Learn(kPeer, kMac, kT0, false);
  ASSERT_EQ(ready.size(), 2u);
  EXPECT_EQ(ready[0].payload, "1");
  EXPECT_EQ(ready[1].payload, "2");
  EXPECT_EQ(n.Lookup(kPeer, kT0), kMac);
  EXPECT_EQ(n.counters().resolved, 1u);
}

TEST(NeighborTableTest, LearnWithoutCreateOnlyUpdates) {
  NeighborTable n({});
  EXPECT_TRUE(n.Learn(kPeer, kMac, kT0, false).empty());
  EXPECT_FALSE(n.Lookup(kPeer, kT0).has_value());
  n.Learn(kPeer, kMac, kT0, true);
  EXPECT_EQ(n.Lookup(kPeer, kT0), kMac);
}

TEST(NeighborTableTest, ProbesThenFailsAndDrops) {
  NeighborTable n({.retransmit = absl::Seconds(1), .max_probes = 3, .max_pending = 2});
  n.Queue(Datagram("a"), kT0);
  n.Queue(Datagram("b"), kT0);
  n.Queue(Datagram("c"), kT0);  // over max_pending
  EXPECT_EQ(n.counters().dropped_queue_full, 1u);
  EXPECT_TRUE(n.Tick(kT0 + absl::Milliseconds(500)).empty());
  EXPECT_EQ(n.Tick(kT0 + absl::Seconds(1)).size(), 1u);
  EXPECT_EQ(n.Tick(kT0 + absl::Seconds(2)).size(), 1u);
  EXPECT_TRUE(n.Tick(kT0 + absl::Seconds(3)).empty());  // out of probes: gone
  EXPECT_EQ(n.counters().failed, 1u);
  EXPECT_EQ(n.counters().dropped_unresolved, 2u);
  EXPECT_EQ(n.counters().probes_sent, 3u);
  EXPECT_TRUE(n.List().empty());
}

TEST(NeighborTableTest, StaleEntriesAreUsedAndRefreshed) {
  NeighborTable n({.reachable_time = absl::Seconds(30)});
  n.Learn(kPeer, kMac, kT0, true);
  const absl::Time later = kT0 + absl::Seconds(31);
  EXPECT_EQ(n.Lookup(kPeer, later), kMac);  // stale, still used
  EXPECT_EQ(n.List()[0].state, NeighborState::kStale);
  EXPECT_EQ(n.Tick(later).size(), 1u);       // one refreshing probe
  n.Learn(kPeer, kMac, later, false);
  EXPECT_EQ(n.List()[0].state, NeighborState::kReachable);
}

TEST(NeighborTableTest, BoundedTableAndPermanentEntries) {
  NeighborTable n({.max_entries = 2});
  ASSERT_EQ(n.SetPermanent(kPeer, kMac), absl::OkStatus());
  n.Learn(*net::IpAddress::Parse("10.1.0.3"), kMac, kT0, true);
  // Full, and nothing is stale: a third neighbour is refused.
  EXPECT_FALSE(n.Queue({{}, {}, *net::IpAddress::Parse("10.1.0.4"), "x"}, kT0));
  EXPECT_EQ(n.counters().table_full, 1u);
  EXPECT_EQ(n.SetPermanent(*net::IpAddress::Parse("10.1.0.5"), kMac).code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(n.Remove(*net::IpAddress::Parse("10.1.0.9")).code(), absl::StatusCode::kNotFound);
  // A permanent entry is never replaced by what the wire says.
  n.Learn(kPeer, *net::MacAddress::Parse("02:00:00:00:00:66"), kT0, true);
  EXPECT_EQ(n.Lookup(kPeer, kT0 + absl::Hours(1)), kMac);
}

}  // namespace
}  // namespace quadsock::stack
