#include "stack/link/xsk_link.h"

#include <gtest/gtest.h>
#include <sys/resource.h>

#include <cerrno>

#include "absl/strings/str_format.h"

namespace quadsock::link {
namespace {

// The UMEM is locked memory: past RLIMIT_MEMLOCK without CAP_IPC_LOCK the kernel refuses it,
// and the error must say what to change (a bare "No buffer space available" did not).
TEST(UmemRegistrationErrorTest, OverTheMemlockLimitSaysHowToFixIt) {
  rlimit old;
  ASSERT_EQ(getrlimit(RLIMIT_MEMLOCK, &old), 0);
  rlimit low = old;
  low.rlim_cur = 8 << 20;
  if (old.rlim_max != RLIM_INFINITY && old.rlim_max < low.rlim_cur) low.rlim_cur = old.rlim_max;
  ASSERT_EQ(setrlimit(RLIMIT_MEMLOCK, &low), 0);
  const absl::Status nobufs = UmemRegistrationError(ENOBUFS, size_t{32} << 20);
  const absl::Status eperm = UmemRegistrationError(EPERM, size_t{32} << 20);
  ASSERT_EQ(setrlimit(RLIMIT_MEMLOCK, &old), 0);
  EXPECT_EQ(nobufs.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(eperm.code(), absl::StatusCode::kPermissionDenied);
  for (const absl::Status& s : {nobufs, eperm}) {
    EXPECT_NE(s.message().find("raise RLIMIT_MEMLOCK (ulimit -l) or grant CAP_IPC_LOCK"),
              std::string::npos)
        << s.message();
    EXPECT_NE(s.message().find("32 MiB"), std::string::npos) << s.message();
    EXPECT_NE(s.message().find(absl::StrFormat("RLIMIT_MEMLOCK is %u KiB", low.rlim_cur >> 10)),
              std::string::npos)
        << s.message();
  }
  // Other failures keep their own message.
  const absl::Status invalid = UmemRegistrationError(EINVAL, size_t{32} << 20);
  EXPECT_EQ(invalid.message().find("MEMLOCK"), std::string::npos) << invalid.message();
}

}  // namespace
}  // namespace quadsock::link
