// Happens-before edges ThreadSanitizer cannot see, because they pass through a library Debian
// does not build for it (liburcu's grace periods, gRPC's hand-off of a finished call to the
// thread that runs OnDone). Where the library promises an order, the code says so here: what a
// thread did before HandOff(p) happens before what a thread does after TakeOver(p). Nothing
// outside a TSan build.
#ifndef QUADSOCK_SANITIZERS_ANNOTATE_H_
#define QUADSOCK_SANITIZERS_ANNOTATE_H_

#if defined(__SANITIZE_THREAD__)
extern "C" void __tsan_acquire(void* addr);
extern "C" void __tsan_release(void* addr);
#endif

namespace quadsock::sanitizers {

#if defined(__SANITIZE_THREAD__)
inline void HandOff(const void* p) { __tsan_release(const_cast<void*>(p)); }
inline void TakeOver(const void* p) { __tsan_acquire(const_cast<void*>(p)); }
#else
inline void HandOff(const void*) {}
inline void TakeOver(const void*) {}
#endif

// HandOff(p) when the scope ends, whichever return ends it.
class HandOffAtExit {
 public:
  explicit HandOffAtExit(const void* p) : p_(p) {}
  HandOffAtExit(const HandOffAtExit&) = delete;
  HandOffAtExit& operator=(const HandOffAtExit&) = delete;
  ~HandOffAtExit() { HandOff(p_); }

 private:
  const void* p_;
};

}  // namespace quadsock::sanitizers

#endif  // QUADSOCK_SANITIZERS_ANNOTATE_H_
