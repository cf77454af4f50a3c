#include "stack/link/errno_status.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace quadsock::link {
namespace {

TEST(ErrnoStatusTest, AbseilsCodeAndMessage) {
  for (int error : {EPERM, ENOMEM, ENOBUFS, EINVAL, ENOENT, EAGAIN, E2BIG}) {
    SCOPED_TRACE(error);
    const absl::Status s = ErrnoStatus(error, "socket");
    EXPECT_EQ(s, absl::ErrnoToStatus(error, "socket"));
    EXPECT_EQ(s.message(), std::string("socket: ") + std::strerror(error));
  }
}

TEST(ErrnoStatusTest, TakesLibbpfsNegativeErrors) {
  EXPECT_EQ(ErrnoStatus(-EINVAL, "attach"), ErrnoStatus(EINVAL, "attach"));
  EXPECT_EQ(ErrnoStatus(-EBUSY, "bind"), ErrnoStatus(EBUSY, "bind"));
}

// The codes quadsock's contracts give these errnos, where Abseil maps them otherwise.
TEST(ErrnoStatusTest, KeepsQuadsocksCodesWhereTheyDifferFromAbseils) {
  EXPECT_EQ(ErrnoStatus(ENODEV, "x").code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(ErrnoStatus(ENXIO, "x").code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(ErrnoStatus(EOPNOTSUPP, "x").code(), absl::StatusCode::kFailedPrecondition);
  const absl::Status busy = ErrnoStatus(EBUSY, "binding an AF_XDP socket");
  EXPECT_EQ(busy.code(), absl::StatusCode::kAlreadyExists);
  // The benchmark harness knows a busy queue by this text.
  EXPECT_EQ(busy.message(), "binding an AF_XDP socket: Device or resource busy");
}

TEST(ErrnoStatusTest, HintOnlyOnPermissionErrors) {
  const char* hint = "(needs CAP_NET_ADMIN)";
  EXPECT_EQ(ErrnoStatus(EPERM, "SIOCETHTOOL on eth0", hint).message(),
            "SIOCETHTOOL on eth0: Operation not permitted (needs CAP_NET_ADMIN)");
  EXPECT_EQ(ErrnoStatus(EACCES, "x", hint).code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(ErrnoStatus(EINVAL, "x", hint).message(), "x: Invalid argument");
}

}  // namespace
}  // namespace quadsock::link
