// The program's signal handlers, each behind the library's trampoline, so that a wait the
// library sleeps in on the program's behalf (a receive on a quadsock socket, socket.cc) knows
// which handlers ran on its thread meanwhile, and ends or goes on as the kernel's would: Linux
// restarts a receive after handlers with SA_RESTART (unless the socket has a receive timeout)
// and ends it with EINTR after any other.
//
// sigaction, signal and their kin (interpose.cc) come here: the kernel is given the trampoline,
// which counts the run on its thread and calls the program's handler; the program is shown its
// own handler and flags back. SIG_DFL and SIG_IGN go to the kernel as they are. A handler
// installed some other way (the raw system call) runs uncounted: a wait it ends says EINTR.
//
//   const HandlerRuns before = HandlerRuns::OfThisThread();
//   if (poll(&p, 1, ms) < 0 && errno == EINTR && RanSince(before) == AfterHandlers::kRestart) {
//     // only handlers with SA_RESTART ran: sleep again
//   }
#ifndef QUADSOCK_CLIENTS_PRELOAD_INTERNAL_SIGNAL_HANDLERS_H_
#define QUADSOCK_CLIENTS_PRELOAD_INTERNAL_SIGNAL_HANDLERS_H_

#include <signal.h>

#include <cstdint>

namespace quadsock::preload {

// How many of the program's handlers have run on the calling thread, by SA_RESTART.
struct HandlerRuns {
  uint32_t restarting = 0;
  uint32_t interrupting = 0;

  static HandlerRuns OfThisThread();
};

// What the handlers that ran on this thread since `before` ask of a call they interrupted:
// none of ours ran; all had SA_RESTART; one had not.
enum class AfterHandlers { kNone, kRestart, kInterrupt };
AfterHandlers RanSince(const HandlerRuns& before);

// sigaction as the program sees it (async-signal-safe, as sigaction is).
int ProgramSigaction(int sig, const struct sigaction* act, struct sigaction* old);

}  // namespace quadsock::preload

#endif  // QUADSOCK_CLIENTS_PRELOAD_INTERNAL_SIGNAL_HANDLERS_H_
