// The program's signal handlers, each behind the library's trampoline, so that a wait the
// library sleeps in on the program's behalf (a receive on a quadsock socket, socket.cc) knows
// which handlers ran while it slept, and ends or goes on as the kernel's would: Linux restarts a
// receive after a handler with SA_RESTART (unless the socket has a receive timeout) and ends it
// with EINTR after any other.
//
// sigaction, signal and their kin (interpose.cc) come here, and are what the C library's are
// to the program: the kernel is given the trampoline, which counts the run and calls the
// program's handler; the program is shown its own handler and flags back. SIG_DFL and SIG_IGN
// go to the kernel as they are. A handler installed around these (the raw system call) runs
// uncounted: a wait it ends says EINTR.
//
// Runs are counted for the whole process (no thread-local storage in a handler: reaching it
// may allocate). A wait looks at them only when its own call ended with EINTR, so a handler
// ran on its thread; one without SA_RESTART that ran on another thread meanwhile makes it EINTR
// too. Where Linux lets the first of several signals decide, any handler without SA_RESTART
// does here.
//
//   const HandlerRuns before = HandlerRuns::Now();
//   if (poll(&p, 1, ms) < 0 && errno == EINTR && RanSince(before) == AfterHandlers::kRestart) {
//     // only handlers with SA_RESTART ran: sleep again
//   }
#ifndef QUADSOCK_CLIENTS_PRELOAD_INTERNAL_SIGNAL_HANDLERS_H_
#define QUADSOCK_CLIENTS_PRELOAD_INTERNAL_SIGNAL_HANDLERS_H_

#include <signal.h>

#include <cstdint>

namespace quadsock::preload {

// How many of the program's handlers have run, by SA_RESTART.
struct HandlerRuns {
  uint32_t restarting = 0;
  uint32_t interrupting = 0;

  static HandlerRuns Now();
};

// What the handlers that ran since `before` ask of a call they interrupted: none of ours ran;
// all had SA_RESTART; one had not.
enum class AfterHandlers { kNone, kRestart, kInterrupt };
AfterHandlers RanSince(const HandlerRuns& before);

// The C library's calls, as the program sees them. Async-signal-safe, as sigaction is: a
// change holds the thread's signals back and a lock shared with other threads' changes.
// (The program's new handler is recorded just before the kernel is given the trampoline: a
// signal in between runs it with the kernel's flags of before.)
int ProgramSigaction(int sig, const struct sigaction* act, struct sigaction* old);
sighandler_t ProgramBsdSignal(int sig, sighandler_t handler);   // signal, bsd_signal, ssignal
sighandler_t ProgramSysvSignal(int sig, sighandler_t handler);  // sysv_signal
int ProgramSiginterrupt(int sig, int interrupt);
sighandler_t ProgramSigset(int sig, sighandler_t disposition);

}  // namespace quadsock::preload

#endif  // QUADSOCK_CLIENTS_PRELOAD_INTERNAL_SIGNAL_HANDLERS_H_
