// A fuzz target's checks: a broken one prints what broke and aborts, which libFuzzer reports as
// a crash (keeping the input) and the replay driver as a failed test.
//
//   FUZZ_CHECK(r.bytes_held() <= budget, "reassembly holds more than its budget");
#ifndef QUADSOCK_FUZZ_CHECK_H_
#define QUADSOCK_FUZZ_CHECK_H_

#include <cstdio>
#include <cstdlib>

#define FUZZ_CHECK(condition, what)                                     \
  do {                                                                  \
    if (!(condition)) {                                                 \
      std::fprintf(stderr, "%s: check failed: %s\n", __FILE__, (what)); \
      std::abort();                                                     \
    }                                                                   \
  } while (0)

#endif  // QUADSOCK_FUZZ_CHECK_H_
