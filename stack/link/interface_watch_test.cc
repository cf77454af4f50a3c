// InterfaceWatch on a veth pair in a private network namespace (root): `ip` changes the
// interface, the watch reports each change once, counts it, and keeps to the interface's index.
#include "stack/link/interface_watch.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "stack/testing/netns.h"

namespace quadsock::link {
namespace {

const ::testing::Environment* const kNetns =
    ::testing::AddGlobalTestEnvironment(new testing::PrivateNamespaceEnvironment);

using Kind = InterfaceWatch::Change::Kind;

std::vector<Kind> Kinds(const std::vector<InterfaceWatch::Change>& changes) {
  std::vector<Kind> kinds;
  for (const InterfaceWatch::Change& c : changes) kinds.push_back(c.kind);
  return kinds;
}

// The kernel sets a link's operational state (IFF_RUNNING) a moment after `ip` returns (its
// link watch runs later): the changes the watch reports once one has come (10 s at most).
std::vector<InterfaceWatch::Change> Await(InterfaceWatch& w) {
  std::vector<InterfaceWatch::Change> c;
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while ((c = w.Check()).empty() && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(5));
  return c;
}

// Both ends up and the carrier on, as the kernel reports it.
void AwaitCarrier(const std::string& name) {
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (testing::Shell("ip -o link show dev " + name + " | grep -q 'state UP'") != 0 &&
         absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(5));
  }
}

TEST(InterfaceWatchTest, DownUpAndMtuAreReportedOnceAndCounted) {
  testing::TestVeth veth("qsw0", "qsw1");
  AwaitCarrier("qsw0");
  absl::StatusOr<std::unique_ptr<InterfaceWatch>> w = InterfaceWatch::Start("qsw0");
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_TRUE((*w)->Check().empty());
  EXPECT_EQ((*w)->mtu(), 1500u);

  ASSERT_EQ(testing::Shell("ip link set qsw0 down"), 0);
  std::vector<InterfaceWatch::Change> c = Await(**w);
  ASSERT_EQ(Kinds(c), std::vector<Kind>{Kind::kDown});
  EXPECT_EQ(c[0].text, "qsw0 is down (set down): no frames come or go until it is up again");
  EXPECT_TRUE((*w)->Check().empty()) << "reported twice";
  ASSERT_EQ(testing::Shell("ip link set qsw0 up"), 0);
  EXPECT_EQ(Kinds(Await(**w)), std::vector<Kind>{Kind::kUp});

  // The peer's end down: no carrier here.
  ASSERT_EQ(testing::Shell("ip link set qsw1 down"), 0);
  c = Await(**w);
  ASSERT_EQ(Kinds(c), std::vector<Kind>{Kind::kDown});
  EXPECT_NE(c[0].text.find("no carrier"), std::string::npos) << c[0].text;
  ASSERT_EQ(testing::Shell("ip link set qsw1 up"), 0);
  EXPECT_EQ(Kinds(Await(**w)), std::vector<Kind>{Kind::kUp});
  EXPECT_EQ((*w)->down(), 2u);

  ASSERT_EQ(testing::Shell("ip link set qsw0 mtu 1400"), 0);
  c = Await(**w);
  ASSERT_EQ(Kinds(c), std::vector<Kind>{Kind::kMtu});
  EXPECT_EQ(c[0].old_mtu, 1500u);
  EXPECT_EQ(c[0].new_mtu, 1400u);
  EXPECT_EQ(c[0].text, "qsw0's MTU changed from 1500 to 1400");
  EXPECT_EQ((*w)->mtu_changes(), 1u);
  EXPECT_EQ((*w)->mtu(), 1500u) << "the MTU the stack was built for";
  EXPECT_TRUE((*w)->Check().empty());
}

// Deleted, then another interface of the same name: the watch says gone once, and the new one
// (another index) is not taken for it.
TEST(InterfaceWatchTest, ADeletedInterfaceIsGoneEvenWhenItsNameComesBack) {
  absl::StatusOr<std::unique_ptr<InterfaceWatch>> w;
  {
    testing::TestVeth veth("qsw2", "qsw3");
    w = InterfaceWatch::Start("qsw2");
    ASSERT_TRUE(w.ok()) << w.status();
  }
  testing::TestVeth again("qsw2", "qsw3");
  std::vector<InterfaceWatch::Change> c = Await(**w);
  ASSERT_EQ(Kinds(c), std::vector<Kind>{Kind::kGone});
  EXPECT_NE(c[0].text.find("qsw2 (index "), std::string::npos) << c[0].text;
  EXPECT_TRUE((*w)->Check().empty());
}

// A renamed interface is still the one served (the XDP program and sockets follow the index).
TEST(InterfaceWatchTest, ARenamedInterfaceIsStillIt) {
  testing::TestVeth veth("qsw4", "qsw5");
  AwaitCarrier("qsw4");
  absl::StatusOr<std::unique_ptr<InterfaceWatch>> w = InterfaceWatch::Start("qsw4");
  ASSERT_TRUE(w.ok()) << w.status();
  ASSERT_EQ(testing::Shell("ip link set qsw4 down && ip link set qsw4 name qsw6"), 0);
  EXPECT_EQ(Kinds(Await(**w)), std::vector<Kind>{Kind::kDown});
  ASSERT_EQ(testing::Shell("ip link set qsw6 name qsw4 && ip link set qsw4 up"), 0);
  EXPECT_EQ(Kinds(Await(**w)), std::vector<Kind>{Kind::kUp});
}

TEST(InterfaceWatchTest, NoSuchInterface) {
  EXPECT_EQ(InterfaceWatch::Start("qsw-none").status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace quadsock::link
