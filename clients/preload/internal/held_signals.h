// The program's signals, held back while the library waits on its behalf (a busy-polled spin,
// busy_poll.h), so that it knows which signal came and can end the wait as the kernel's would
// have. Faults the thread itself causes are never held back.
//
// A held signal stays pending; LetThrough delivers it (the program's mask for a moment: its
// handler runs then, in this thread) and says what it did to the wait: the kernel ends an
// epoll_wait, poll or select with EINTR after any handler, and restarts a receive after
// handlers with SA_RESTART (unless the socket has a receive timeout). It knows which before it
// lets them through, from the pending set and sigaction (the program's own flags,
// signal_handlers.h), so a handler installed around the library's sigaction counts too.
//
//   HeldSignals held;
//   while (Spinning()) {
//     if (held.LetThrough() == HeldSignals::Outcome::kInterrupt) return -EINTR;
//   }
#ifndef QUADSOCK_CLIENTS_PRELOAD_INTERNAL_HELD_SIGNALS_H_
#define QUADSOCK_CLIENTS_PRELOAD_INTERNAL_HELD_SIGNALS_H_

#include <signal.h>

namespace quadsock::preload {

class HeldSignals {
 public:
  // What the signals let through did: none came, or only ones ignored or left to their
  // default action; handlers ran, all with SA_RESTART; a handler ran without it.
  enum class Outcome { kNone, kRestart, kInterrupt };

  HeldSignals();
  ~HeldSignals();  // the program's mask back
  HeldSignals(const HeldSignals&) = delete;
  HeldSignals& operator=(const HeldSignals&) = delete;

  // Delivers the held signals that are pending (a fatal one ends the process here).
  Outcome LetThrough();

 private:
  sigset_t held_;          // what is held back
  sigset_t program_mask_;  // the thread's mask before
  sigset_t allowed_;       // held, and not blocked by the program
};

}  // namespace quadsock::preload

#endif  // QUADSOCK_CLIENTS_PRELOAD_INTERNAL_HELD_SIGNALS_H_
