#include "stack/neighbors.h"

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"

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
  std::vector<PendingDatagram> ready = n.Learn(kPeer, {.mac = kMac, .solicited = true}, kT0);
  ASSERT_EQ(ready.size(), 2u);
  EXPECT_EQ(ready[0].payload, "1");
  EXPECT_EQ(ready[1].payload, "2");
  EXPECT_EQ(n.Lookup(kPeer, kT0), kMac);
  EXPECT_EQ(n.counters().resolved, 1u);
}

// Only a request or solicitation for us makes an entry, and a STALE one (RFC 4861 7.2.3).
TEST(NeighborTableTest, LearnWithoutCreateOnlyUpdates) {
  NeighborTable n({});
  EXPECT_TRUE(n.Learn(kPeer, {.mac = kMac, .solicited = true}, kT0).empty());
  EXPECT_FALSE(n.Lookup(kPeer, kT0).has_value());
  n.Learn(kPeer, {.mac = kMac, .create = true}, kT0);
  ASSERT_EQ(n.List().size(), 1u);
  EXPECT_EQ(n.List()[0].state, NeighborState::kStale);
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
  n.Queue(Datagram("1"), kT0);
  n.Learn(kPeer, {.mac = kMac, .solicited = true}, kT0);
  EXPECT_EQ(n.List()[0].state, NeighborState::kReachable);
  const absl::Time later = kT0 + absl::Seconds(31);
  EXPECT_EQ(n.Lookup(kPeer, later), kMac);  // stale, still used
  EXPECT_EQ(n.List()[0].state, NeighborState::kStale);
  EXPECT_TRUE(n.Tick(later).empty());        // RFC 4861's DELAY: an answer may yet come
  EXPECT_EQ(n.Tick(later + absl::Seconds(5)).size(), 1u);  // one refreshing probe
  n.Learn(kPeer, {.mac = kMac, .solicited = true}, later + absl::Seconds(5));
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
  n.Learn(a3, {.mac = kMac, .create = true}, kT0);
  // Full: a next hop we send to takes the learned entry's place, never the permanent one's.
  EXPECT_TRUE(n.Queue({{}, {}, a4, "x"}, kT0));
  EXPECT_FALSE(n.Lookup(a3, kT0).has_value());
  EXPECT_EQ(n.Lookup(kPeer, kT0), kMac);
  // Now full of a permanent and an unresolved entry: the unresolved one goes (dropped,
  // counted) before the permanent one would.
  EXPECT_TRUE(n.Queue({{}, {}, *net::IpAddress::Parse("10.1.0.5"), "y"}, kT0));
  EXPECT_FALSE(n.Lookup(a4, kT0).has_value());
  EXPECT_EQ(n.counters().evicted, 2u);
  EXPECT_EQ(n.counters().dropped_unresolved, 1u);
  // A neighbour from the wire finds no room: no stale entry to replace.
  n.Learn(a3, {.mac = kMac, .create = true}, kT0);
  EXPECT_EQ(n.counters().table_full, 1u);
  EXPECT_EQ(n.SetPermanent(*net::IpAddress::Parse("10.1.0.6"), kMac, kT0).code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(n.Remove(*net::IpAddress::Parse("10.1.0.9")).code(), absl::StatusCode::kNotFound);
  // A permanent entry is never replaced by what the wire says.
  n.Learn(kPeer, {.mac = *net::MacAddress::Parse("02:00:00:00:00:66"), .solicited = true},
          kT0);
  EXPECT_EQ(n.Lookup(kPeer, kT0 + absl::Hours(1)), kMac);
}

// on_entry hears of every entry as it is made and as it goes, whatever makes or drops it: a
// datagram's next hop, a request for us, the administration, failed probes, eviction.
TEST(NeighborTableTest, OnEntryHearsEveryEntryMadeAndDropped) {
  std::vector<std::string> heard;
  NeighborTable::Options o{.retransmit = absl::Seconds(1), .max_probes = 1, .max_entries = 2};
  o.on_entry = [&heard](const net::IpAddress& ip, bool present) {
    heard.push_back(absl::StrCat(present ? "+" : "-", ip.ToString()));
  };
  NeighborTable n(o);
  const net::IpAddress a3 = *net::IpAddress::Parse("10.1.0.3");
  const net::IpAddress a4 = *net::IpAddress::Parse("10.1.0.4");
  n.Queue(Datagram("1"), kT0);                                         // +10.1.0.1
  n.Learn(a3, {.mac = kMac, .create = true}, kT0);                     // +10.1.0.3
  n.Learn(a3, {.mac = kMac, .solicited = true}, kT0);                  // no change
  n.Tick(kT0 + absl::Seconds(2));                                      // -10.1.0.1: failed
  ASSERT_EQ(n.SetPermanent(a4, kMac, kT0), absl::OkStatus());          // +10.1.0.4
  n.Queue(Datagram("2"), kT0);  // full: -10.1.0.3 (evicted), +10.1.0.1
  ASSERT_EQ(n.Remove(a4), absl::OkStatus());                           // -10.1.0.4
  EXPECT_EQ(heard, (std::vector<std::string>{"+10.1.0.1", "+10.1.0.3", "-10.1.0.1",
                                              "+10.1.0.4", "-10.1.0.3", "+10.1.0.1",
                                              "-10.1.0.4"}));
}

// Neighbours learned from requests for us (STALE) replace each other, oldest first, but never
// push out a next hop we send to; a next hop pushes out a learned one, fresh or not.
TEST(NeighborTableTest, LearnedNeighboursDoNotLockOutNextHops) {
  NeighborTable n({.max_entries = 4});
  const auto learn = [&](uint32_t ip, absl::Time t) {
    n.Learn(net::IpAddress::V4(ip), {.mac = kMac, .create = true}, t);
  };
  for (int i = 0; i < 4; ++i) learn(0x0a020000 + i, kT0 + absl::Seconds(i));
  // A fifth sender on the wire takes the oldest learned one's place.
  learn(0x0a020009, kT0 + absl::Seconds(5));
  EXPECT_EQ(n.List().size(), 4u);
  EXPECT_EQ(n.Lookup(net::IpAddress::V4(0x0a020009), kT0), kMac);
  EXPECT_FALSE(n.Lookup(net::IpAddress::V4(0x0a020000), kT0).has_value());
  // Next hops we send to (resolved: REACHABLE) take the learned ones' places ...
  for (uint32_t i = 0; i < 4; ++i) {
    const net::IpAddress hop = net::IpAddress::V4(0x0a010010 + i);
    EXPECT_TRUE(n.Queue({{}, {}, hop, "x"}, kT0 + absl::Seconds(6)));
    n.Learn(hop, {.mac = kMac, .solicited = true}, kT0 + absl::Seconds(6));
  }
  EXPECT_FALSE(n.Lookup(net::IpAddress::V4(0x0a020009), kT0).has_value());
  // ... and the wire's senders cannot take theirs.
  learn(0x0a020008, kT0 + absl::Seconds(7));
  EXPECT_FALSE(n.Lookup(net::IpAddress::V4(0x0a020008), kT0).has_value());
  EXPECT_EQ(n.counters().table_full, 1u);
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
  n.Learn(net::IpAddress::V4(0x0a010004), {.mac = kMac, .create = true}, kT0);
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

const net::MacAddress kForged = *net::MacAddress::Parse("02:00:00:00:00:66");

// A table with kPeer REACHABLE at kMac, as after our probe's answer.
NeighborTable Resolved() {
  NeighborTable n({});
  n.Queue(Datagram("1"), kT0);
  n.Learn(kPeer, {.mac = kMac, .solicited = true}, kT0);
  return n;
}

NeighborInfo Entry(const NeighborTable& n) {
  EXPECT_EQ(n.List().size(), 1u);
  return n.List().empty() ? NeighborInfo{} : n.List()[0];
}

// RFC 4861 7.2.5, case by case: the S and O flags, and whether the MAC differs.
TEST(NeighborTableTest, AdvertisementsFollowRfc4861) {
  const absl::Time t = kT0 + absl::Seconds(1);
  {  // Unsolicited, override, another MAC: taken, but only STALE (it was REACHABLE for good).
    NeighborTable n = Resolved();
    n.Learn(kPeer, {.mac = kForged, .solicited = false, .override = true}, t);
    EXPECT_EQ(Entry(n).mac, kForged);
    EXPECT_EQ(Entry(n).state, NeighborState::kStale);
  }
  {  // No override, another MAC: the MAC stays; a reachable entry is doubted.
    NeighborTable n = Resolved();
    n.Learn(kPeer, {.mac = kForged, .solicited = true, .override = false}, t);
    EXPECT_EQ(Entry(n).mac, kMac);
    EXPECT_EQ(Entry(n).state, NeighborState::kStale);
    // Stale already: ignored altogether.
    n.Learn(kPeer, {.mac = kForged, .solicited = false, .override = false}, t);
    EXPECT_EQ(Entry(n).mac, kMac);
    EXPECT_EQ(Entry(n).state, NeighborState::kStale);
    // Solicited with the MAC we have (no override needed): REACHABLE again.
    n.Learn(kPeer, {.mac = kMac, .solicited = true, .override = false}, t);
    EXPECT_EQ(Entry(n).state, NeighborState::kReachable);
  }
  {  // Unsolicited, the same MAC: no change of state.
    NeighborTable n = Resolved();
    n.Learn(kPeer, {.mac = kMac, .solicited = false, .override = true}, t);
    EXPECT_EQ(Entry(n).state, NeighborState::kReachable);
    EXPECT_EQ(Entry(n).updated, kT0);
  }
  {  // Solicited, override, another MAC: taken, REACHABLE.
    NeighborTable n = Resolved();
    n.Learn(kPeer, {.mac = kForged, .solicited = false, .override = true}, t);
    n.Learn(kPeer, {.mac = kMac, .solicited = true, .override = true}, t);
    EXPECT_EQ(Entry(n).mac, kMac);
    EXPECT_EQ(Entry(n).state, NeighborState::kReachable);
  }
  {  // No link-layer option: a solicited one confirms (REACHABLE), an unsolicited one nothing.
    NeighborTable n = Resolved();
    n.Learn(kPeer, {.mac = kForged, .override = true}, t);
    n.Learn(kPeer, {.solicited = false}, t);
    EXPECT_EQ(Entry(n).state, NeighborState::kStale);
    n.Learn(kPeer, {.solicited = true}, t);
    EXPECT_EQ(Entry(n).state, NeighborState::kReachable);
    EXPECT_EQ(Entry(n).mac, kForged);
  }
  {  // INCOMPLETE: an unsolicited answer resolves it STALE; one without a MAC does nothing.
    NeighborTable n({});
    n.Queue(Datagram("1"), kT0);
    EXPECT_TRUE(n.Learn(kPeer, {.solicited = true}, t).empty());
    EXPECT_EQ(Entry(n).state, NeighborState::kIncomplete);
    EXPECT_EQ(n.Learn(kPeer, {.mac = kMac, .override = false}, t).size(), 1u);
    EXPECT_EQ(Entry(n).state, NeighborState::kStale);
    EXPECT_EQ(Entry(n).mac, kMac);
  }
  {  // No entry: an advertisement makes none.
    NeighborTable n({});
    n.Learn(kPeer, {.mac = kMac, .solicited = true, .override = true}, t);
    EXPECT_TRUE(n.List().empty());
  }
}

PendingDatagram From(uint64_t owner, uint32_t ip) {
  PendingDatagram d = Datagram("x");
  d.next_hop = net::IpAddress::V4(ip);
  d.owner = owner;
  return d;
}

// The owners of one group (a peer's sessions) together take at most the group's share; another
// group's owner still resolves, and a resolved entry gives its place back.
TEST(NeighborTableTest, UnresolvedEntriesAreCappedPerGroup) {
  NeighborTable n({.max_unresolved = 10, .max_unresolved_per_owner = 3,
                   .max_unresolved_per_group = 4});
  const auto in_group = [](uint64_t owner, uint64_t group, uint32_t ip) {
    PendingDatagram d = From(owner, ip);
    d.group = group;
    return d;
  };
  for (uint32_t i = 0; i < 3; ++i) EXPECT_TRUE(n.Queue(in_group(1, 7, 0x0a010100 + i), kT0));
  EXPECT_TRUE(n.Queue(in_group(2, 7, 0x0a010200), kT0));
  EXPECT_FALSE(n.Queue(in_group(2, 7, 0x0a010201), kT0));  // the group's fourth: its share
  EXPECT_EQ(n.counters().refused_owner_unresolved, 1u);
  EXPECT_TRUE(n.Queue(in_group(3, 8, 0x0a010300), kT0));  // another group
  n.Learn(net::IpAddress::V4(0x0a010100), {.mac = kMac, .solicited = true}, kT0);
  EXPECT_TRUE(n.Queue(in_group(2, 7, 0x0a010202), kT0));  // a place came back
}

// One owner (a session) sending to many made-up on-link addresses takes at most its share of
// unresolved entries, all owners together at most max_unresolved; the rest is refused, counted.
TEST(NeighborTableTest, UnresolvedEntriesAreCappedPerOwnerAndInAll) {
  NeighborTable n({.max_unresolved = 5, .max_unresolved_per_owner = 3});
  for (uint32_t i = 0; i < 10; ++i) n.Queue(From(1, 0x0a010100 + i), kT0);
  EXPECT_EQ(n.List().size(), 3u);
  EXPECT_EQ(n.counters().refused_owner_unresolved, 7u);
  // Another owner still resolves, up to the total.
  EXPECT_TRUE(n.Queue(From(2, 0x0a010200), kT0));
  EXPECT_TRUE(n.Queue(From(2, 0x0a010201), kT0));
  EXPECT_FALSE(n.Queue(From(3, 0x0a010300), kT0));
  EXPECT_EQ(n.counters().refused_unresolved, 1u);
  // A datagram to a next hop already being resolved joins it whoever sends it.
  EXPECT_FALSE(n.Queue(From(3, 0x0a010100), kT0));
  EXPECT_EQ(n.List().size(), 5u);
  // Answers and failures give the places back.
  n.Learn(net::IpAddress::V4(0x0a010100), {.mac = kMac, .solicited = true}, kT0);
  EXPECT_TRUE(n.Queue(From(1, 0x0a010110), kT0));
  for (int i = 1; i <= 3; ++i) n.Tick(kT0 + absl::Seconds(i));
  EXPECT_EQ(n.counters().failed, 5u);
  EXPECT_TRUE(n.Queue(From(1, 0x0a010120), kT0 + absl::Seconds(4)));
}

// Probes come out of a token bucket: new resolutions past it are refused, retransmissions put
// off until tokens come back.
TEST(NeighborTableTest, ProbesAreRateLimited) {
  NeighborTable n({.max_unresolved_per_owner = 100, .probes_per_second = 2, .probe_burst = 4});
  int fresh = 0;
  for (uint32_t i = 0; i < 10; ++i) fresh += n.Queue(From(1, 0x0a010100 + i), kT0);
  EXPECT_EQ(fresh, 4);
  EXPECT_EQ(n.counters().probes_rate_limited, 6u);
  EXPECT_EQ(n.counters().probes_sent, 4u);
  // A second later: 2 tokens for the 4 retransmissions due; 2 put off to later ticks.
  EXPECT_EQ(n.Tick(kT0 + absl::Seconds(1)).size(), 2u);
  EXPECT_EQ(n.counters().probes_rate_limited, 8u);
  EXPECT_EQ(n.Tick(kT0 + absl::Milliseconds(1500)).size(), 1u);
  EXPECT_EQ(n.counters().probes_sent, 7u);
}

// The gateway's entry is never evicted, and its resolution never refused by a cap or the bucket.
TEST(NeighborTableTest, TheGatewayIsNeverEvictedNorRefused) {
  const net::IpAddress gw = *net::IpAddress::Parse("10.1.0.254");
  NeighborTable n({.max_entries = 4, .max_unresolved = 2, .max_unresolved_per_owner = 2,
                   .probes_per_second = 1, .probe_burst = 2},
                  {gw});
  EXPECT_TRUE(n.Queue(From(1, 0x0a010100), kT0));
  EXPECT_TRUE(n.Queue(From(1, 0x0a010101), kT0));
  PendingDatagram via = Datagram("out");
  via.next_hop = gw;
  via.owner = 1;
  EXPECT_TRUE(n.Queue(std::move(via), kT0));  // past the caps and the bucket
  n.Learn(gw, {.mac = kMac, .solicited = true}, kT0);
  // Next hops and stale learned ones come and go; the gateway stays, even when stale.
  for (uint32_t i = 0; i < 50; ++i) {
    const absl::Time t = kT0 + absl::Seconds(60 + i);
    n.Learn(net::IpAddress::V4(0x0a010200 + i), {.mac = kMac, .create = true}, t);
    n.Queue(From(2 + i, 0x0a010300 + i), t);
    n.Tick(t);
  }
  EXPECT_EQ(n.Lookup(gw, kT0 + absl::Seconds(200)), kMac);
}

// Senders on the wire are learned at most at the learning rate (a flood of made-up ones makes
// no more entries than that), replace only what the wire made, oldest first, and never a next
// hop we send to; a new entry changes nothing looked up before (changes() stays), an erased
// or moved one does.
TEST(NeighborTableTest, AFloodOfMadeUpSendersIsLearnedAtTheLearningRateOnly) {
  NeighborTable n({.max_entries = 64, .learned_per_second = 100, .learn_burst = 10});
  for (uint32_t i = 0; i < 8; ++i) {  // next hops we send to, answered
    const net::IpAddress hop = net::IpAddress::V4(0x0a010010 + i);
    ASSERT_TRUE(n.Queue({{}, {}, hop, "x"}, kT0));
    n.Learn(hop, {.mac = kMac, .solicited = true}, kT0);
  }
  const uint64_t changes = n.changes();
  // 100,000 made-up senders over 10 seconds.
  for (uint32_t i = 0; i < 100000; ++i) {
    n.Learn(net::IpAddress::V4(0x0a020000 + i), {.mac = kMac, .create = true},
            kT0 + absl::Microseconds(100) * i);
  }
  const uint64_t learned = 10 + 100 * 10;  // the burst, and 100 a second
  EXPECT_GE(n.counters().learn_rate_limited, 100000 - learned);
  EXPECT_EQ(n.List().size(), 64u);
  // Every next hop stayed; the wire's entries replaced each other (an erased entry is a change).
  for (uint32_t i = 0; i < 8; ++i) {
    EXPECT_EQ(n.Lookup(net::IpAddress::V4(0x0a010010 + i), kT0 + absl::Seconds(10)), kMac) << i;
  }
  EXPECT_LE(n.counters().evicted, learned);
  EXPECT_LE(n.changes() - changes, learned);
  // A new entry leaves what was looked up right; a moved MAC does not.
  const uint64_t before = n.changes();
  n.Learn(net::IpAddress::V4(0x0a030001), {.mac = kMac, .create = true}, kT0 + absl::Seconds(60));
  EXPECT_EQ(n.changes(), before + 1) << "the new one took the oldest learned one's place";
  const uint64_t after = n.changes();
  n.Learn(net::IpAddress::V4(0x0a030001), {.mac = kMac}, kT0 + absl::Seconds(60));
  EXPECT_EQ(n.changes(), after) << "nothing changed";
  n.Learn(net::IpAddress::V4(0x0a030001),
          {.mac = *net::MacAddress::Parse("02:00:00:00:00:55"), .override = true},
          kT0 + absl::Seconds(60));
  EXPECT_EQ(n.changes(), after + 1);
}

// New entries alone do not count as changes: a table with room learns without one.
TEST(NeighborTableTest, ANewNeighbourIsNoChange) {
  NeighborTable n({});
  n.Learn(kPeer, {.mac = kMac, .create = true}, kT0);
  ASSERT_TRUE(n.Lookup(kPeer, kT0).has_value());
  EXPECT_EQ(n.changes(), 0u);
}

}  // namespace
}  // namespace quadsock::stack
