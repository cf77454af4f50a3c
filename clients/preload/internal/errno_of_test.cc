#include "clients/preload/internal/errno_of.h"

#include <cerrno>

#include "gtest/gtest.h"

namespace quadsock::preload {
namespace {

TEST(ErrnoOfTest, EachCallGetsTheErrnoLinuxUses) {
  EXPECT_EQ(ErrnoOf(absl::OkStatus(), Call::kBind), 0);
  EXPECT_EQ(ErrnoOf(absl::AlreadyExistsError("taken"), Call::kBind), EADDRINUSE);
  EXPECT_EQ(ErrnoOf(absl::InvalidArgumentError("not ours"), Call::kBind), EADDRNOTAVAIL);
  EXPECT_EQ(ErrnoOf(absl::InvalidArgumentError("no route"), Call::kConnect), ENETUNREACH);
  EXPECT_EQ(ErrnoOf(absl::FailedPreconditionError("bound"), Call::kBind), EINVAL);
  EXPECT_EQ(ErrnoOf(absl::FailedPreconditionError("not connected"), Call::kDisconnect), 0);
  EXPECT_EQ(ErrnoOf(absl::ResourceExhaustedError("sockets"), Call::kOpen), EMFILE);
  EXPECT_EQ(ErrnoOf(absl::ResourceExhaustedError("ports"), Call::kBind), EADDRINUSE);
  EXPECT_EQ(ErrnoOf(absl::ResourceExhaustedError("memory"), Call::kOther), ENOBUFS);
  EXPECT_EQ(ErrnoOf(absl::PermissionDeniedError("theirs"), Call::kBind), EACCES);
  EXPECT_EQ(ErrnoOf(absl::UnavailableError("gone"), Call::kConnect), ENETDOWN);
  EXPECT_EQ(ErrnoOf(absl::NotFoundError("closed"), Call::kOther), ENETDOWN);
  EXPECT_EQ(ErrnoOf(absl::AbortedError("ICMP"), Call::kOther), ECONNREFUSED);
  EXPECT_EQ(ErrnoOf(absl::InternalError("?"), Call::kOther), EIO);
}

}  // namespace
}  // namespace quadsock::preload
