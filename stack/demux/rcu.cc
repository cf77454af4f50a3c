#include "stack/demux/rcu.h"

#include <urcu/urcu-qsbr.h>

#include <utility>

#include "sanitizers/annotate.h"

// Calls made from liburcu itself are suppressed in sanitizers/tsan.cc.

namespace quadsock::demux {
namespace {

// The object ThreadSanitizer synchronises on in place of liburcu's reader counters.
char tsan_grace_period;
void AnnotateReaderQuiescent() { sanitizers::HandOff(&tsan_grace_period); }
void AnnotateGracePeriodEnd() { sanitizers::TakeOver(&tsan_grace_period); }

// Standard layout, rcu_head first, so the callback can cast back.
struct Deferred {
  rcu_head head;
  std::function<void()>* fn;
};

void RunDeferred(rcu_head* head) {
  Deferred* d = reinterpret_cast<Deferred*>(head);
  sanitizers::TakeOver(d);  // call_rcu hands the callback over in liburcu's queue
  AnnotateGracePeriodEnd();
  (*d->fn)();
  delete d->fn;
  delete d;
}

}  // namespace

RcuReaderThread::RcuReaderThread() { urcu_qsbr_register_thread(); }

RcuReaderThread::~RcuReaderThread() {
  AnnotateReaderQuiescent();
  urcu_qsbr_unregister_thread();
}

void RcuReaderThread::Quiescent() {
  AnnotateReaderQuiescent();
  urcu_qsbr_quiescent_state();
}

void RcuReaderThread::Offline() {
  if (!online_) return;
  AnnotateReaderQuiescent();
  urcu_qsbr_thread_offline();
  online_ = false;
}

void RcuReaderThread::Online() {
  if (online_) return;
  urcu_qsbr_thread_online();
  online_ = true;
}

void RcuSynchronize() {
  AnnotateReaderQuiescent();  // the caller itself may be a registered reader
  urcu_qsbr_synchronize_rcu();
  AnnotateGracePeriodEnd();
}

void RcuDefer(std::function<void()> fn) {
  auto* d = new Deferred{{}, new std::function<void()>(std::move(fn))};
  sanitizers::HandOff(d);
  urcu_qsbr_call_rcu(&d->head, &RunDeferred);
}

void RcuBarrier() {
  urcu_qsbr_barrier();
  AnnotateGracePeriodEnd();
}

}  // namespace quadsock::demux
