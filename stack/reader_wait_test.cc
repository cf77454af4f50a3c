// A socket's reader and the descriptor it waits on (Stack::StartReading, WaitForData,
// EndReading): taken while it reads, given back after, and a wait without one fails at once.
#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <vector>

#include "absl/strings/match.h"
#include "stack/stack.h"
#include "stack/testing/stack_fixtures.h"

namespace quadsock::stack {
namespace {

using namespace testing_fixtures;  // NOLINT: the fixtures' short helpers

size_t OpenDescriptors() {
  return static_cast<size_t>(std::distance(std::filesystem::directory_iterator("/proc/self/fd"),
                                           std::filesystem::directory_iterator()));
}

// A reader's wait takes a descriptor (an eventfd) and gives it back when the reader goes: a
// socket between readers holds none. With no descriptor left (EMFILE), a wait fails at once,
// RESOURCE_EXHAUSTED and counted, for its stream to end instead of spinning on it.
TEST_F(TwoStacksTest, AReadersWaitGivesItsDescriptorBackAndFailsAtOnceWithoutOne) {
  const SocketId s = b_->Open(net::Family::kV4).value();
  ASSERT_TRUE(b_->Bind(s, Ep("0.0.0.0:4000")).ok());
  const size_t before = OpenDescriptors();
  ASSERT_EQ(b_->StartReading(s, absl::ZeroDuration()), absl::OkStatus());
  EXPECT_EQ(b_->WaitForData(s, absl::Milliseconds(1)).value(), false);
  EXPECT_EQ(OpenDescriptors(), before + 1);
  b_->EndReading(s);
  EXPECT_EQ(OpenDescriptors(), before);

  // Every descriptor taken: a lower limit, and every number under it filled.
  rlimit saved{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &saved), 0);
  rlimit low = saved;
  low.rlim_cur = OpenDescriptors() + 16;
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &low), 0);
  std::vector<int> filler;
  for (int fd; (fd = open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0;) filler.push_back(fd);
  const int full = errno;
  ASSERT_EQ(b_->StartReading(s, absl::ZeroDuration()), absl::OkStatus());
  const absl::Time start = absl::Now();
  absl::StatusOr<bool> ready = b_->WaitForData(s, absl::Seconds(30));
  const absl::Duration took = absl::Now() - start;
  for (int fd : filler) close(fd);
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &saved), 0);
  b_->EndReading(s);
  ASSERT_EQ(full, EMFILE);
  EXPECT_EQ(ready.status().code(), absl::StatusCode::kResourceExhausted) << ready.status();
  EXPECT_TRUE(absl::StrContains(ready.status().message(), "LimitNOFILE")) << ready.status();
  EXPECT_LT(took, absl::Seconds(10)) << "it waited, without a descriptor to be woken by";
  EXPECT_EQ(b_->Counters().wait_refused, 1u);
}

}  // namespace
}  // namespace quadsock::stack
