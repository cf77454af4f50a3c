// Lookup rules: order, scoring, wildcard, IPv4/IPv6/v4-mapped, bound device, reuseport.
#include "stack/demux/socket_table.h"

#include <algorithm>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "stack/demux/test_util.h"

namespace quadsock::demux {
namespace {

using testing::Ep;
using testing::Flow;
using testing::Ip;
using testing::TableTest;
using testing::V4;
using testing::V6;

TEST_F(TableTest, ExactAddressFound) {
  SocketId s = Bound(V4(false, 77), "10.0.0.1:53");
  std::optional<LookupResult> r = table_->Lookup(*ctx_, Flow("10.9.9.9:1000", "10.0.0.1:53"));
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->id, s);
  EXPECT_EQ(r->cookie, 77u);
  EXPECT_EQ(Find("10.9.9.9:1000", "10.0.0.2:53"), 0u);
  EXPECT_EQ(Find("10.9.9.9:1000", "10.0.0.1:54"), 0u);
}

TEST_F(TableTest, WildcardFoundForAnyAddress) {
  SocketId s = Bound(V4(), "0.0.0.0:53");
  EXPECT_EQ(Find("10.9.9.9:1000", "10.0.0.1:53"), s);
  EXPECT_EQ(Find("10.9.9.9:1000", "192.168.1.1:53"), s);
  EXPECT_EQ(Find("[fd00::9]:1000", "[fd00::1]:53"), 0u);  // an IPv4 socket gets no IPv6
}

TEST_F(TableTest, ExactBeatsWildcard) {
  SocketId wild = Bound(V4(true), "0.0.0.0:53");
  SocketId exact = Bound(V4(true), "10.0.0.1:53");
  EXPECT_EQ(Find("10.9.9.9:1000", "10.0.0.1:53"), exact);
  EXPECT_EQ(Find("10.9.9.9:1000", "10.0.0.2:53"), wild);
}

TEST_F(TableTest, ConnectedFoundByHash4) {
  SocketId s = Bound(V4(), "10.0.0.1:4000");
  ASSERT_TRUE(table_->Connect(s, Ep("10.9.9.9:53")).ok());
  EXPECT_EQ(Find("10.9.9.9:53", "10.0.0.1:4000"), s);
  TableStats st = table_->Stats();
  EXPECT_EQ(st.hash4_hits, 1u);
  EXPECT_EQ(st.hash2_lookups, 0u);
  // Other peers do not reach a connected socket.
  EXPECT_EQ(Find("10.9.9.8:53", "10.0.0.1:4000"), 0u);
  EXPECT_EQ(Find("10.9.9.9:54", "10.0.0.1:4000"), 0u);
}

TEST_F(TableTest, Hash4TriedOnlyWhenSlotHasHash4Sockets) {
  Bound(V4(), "10.0.0.1:53");
  Find("10.9.9.9:1000", "10.0.0.1:53");
  TableStats st = table_->Stats();
  EXPECT_EQ(st.hash4_hits + st.hash4_misses, 0u);
  EXPECT_EQ(st.hash2_lookups, 1u);
}

TEST_F(TableTest, Hash4ThenExactThenWildcard) {
  SocketId wild = Bound(V4(true), "0.0.0.0:53");
  SocketId exact = Bound(V4(true), "10.0.0.1:53");
  SocketId conn = Bound(V4(true), "10.0.0.1:53");
  ASSERT_TRUE(table_->Connect(conn, Ep("10.9.9.9:7")).ok());
  EXPECT_EQ(Find("10.9.9.9:7", "10.0.0.1:53"), conn);
  EXPECT_EQ(Find("10.9.9.9:8", "10.0.0.1:53"), exact);
  EXPECT_EQ(Find("10.9.9.9:8", "10.0.0.5:53"), wild);
  TableStats st = table_->Stats();
  EXPECT_EQ(st.hash4_hits, 1u);
  EXPECT_EQ(st.hash4_misses, 1u);  // the second lookup tried hash4 (count non-zero), missed
}

TEST_F(TableTest, Hash4OffScoresConnectedInHash2) {
  Make(testing::TestOptions(/*hash4=*/false));
  SocketId open = Bound(V4(true), "10.0.0.1:53");
  SocketId conn = Bound(V4(true), "10.0.0.1:53");
  ASSERT_TRUE(table_->Connect(conn, Ep("10.9.9.9:7")).ok());
  EXPECT_FALSE(table_->Get(conn)->in_hash4);
  EXPECT_EQ(Find("10.9.9.9:7", "10.0.0.1:53"), conn);  // connected scores higher
  EXPECT_EQ(Find("10.9.9.9:8", "10.0.0.1:53"), open);  // wrong peer port disqualifies
  EXPECT_EQ(Find("10.9.9.8:7", "10.0.0.1:53"), open);  // wrong peer address disqualifies
  TableStats st = table_->Stats();
  EXPECT_EQ(st.hash4_hits + st.hash4_misses, 0u);
  EXPECT_EQ(st.hash4_entries, 0u);
}

TEST_F(TableTest, DualStackV6SocketReceivesV4) {
  SocketId s = Bound(V6(), "[::]:53");
  EXPECT_EQ(Find("10.9.9.9:1000", "10.0.0.1:53"), s);
  EXPECT_EQ(Find("[fd00::9]:1000", "[fd00::1]:53"), s);
}

TEST_F(TableTest, V6OnlySocketDoesNotReceiveV4) {
  SocketId s = Bound(V6(/*v6only=*/true), "[::]:53");
  EXPECT_EQ(Find("10.9.9.9:1000", "10.0.0.1:53"), 0u);
  EXPECT_EQ(Find("[fd00::9]:1000", "[fd00::1]:53"), s);
}

TEST_F(TableTest, V4MappedBoundSocketReceivesV4ToThatAddress) {
  SocketId s = Bound(V6(), "[::ffff:10.0.0.1]:53");
  EXPECT_EQ(Find("10.9.9.9:1000", "10.0.0.1:53"), s);
  EXPECT_EQ(Find("10.9.9.9:1000", "10.0.0.2:53"), 0u);
  EXPECT_EQ(Find("[fd00::9]:1000", "[fd00::1]:53"), 0u);
}

TEST_F(TableTest, PureV6SocketGetsNoV4) {
  Bound(V6(), "[fd00::1]:53");
  EXPECT_EQ(Find("10.9.9.9:1000", "10.0.0.1:53"), 0u);
}

TEST_F(TableTest, V4SocketScoresAboveDualStackForV4) {
  SocketId v6 = Bound(V6(false, true), "[::]:53");
  SocketId v4 = Bound(V4(true), "0.0.0.0:53");
  EXPECT_EQ(Find("10.9.9.9:1000", "10.0.0.1:53"), v4);
  EXPECT_EQ(Find("[fd00::9]:1000", "[fd00::1]:53"), v6);
}

TEST_F(TableTest, V4MappedConnectedSocketFoundByV4Lookup) {
  SocketId s = Bound(V6(), "[::]:4000");
  absl::StatusOr<net::Endpoint> local = table_->Connect(s, Ep("[::ffff:10.9.9.9]:53"));
  ASSERT_TRUE(local.ok()) << local.status();
  EXPECT_EQ(local->address, Ip("::ffff:10.0.0.1"));
  EXPECT_EQ(Find("10.9.9.9:53", "10.0.0.1:4000"), s);
  EXPECT_EQ(table_->Stats().hash4_hits, 1u);
}

TEST_F(TableTest, BoundDeviceScoresAndDisqualifies) {
  SocketId any = Bound(V4(true), "0.0.0.0:53");
  SocketOptions o = V4(true);
  o.bound_device = 3;
  SocketId dev3 = Bound(o, "0.0.0.0:53");
  EXPECT_EQ(Find("10.9.9.9:1000", "10.0.0.1:53", 3), dev3);
  EXPECT_EQ(Find("10.9.9.9:1000", "10.0.0.1:53", 4), any);
  ASSERT_TRUE(table_->Close(any).ok());
  EXPECT_EQ(Find("10.9.9.9:1000", "10.0.0.1:53", 4), 0u);
  ASSERT_TRUE(table_->SetBoundDevice(dev3, 4).ok());
  EXPECT_EQ(Find("10.9.9.9:1000", "10.0.0.1:53", 4), dev3);
  EXPECT_EQ(Find("10.9.9.9:1000", "10.0.0.1:53", 3), 0u);
}

TEST_F(TableTest, ConnectedBoundDeviceMustMatchInHash4) {
  SocketOptions o = V4();
  o.bound_device = 2;
  SocketId s = Bound(o, "10.0.0.1:4000");
  ASSERT_TRUE(table_->Connect(s, Ep("10.9.9.9:53")).ok());
  EXPECT_EQ(Find("10.9.9.9:53", "10.0.0.1:4000", 2), s);
  EXPECT_EQ(Find("10.9.9.9:53", "10.0.0.1:4000", 5), 0u);
}

TEST_F(TableTest, ReuseportSpreadsAndIsStable) {
  std::vector<SocketId> group;
  for (int i = 0; i < 4; ++i) group.push_back(Bound(V4(true), "10.0.0.1:53"));
  std::map<SocketId, int> hits;
  std::map<int, SocketId> first;
  for (int port = 1000; port < 3000; ++port) {
    SocketId got = Find("10.9.9.9:" + std::to_string(port), "10.0.0.1:53");
    ASSERT_NE(got, 0u);
    ++hits[got];
    first[port] = got;
  }
  ASSERT_EQ(hits.size(), 4u);
  for (auto& [id, n] : hits) EXPECT_GT(n, 300) << id;  // 500 expected each
  for (int port = 1000; port < 3000; ++port) {
    EXPECT_EQ(Find("10.9.9.9:" + std::to_string(port), "10.0.0.1:53"), first[port]);
  }
}

TEST_F(TableTest, ReuseportConnectedMemberFoundByHash4AndLeavesSpread) {
  SocketId a = Bound(V4(true), "10.0.0.1:53");
  SocketId b = Bound(V4(true), "10.0.0.1:53");
  ASSERT_TRUE(table_->Connect(b, Ep("10.9.9.9:7")).ok());
  EXPECT_EQ(Find("10.9.9.9:7", "10.0.0.1:53"), b);
  for (int port = 1000; port < 1200; ++port) {
    EXPECT_EQ(Find("10.9.9.9:" + std::to_string(port), "10.0.0.1:53"), a);
  }
  ASSERT_TRUE(table_->Disconnect(b).ok());  // back in the group
  std::map<SocketId, int> hits;
  for (int port = 1000; port < 1200; ++port)
    ++hits[Find("10.9.9.9:" + std::to_string(port), "10.0.0.1:53")];
  EXPECT_EQ(hits.size(), 2u);
}

TEST_F(TableTest, ClosedSocketNotFound) {
  SocketId s = Bound(V4(), "10.0.0.1:53");
  ASSERT_TRUE(table_->Close(s).ok());
  EXPECT_EQ(Find("10.9.9.9:1000", "10.0.0.1:53"), 0u);
  EXPECT_EQ(table_->Close(s).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(table_->Stats().hash2_entries, 0u);
}

TEST_F(TableTest, ConnectWildcardTakesRouteSourceAndRehashes) {
  SocketId s = Bound(V4(), "0.0.0.0:4000");
  absl::StatusOr<net::Endpoint> local = table_->Connect(s, Ep("10.9.9.9:53"));
  ASSERT_TRUE(local.ok());
  EXPECT_EQ(*local, Ep("10.0.0.1:4000"));
  EXPECT_EQ(Find("10.9.9.9:53", "10.0.0.1:4000"), s);
  EXPECT_EQ(Find("10.9.9.9:53", "10.0.0.2:4000"), 0u);  // no longer on the wildcard
  EXPECT_EQ(table_->Stats().hash2_entries, 0u);
}

TEST_F(TableTest, ConnectUnboundAutoBinds) {
  SocketId s = Open(V4());
  absl::StatusOr<net::Endpoint> local = table_->Connect(s, Ep("10.9.9.9:53"));
  ASSERT_TRUE(local.ok());
  EXPECT_EQ(local->address, Ip("10.0.0.1"));
  EXPECT_GE(local->port, 32768);
  EXPECT_LE(local->port, 60999);
  EXPECT_EQ(Find(Flow("10.9.9.9:53", local->ToString())), s);
}

TEST_F(TableTest, RehashMovesSocket) {
  SocketId s = Bound(V4(), "10.0.0.1:53");
  absl::StatusOr<net::Endpoint> moved = table_->Rehash(s, Ip("10.0.0.2"), 54);
  ASSERT_TRUE(moved.ok());
  EXPECT_EQ(*moved, Ep("10.0.0.2:54"));
  EXPECT_EQ(Find("10.9.9.9:1000", "10.0.0.1:53"), 0u);
  EXPECT_EQ(Find("10.9.9.9:1000", "10.0.0.2:54"), s);
  // The old address is free again.
  EXPECT_TRUE(table_->Bind(Open(V4()), Ep("10.0.0.1:53")).ok());
}

TEST_F(TableTest, RehashConnectedKeepsPeer) {
  SocketId s = Bound(V4(), "10.0.0.1:4000");
  ASSERT_TRUE(table_->Connect(s, Ep("10.9.9.9:53")).ok());
  ASSERT_TRUE(table_->Rehash(s, Ip("10.0.0.3"), std::nullopt).ok());
  EXPECT_EQ(Find("10.9.9.9:53", "10.0.0.3:4000"), s);
  EXPECT_EQ(Find("10.9.9.9:53", "10.0.0.1:4000"), 0u);
  EXPECT_EQ(table_->Stats().hash4_entries, 1u);
}

// LookupBatch answers each flow as Lookup does, over every kind of socket and every stage
// (hash4 hit, hash4 miss to exact and wildcard, reuseport spread, device, IPv6, no socket),
// in batches of sizes around its internal chunk of 64.
TEST_F(TableTest, LookupBatchAnswersAsLookupFlowByFlow) {
  for (int i = 0; i < 300; ++i) {
    SocketId s = Bound(V4(true), "10.0.0.1:443");
    ASSERT_TRUE(table_->Connect(s, Ep("10.9.0." + std::to_string(i % 250 + 1) + ":" +
                                      std::to_string(1000 + i))).ok());
  }
  for (int i = 0; i < 4; ++i) Bound(V4(true), "10.0.0.1:443");  // a reuseport group
  Bound(V4(), "0.0.0.0:53");
  SocketId dev = Open(SocketOptions{net::Family::kV4, false, false, 7, 0});
  ASSERT_TRUE(table_->Bind(dev, Ep("10.0.0.2:54")).ok());
  Bound(V6(), "[::]:8080");
  SocketId c6 = Bound(V6(true), "[fd00::1]:9000");
  ASSERT_TRUE(table_->Connect(c6, Ep("[fd00::9]:9001")).ok());

  std::vector<FlowKey> flows;
  for (int i = 0; i < 400; ++i) {
    const std::string peer = "10.9.0." + std::to_string(i % 250 + 1) + ":";
    flows.push_back(Flow(peer + std::to_string(1000 + i % 320), "10.0.0.1:443"));  // hit/miss
    flows.push_back(Flow(peer + std::to_string(7000 + i), i % 3 ? "10.0.0.2:54" : "10.0.0.2:53",
                         i % 2 ? 7 : 3));
    flows.push_back(Flow(peer + "1", "10.0.0.3:" + std::to_string(50 + i % 5)));
    flows.push_back(Flow("[fd00::9]:" + std::to_string(9000 + i % 3), "[fd00::1]:9000"));
    flows.push_back(Flow("[fd00::7]:1", "[fd00::2]:8080"));
    flows.push_back(Flow(peer + "2", "10.0.0.1:8080"));  // v4 to the dual-stack wildcard
  }
  std::vector<std::optional<LookupResult>> one;
  for (const FlowKey& f : flows) one.push_back(table_->Lookup(*ctx_, f));
  ASSERT_GT(std::count(one.begin(), one.end(), std::nullopt), 0);
  ASSERT_LT(std::count(one.begin(), one.end(), std::nullopt), static_cast<long>(one.size()));
  for (size_t batch : {1, 7, 63, 64, 65, 130, 2400}) {
    std::vector<std::optional<LookupResult>> got(flows.size());
    for (size_t i = 0; i < flows.size(); i += batch) {
      const size_t n = std::min(batch, flows.size() - i);
      table_->LookupBatch(*ctx_, std::span(flows).subspan(i, n), std::span(got).subspan(i, n));
    }
    for (size_t i = 0; i < flows.size(); ++i) {
      ASSERT_EQ(got[i], one[i]) << "batch " << batch << ", flow " << i;
    }
  }
  const TableStats st = table_->Stats();
  EXPECT_EQ(st.lookups, flows.size() * 8);  // the counters count batched lookups too
}

// With four slots the hash4 chains are about 80 entries long: LookupBatch walks them one entry
// per pass for all the batch's flows, and must find what Lookup finds, comparing as many
// entries.
TEST_F(TableTest, LookupBatchWalksLongHash4ChainsAsLookup) {
  SocketTable::Options o = testing::TestOptions();
  o.min_log2_slots = o.max_log2_slots = 2;
  Make(o);
  for (int i = 0; i < 300; ++i) {
    SocketId s = Bound(V4(true), "10.0.0.1:443");
    ASSERT_TRUE(table_->Connect(s, Ep("10.9.0." + std::to_string(i % 250 + 1) + ":" +
                                      std::to_string(1000 + i))).ok());
  }
  Bound(V4(true), "0.0.0.0:443");  // the listener
  std::vector<FlowKey> flows;
  for (int i = 0; i < 350; ++i) {  // the 300 connected peers, each after a flow to the listener
    flows.push_back(Flow("10.9.1." + std::to_string(i % 250 + 1) + ":7", "10.0.0.1:443"));
    flows.push_back(Flow("10.9.0." + std::to_string(i % 250 + 1) + ":" + std::to_string(1000 + i),
                         "10.0.0.1:443"));
  }
  const TableStats before = table_->Stats();
  std::vector<std::optional<LookupResult>> one;
  for (const FlowKey& f : flows) one.push_back(table_->Lookup(*ctx_, f));
  const TableStats middle = table_->Stats();
  std::vector<std::optional<LookupResult>> got(flows.size());
  table_->LookupBatch(*ctx_, flows, got);
  const TableStats after = table_->Stats();
  for (size_t i = 0; i < flows.size(); ++i) ASSERT_EQ(got[i], one[i]) << "flow " << i;
  EXPECT_EQ(middle.hash4_hits - before.hash4_hits, 300u);
  EXPECT_EQ(after.hash4_hits - middle.hash4_hits, middle.hash4_hits - before.hash4_hits);
  EXPECT_EQ(after.hash4_misses - middle.hash4_misses, middle.hash4_misses - before.hash4_misses);
  for (int i = 0; i < TableStats::kHistogramBuckets; ++i) {
    EXPECT_EQ(after.chain_histogram[i] - middle.chain_histogram[i],
              middle.chain_histogram[i] - before.chain_histogram[i])
        << "bucket " << i;
  }
  EXPECT_EQ(after.chain_steps - middle.chain_steps, middle.chain_steps - before.chain_steps);
  EXPECT_GT((middle.chain_steps - before.chain_steps) / flows.size(), 20u) << "long chains";
}

}  // namespace
}  // namespace quadsock::demux
