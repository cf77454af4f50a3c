#include "clients/preload/internal/held_signals.h"

#include <pthread.h>

namespace quadsock::preload {
namespace {

// Signals a thread causes itself: held back, the kernel would deliver them anyway, with the
// program's handler reset to the default.
constexpr int kSynchronous[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSYS};

}  // namespace

HeldSignals::HeldSignals() {
  sigfillset(&held_);
  for (int s : kSynchronous) sigdelset(&held_, s);
  pthread_sigmask(SIG_BLOCK, &held_, &program_mask_);
  sigemptyset(&allowed_);
  for (int sig = 1; sig < NSIG; ++sig) {
    if (sigismember(&held_, sig) == 1 && sigismember(&program_mask_, sig) == 0) {
      sigaddset(&allowed_, sig);
    }
  }
}

HeldSignals::~HeldSignals() { pthread_sigmask(SIG_SETMASK, &program_mask_, nullptr); }

HeldSignals::Outcome HeldSignals::LetThrough() {
  sigset_t pending;
  if (sigpending(&pending) != 0) return Outcome::kNone;
  sigset_t through;  // what is let through: only what was looked at
  sigemptyset(&through);
  bool handled = false, restart = true;
  for (int sig = 1; sig < NSIG; ++sig) {
    if (sigismember(&pending, sig) != 1 || sigismember(&allowed_, sig) != 1) continue;
    sigaddset(&through, sig);
    struct sigaction sa;
    if (sigaction(sig, nullptr, &sa) != 0) continue;
    if (sa.sa_handler == SIG_DFL || sa.sa_handler == SIG_IGN) continue;
    handled = true;
    restart = restart && (sa.sa_flags & SA_RESTART) != 0;
  }
  if (sigisemptyset(&through)) return Outcome::kNone;
  // Unblocked for a moment: delivered now.
  pthread_sigmask(SIG_UNBLOCK, &through, nullptr);
  pthread_sigmask(SIG_BLOCK, &through, nullptr);
  if (!handled) return Outcome::kNone;
  return restart ? Outcome::kRestart : Outcome::kInterrupt;
}

}  // namespace quadsock::preload
