// The data channel (stack/channel) between two threads, as quadsockd and an application use it:
// a producer that works as a poll thread does (turns of at most 64 datagrams, paced at an offered
// rate; it sleeps when nothing is due, as the poll thread sleeps until the NIC has frames) and a
// reader that sleeps on the eventfds when the ring is empty (ChannelReader::Receive with a
// timeout), as clients/cpp does. What it costs shows per 1000 datagrams: eventfd writes
// (wake-ups), context switches of the two threads, and datagrams dropped for a full ring. Both
// threads run at nice -20 when allowed (root), as the network benchmarks' receivers do.
//   BM_Channel/<kpps>/<same_cpu>/<batched>
//       kpps: the offered rate, thousands of datagrams per second
//       same_cpu: both threads on CPU 0 (1, as the app_quadsock_* cases put quadsockd and the
//                 application), or the reader on CPU 0 and the producer on CPU 1 (0)
//       batched: the poll engine's way (1), or each datagram published and woken at once (0:
//                the poll engine before the channel's batching)
//
//   bazel run -c opt //bench:channel_benchmark
#include <sys/prctl.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "benchmark/benchmark.h"
#include "bench/internal/pin.h"
#include "stack/channel/channel.h"
#include "stack/channel/reader.h"
#include "stack/internal/staged_channels.h"

namespace quadsock::channel {
namespace {

constexpr size_t kTurn = 64;             // the poll engine's RX batch
constexpr uint64_t kPerIteration = 1000;  // datagrams per benchmark iteration
constexpr uint32_t kSlots = 1024;         // quadsockd's default ring

const net::Endpoint kPeer = *net::Endpoint::Parse("10.9.1.1:10000");
const net::Endpoint kLocal = *net::Endpoint::Parse("10.9.0.2:4000");

int64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

void SleepUntilNs(int64_t t) {
  const timespec ts{static_cast<time_t>(t / 1000000000), static_cast<long>(t % 1000000000)};
  clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr);
}

// Both threads at nice -20, as bench/netbench.py runs receivers (when allowed: root), so that
// other work on the machine takes less of their CPU.
void RaisePriority() { (void)setpriority(PRIO_PROCESS, static_cast<id_t>(gettid()), -20); }

// This thread's context switches so far, voluntary and not.
uint64_t ContextSwitches() {
  rusage u;
  getrusage(RUSAGE_THREAD, &u);
  return static_cast<uint64_t>(u.ru_nvcsw + u.ru_nivcsw);
}

// The poll thread's side: one turn of `n` datagrams (n = 0: an idle turn), as the poll engine
// does it (`batched`: staged, published once a turn, the reader woken at the idle turn or every
// few busy ones: stack/internal/staged_channels.h), or as it did before (each datagram
// published and its reader woken at once: Channel::Push).
class Producer {
 public:
  Producer(Channel& c, bool batched) : c_(c), batched_(batched), staged_(0) {}
  void Turn(size_t n, absl::Time now) {
    for (size_t i = 0; i < n; ++i) {
      const uint32_t socket = static_cast<uint32_t>(sequence_ % 100000);
      if (!batched_) {
        (void)c_.Push(0, socket, kPeer, kLocal, payload_, now, sequence_);
      } else if (c_.Stage(0, socket, kPeer, kLocal, payload_, now, sequence_)) {
        staged_.Add(&c_);
      }
      ++sequence_;
    }
    staged_.Publish();
    staged_.EndTurn(n == 0);
  }

 private:
  Channel& c_;
  const bool batched_;
  stack::StagedChannels staged_;
  const uint8_t payload_[18] = {};
  uint64_t sequence_ = 1;
};

void BM_Channel(benchmark::State& state) {
  const double rate = static_cast<double>(state.range(0)) * 1000;
  const bool same_cpu = state.range(1) != 0;
  const bool batched = state.range(2) != 0;
  std::shared_ptr<Channel> c = Channel::Create({.rings = 1, .slots = kSlots}).value();
  std::vector<int> events;
  for (int fd : c->event_fds()) events.push_back(dup(fd));
  ChannelReader r = ChannelReader::Map(dup(c->memfd()), std::move(events)).value();
  // Sleeps end when asked, not up to 50 us later: the producer stands for a thread woken by
  // the NIC.
  prctl(PR_SET_TIMERSLACK, 1000UL);
  if (absl::Status s = bench::PinToCpu(same_cpu ? 0 : 1); !s.ok()) {
    state.SkipWithError(std::string(s.message()).c_str());
    return;
  }
  RaisePriority();
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> received{0}, reader_switches{0};
  std::thread reader([&] {
    (void)bench::PinToCpu(0);
    RaisePriority();
    const uint64_t switches = ContextSwitches();
    ReceivedView v[kTurn];
    uint64_t n = 0;
    while (!stop.load(std::memory_order_relaxed)) {
      n += r.Receive(v, absl::Milliseconds(10));
      r.Release();
    }
    // What was published before stop.
    for (size_t got; (got = r.Receive(v)) > 0; r.Release()) n += got;
    received = n;
    reader_switches = ContextSwitches() - switches;
  });
  Producer p(*c, batched);
  const uint64_t switches = ContextSwitches();
  const int64_t start = NowNs();
  const double period_ns = 1e9 / rate;
  uint64_t produced = 0;
  for (auto _ : state) {
    const uint64_t target = produced + kPerIteration;
    while (produced < target) {
      const int64_t now = NowNs();
      const uint64_t due = static_cast<uint64_t>(static_cast<double>(now - start) / period_ns);
      const size_t n = static_cast<size_t>(
          std::min<uint64_t>({due > produced ? due - produced : 0, kTurn, target - produced}));
      p.Turn(n, absl::FromUnixNanos(now));
      produced += n;
      // Nothing due: sleep until the next datagram is.
      if (n == 0) SleepUntilNs(start + static_cast<int64_t>((produced + 1) * period_ns));
    }
  }
  p.Turn(0, absl::Now());
  const uint64_t producer_switches = ContextSwitches() - switches;
  stop = true;
  reader.join();
  const ChannelCounters n = c->counters();
  if (received.load() + n.ring_full != produced) state.SkipWithError("datagrams unaccounted for");
  const double per_1000 = 1000.0 / static_cast<double>(produced);
  state.counters["wakeups_per_1000"] = static_cast<double>(n.wakeups) * per_1000;
  state.counters["switches_per_1000"] =
      static_cast<double>(producer_switches + reader_switches.load()) * per_1000;
  state.counters["drops_per_1000"] = static_cast<double>(n.ring_full) * per_1000;
  state.SetItemsProcessed(static_cast<int64_t>(produced));
}

BENCHMARK(BM_Channel)
    ->ArgsProduct({{100, 500, 1000}, {1, 0}, {0, 1}})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace quadsock::channel

BENCHMARK_MAIN();
