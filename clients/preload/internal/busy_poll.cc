#include "clients/preload/internal/busy_poll.h"

#include <errno.h>
#include <sched.h>

#include <algorithm>

#include "absl/time/clock.h"

namespace quadsock::preload {

BusyPoll::BusyPoll(Link& link, absl::Duration budget, absl::Time deadline)
    : link_(link), until_(std::min(absl::Now() + budget, deadline)) {}

bool BusyPoll::Turn() {
  if (absl::Now() >= until_) {
    if (!ended_) link_.SpinEnded();
    ended_ = true;
    return false;
  }
  if (link_.Poll(/*signals_held=*/true) == 0) {
    // quadsockd's thread may share this CPU, and the scheduler lets a thread that runs keep
    // it for a whole slice: a yield lets it bring the datagram this turn waits for.
    sched_yield();
  }
  return true;
}

int SpinThenWait(Link& link, absl::Duration budget, absl::Duration timeout,
                 absl::FunctionRef<int(absl::Duration)> wait) {
  link.Poll();  // what came while the hand-off thread kept out of the way
  const int first = wait(absl::ZeroDuration());
  if (first != 0 || timeout <= absl::ZeroDuration()) return first;
  const absl::Time deadline =
      timeout == absl::InfiniteDuration() ? absl::InfiniteFuture() : absl::Now() + timeout;
  {
    BusyPoll spin(link, budget, deadline);
    // Signals are looked for after every turn, and once more after the last: one that came
    // while the wait spun ends it, as it would have ended the kernel's.
    bool interrupted = false;
    while (!interrupted && spin.Turn()) {
      // ~BusyPoll's pthread_sigmask leaves errno as the wait set it.
      if (const int r = wait(absl::ZeroDuration()); r != 0) return r;
      interrupted = spin.signals().LetThrough() != HeldSignals::Outcome::kNone;
    }
    if (interrupted || spin.signals().LetThrough() != HeldSignals::Outcome::kNone) {
      errno = EINTR;
      return -1;
    }
  }
  if (deadline == absl::InfiniteFuture()) return wait(absl::InfiniteDuration());
  return wait(std::max(deadline - absl::Now(), absl::ZeroDuration()));
}

}  // namespace quadsock::preload
