// NIC features through SIOCETHTOOL on a veth pair in a private network namespace (root). veth
// lets rx-vlan-hw-parse be turned on and off; `ethtool -k` is the independent reader.
#include "stack/link/nic_features.h"

#include <sched.h>
#include <sys/mount.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "stack/testing/netns.h"

namespace quadsock::link {
namespace {

const ::testing::Environment* const kNetns =
    ::testing::AddGlobalTestEnvironment(new testing::PrivateNamespaceEnvironment);

// What ethtool itself says of rx-vlan-offload ("on" or "off").
std::string EthtoolSays(const std::string& interface) {
  const std::string command = "ethtool -k " + interface +
                              " | sed -n 's/^rx-vlan-offload: \\(o[nf]*\\).*/\\1/p'";
  FILE* p = popen(command.c_str(), "r");
  char line[16] = {};
  if (p == nullptr || fgets(line, sizeof(line), p) == nullptr) line[0] = '\0';
  if (p != nullptr) pclose(p);
  std::string out(line);
  while (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

TEST(NicFeaturesTest, ReadsAndTurnsVlanStrippingOffAndOn) {
  testing::TestVeth veth("qsf0", "qsf1");
  ASSERT_EQ(EthtoolSays("qsf0"), "on") << "veth strips VLAN tags by default";
  EXPECT_EQ(GetNicFeature("qsf0", kRxVlanStripping).value(), true);

  ASSERT_TRUE(SetNicFeature("qsf0", kRxVlanStripping, false).ok());
  EXPECT_EQ(EthtoolSays("qsf0"), "off");
  EXPECT_EQ(GetNicFeature("qsf0", kRxVlanStripping).value(), false);
  EXPECT_EQ(EthtoolSays("qsf1"), "on");  // the other end is another device

  ASSERT_TRUE(SetNicFeature("qsf0", kRxVlanStripping, true).ok());
  EXPECT_EQ(EthtoolSays("qsf0"), "on");
}

TEST(NicFeaturesTest, FixedFeaturesAndUnknownNamesAreRefused) {
  testing::TestVeth veth("qsf0", "qsf1");
  // veth shows rx-vlan-filter as "off [fixed]".
  EXPECT_EQ(GetNicFeature("qsf0", "rx-vlan-filter").value(), false);
  EXPECT_TRUE(SetNicFeature("qsf0", "rx-vlan-filter", false).ok());  // already so
  absl::Status s = SetNicFeature("qsf0", "rx-vlan-filter", true);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_NE(s.message().find("fixed"), absl::string_view::npos) << s;

  EXPECT_EQ(GetNicFeature("qsf0", "no-such-feature").status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(GetNicFeature("qs-nonesuch", kRxVlanStripping).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(SetNicFeature("an-interface-name-too-long", kRxVlanStripping, false).code(),
            absl::StatusCode::kInvalidArgument);
}

// veth reports its queues as channels (rx, no combined), as `ethtool -l` shows them.
TEST(NicFeaturesTest, CountsTheRxQueues) {
  {
    testing::TestVeth veth("qsf0", "qsf1", /*queues=*/4);
    EXPECT_EQ(RxQueueCount("qsf0").value(), 4u);
  }
  testing::TestVeth veth("qsf0", "qsf1");
  EXPECT_EQ(RxQueueCount("qsf0").value(), 1u);
  EXPECT_EQ(RxQueueCount("qs-nonesuch").status().code(), absl::StatusCode::kNotFound);
}

TEST(NicFeaturesTest, NamesTheDriver) {
  testing::TestVeth veth("qsf0", "qsf1");
  EXPECT_EQ(DriverName("qsf0").value(), "veth");
  EXPECT_EQ(DriverName("qs-nonesuch").status().code(), absl::StatusCode::kNotFound);
}

// macvlan has no get_channels (EOPNOTSUPP): its queues are counted in sysfs, which must be this
// network namespace's (a sysfs mounted in it, here in a mount namespace of this process's own).
TEST(NicFeaturesTest, CountsTheRxQueuesInSysfsWhereTheDriverHasNoChannels) {
  testing::TestVeth veth("qsf0", "qsf1");
  ASSERT_EQ(testing::Shell("ip link add link qsf0 name qsf2 numrxqueues 3 type macvlan"), 0);
  absl::StatusOr<uint32_t> unseen = RxQueueCount("qsf2");  // /sys is the host's here
  EXPECT_EQ(unseen.status().code(), absl::StatusCode::kFailedPrecondition) << unseen.status();
  EXPECT_NE(unseen.status().message().find("/sys/class/net/qsf2/queues"), absl::string_view::npos)
      << unseen.status();
  ASSERT_EQ(unshare(CLONE_NEWNS), 0) << std::strerror(errno);
  ASSERT_EQ(mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr), 0) << std::strerror(errno);
  ASSERT_EQ(mount("sysfs", "/sys", "sysfs", 0, nullptr), 0) << std::strerror(errno);
  EXPECT_EQ(RxQueueCount("qsf2").value(), 3u);
}

}  // namespace
}  // namespace quadsock::link
