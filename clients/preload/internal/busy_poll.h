// Busy polling (QUADSOCK_BUSY_POLL=N): a program's thread that would sleep waiting for a
// quadsock socket (in recv, or in poll, select or epoll_wait on a set that holds one) first
// spins for up to N microseconds, taking what the session's channel holds itself (Link::Poll):
// a datagram reaches it with no hand-off thread and no wake-up in between.
//
// The hand-off thread keeps out of the way while threads spin, and for as long again after
// (unless a spin ran out: then it takes over at once). A datagram may wait in the channel
// meanwhile, so every receive, look (a zero timeout) and FIONREAD on a quadsock socket polls
// the channel once first.
//
// While it spins, the program's signals are held back (held_signals.h) and looked for on every
// turn: one that comes is let through at once, and the wait ends as the kernel's would have.
//
//   BusyPoll spin(link, absl::Microseconds(busy_poll_us), deadline);
//   while (spin.Turn()) {
//     if (Ready()) return Take();
//     if (spin.signals().LetThrough() != HeldSignals::Outcome::kNone) return -EINTR;
//   }
//   // then sleep as without busy polling, until the deadline
#ifndef QUADSOCK_CLIENTS_PRELOAD_INTERNAL_BUSY_POLL_H_
#define QUADSOCK_CLIENTS_PRELOAD_INTERNAL_BUSY_POLL_H_

#include "absl/functional/function_ref.h"
#include "absl/time/time.h"
#include "clients/preload/internal/held_signals.h"
#include "clients/preload/internal/link.h"

namespace quadsock::preload {

class BusyPoll {
 public:
  // A spin of at most `budget`, ending by `deadline`; the program's signals are held back
  // until it is destroyed.
  BusyPoll(Link& link, absl::Duration budget, absl::Time deadline);

  // Polls the channel once; false, and nothing polled, once the spin is over (the hand-off
  // thread is told: Link::SpinEnded).
  bool Turn();
  HeldSignals& signals() { return held_; }

 private:
  Link& link_;
  const absl::Time until_;
  bool ended_ = false;
  HeldSignals held_;
};

// A wait of the C library's (poll, select, epoll_wait) of up to `timeout` (InfiniteDuration:
// no limit; zero: a look), busy-polled for up to `budget` before it sleeps. `wait(t)` makes
// the wait with timeout t (zero: a look; InfiniteDuration: no limit). Returns the wait's
// result, with errno as it set it; -1 with EINTR when a handler ran during the spin (these
// waits are never restarted).
int SpinThenWait(Link& link, absl::Duration budget, absl::Duration timeout,
                 absl::FunctionRef<int(absl::Duration)> wait);

}  // namespace quadsock::preload

#endif  // QUADSOCK_CLIENTS_PRELOAD_INTERNAL_BUSY_POLL_H_
