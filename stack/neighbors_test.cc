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

// Setting a neighbour by hand hands over what waited for it, or drops it counted: never leaves
// it in an entry that no answer or timer will visit again.
TEST(NeighborTableTest, PermanentEntryReleasesWhatWaited) {
  NeighborTable n({});
  EXPECT_TRUE(n.Queue({{}, {}, kPeer, "one"}, kT0));
  EXPECT_FALSE(n.Queue({{}, {}, kPeer, "two"}, kT0));
  std::vector<PendingDatagram> ready;
  ASSERT_EQ(n.SetPermanent(kPeer, kMac, kT0, &ready), absl::OkStatus());
  ASSERT_EQ(ready.size(), 2u);
  EXPECT_EQ(ready[0].payload, "one");
  EXPECT_EQ(n.List()[0].pending, 0u);
  const net::IpAddress other = *net::IpAddress::Parse("10.1.0.8");
  EXPECT_TRUE(n.Queue({{}, {}, other, "three"}, kT0));
  ASSERT_EQ(n.SetPermanent(other, kMac, kT0), absl::OkStatus());
  EXPECT_EQ(n.counters().dropped_unresolved, 1u);
}

TEST(NeighborTableTest, BoundedTableAndPermanentEntries) {
  NeighborTable n({.max_entries = 2});
  const net::IpAddress a3 = *net::IpAddress::Parse("10.1.0.3");
  const net::IpAddress a4 = *net::IpAddress::Parse("10.1.0.4");
  ASSERT_EQ(n.SetPermanent(kPeer, kMac, kT0), absl::OkStatus());
  n.Learn(a3, kMac, kT0, true);
  // Full: a next hop we send to takes the reachable entry's place, never the permanent one's.
  EXPECT_TRUE(n.Queue({{}, {}, a4, "x"}, kT0));
  EXPECT_FALSE(n.Lookup(a3, kT0).has_value());
  EXPECT_EQ(n.Lookup(kPeer, kT0), kMac);
  // Now full of a permanent and an unresolved entry (a datagram waits there): no room.
  EXPECT_FALSE(n.Queue({{}, {}, *net::IpAddress::Parse("10.1.0.5"), "y"}, kT0));
  EXPECT_EQ(n.counters().table_full, 1u);
  EXPECT_EQ(n.SetPermanent(*net::IpAddress::Parse("10.1.0.6"), kMac, kT0).code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(n.Remove(*net::IpAddress::Parse("10.1.0.9")).code(), absl::StatusCode::kNotFound);
  // A permanent entry is never replaced by what the wire says.
  n.Learn(kPeer, *net::MacAddress::Parse("02:00:00:00:00:66"), kT0, true);
  EXPECT_EQ(n.Lookup(kPeer, kT0 + absl::Hours(1)), kMac);
}

// Neighbours learned from requests for us, never sent to, never looked up: they must not keep
// the table full for good (they used to stay REACHABLE, and only stale entries made room).
TEST(NeighborTableTest, LearnedNeighboursDoNotLockOutNextHops) {
  NeighborTable n({.reachable_time = absl::Seconds(30), .max_entries = 4});
  for (int i = 0; i < 4; ++i) {
    n.Learn(net::IpAddress::V4(0x0a020000 + i), kMac, kT0 + absl::Seconds(i), true);
  }
  // Another sender on the wire while all four are fresh: not learned, nothing pushed out.
  n.Learn(net::IpAddress::V4(0x0a020009), kMac, kT0 + absl::Seconds(5), true);
  EXPECT_EQ(n.List().size(), 4u);
  EXPECT_FALSE(n.Lookup(net::IpAddress::V4(0x0a020009), kT0).has_value());
  // A next hop we send to gets the oldest learned entry's place, fresh or not.
  EXPECT_TRUE(n.Queue(Datagram("1"), kT0 + absl::Seconds(6)));
  EXPECT_FALSE(n.Lookup(net::IpAddress::V4(0x0a020000), kT0).has_value());
  EXPECT_EQ(n.counters().table_full, 1u);  // only the wire's fifth sender
  // Once the learned entries have expired, the wire's senders may take their places again,
  // the oldest first.
  const absl::Time later = kT0 + absl::Seconds(40);
  n.Learn(net::IpAddress::V4(0x0a020009), kMac, later, true);
  EXPECT_EQ(n.Lookup(net::IpAddress::V4(0x0a020009), later), kMac);
  EXPECT_FALSE(n.Lookup(net::IpAddress::V4(0x0a020001), later).has_value());
  EXPECT_EQ(n.Lookup(net::IpAddress::V4(0x0a020002), later), kMac);
}

// What no neighbour has is refused, saying what is wrong, and leaves no entry.
TEST(NeighborTableTest, PermanentEntriesNeedAUnicastAddressAndMac) {
  NeighborTable n({});
  const auto refused = [&](const char* ip, const char* mac, const std::string& why) {
    const absl::Status s =
        n.SetPermanent(*net::IpAddress::Parse(ip), *net::MacAddress::Parse(mac), kT0);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << ip << " " << mac;
    EXPECT_NE(s.message().find(why), std::string::npos) << s.message();
  };
  refused("10.1.0.9", "00:00:00:00:00:00", "all zeros");
  refused("10.1.0.9", "ff:ff:ff:ff:ff:ff", "broadcast");
  refused("10.1.0.9", "01:00:5e:00:00:01", "multicast");
  refused("224.0.0.1", "02:00:00:00:00:09", "multicast");
  refused("ff02::1", "02:00:00:00:00:09", "multicast");
  refused("0.0.0.0", "02:00:00:00:00:09", "unspecified");
  refused("::", "02:00:00:00:00:09", "unspecified");
  refused("127.0.0.1", "02:00:00:00:00:09", "loopback");
  refused("255.255.255.255", "02:00:00:00:00:09", "broadcast");
  EXPECT_TRUE(n.List().empty());
  EXPECT_EQ(n.Remove(*net::IpAddress::Parse("224.0.0.1")).code(),
            absl::StatusCode::kInvalidArgument);
}

// Permanent entries are never evicted: at most half the table may be permanent, so that the
// neighbours the stack learns and sends to always have room.
TEST(NeighborTableTest, PermanentEntriesTakeAtMostHalfTheTable) {
  NeighborTable n({.max_entries = 4});
  ASSERT_EQ(n.SetPermanent(net::IpAddress::V4(0x0a010001), kMac, kT0), absl::OkStatus());
  ASSERT_EQ(n.SetPermanent(net::IpAddress::V4(0x0a010002), kMac, kT0), absl::OkStatus());
  const absl::Status third = n.SetPermanent(net::IpAddress::V4(0x0a010003), kMac, kT0);
  EXPECT_EQ(third.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(third.message().find("2 permanent entries"), std::string::npos) << third.message();
  // A learned neighbour does not become permanent past the cap either.
  n.Learn(net::IpAddress::V4(0x0a010004), kMac, kT0, true);
  EXPECT_EQ(n.SetPermanent(net::IpAddress::V4(0x0a010004), kMac, kT0).code(),
            absl::StatusCode::kResourceExhausted);
  // A permanent entry may change its MAC; and removing one makes room.
  EXPECT_EQ(n.SetPermanent(net::IpAddress::V4(0x0a010002), kMac, kT0), absl::OkStatus());
  ASSERT_EQ(n.Remove(net::IpAddress::V4(0x0a010001)), absl::OkStatus());
  EXPECT_EQ(n.SetPermanent(net::IpAddress::V4(0x0a010003), kMac, kT0), absl::OkStatus());
  // Next hops we send to still find room.
  EXPECT_TRUE(n.Queue({{}, {}, net::IpAddress::V4(0x0a010005), "x"}, kT0));
  EXPECT_TRUE(n.Queue({{}, {}, net::IpAddress::V4(0x0a010006), "y"}, kT0));
  EXPECT_EQ(n.counters().table_full, 0u);
}

}  // namespace
}  // namespace quadsock::stack
