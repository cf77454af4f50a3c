// The receiving tools' run protocol with bench/netbench.py, shared by bench/receiver.cc and
// bench/app_receiver.cc: after setup a tool prints "READY", then either measures (waits for
// the first packet, warms up, takes --samples windows of --window seconds) or serves (counts
// until its stdin ends, answering each "COUNT" line with "COUNT <packets so far>"), and ends
// with one JSON line of its result and details.
//
//   std::printf("READY\n"); std::fflush(stdout);
//   RunTiming t = {.wait = 10, .warmup = 0.5, .window = 1, .samples = 5};
//   return serve ? PrintServed("app", Serve(r), details) : PrintMeasured("app", Measure(t, r), details);
#ifndef QUADSOCK_BENCH_INTERNAL_RUN_H_
#define QUADSOCK_BENCH_INTERNAL_RUN_H_

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "bench/internal/pin.h"

namespace quadsock::bench {

// One receive turn: returns the packets it took. The details are printed at the end.
class Receiver {
 public:
  virtual ~Receiver() = default;
  virtual uint64_t Step() = 0;
  virtual std::map<std::string, double> Details() { return {}; }
};

struct RunTiming {
  double wait = 10;  // for the first packet
  double warmup = 0.5;
  double window = 1;
  int samples = 5;
};

// Waits for the first packet, warms up, then takes the samples (pps).
inline std::vector<double> Measure(const RunTiming& t, Receiver& r) {
  std::vector<double> samples;
  const double deadline = MonotonicSeconds() + t.wait;
  uint64_t total = 0;
  while (total == 0) {
    total += r.Step();
    if (MonotonicSeconds() > deadline) return samples;
  }
  const double warm = MonotonicSeconds() + t.warmup;
  while (MonotonicSeconds() < warm) r.Step();
  for (int i = 0; i < t.samples; ++i) {
    const double start = MonotonicSeconds();
    uint64_t got = 0;
    double now = start;
    while (now - start < t.window) {
      got += r.Step();
      now = MonotonicSeconds();
    }
    samples.push_back(got / (now - start));
  }
  return samples;
}

// --serve: receives until stdin ends, answering "COUNT" lines with the running count (a
// thread that sleeps in read() answers, so the receive loop does not poll stdin).
inline uint64_t Serve(Receiver& r) {
  std::atomic<uint64_t> total{0};
  std::atomic<bool> quit{false};
  std::thread commands([&] {
    char line[64];
    while (std::fgets(line, sizeof(line), stdin) != nullptr) {
      if (std::strncmp(line, "COUNT", 5) == 0) {
        std::printf("COUNT %llu\n", static_cast<unsigned long long>(total.load()));
        std::fflush(stdout);
      } else if (std::strncmp(line, "QUIT", 4) == 0) {
        break;
      }
    }
    quit.store(true);
  });
  // One writer: a relaxed load and store suffice.
  while (!quit.load(std::memory_order_relaxed)) {
    total.store(total.load(std::memory_order_relaxed) + r.Step(), std::memory_order_relaxed);
  }
  commands.join();
  return total.load();
}

// The details as JSON members: "setup_seconds": 1.2, "name": value, ... Counts are exact
// (absl::StrCat would round a double to six digits).
inline std::string DetailsJson(double setup_seconds, const std::map<std::string, double>& d) {
  std::string out = absl::StrFormat("\"setup_seconds\": %.6g", setup_seconds);
  for (const auto& [name, value] : d) absl::StrAppendFormat(&out, ", \"%s\": %.17g", name, value);
  return out;
}

// The last line of a --serve run; returns the exit code.
inline int PrintServed(const std::string& mode, uint64_t total, const std::string& details) {
  std::printf("{\"mode\": \"%s\", \"total\": %llu, \"details\": {%s}}\n", mode.c_str(),
              static_cast<unsigned long long>(total), details.c_str());
  std::fflush(stdout);
  return 0;
}

// The last line of a measuring run; returns the exit code (3: no packet came).
inline int PrintMeasured(const std::string& mode, const std::vector<double>& samples,
                         const std::string& details) {
  std::printf("{\"mode\": \"%s\", \"samples\": [%s], \"details\": {%s}}\n", mode.c_str(),
              absl::StrJoin(samples, ", ",
                            [](std::string* out, double v) {
                              absl::StrAppend(out, static_cast<uint64_t>(v));
                            }).c_str(),
              details.c_str());
  std::fflush(stdout);
  return samples.empty() ? 3 : 0;
}

}  // namespace quadsock::bench

#endif  // QUADSOCK_BENCH_INTERNAL_RUN_H_
