// The client library's public headers compile in an application's strictest usual build:
// -Wall -Wextra with every warning an error (quadsock's own build turns
// -Wmissing-field-initializers off, so this file turns it back on before the includes). A
// warning in client.h or data_channel.h fails this test's build, as it would fail a user's.
#pragma GCC diagnostic error "-Wall"
#pragma GCC diagnostic error "-Wextra"
#pragma GCC diagnostic error "-Wmissing-field-initializers"

#include "clients/cpp/client.h"
#include "clients/cpp/data_channel.h"

#include <gtest/gtest.h>

namespace quadsock {
namespace {

// The defaults the headers promise, read the way an application reads them.
TEST(PublicHeadersTest, OpenOptionsDefaults) {
  OpenOptions options;
  EXPECT_EQ(options.family, v1::FAMILY_IPV4);
  EXPECT_FALSE(options.v6only);
  EXPECT_FALSE(options.reuse_port);
  EXPECT_EQ(options.bound_device, "");
  EXPECT_EQ(options.receive_queue_depth, 0u);
}

}  // namespace
}  // namespace quadsock
