#include "clients/preload/internal/config.h"

#include <cstdlib>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace quadsock::preload {
namespace {

class ConfigTest : public ::testing::Test {
 protected:
  void TearDown() override {
    for (const char* name : {"QUADSOCK_TARGET", "QUADSOCK_WILDCARD", "QUADSOCK_PORTS",
                             "QUADSOCK_REQUIRE", "QUADSOCK_BUSY_POLL", "QUADSOCK_LOG"}) {
      unsetenv(name);
    }
  }
};

TEST_F(ConfigTest, DefaultsTakeEverythingAndNeverSpin) {
  const Config c = ConfigFromEnvironment();
  EXPECT_EQ(c.target, "unix:/run/quadsock/quadsock.sock");
  EXPECT_TRUE(c.wildcard_to_quadsock);
  EXPECT_FALSE(c.required);
  EXPECT_EQ(c.busy_poll_us, 0u);
  EXPECT_EQ(c.log_level, LogLevel::kWarn);
  EXPECT_TRUE(c.TakesPort(53));
  EXPECT_TRUE(c.problems.empty());
}

TEST_F(ConfigTest, ReadsEverySetting) {
  setenv("QUADSOCK_TARGET", "unix:/tmp/q.sock", 1);
  setenv("QUADSOCK_WILDCARD", "kernel", 1);
  setenv("QUADSOCK_PORTS", "53, 5000-5100", 1);
  setenv("QUADSOCK_REQUIRE", "1", 1);
  setenv("QUADSOCK_BUSY_POLL", "50", 1);
  setenv("QUADSOCK_LOG", "debug", 1);
  const Config c = ConfigFromEnvironment();
  EXPECT_EQ(c.target, "unix:/tmp/q.sock");
  EXPECT_FALSE(c.wildcard_to_quadsock);
  EXPECT_TRUE(c.required);
  EXPECT_EQ(c.busy_poll_us, 50u);
  EXPECT_EQ(c.log_level, LogLevel::kDebug);
  EXPECT_TRUE(c.TakesPort(53));
  EXPECT_TRUE(c.TakesPort(5000));
  EXPECT_TRUE(c.TakesPort(5100));
  EXPECT_FALSE(c.TakesPort(5101));
  EXPECT_FALSE(c.TakesPort(54));
  EXPECT_TRUE(c.TakesPort(0)) << "an ephemeral port is quadsock's to pick";
  EXPECT_TRUE(c.problems.empty());
}

TEST_F(ConfigTest, BadValuesKeepTheDefaultAndSaySo) {
  setenv("QUADSOCK_WILDCARD", "maybe", 1);
  setenv("QUADSOCK_PORTS", "53-", 1);
  setenv("QUADSOCK_REQUIRE", "yes", 1);
  setenv("QUADSOCK_BUSY_POLL", "-1", 1);
  setenv("QUADSOCK_LOG", "loud", 1);
  const Config c = ConfigFromEnvironment();
  EXPECT_TRUE(c.wildcard_to_quadsock);
  EXPECT_TRUE(c.ports.empty());
  EXPECT_FALSE(c.required);
  EXPECT_EQ(c.busy_poll_us, 0u);
  EXPECT_EQ(c.log_level, LogLevel::kWarn);
  EXPECT_THAT(c.problems,
              ::testing::ElementsAre(::testing::HasSubstr("QUADSOCK_WILDCARD=maybe"),
                                     ::testing::HasSubstr("QUADSOCK_PORTS=53-"),
                                     ::testing::HasSubstr("QUADSOCK_REQUIRE=yes"),
                                     ::testing::HasSubstr("QUADSOCK_BUSY_POLL=-1"),
                                     ::testing::HasSubstr("QUADSOCK_LOG=loud")));
}

TEST_F(ConfigTest, PortRangesMustBeOrderedAndInRange) {
  for (const char* bad : {"5100-5000", "0", "70000", "a", ","}) {
    setenv("QUADSOCK_PORTS", bad, 1);
    const Config c = ConfigFromEnvironment();
    EXPECT_TRUE(c.ports.empty()) << bad;
    EXPECT_EQ(c.problems.size(), 1u) << bad;
  }
}

}  // namespace
}  // namespace quadsock::preload
