// What ThreadSanitizer needs to know about the libraries Debian does not build for it, in every
// test binary (linked in through stack/demux:rcu; nothing here outside a TSan build).
//
// 1. Abseil's Mutex and CondVar. Debian's libabsl_synchronization is not instrumented, and its
//    Mutex waits on futexes, not pthreads: TSan sees none of its happens-before edges. gRPC
//    locks with it too (grpc_core::Mutex and gpr_mu are absl::Mutex), so every request and
//    response handed between gRPC's threads looked like a race (thousands per test). This file
//    defines Mutex's and CondVar's locking functions in the executable, where they take the
//    place of the library's for every caller (our code, gRPC, Abseil itself): each calls the
//    library's own (dlsym RTLD_NEXT) and tells TSan what it did: a lock acquires the mutex, an
//    unlock releases it, and a wait (Await, CondVar::Wait) releases it before and acquires it
//    after.
// 2. Suppressions (a function TSan calls; the tsan config's TSAN_OPTIONS replaces a target's
//    own, so they are built in), for what is left inside those libraries: the calls they make
//    themselves (memcpy, malloc: called_from_lib), races whose top frame is their code, also
//    where their headers put it in ours (race_top), and the two hand-offs that gRPC orders with
//    lock-free code in libgrpc: a message serialized into its buffer on one thread and parsed
//    on another, and a finished stream's call object deleted after its reactor's last callback.
//    liburcu's own calls too (rcu.cc annotates our happens-before edges over it).
//    Races in our code stay reported on whatever thread they run, gRPC's included: a handler's
//    write without its lock (Sessions::Touch, put in on purpose) fails session_race_test,
//    streams_test and channel_stream_test.
#if defined(__SANITIZE_THREAD__)

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>

#include "absl/synchronization/mutex.h"

extern "C" void __tsan_acquire(void* addr);
extern "C" void __tsan_release(void* addr);

extern "C" const char* __tsan_default_suppressions() {
  return "called_from_lib:liburcu-qsbr.so.8\n"
         "called_from_lib:liburcu-common.so.8\n"
         "called_from_lib:libgrpc.so\n"
         "called_from_lib:libgrpc++.so\n"
         "called_from_lib:libgpr.so\n"
         "called_from_lib:libprotobuf.so\n"
         "called_from_lib:libabsl_synchronization.so\n"
         "called_from_lib:libabsl_graphcycles_internal.so\n"
         "called_from_lib:libabsl_status.so\n"
         // gRPC's, protobuf's and Abseil's own code, also where their headers put it in ours.
         "race_top:^grpc::\n"
         "race_top:^grpc_\n"
         "race_top:^google::protobuf::\n"
         "race_top:^absl::\n"
         // gRPC deletes a finished bidi stream's call object (its header code, in ours) after
         // its reactor's last callback, ordered by a refcount inside libgrpc++.
         "race:grpc::internal::CallbackBidiHandler*::ServerCallbackReaderWriterImpl::CallOnDone\n"
         // Messages gRPC carries between threads in its buffers, serialized in one and parsed
         // (by gRPC's header code, in ours) in another.
         "race:google::protobuf::io::EpsCopyOutputStream::\n"
         "race:google::protobuf::internal::InlineGreedyStringParser\n"
         "race:grpc::internal::UnaryDeserializeHelper\n"
         "race:grpc::internal::CallOpRecvMessage\n"
         "race:grpc::GenericDeserialize\n";
}

namespace {

// The library's own definition of `symbol` (the next after this executable's).
template <typename F>
F Next(const char* symbol) {
  void* f = dlsym(RTLD_NEXT, symbol);
  if (f == nullptr) {
    std::fprintf(stderr, "sanitizers/tsan.cc: no %s in Abseil: %s\n", symbol, dlerror());
    std::abort();
  }
  return reinterpret_cast<F>(f);
}

}  // namespace

namespace absl {
ABSL_NAMESPACE_BEGIN

// The library's function this one stands for, looked up once.
#define QUADSOCK_NEXT(type, symbol) static const auto next = Next<type>(symbol)

void Mutex::Lock() {
  QUADSOCK_NEXT(void (*)(Mutex*), "_ZN4absl7debian35Mutex4LockEv");
  next(this);
  __tsan_acquire(this);
}

void Mutex::ReaderLock() {
  QUADSOCK_NEXT(void (*)(Mutex*), "_ZN4absl7debian35Mutex10ReaderLockEv");
  next(this);
  __tsan_acquire(this);
}

bool Mutex::TryLock() {
  QUADSOCK_NEXT(bool (*)(Mutex*), "_ZN4absl7debian35Mutex7TryLockEv");
  const bool locked = next(this);
  if (locked) __tsan_acquire(this);
  return locked;
}

bool Mutex::ReaderTryLock() {
  QUADSOCK_NEXT(bool (*)(Mutex*), "_ZN4absl7debian35Mutex13ReaderTryLockEv");
  const bool locked = next(this);
  if (locked) __tsan_acquire(this);
  return locked;
}

void Mutex::Unlock() {
  QUADSOCK_NEXT(void (*)(Mutex*), "_ZN4absl7debian35Mutex6UnlockEv");
  __tsan_release(this);
  next(this);
}

void Mutex::ReaderUnlock() {
  QUADSOCK_NEXT(void (*)(Mutex*), "_ZN4absl7debian35Mutex12ReaderUnlockEv");
  __tsan_release(this);
  next(this);
}

void Mutex::LockWhen(const Condition& cond) {
  QUADSOCK_NEXT(void (*)(Mutex*, const Condition&),
                "_ZN4absl7debian35Mutex8LockWhenERKNS0_9ConditionE");
  next(this, cond);
  __tsan_acquire(this);
}

void Mutex::ReaderLockWhen(const Condition& cond) {
  QUADSOCK_NEXT(void (*)(Mutex*, const Condition&),
                "_ZN4absl7debian35Mutex14ReaderLockWhenERKNS0_9ConditionE");
  next(this, cond);
  __tsan_acquire(this);
}

bool Mutex::LockWhenWithTimeout(const Condition& cond, Duration timeout) {
  QUADSOCK_NEXT(bool (*)(Mutex*, const Condition&, Duration),
                "_ZN4absl7debian35Mutex19LockWhenWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  const bool met = next(this, cond, timeout);
  __tsan_acquire(this);  // held whether or not the condition came
  return met;
}

bool Mutex::LockWhenWithDeadline(const Condition& cond, Time deadline) {
  QUADSOCK_NEXT(bool (*)(Mutex*, const Condition&, Time),
                "_ZN4absl7debian35Mutex20LockWhenWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  const bool met = next(this, cond, deadline);
  __tsan_acquire(this);
  return met;
}

void Mutex::Await(const Condition& cond) {
  QUADSOCK_NEXT(void (*)(Mutex*, const Condition&),
                "_ZN4absl7debian35Mutex5AwaitERKNS0_9ConditionE");
  __tsan_release(this);
  next(this, cond);
  __tsan_acquire(this);
}

bool Mutex::AwaitWithTimeout(const Condition& cond, Duration timeout) {
  QUADSOCK_NEXT(bool (*)(Mutex*, const Condition&, Duration),
                "_ZN4absl7debian35Mutex16AwaitWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  __tsan_release(this);
  const bool met = next(this, cond, timeout);
  __tsan_acquire(this);
  return met;
}

bool Mutex::AwaitWithDeadline(const Condition& cond, Time deadline) {
  QUADSOCK_NEXT(bool (*)(Mutex*, const Condition&, Time),
                "_ZN4absl7debian35Mutex17AwaitWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  __tsan_release(this);
  const bool met = next(this, cond, deadline);
  __tsan_acquire(this);
  return met;
}

void CondVar::Wait(Mutex* mu) {
  QUADSOCK_NEXT(void (*)(CondVar*, Mutex*), "_ZN4absl7debian37CondVar4WaitEPNS0_5MutexE");
  __tsan_release(mu);
  next(this, mu);
  __tsan_acquire(mu);
}

bool CondVar::WaitWithTimeout(Mutex* mu, Duration timeout) {
  QUADSOCK_NEXT(bool (*)(CondVar*, Mutex*, Duration),
                "_ZN4absl7debian37CondVar15WaitWithTimeoutEPNS0_5MutexENS0_8DurationE");
  __tsan_release(mu);
  const bool timed_out = next(this, mu, timeout);
  __tsan_acquire(mu);
  return timed_out;
}

bool CondVar::WaitWithDeadline(Mutex* mu, Time deadline) {
  QUADSOCK_NEXT(bool (*)(CondVar*, Mutex*, Time),
                "_ZN4absl7debian37CondVar16WaitWithDeadlineEPNS0_5MutexENS0_4TimeE");
  __tsan_release(mu);
  const bool timed_out = next(this, mu, deadline);
  __tsan_acquire(mu);
  return timed_out;
}

#undef QUADSOCK_NEXT

ABSL_NAMESPACE_END
}  // namespace absl

#endif  // __SANITIZE_THREAD__
