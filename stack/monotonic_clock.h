// The clock of the stack's and the service's timers: leases, neighbour timers, the ICMP token
// bucket. It is the system's monotonic clock (CLOCK_MONOTONIC, std::chrono::steady_clock), not
// the wall clock (absl::Now): an NTP or administrator step of the wall clock must neither
// expire every session at once nor freeze the timers for as long as it went back.
//
// Its times are absl::Time for the convenience of absl::Duration arithmetic, but they are not
// dates: only differences between two of them mean something. Timestamps shown to clients (a
// datagram's arrival) come from the wall clock (StackOptions::wall_clock).
//
//   const absl::Time start = MonotonicNow();
//   ...
//   if (MonotonicNow() - start > lease) Expire();
#ifndef QUADSOCK_STACK_MONOTONIC_CLOCK_H_
#define QUADSOCK_STACK_MONOTONIC_CLOCK_H_

#include <chrono>

#include "absl/time/time.h"

namespace quadsock::stack {

inline absl::Time MonotonicNow() {
  return absl::UnixEpoch() +
         absl::FromChrono(std::chrono::steady_clock::now().time_since_epoch());
}

}  // namespace quadsock::stack

#endif  // QUADSOCK_STACK_MONOTONIC_CLOCK_H_
