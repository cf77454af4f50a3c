#include "clients/preload/internal/signal_handlers.h"

#include <atomic>
#include <cstdint>

#include "clients/preload/internal/libc.h"

namespace quadsock::preload {
namespace {

// The program's handler for each signal, as it gave it: the function and its sa_flags.
// Written before the kernel is given the trampoline, so that a signal that comes at once finds
// it; nothing here takes a lock (sigaction may be called from a handler).
struct ProgramHandler {
  std::atomic<uintptr_t> function{0};
  std::atomic<int> flags{0};
};
ProgramHandler handlers[NSIG];

// Counted by the trampoline on the thread it runs on; read by the same thread after its wait.
// In the library's static TLS block (it is loaded with the program), where a handler may touch
// it. Not tls_model("initial-exec"): the link gave the second such variable the offset of the
// block's first one (a send buffer), and each handler run moved that buffer's pointer.
thread_local std::atomic<uint32_t> restarting_runs;
thread_local std::atomic<uint32_t> interrupting_runs;

void Trampoline(int sig, siginfo_t* info, void* context) {
  const int flags = handlers[sig].flags.load(std::memory_order_acquire);
  const uintptr_t function = handlers[sig].function.load(std::memory_order_relaxed);
  std::atomic<uint32_t>& runs = (flags & SA_RESTART) != 0 ? restarting_runs : interrupting_runs;
  runs.fetch_add(1, std::memory_order_relaxed);
  if ((flags & SA_SIGINFO) != 0) {
    reinterpret_cast<void (*)(int, siginfo_t*, void*)>(function)(sig, info, context);
  } else {
    reinterpret_cast<void (*)(int)>(function)(sig);
  }
}

struct Saved {
  uintptr_t function;
  int flags;
};

Saved Load(int sig) {
  return {handlers[sig].function.load(std::memory_order_relaxed),
          handlers[sig].flags.load(std::memory_order_relaxed)};
}

void Store(int sig, Saved h) {
  handlers[sig].function.store(h.function, std::memory_order_relaxed);
  handlers[sig].flags.store(h.flags, std::memory_order_release);
}

}  // namespace

HandlerRuns HandlerRuns::OfThisThread() {
  std::atomic_signal_fence(std::memory_order_seq_cst);
  return {restarting_runs.load(std::memory_order_relaxed),
          interrupting_runs.load(std::memory_order_relaxed)};
}

AfterHandlers RanSince(const HandlerRuns& before) {
  const HandlerRuns now = HandlerRuns::OfThisThread();
  if (now.interrupting != before.interrupting) return AfterHandlers::kInterrupt;
  if (now.restarting != before.restarting) return AfterHandlers::kRestart;
  return AfterHandlers::kNone;
}

int ProgramSigaction(int sig, const struct sigaction* act, struct sigaction* old) {
  // A number no signal has: the C library's EINVAL.
  if (sig <= 0 || sig >= NSIG) return Libc().sigaction(sig, act, old);
  const Saved before = Load(sig);
  struct sigaction wrapped;
  const bool wrap = act != nullptr && act->sa_handler != SIG_DFL && act->sa_handler != SIG_IGN;
  if (wrap) {
    Store(sig, {reinterpret_cast<uintptr_t>(act->sa_handler), act->sa_flags});
    wrapped = *act;
    wrapped.sa_sigaction = Trampoline;
    wrapped.sa_flags |= SA_SIGINFO;
    act = &wrapped;
  }
  const int r = Libc().sigaction(sig, act, old);
  if (r != 0) {
    if (wrap) Store(sig, before);  // nothing changed (SIGKILL, or the C library's own)
    return r;
  }
  if (old != nullptr && old->sa_sigaction == Trampoline) {
    // The program's own handler, and whether it asked for SA_SIGINFO.
    old->sa_sigaction = reinterpret_cast<void (*)(int, siginfo_t*, void*)>(before.function);
    old->sa_flags = (old->sa_flags & ~SA_SIGINFO) | (before.flags & SA_SIGINFO);
  }
  return r;
}

}  // namespace quadsock::preload
