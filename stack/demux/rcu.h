// Read-copy-update for the socket table: the reader-thread registration that data-plane
// threads hold, and the writer-side grace-period helpers. A thin layer over liburcu's QSBR
// ("quiescent-state-based reclamation") flavour, where a read-side critical section costs
// nothing and a reader instead reports, between batches of work, that it holds no pointers.
//
//   // On each poll thread, once:
//   quadsock::demux::RcuReaderThread reader;     // registers the thread, online
//   for (;;) {
//     ... table.Lookup(ctx, flow) for a batch of packets ...
//     reader.Quiescent();                         // no table pointers are held here
//     // before blocking for a long time: reader.Offline(); ... reader.Online();
//   }
//
// Rules (the usual QSBR ones): a registered thread that is online must call Quiescent() or go
// Offline() regularly, or writers' grace periods (and so Close, Connect, resizing) wait for it.
// A writer operation may be called from a registered thread (liburcu takes the caller offline
// while it waits) but never from inside a lookup.
//
// Writers use RcuSynchronize() (wait for all readers that might hold old pointers) and
// RcuDefer() (run a function, typically a delete, after such a grace period, without waiting).
//
// ThreadSanitizer does not see liburcu's own synchronisation (it is not instrumented). Under
// TSAN this file adds the missing happens-before edges with annotations: a reader releases a
// sync object when it reports a quiescent state, a writer acquires it after a grace period.
#ifndef QUADSOCK_STACK_DEMUX_RCU_H_
#define QUADSOCK_STACK_DEMUX_RCU_H_

#include <functional>

namespace quadsock::demux {

class RcuReaderThread {
 public:
  // Registers the calling thread as a QSBR reader; the thread is online afterwards.
  RcuReaderThread();
  // Unregisters the thread. Must be destroyed on the thread that created it.
  ~RcuReaderThread();
  RcuReaderThread(const RcuReaderThread&) = delete;
  RcuReaderThread& operator=(const RcuReaderThread&) = delete;

  // Reports that this thread holds no RCU-protected pointers right now.
  void Quiescent();
  // An offline thread holds no pointers and must not look up; grace periods do not wait for it.
  void Offline();
  void Online();
  bool online() const { return online_; }

 private:
  bool online_ = true;
};

// Waits for a grace period: every reader that could hold a pointer unlinked before the call has
// reported a quiescent state.
void RcuSynchronize();

// Runs `fn` on liburcu's call_rcu thread after a grace period. Never blocks.
void RcuDefer(std::function<void()> fn);

// Waits until every function passed to RcuDefer so far has run.
void RcuBarrier();

}  // namespace quadsock::demux

#endif  // QUADSOCK_STACK_DEMUX_RCU_H_
