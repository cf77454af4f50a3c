// Pins the calling thread to one CPU (the benchmark puts the receiver on CPU 0 and the
// generator on CPU 1), and a monotonic clock in seconds.
//
//   if (absl::Status s = PinToCpu(1); !s.ok()) return Fail(s);
//   const double t0 = MonotonicSeconds();
#ifndef QUADSOCK_BENCH_INTERNAL_PIN_H_
#define QUADSOCK_BENCH_INTERNAL_PIN_H_

#include <sched.h>
#include <time.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "absl/status/status.h"

namespace quadsock::bench {

inline absl::Status PinToCpu(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  if (sched_setaffinity(0, sizeof(set), &set) != 0) {
    return absl::InvalidArgumentError("cannot pin to CPU " + std::to_string(cpu) + ": " +
                                      std::strerror(errno));
  }
  return absl::OkStatus();
}

inline double MonotonicSeconds() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

}  // namespace quadsock::bench

#endif  // QUADSOCK_BENCH_INTERNAL_PIN_H_
