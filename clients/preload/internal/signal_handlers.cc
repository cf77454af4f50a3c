#include "clients/preload/internal/signal_handlers.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>

#include <atomic>
#include <cstdint>

#include "clients/preload/internal/libc.h"

namespace quadsock::preload {
namespace {

// The program's handler for each signal in one word, so that the trampoline never reads half
// of a change: the function's address (user space addresses need at most 56 bits) and the two
// flags the trampoline acts on.
constexpr uint64_t kRestart = uint64_t{1} << 62;
constexpr uint64_t kSiginfo = uint64_t{1} << 63;
constexpr uint64_t kFunction = (uint64_t{1} << 56) - 1;
std::atomic<uint64_t> handlers[NSIG];

std::atomic<uint32_t> restarting_runs{0};
std::atomic<uint32_t> interrupting_runs{0};

// The signals siginterrupt asked to interrupt calls: signal() gives them no SA_RESTART.
std::atomic<uint64_t> interrupting_signals{0};

void Trampoline(int sig, siginfo_t* info, void* context) {
  const uint64_t h = handlers[sig].load(std::memory_order_acquire);
  ((h & kRestart) != 0 ? restarting_runs : interrupting_runs)
      .fetch_add(1, std::memory_order_relaxed);
  const uintptr_t function = h & kFunction;
  if ((h & kSiginfo) != 0) {
    reinterpret_cast<void (*)(int, siginfo_t*, void*)>(function)(sig, info, context);
  } else {
    reinterpret_cast<void (*)(int)>(function)(sig);
  }
}

// Changes are made one at a time, with the thread's signals held back (a handler that changes
// a disposition cannot come in the middle of one on its own thread).
class ChangeLock {
 public:
  ChangeLock() {
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &mask_);
    while (taken_.test_and_set(std::memory_order_acquire)) sched_yield();
  }
  ~ChangeLock() {
    taken_.clear(std::memory_order_release);
    pthread_sigmask(SIG_SETMASK, &mask_, nullptr);
  }
  ChangeLock(const ChangeLock&) = delete;
  ChangeLock& operator=(const ChangeLock&) = delete;

 private:
  static inline std::atomic_flag taken_;
  sigset_t mask_;
};

bool Valid(int sig) { return sig > 0 && sig < NSIG; }

// sigaction, with the change lock held and `sig` valid.
int SigactionLocked(int sig, const struct sigaction* act, struct sigaction* old) {
  const uint64_t before = handlers[sig].load(std::memory_order_relaxed);
  struct sigaction wrapped;
  const uintptr_t function = act != nullptr ? reinterpret_cast<uintptr_t>(act->sa_handler) : 0;
  const bool wrap = act != nullptr && act->sa_handler != SIG_DFL && act->sa_handler != SIG_IGN &&
                    (function & ~kFunction) == 0;
  if (wrap) {
    handlers[sig].store(function | ((act->sa_flags & SA_RESTART) != 0 ? kRestart : 0) |
                            ((act->sa_flags & SA_SIGINFO) != 0 ? kSiginfo : 0),
                        std::memory_order_release);
    wrapped = *act;
    wrapped.sa_sigaction = Trampoline;
    wrapped.sa_flags |= SA_SIGINFO;
    act = &wrapped;
  }
  const int r = Libc().sigaction(sig, act, old);
  if (r != 0) {
    if (wrap) handlers[sig].store(before, std::memory_order_release);  // nothing changed
    return r;
  }
  if (old == nullptr) return 0;
  const int program_siginfo = (before & kSiginfo) != 0 ? SA_SIGINFO : 0;
  if (old->sa_sigaction == Trampoline) {
    old->sa_sigaction = reinterpret_cast<void (*)(int, siginfo_t*, void*)>(before & kFunction);
    old->sa_flags = (old->sa_flags & ~SA_SIGINFO) | program_siginfo;
  } else if (old->sa_handler == SIG_DFL && (old->sa_flags & SA_RESETHAND) != 0 && before != 0) {
    // A one-shot handler of ours ran: the kernel reset the handler and kept our SA_SIGINFO.
    old->sa_flags = (old->sa_flags & ~SA_SIGINFO) | program_siginfo;
  }
  return 0;
}

sighandler_t SetHandler(int sig, sighandler_t handler, int flags, bool block_itself) {
  if (handler == SIG_ERR || !Valid(sig)) {
    errno = EINVAL;
    return SIG_ERR;
  }
  struct sigaction act = {}, old = {};
  act.sa_handler = handler;
  act.sa_flags = flags;
  if (block_itself) sigaddset(&act.sa_mask, sig);
  return ProgramSigaction(sig, &act, &old) == 0 ? old.sa_handler : SIG_ERR;
}

uint64_t Bit(int sig) { return uint64_t{1} << (sig - 1); }

}  // namespace

HandlerRuns HandlerRuns::Now() {
  return {restarting_runs.load(std::memory_order_relaxed),
          interrupting_runs.load(std::memory_order_relaxed)};
}

AfterHandlers RanSince(const HandlerRuns& before) {
  const HandlerRuns now = HandlerRuns::Now();
  if (now.interrupting != before.interrupting) return AfterHandlers::kInterrupt;
  if (now.restarting != before.restarting) return AfterHandlers::kRestart;
  return AfterHandlers::kNone;
}

int ProgramSigaction(int sig, const struct sigaction* act, struct sigaction* old) {
  if (!Valid(sig)) return Libc().sigaction(sig, act, old);  // the C library's EINVAL
  ChangeLock lock;
  return SigactionLocked(sig, act, old);
}

// As glibc's: the handler stays and blocks its signal while it runs; interrupted calls restart
// unless siginterrupt said otherwise.
sighandler_t ProgramBsdSignal(int sig, sighandler_t handler) {
  const bool interrupts =
      Valid(sig) && (interrupting_signals.load(std::memory_order_relaxed) & Bit(sig)) != 0;
  return SetHandler(sig, handler, interrupts ? 0 : SA_RESTART, /*block_itself=*/true);
}

// System V's: once, not blocked while it runs, and interrupted calls end with EINTR.
sighandler_t ProgramSysvSignal(int sig, sighandler_t handler) {
  return SetHandler(sig, handler, SA_RESETHAND | SA_NODEFER | SA_INTERRUPT,
                    /*block_itself=*/false);
}

int ProgramSiginterrupt(int sig, int interrupt) {
  if (!Valid(sig)) {
    errno = EINVAL;
    return -1;
  }
  ChangeLock lock;
  struct sigaction act;
  if (SigactionLocked(sig, nullptr, &act) != 0) return -1;
  if (interrupt != 0) {
    interrupting_signals.fetch_or(Bit(sig), std::memory_order_relaxed);
    act.sa_flags &= ~SA_RESTART;
  } else {
    interrupting_signals.fetch_and(~Bit(sig), std::memory_order_relaxed);
    act.sa_flags |= SA_RESTART;
  }
  return SigactionLocked(sig, &act, nullptr) != 0 ? -1 : 0;
}

// System V's sigset, as glibc's: SIG_HOLD blocks the signal; anything else is installed with
// no flags and unblocks it. The answer is SIG_HOLD if the signal was blocked.
sighandler_t ProgramSigset(int sig, sighandler_t disposition) {
  sigset_t one;
  sigemptyset(&one);
  if (disposition == SIG_ERR || !Valid(sig) || sigaddset(&one, sig) != 0) {
    errno = EINVAL;
    return SIG_ERR;
  }
  struct sigaction old;
  sigset_t was;
  if (disposition == SIG_HOLD) {
    if (ProgramSigaction(sig, nullptr, &old) != 0 ||
        pthread_sigmask(SIG_BLOCK, &one, &was) != 0) {
      return SIG_ERR;
    }
  } else {
    struct sigaction act = {};
    act.sa_handler = disposition;
    if (ProgramSigaction(sig, &act, &old) != 0 ||
        pthread_sigmask(SIG_UNBLOCK, &one, &was) != 0) {
      return SIG_ERR;
    }
  }
  return sigismember(&was, sig) == 1 ? SIG_HOLD : old.sa_handler;
}

}  // namespace quadsock::preload
