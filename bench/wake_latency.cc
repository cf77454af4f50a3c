// How long a thread asleep on one CPU takes to run once a thread on another wakes it (an
// eventfd write), at several gaps between wake-ups: the wait of the veth's NAPI thread, of
// quadsockd's poll thread and of an application before they drain their rings. On a VM a
// halted vCPU wakes through the hypervisor, the later the longer it was idle, and a ring that
// fills meanwhile drops (bench/PERFORMANCE.md, "Losses at low rates on an idle vCPU"). Each
// wake-up is made after the last one was seen, so none is folded into another. Prints, per
// gap, the delays' p50, p90, p99 and maximum in microseconds. Bounded: at most
// gaps x wakeups x (gap + 1 s) (a wake-up not seen within a second is counted lost).
//
//   bazel run -c opt //bench:wake_latency -- --gaps_us=20,100,500,2000 --wakeups=2000
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "bench/internal/args.h"
#include "bench/internal/pin.h"

namespace quadsock::bench {
namespace {

constexpr uint64_t kLostAfterNs = 1'000'000'000;

uint64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1'000'000'000 + uint64_t(ts.tv_nsec);
}

struct Wakeups {
  int event_fd = -1;
  std::atomic<uint64_t> woke_ns{0};  // when the sleeper ran after the last write; 0 until then
  std::atomic<bool> stop{false};
};

// The sleeper: blocks on the eventfd and notes when it runs.
void Sleep(Wakeups& w) {
  uint64_t count;
  while (read(w.event_fd, &count, sizeof(count)) == sizeof(count) &&
         !w.stop.load(std::memory_order_relaxed)) {
    w.woke_ns.store(NowNs(), std::memory_order_release);
  }
}

struct Delays {
  std::vector<uint64_t> ns;
  int lost = 0;
};

// `n` wake-ups, each `gap_us` after the last one was seen (spinning meanwhile: the waker's CPU
// stays awake, only the sleeper's idles).
Delays Measure(Wakeups& w, int gap_us, int n) {
  Delays d;
  for (int i = 0; i < n; ++i) {
    const uint64_t due = NowNs() + uint64_t(gap_us) * 1000;
    while (NowNs() < due) {
    }
    w.woke_ns.store(0, std::memory_order_relaxed);
    const uint64_t sent = NowNs();
    const uint64_t one = 1;
    if (write(w.event_fd, &one, sizeof(one)) != sizeof(one)) {
      ++d.lost;
      continue;
    }
    uint64_t woke = 0;
    while ((woke = w.woke_ns.load(std::memory_order_acquire)) == 0 &&
           NowNs() - sent < kLostAfterNs) {
    }
    if (woke == 0) {
      ++d.lost;
    } else {
      d.ns.push_back(woke - sent);
    }
  }
  std::sort(d.ns.begin(), d.ns.end());
  return d;
}

double Quantile(const std::vector<uint64_t>& sorted, double q) {
  if (sorted.empty()) return 0;
  return sorted[std::min(sorted.size() - 1, size_t(q * double(sorted.size())))] / 1e3;
}

int Main(int argc, char** argv) {
  Args args(argc, argv);
  const std::string gaps_text = args.String("gaps_us", "20,100,500,2000");
  const int wakeups = int(args.Int("wakeups", 2000));
  const int cpu = int(args.Int("cpu", 0));
  const int from_cpu = int(args.Int("from_cpu", 1));
  const bool help = args.Bool("help", false);
  std::vector<int> gaps;
  for (absl::string_view g : absl::StrSplit(gaps_text, ',')) {
    int us;
    if (!absl::SimpleAtoi(g, &us) || us < 0 || us > 1'000'000) {
      gaps.clear();
      break;
    }
    gaps.push_back(us);
  }
  if (help || !args.Unused().empty() || gaps.empty() || wakeups <= 0 || wakeups > 1'000'000) {
    std::fprintf(stderr,
                 "usage: wake_latency [--gaps_us=20,100,500,2000] [--wakeups=2000] [--cpu=0] "
                 "[--from_cpu=1]\n"
                 "  How long a thread asleep on --cpu takes to run after a write to its eventfd "
                 "from --from_cpu,\n  --wakeups times at each gap (microseconds, up to 1 s).\n");
    return help ? 0 : 2;
  }
  Wakeups w;
  w.event_fd = eventfd(0, EFD_CLOEXEC);
  if (w.event_fd < 0) {
    std::perror("eventfd");
    return 1;
  }
  if (absl::Status s = PinToCpu(from_cpu); !s.ok()) {
    std::fprintf(stderr, "%s\n", std::string(s.message()).c_str());
    return 1;
  }
  std::atomic<int> pinned{0};  // the sleeper's: 1 pinned, -1 could not be
  std::thread sleeper([&] {
    if (absl::Status s = PinToCpu(cpu); !s.ok()) {
      std::fprintf(stderr, "%s\n", std::string(s.message()).c_str());
      pinned.store(-1);
      return;
    }
    pinned.store(1);
    Sleep(w);
  });
  while (pinned.load() == 0) usleep(1000);
  if (pinned.load() < 0) {
    sleeper.join();
    return 1;
  }
  usleep(100'000);  // asleep in read() by now
  std::printf("wake-ups of a thread asleep on CPU %d from CPU %d, microseconds:\n", cpu,
              from_cpu);
  for (int gap : gaps) {
    const Delays d = Measure(w, gap, wakeups);
    std::printf("gap %7d us: %d seen, %d lost; p50 %.1f, p90 %.1f, p99 %.1f, max %.1f\n", gap,
                int(d.ns.size()), d.lost, Quantile(d.ns, 0.5), Quantile(d.ns, 0.9),
                Quantile(d.ns, 0.99), d.ns.empty() ? 0.0 : d.ns.back() / 1e3);
    std::fflush(stdout);
  }
  w.stop.store(true);
  const uint64_t one = 1;
  (void)!write(w.event_fd, &one, sizeof(one));
  sleeper.join();
  close(w.event_fd);
  return 0;
}

}  // namespace
}  // namespace quadsock::bench

int main(int argc, char** argv) { return quadsock::bench::Main(argc, argv); }
