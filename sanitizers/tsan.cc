// What ThreadSanitizer needs to know about the libraries Debian does not build for it, in every
// test executable that links it (stack/demux:rcu brings it; linkstatic, so that it is in the
// executable itself, where TSan and the dynamic linker look); nothing outside a TSan build.
//
// 1. Abseil's Mutex and CondVar. Debian's libabsl_synchronization is not instrumented, and its
//    Mutex waits on futexes, not pthreads: TSan sees none of its happens-before edges. gRPC
//    locks with it too (grpc_core::Mutex and gpr_mu are absl::Mutex), so every request and
//    response handed between gRPC's threads looked like a race (thousands per test). This file
//    defines Mutex's and CondVar's locking functions in the executable, where they take the
//    place of the library's for every caller (our code, gRPC, Abseil itself): each calls the
//    library's own (dlsym RTLD_NEXT) and tells TSan what it did: a lock acquires, an unlock
//    releases (readers apart from writers: Readers() below), and a wait (Await,
//    CondVar::Wait) releases before and acquires after. (The *WithTimeout functions call the
//    *WithDeadline ones through the library's PLT: those annotate twice, which is harmless.)
// 2. Suppressions (a function TSan calls; the tsan config's TSAN_OPTIONS replaces a target's
//    own, so they are built in), for what is left inside those libraries: the calls they make
//    themselves (memcpy, malloc: called_from_lib), gRPC's own accesses to its call objects
//    (race_top: the racing access itself is gRPC's), a handler's status text as gRPC copies
//    it for the transport, and a message's bytes in gRPC's buffer, serialized on one thread
//    and parsed on another (which also hides a race on a message while gRPC serializes or
//    parses it). liburcu's own calls too. Where these libraries promise an order, our code
//    says so with annotate.h (rcu.cc over liburcu's grace periods, ChannelStream over gRPC's
//    reactions). Other races in our code stay reported on whatever thread they run, gRPC's
//    included: a handler's write without its lock (Sessions::Touch, put in on purpose) fails
//    session_race_test, streams_test and channel_stream_test; an unlocked credit update in
//    ChannelStream fails data_channel_test.
#if defined(__SANITIZE_THREAD__)

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <string_view>

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
         // gRPC's own call objects (its header code, compiled into ours), handed between its
         // threads by refcounts inside libgrpc++: only where the racing access is gRPC's own
         // (the top frame), not our reactor's callbacks that it calls.
         "race_top:grpc::internal::CallbackBidiHandler*::ServerCallbackReaderWriterImpl::\n"
         "race_top:grpc::internal::CallbackBidiHandler*::RunHandler\n"
         "race_top:grpc::internal::CallbackWithSuccessTag::StaticRun\n"
         "race_top:grpc::internal::CallOpSet<\n"
         // ...and its destructor of a finished call's (no callback of ours runs in it).
         "race:grpc::internal::CallbackBidiHandler*::ServerCallbackReaderWriterImpl::"
         "~ServerCallbackReaderWriterImpl\n"
         // The status a handler returns, copied into gRPC's send-status op on the handler's
         // thread and read by the transport on another (seen once in service_test: the read
         // in gRPC's StrAppend, no frame of ours on its thread).
         "race:grpc::internal::CallOpServerSendStatus\n"
         // A message's bytes in gRPC's buffer, serialized on one thread and parsed on another
         // (the in-process transport hands over the buffer itself). These also hide a race on
         // a message while gRPC serializes or parses it: the price of a shared buffer TSan
         // cannot see handed over.
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

// TSan's view of a reader-writer lock: a writer's unlock releases `mu`, a reader's releases a
// second address beside it; a writer's lock acquires both, a reader's only `mu`. So readers do
// not order each other, and a writer comes after every reader before it.
void* Readers(void* mu) { return static_cast<char*>(mu) + 1; }
void WriterAcquired(void* mu) {
  __tsan_acquire(mu);
  __tsan_acquire(Readers(mu));
}
void WriterReleasing(void* mu) { __tsan_release(mu); }
void ReaderAcquired(void* mu) { __tsan_acquire(mu); }
void ReaderReleasing(void* mu) { __tsan_release(Readers(mu)); }

}  // namespace

// The symbols below are named for this Abseil (Debian 12's): another would fail at start.
#define QUADSOCK_STRING(x) #x
#define QUADSOCK_NAME(x) QUADSOCK_STRING(x)
static_assert(std::string_view(QUADSOCK_NAME(ABSL_OPTION_INLINE_NAMESPACE_NAME)) == "debian3",
              "sanitizers/tsan.cc names Abseil's functions in namespace absl::debian3");

namespace absl {
ABSL_NAMESPACE_BEGIN

// The library's function this one stands for, looked up once.
#define QUADSOCK_NEXT(type, symbol) static const auto next = Next<type>(symbol)

void Mutex::Lock() {
  QUADSOCK_NEXT(void (*)(Mutex*), "_ZN4absl7debian35Mutex4LockEv");
  next(this);
  WriterAcquired(this);
}

void Mutex::ReaderLock() {
  QUADSOCK_NEXT(void (*)(Mutex*), "_ZN4absl7debian35Mutex10ReaderLockEv");
  next(this);
  ReaderAcquired(this);
}

bool Mutex::TryLock() {
  QUADSOCK_NEXT(bool (*)(Mutex*), "_ZN4absl7debian35Mutex7TryLockEv");
  const bool locked = next(this);
  if (locked) WriterAcquired(this);
  return locked;
}

bool Mutex::ReaderTryLock() {
  QUADSOCK_NEXT(bool (*)(Mutex*), "_ZN4absl7debian35Mutex13ReaderTryLockEv");
  const bool locked = next(this);
  if (locked) ReaderAcquired(this);
  return locked;
}

void Mutex::Unlock() {
  QUADSOCK_NEXT(void (*)(Mutex*), "_ZN4absl7debian35Mutex6UnlockEv");
  WriterReleasing(this);
  next(this);
}

void Mutex::ReaderUnlock() {
  QUADSOCK_NEXT(void (*)(Mutex*), "_ZN4absl7debian35Mutex12ReaderUnlockEv");
  ReaderReleasing(this);
  next(this);
}

void Mutex::LockWhen(const Condition& cond) {
  QUADSOCK_NEXT(void (*)(Mutex*, const Condition&),
                "_ZN4absl7debian35Mutex8LockWhenERKNS0_9ConditionE");
  next(this, cond);
  WriterAcquired(this);
}

void Mutex::ReaderLockWhen(const Condition& cond) {
  QUADSOCK_NEXT(void (*)(Mutex*, const Condition&),
                "_ZN4absl7debian35Mutex14ReaderLockWhenERKNS0_9ConditionE");
  next(this, cond);
  ReaderAcquired(this);
}

bool Mutex::ReaderLockWhenWithTimeout(const Condition& cond, Duration timeout) {
  QUADSOCK_NEXT(bool (*)(Mutex*, const Condition&, Duration),
                "_ZN4absl7debian35Mutex25ReaderLockWhenWithTimeout"
                "ERKNS0_9ConditionENS0_8DurationE");
  const bool met = next(this, cond, timeout);
  ReaderAcquired(this);  // held whether or not the condition came
  return met;
}

bool Mutex::ReaderLockWhenWithDeadline(const Condition& cond, Time deadline) {
  QUADSOCK_NEXT(bool (*)(Mutex*, const Condition&, Time),
                "_ZN4absl7debian35Mutex26ReaderLockWhenWithDeadline"
                "ERKNS0_9ConditionENS0_4TimeE");
  const bool met = next(this, cond, deadline);
  ReaderAcquired(this);
  return met;
}

bool Mutex::LockWhenWithTimeout(const Condition& cond, Duration timeout) {
  QUADSOCK_NEXT(bool (*)(Mutex*, const Condition&, Duration),
                "_ZN4absl7debian35Mutex19LockWhenWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  const bool met = next(this, cond, timeout);
  WriterAcquired(this);  // held whether or not the condition came
  return met;
}

bool Mutex::LockWhenWithDeadline(const Condition& cond, Time deadline) {
  QUADSOCK_NEXT(bool (*)(Mutex*, const Condition&, Time),
                "_ZN4absl7debian35Mutex20LockWhenWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  const bool met = next(this, cond, deadline);
  WriterAcquired(this);
  return met;
}

void Mutex::Await(const Condition& cond) {
  QUADSOCK_NEXT(void (*)(Mutex*, const Condition&),
                "_ZN4absl7debian35Mutex5AwaitERKNS0_9ConditionE");
  WriterReleasing(this);
  next(this, cond);
  WriterAcquired(this);
}

bool Mutex::AwaitWithTimeout(const Condition& cond, Duration timeout) {
  QUADSOCK_NEXT(bool (*)(Mutex*, const Condition&, Duration),
                "_ZN4absl7debian35Mutex16AwaitWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  WriterReleasing(this);
  const bool met = next(this, cond, timeout);
  WriterAcquired(this);
  return met;
}

bool Mutex::AwaitWithDeadline(const Condition& cond, Time deadline) {
  QUADSOCK_NEXT(bool (*)(Mutex*, const Condition&, Time),
                "_ZN4absl7debian35Mutex17AwaitWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  WriterReleasing(this);
  const bool met = next(this, cond, deadline);
  WriterAcquired(this);
  return met;
}

void CondVar::Wait(Mutex* mu) {
  QUADSOCK_NEXT(void (*)(CondVar*, Mutex*), "_ZN4absl7debian37CondVar4WaitEPNS0_5MutexE");
  WriterReleasing(mu);
  next(this, mu);
  WriterAcquired(mu);
}

bool CondVar::WaitWithTimeout(Mutex* mu, Duration timeout) {
  QUADSOCK_NEXT(bool (*)(CondVar*, Mutex*, Duration),
                "_ZN4absl7debian37CondVar15WaitWithTimeoutEPNS0_5MutexENS0_8DurationE");
  WriterReleasing(mu);
  const bool timed_out = next(this, mu, timeout);
  WriterAcquired(mu);
  return timed_out;
}

bool CondVar::WaitWithDeadline(Mutex* mu, Time deadline) {
  QUADSOCK_NEXT(bool (*)(CondVar*, Mutex*, Time),
                "_ZN4absl7debian37CondVar16WaitWithDeadlineEPNS0_5MutexENS0_4TimeE");
  WriterReleasing(mu);
  const bool timed_out = next(this, mu, deadline);
  WriterAcquired(mu);
  return timed_out;
}

#undef QUADSOCK_NEXT

ABSL_NAMESPACE_END
}  // namespace absl

#endif  // __SANITIZE_THREAD__
