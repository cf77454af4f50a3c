// Benchmarks of the socket table (stack/demux): lookup with N connected sockets on one port,
// hash4 on and off, a new flow to a port with N connected sockets, connect+rehash operations per
// second, and memory per socket. Names are fixed so runs can be compared:
//   BM_Lookup4/<N>     hash4 on: lookup of a connected flow, N connected sockets on one port
//   BM_Lookup4Off/<N>  the same with hash4 off (CONFIG_BASE_SMALL): every connected socket on
//                      the port is scored in one hash2 chain, so a lookup is O(N)
//   BM_NewFlow/<N>     hash4 on: an unconnected lookup of a new flow to a port with N connected
//                      sockets and one listener (N = 0 is the empty-port baseline)
//   BM_Lookup4Cold/<N>       hash4 on, flows to all N sockets in a random order (each lookup's
//                            slot, entry and chain cache-cold, as in a stack with N busy peers)
//   BM_LookupBatch4Cold/<N>  the same flows through LookupBatch, 64 at a time (time per flow)
//   BM_ConnectRehash   Open + Connect (auto-bind, enters hash4) + Rehash (new address) + Close
//   BM_ConnectWildcard Connect of a wildcard-bound socket (hash2 -> hash4: one grace period)
// The other lookups cycle through 256 flows spread over the table (cache-warm: they measure the
// algorithm, chain lengths and hashing, not DRAM latency).
//
//   bazel run -c opt //bench:demux_benchmark
#include <algorithm>
#include <map>
#include <random>
#include <span>
#include <memory>
#include <vector>

#include "benchmark/benchmark.h"
#include "stack/demux/rcu.h"
#include "stack/demux/socket_table.h"
#include "stack/net/address.h"

namespace quadsock::demux {
namespace {

constexpr uint16_t kPort = 443;
const net::IpAddress kLocal = net::IpAddress::V4(0x0a000001);  // 10.0.0.1

net::Endpoint Peer(int i) {
  return net::Endpoint{net::IpAddress::V4(0x0b000000 + (i >> 8)),
                       static_cast<uint16_t>(1024 + (i & 0xff))};
}

RcuReaderThread& Reader() {
  static RcuReaderThread* reader = new RcuReaderThread;  // the benchmark thread
  return *reader;
}

SocketTable::Options Options(bool hash4) {
  SocketTable::Options o;
  o.hash4 = hash4;
  o.ephemeral_low = o.ephemeral_high = kPort;  // connect auto-binds everything to one port
  o.route = [](const net::IpAddress&) -> absl::StatusOr<net::IpAddress> { return kLocal; };
  return o;
}

struct Fixture {
  std::unique_ptr<SocketTable> table;
  std::unique_ptr<LookupContext> ctx;
  size_t bytes_per_socket = 0;
};

// One table at a time is kept (the 1M tables are large); built once per (hash4, N).
Fixture& Get(bool hash4, int n) {
  static std::pair<bool, int> key{false, -1};
  static Fixture fixture;
  Reader();
  if (key == std::make_pair(hash4, n)) return fixture;
  fixture.ctx.reset();
  fixture.table.reset();
  fixture.table = SocketTable::Create(Options(hash4)).value();
  SocketTable& t = *fixture.table;
  const size_t empty = t.MemoryBytes();
  SocketId listener = t.Open({net::Family::kV4, false, true, 0, 0}).value();
  t.Bind(listener, net::Endpoint{kLocal, kPort}).value();
  for (int i = 0; i < n; ++i) {
    SocketId s = t.Open({net::Family::kV4, false, true, 0, 0}).value();
    t.Connect(s, Peer(i)).value();
  }
  fixture.bytes_per_socket = n > 0 ? (t.MemoryBytes() - empty) / (n + 1) : 0;
  fixture.ctx = std::make_unique<LookupContext>(t);
  key = {hash4, n};
  return fixture;
}

std::vector<FlowKey> ConnectedFlows(int n) {
  std::vector<FlowKey> flows;
  const int k = std::min(n, 256);
  for (int j = 0; j < k; ++j) {
    net::Endpoint p = Peer(static_cast<int>((int64_t{j} * n) / k));
    flows.push_back(FlowKey{p.address, p.port, kLocal, kPort, 0});
  }
  return flows;
}

void LookupLoop(benchmark::State& state, Fixture& f, const std::vector<FlowKey>& flows,
                bool expect_listener) {
  (void)expect_listener;
  size_t i = 0;
  int64_t found = 0;
  for (auto _ : state) {
    std::optional<LookupResult> r = f.table->Lookup(*f.ctx, flows[i]);
    found += r.has_value();
    benchmark::DoNotOptimize(r);
    if (++i == flows.size()) {
      i = 0;
      Reader().Quiescent();
    }
  }
  if (found != state.iterations()) state.SkipWithError("lookup missed");
  TableStats st = f.table->Stats();
  state.counters["bytes_per_socket"] = f.bytes_per_socket;
  state.counters["slots"] = st.slots;
  state.counters["steps_per_lookup"] =
      st.lookups ? static_cast<double>(st.chain_steps) / st.lookups : 0;
  (void)expect_listener;
}

void BM_Lookup4(benchmark::State& state) {
  Fixture& f = Get(true, state.range(0));
  LookupLoop(state, f, ConnectedFlows(state.range(0)), false);
}

void BM_Lookup4Off(benchmark::State& state) {
  Fixture& f = Get(false, state.range(0));
  LookupLoop(state, f, ConnectedFlows(state.range(0)), false);
}

// Every connected flow once, in a random order.
std::vector<FlowKey> ShuffledFlows(int n) {
  std::vector<FlowKey> flows;
  for (int j = 0; j < n; ++j) {
    net::Endpoint p = Peer(j);
    flows.push_back(FlowKey{p.address, p.port, kLocal, kPort, 0});
  }
  std::mt19937_64 rng(7);
  std::shuffle(flows.begin(), flows.end(), rng);
  return flows;
}

void BM_Lookup4Cold(benchmark::State& state) {
  Fixture& f = Get(true, state.range(0));
  LookupLoop(state, f, ShuffledFlows(state.range(0)), false);
}

void BM_LookupBatch4Cold(benchmark::State& state) {
  constexpr size_t kBatch = 64;
  Fixture& f = Get(true, state.range(0));
  std::vector<FlowKey> flows = ShuffledFlows(state.range(0));
  flows.resize(flows.size() / kBatch * kBatch);
  std::optional<LookupResult> out[kBatch];
  size_t i = 0;
  int64_t found = 0;
  for (auto _ : state) {
    f.table->LookupBatch(*f.ctx, std::span(flows).subspan(i, kBatch), out);
    for (const std::optional<LookupResult>& r : out) found += r.has_value();
    benchmark::DoNotOptimize(out);
    i += kBatch;
    if (i == flows.size()) {
      i = 0;
      Reader().Quiescent();
    }
  }
  if (found != state.iterations() * int64_t{kBatch}) state.SkipWithError("lookup missed");
  state.SetItemsProcessed(state.iterations() * kBatch);
  state.counters["s_per_flow"] = benchmark::Counter(
      static_cast<double>(state.iterations() * kBatch),
      benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

void BM_NewFlow(benchmark::State& state) {
  Fixture& f = Get(true, state.range(0));
  std::vector<FlowKey> flows;
  for (int j = 0; j < 256; ++j) {
    flows.push_back(FlowKey{net::IpAddress::V4(0x0c000000 + j), 7, kLocal, kPort, 0});
  }
  LookupLoop(state, f, flows, true);
}

void BM_ConnectRehash(benchmark::State& state) {
  Reader();
  std::unique_ptr<SocketTable> table = SocketTable::Create(Options(true)).value();
  const net::IpAddress other = net::IpAddress::V4(0x0a000002);
  int i = 0;
  for (auto _ : state) {
    SocketId s = table->Open({net::Family::kV4, false, true, 0, 0}).value();
    benchmark::DoNotOptimize(table->Connect(s, Peer(i++)));
    benchmark::DoNotOptimize(table->Rehash(s, other, std::nullopt));
    benchmark::DoNotOptimize(table->Close(s));
  }
  state.SetItemsProcessed(state.iterations());
}

void BM_ConnectWildcard(benchmark::State& state) {
  Reader();
  std::unique_ptr<SocketTable> table = SocketTable::Create(Options(true)).value();
  int i = 0;
  for (auto _ : state) {
    state.PauseTiming();
    SocketId s = table->Open({net::Family::kV4, false, true, 0, 0}).value();
    table->Bind(s, net::Endpoint{net::IpAddress::AnyV4(), kPort}).value();
    state.ResumeTiming();
    benchmark::DoNotOptimize(table->Connect(s, Peer(i++)));
    state.PauseTiming();
    table->Close(s).IgnoreError();
    state.ResumeTiming();
  }
  state.SetItemsProcessed(state.iterations());
}

// N = 1M with hash4 off is about a millisecond per lookup (one chain of a million entries), so
// its benchmark runs few iterations, but its setup is linear: not capped.
BENCHMARK(BM_Lookup4)->Arg(1)->Arg(500)->Arg(10000)->Arg(100000)->Arg(1000000);
BENCHMARK(BM_Lookup4Off)->Arg(1)->Arg(500)->Arg(10000)->Arg(100000)->Arg(1000000);
BENCHMARK(BM_NewFlow)->Arg(0)->Arg(1)->Arg(500)->Arg(10000)->Arg(100000)->Arg(1000000);
BENCHMARK(BM_Lookup4Cold)->Arg(500)->Arg(10000)->Arg(100000)->Arg(1000000);
BENCHMARK(BM_LookupBatch4Cold)->Arg(500)->Arg(10000)->Arg(100000)->Arg(1000000);
BENCHMARK(BM_ConnectRehash);
BENCHMARK(BM_ConnectWildcard);

}  // namespace
}  // namespace quadsock::demux

BENCHMARK_MAIN();
