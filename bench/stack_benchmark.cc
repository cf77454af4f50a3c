// The stack's own receive path, without a kernel: parse, classify, socket lookup and delivery
// to a counting callback, per frame. A replay link hands the stack batches of 64 prebuilt
// 64-byte UDP frames (the benchmark's part is a few stores per frame), so the time is the
// stack's alone: what it adds on a poll thread to the kernel's AF_XDP work.
//   BM_Receive/0        one unconnected socket, 500 flows
//   BM_Receive/<N>      N connected sockets, one flow each, all N flows in a random order (with
//                       100k sockets each frame's slot, entry and socket are cold)
//   BM_ReceiveNewFlows/<N>  N connected sockets and a listener; 50k flows none is connected to
//   BM_ReceiveIpv6/<N>  BM_Receive over IPv6 (0 and 500)
//   BM_ReceiveChannel/<N>  BM_Receive's N connected sockets on one data channel (stack/channel)
//                       instead of callbacks: each datagram copied into the channel's ring; the
//                       time includes the application taking each batch (a reader on the same
//                       thread after each turn: descriptors read, payloads not touched)
//
//   bazel run -c opt //bench:stack_benchmark
#include <unistd.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <random>
#include <vector>

#include "benchmark/benchmark.h"
#include "stack/channel/channel.h"
#include "stack/channel/reader.h"
#include "stack/link/link.h"
#include "stack/net/frame_builder.h"
#include "stack/stack.h"

namespace quadsock::stack {
namespace {

const net::MacAddress kOurMac = *net::MacAddress::Parse("02:00:00:00:00:01");
const net::MacAddress kPeerMac = *net::MacAddress::Parse("02:00:00:00:00:02");
const net::IpAddress kLocal = *net::IpAddress::Parse("10.9.0.2");
constexpr uint16_t kPort = 4000;
constexpr size_t kFrameStride = 128;  // bytes between prebuilt frames

const net::IpAddress kLocal6 = *net::IpAddress::Parse("fd00:9::2");

// Flow i's peer: IPv4 ip_base + i / 50000, or (ip_base 0) IPv6 fd00:9:1::(i / 50000 + 1).
net::Endpoint Peer(uint32_t i, uint32_t ip_base) {
  const uint16_t port = static_cast<uint16_t>(10000 + i % 50000);
  if (ip_base != 0) return {net::IpAddress::V4(ip_base + i / 50000), port};
  net::IpAddress::Bytes b = net::IpAddress::Parse("fd00:9:1::").value().bytes16();
  b[15] = static_cast<uint8_t>(i / 50000 + 1);
  return {net::IpAddress::V6Bytes(b.data()), port};
}

// Receives the same prebuilt frames over and over, a batch per call; sends nothing.
class ReplayLink : public link::Link {
 public:
  explicit ReplayLink(std::vector<uint8_t> frames, std::vector<uint32_t> lengths)
      : frames_(std::move(frames)), lengths_(std::move(lengths)) {
    info_.name = "replay";
    info_.ifindex = 1;
    info_.mac = kOurMac;
    info_.mode = "memory";
  }
  const link::LinkInfo& info() const override { return info_; }
  size_t Receive(std::span<link::FrameBuffer> out) override {
    for (link::FrameBuffer& f : out) {
      f = {&frames_[next_ * kFrameStride], lengths_[next_], kFrameStride, next_};
      if (++next_ == lengths_.size()) next_ = 0;
    }
    received_ += out.size();
    return out.size();
  }
  void Release(std::span<const link::FrameBuffer>) override {}
  std::optional<link::FrameBuffer> AllocateTx(uint32_t) override { return std::nullopt; }
  size_t Transmit(std::span<const link::FrameBuffer>) override { return 0; }
  void Poll() override {}
  int wait_fd() const override { return -1; }
  absl::Status CheckFrameAccounting() const override { return absl::OkStatus(); }
  link::LinkCounters counters() const override { return {.rx_frames = received_}; }

 private:
  link::LinkInfo info_;
  std::vector<uint8_t> frames_;
  std::vector<uint32_t> lengths_;
  size_t next_ = 0;
  uint64_t received_ = 0;
};

struct Setup {
  std::unique_ptr<Stack> stack;
  std::atomic<uint64_t> delivered{0};
  std::shared_ptr<channel::Channel> channel;  // the sockets' data channel, if on one
  std::optional<channel::ChannelReader> reader;
};

// A stack on a replay link of `flows` flows from ip_base (shuffled; 0: IPv6), with `connected`
// sockets connected to the first of them and, if `listener`, one unconnected socket on the port;
// the sockets count into a callback, or with `on_channel` go to one data channel.
std::unique_ptr<Setup> Make(uint32_t connected, bool listener, uint32_t flows, uint32_t ip_base,
                            bool on_channel = false) {
  const net::IpAddress local = ip_base != 0 ? kLocal : kLocal6;
  std::vector<uint32_t> order(flows);
  for (uint32_t i = 0; i < flows; ++i) order[i] = i;
  std::mt19937 rng(7);
  std::shuffle(order.begin(), order.end(), rng);
  std::vector<uint8_t> bytes(size_t{flows} * kFrameStride);
  std::vector<uint32_t> lengths(flows);
  const uint8_t payload[18] = {};
  for (uint32_t k = 0; k < flows; ++k) {
    std::optional<size_t> n = net::BuildUdp(
        {kPeerMac, kOurMac, std::nullopt}, {Peer(order[k], ip_base), {local, kPort}}, payload,
        {&bytes[size_t{k} * kFrameStride], kFrameStride});
    lengths[k] = static_cast<uint32_t>(n.value());
  }
  auto setup = std::make_unique<Setup>();
  std::vector<std::unique_ptr<link::Link>> links;
  links.push_back(std::make_unique<ReplayLink>(std::move(bytes), std::move(lengths)));
  StackOptions o;
  o.addresses = {*net::IpPrefix::Parse("10.9.0.2/16"), *net::IpPrefix::Parse("fd00:9::2/32")};
  setup->stack = Stack::Create(o, std::move(links)).value();
  Stack& st = *setup->stack;
  std::atomic<uint64_t>* delivered = &setup->delivered;
  auto count = [delivered](const net::Endpoint&, std::span<const uint8_t>) {
    delivered->store(delivered->load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  };
  if (on_channel) {
    setup->channel = channel::Channel::Create({.rings = 1, .slots = 1024}).value();
    std::vector<int> events;
    for (int fd : setup->channel->event_fds()) events.push_back(dup(fd));
    setup->reader.emplace(
        channel::ChannelReader::Map(dup(setup->channel->memfd()), std::move(events)).value());
  }
  for (uint32_t i = 0; i < connected + (listener ? 1 : 0); ++i) {
    SocketId id = st.Open(local.family(), {.reuse_port = true}).value();
    st.Bind(id, {local, kPort}).value();
    if (i < connected) st.Connect(id, Peer(i, ip_base != 0 ? 0x0a090101 : 0)).value();
    if (on_channel) {
      st.PutOnChannel(id, setup->channel, i).IgnoreError();
    } else {
      st.SetReceiveCallback(id, count).IgnoreError();
    }
  }
  return setup;
}

// The application's part of a turn: takes what the channel holds, and gives it back.
void Drain(Setup& s) {
  channel::ReceivedView v[64];
  uint64_t n = 0;
  for (size_t got; (got = s.reader->Receive(v)) > 0;) n += got;
  s.reader->Release();
  s.delivered.store(s.delivered.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
}

void Run(benchmark::State& state, Setup& s) {
  for (auto _ : state) {
    benchmark::DoNotOptimize(s.stack->PollOnce());
    if (s.reader.has_value()) Drain(s);
  }
  const uint64_t frames = static_cast<uint64_t>(state.iterations()) * 64;
  if (s.delivered.load() != frames) state.SkipWithError("not every frame was delivered");
  state.SetItemsProcessed(static_cast<int64_t>(frames));
  state.counters["ns_per_frame"] = benchmark::Counter(
      static_cast<double>(frames), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

void BM_Receive(benchmark::State& state) {
  const uint32_t n = static_cast<uint32_t>(state.range(0));
  std::unique_ptr<Setup> s = Make(n, n == 0, n == 0 ? 500 : n, 0x0a090101);
  Run(state, *s);
}

void BM_ReceiveNewFlows(benchmark::State& state) {
  std::unique_ptr<Setup> s = Make(static_cast<uint32_t>(state.range(0)), true, 50000, 0x0a090201);
  Run(state, *s);
}

void BM_ReceiveIpv6(benchmark::State& state) {
  const uint32_t n = static_cast<uint32_t>(state.range(0));
  std::unique_ptr<Setup> s = Make(n, n == 0, n == 0 ? 500 : n, 0);
  Run(state, *s);
}

void BM_ReceiveChannel(benchmark::State& state) {
  const uint32_t n = static_cast<uint32_t>(state.range(0));
  std::unique_ptr<Setup> s = Make(n, false, n, 0x0a090101, /*on_channel=*/true);
  Run(state, *s);
}

BENCHMARK(BM_Receive)->Arg(0)->Arg(500)->Arg(10000)->Arg(100000);
BENCHMARK(BM_ReceiveIpv6)->Arg(0)->Arg(500);
BENCHMARK(BM_ReceiveNewFlows)->Arg(100000);
BENCHMARK(BM_ReceiveChannel)->Arg(500)->Arg(100000);

}  // namespace
}  // namespace quadsock::stack

BENCHMARK_MAIN();
