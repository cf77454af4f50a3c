// Test helpers for descriptor exhaustion: the process's soft RLIMIT_NOFILE held at what it has
// open plus a few, for a scope, and a bounded wait for a condition.
//
//   {
//     FdLimit limit(0);   // accept() in this process now fails with EMFILE
//     ...
//   }                     // the limit as it was
#ifndef QUADSOCK_SERVICE_TESTING_FD_LIMIT_H_
#define QUADSOCK_SERVICE_TESTING_FD_LIMIT_H_

#include <gtest/gtest.h>
#include <sys/resource.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace quadsock::service::testing {

class FdLimit {
 public:
  explicit FdLimit(int spare) {
    EXPECT_EQ(getrlimit(RLIMIT_NOFILE, &before_), 0);
    int open = -1;  // the directory's own descriptor, closed after the count
    for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) {
      ++open;
    }
    rlimit l = before_;
    l.rlim_cur = static_cast<rlim_t>(open + spare);
    EXPECT_EQ(setrlimit(RLIMIT_NOFILE, &l), 0) << std::strerror(errno);
  }
  ~FdLimit() { EXPECT_EQ(setrlimit(RLIMIT_NOFILE, &before_), 0); }
  FdLimit(const FdLimit&) = delete;
  FdLimit& operator=(const FdLimit&) = delete;

 private:
  rlimit before_{};
};

// Waits up to 30 s for `done`; false when it never came.
template <typename F>
bool Eventually(F done) {
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (!done()) {
    if (absl::Now() > deadline) return false;
    absl::SleepFor(absl::Milliseconds(10));
  }
  return true;
}

}  // namespace quadsock::service::testing

#endif  // QUADSOCK_SERVICE_TESTING_FD_LIMIT_H_
