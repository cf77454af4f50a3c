// Concurrency stress: reader threads look up a fixed set of sockets that stay, while a writer
// binds, connects, rehashes, disconnects and closes thousands of other sockets on the same
// ports and chains, and the slot arrays grow and shrink underneath. Zero misses allowed. Twice:
// what the writer replaces freed by liburcu's call_rcu thread, and by the writer itself
// (reclaim_synchronously; ASan sees a free before the readers are done). Bounded by time
// (about two seconds of churn each) so it also runs under --config=tsan.
#include <atomic>
#include <chrono>
#include <random>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "stack/demux/socket_table.h"
#include "stack/demux/test_util.h"

namespace quadsock::demux {
namespace {

using testing::Ep;
using testing::V4;

struct Expect {
  FlowKey flow;
  SocketId id;
};

class Stress : public ::testing::TestWithParam<bool> {};

TEST_P(Stress, StableSocketsNeverMissedWhileOthersChurn) {
  SocketTable::Options o = testing::TestOptions();
  o.reclaim_synchronously = GetParam();
  o.ephemeral_low = 40000;
  o.ephemeral_high = 60000;
  std::unique_ptr<SocketTable> table = SocketTable::Create(o).value();
  const net::IpAddress local = net::IpAddress::V4(0x0a000001);  // 10.0.0.1
  std::vector<Expect> expect;
  for (int i = 0; i < 50; ++i) {
    // Unconnected on an exact address.
    SocketId a = table->Open(V4()).value();
    uint16_t pa = 1000 + i;
    ASSERT_TRUE(table->Bind(a, net::Endpoint{local, pa}).ok());
    expect.push_back({FlowKey{net::IpAddress::V4(0x0b000001), 9, local, pa, 0}, a});
    // Connected, in hash4.
    SocketId b = table->Open(V4()).value();
    uint16_t pb = 2000 + i;
    net::IpAddress peer = net::IpAddress::V4(0x0a090000 + i);
    ASSERT_TRUE(table->Bind(b, net::Endpoint{local, pb}).ok());
    ASSERT_TRUE(table->Connect(b, net::Endpoint{peer, 53}).ok());
    expect.push_back({FlowKey{peer, 53, local, pb, 0}, b});
    // Wildcard.
    SocketId c = table->Open(V4()).value();
    uint16_t pc = 3000 + i;
    ASSERT_TRUE(table->Bind(c, net::Endpoint{net::IpAddress::AnyV4(), pc}).ok());
    expect.push_back({FlowKey{net::IpAddress::V4(0x0b000002), 9, local, pc, 0}, c});
  }

  std::atomic<bool> stop{false};
  std::atomic<uint64_t> lookups{0}, misses{0};
  std::vector<std::thread> readers;
  std::vector<FlowKey> flows;
  for (const Expect& e : expect) flows.push_back(e.flow);
  for (int r = 0; r < 3; ++r) {
    readers.emplace_back([&, r] {
      RcuReaderThread reader;
      LookupContext ctx(*table);
      std::vector<std::optional<LookupResult>> got(flows.size());
      while (!stop.load(std::memory_order_relaxed)) {
        if (r == 0) {  // one reader in batches, as the stack's poll threads
          table->LookupBatch(ctx, flows, got);
        } else {
          for (size_t i = 0; i < flows.size(); ++i) got[i] = table->Lookup(ctx, flows[i]);
        }
        for (size_t i = 0; i < flows.size(); ++i) {
          if (!got[i] || got[i]->id != expect[i].id) misses.fetch_add(1, std::memory_order_relaxed);
        }
        lookups.fetch_add(expect.size(), std::memory_order_relaxed);
        reader.Quiescent();
      }
    });
  }

  uint64_t ops = 0;
  auto churn = [&] {
    std::mt19937 rng(7);
    auto pick = [&](int n) { return static_cast<int>(rng() % n); };
    std::vector<SocketId> live;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    while (std::chrono::steady_clock::now() < deadline || ops < 5000) {
      // Grow to a few thousand sockets, then close them all: the arrays grow and shrink.
      const int target = 500 + pick(2500);
      while (static_cast<int>(live.size()) < target) {
        SocketId s = table->Open(V4(true)).value();
        const int kind = pick(4);
        const uint16_t port = 1000 + pick(50) + 1000 * pick(2);  // the stable ports' chains
        const net::IpAddress other = net::IpAddress::V4(0x0a000002 + pick(3));
        const net::Endpoint peer{net::IpAddress::V4(0x0c000000 + pick(1 << 20)),
                                 static_cast<uint16_t>(1 + pick(60000))};
        if (kind == 0) {
          ASSERT_TRUE(table->Bind(s, net::Endpoint{other, port}).ok());
        } else if (kind == 1) {
          ASSERT_TRUE(table->Bind(s, net::Endpoint{other, port}).ok());
          ASSERT_TRUE(table->Connect(s, peer).ok());
        } else if (kind == 2) {
          ASSERT_TRUE(table->Connect(s, peer).ok());  // auto-bound, on 10.0.0.1
        } else {
          ASSERT_TRUE(
              table->Bind(s, net::Endpoint{net::IpAddress::AnyV4(), uint16_t(5000 + pick(100))})
                  .ok());
        }
        live.push_back(s);
        ++ops;
      }
      for (int i = 0; i < 200 && !live.empty(); ++i) {  // move some
        SocketId s = live[pick(live.size())];
        const net::IpAddress other = net::IpAddress::V4(0x0a000002 + pick(3));
        switch (pick(3)) {
          case 0:
            if (table->Get(s)->state != SocketState::kOpen) {  // an auto-bound one may be open
              absl::StatusOr<net::Endpoint> r = table->Rehash(s, other, std::nullopt);
              ASSERT_TRUE(r.ok()) << r.status();
            }
            break;
          case 1:
            ASSERT_TRUE(
                table->Connect(s, net::Endpoint{net::IpAddress::V4(0x0d000000 + pick(1000)), 9})
                    .ok());
            break;
          default:
            table->Disconnect(s).IgnoreError();  // may not be connected
            break;
        }
        ++ops;
      }
      for (SocketId s : live) ASSERT_TRUE(table->Close(s).ok());
      ops += live.size();
      live.clear();
    }
  };
  churn();  // returns early on a failed assertion; the readers are stopped either way
  stop = true;
  for (std::thread& t : readers) t.join();
  TableStats st = table->Stats();
  EXPECT_GT(st.resizes, 4u);
  EXPECT_GT(lookups.load(), 10000u);
  EXPECT_EQ(misses.load(), 0u) << "lookups " << lookups.load() << ", writer ops " << ops;
  RecordProperty("lookups", std::to_string(lookups.load()));
  RecordProperty("writer_ops", std::to_string(ops));
}

INSTANTIATE_TEST_SUITE_P(Reclaim, Stress, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& p) {
                           return p.param ? "BySocketTableWriter" : "ByCallRcuThread";
                         });

}  // namespace
}  // namespace quadsock::demux
