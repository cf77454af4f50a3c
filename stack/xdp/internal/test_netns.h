// Test helpers for the privileged XDP tests: a private network namespace for the whole test
// binary, and veth pairs inside it that go away with the test.
//
//   EnterPrivateNetns();             // once, before any test (a gtest Environment does it)
//   TestVeth veth("qs0", "qs1");     // both ends up, in this namespace
//   int ifindex = veth.ifindex();    // of the first end
#ifndef QUADSOCK_STACK_XDP_INTERNAL_TEST_NETNS_H_
#define QUADSOCK_STACK_XDP_INTERNAL_TEST_NETNS_H_

#include <net/if.h>
#include <sched.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>

#include <gtest/gtest.h>

namespace quadsock::xdp::testing {

// Moves the process (its main thread, and every child it forks) into a new network namespace,
// so interfaces it makes are private and vanish with it.
inline void EnterPrivateNetns() {
  ASSERT_EQ(unshare(CLONE_NEWNET), 0)
      << "unshare(CLONE_NEWNET) needs root: " << std::strerror(errno);
  ASSERT_EQ(std::system("ip link set lo up"), 0);
}

class PrivateNetnsEnvironment : public ::testing::Environment {
 public:
  void SetUp() override { EnterPrivateNetns(); }
};

// A veth pair, both ends up, made with ip(8) and deleted at the end of the scope.
class TestVeth {
 public:
  TestVeth(std::string name, std::string peer) : name_(std::move(name)), peer_(std::move(peer)) {
    std::string command = "ip link add " + name_ + " type veth peer name " + peer_ +
                          " && ip link set " + name_ + " up && ip link set " + peer_ + " up";
    EXPECT_EQ(std::system(command.c_str()), 0) << command;
  }
  ~TestVeth() {
    if (std::system(("ip link del " + name_ + " 2>/dev/null").c_str()) != 0) {
      ADD_FAILURE() << "cannot delete veth " << name_;
    }
  }
  TestVeth(const TestVeth&) = delete;
  TestVeth& operator=(const TestVeth&) = delete;

  const std::string& name() const { return name_; }
  const std::string& peer() const { return peer_; }
  int ifindex() const { return static_cast<int>(if_nametoindex(name_.c_str())); }
  int peer_ifindex() const { return static_cast<int>(if_nametoindex(peer_.c_str())); }

 private:
  std::string name_;
  std::string peer_;
};

}  // namespace quadsock::xdp::testing

#endif  // QUADSOCK_STACK_XDP_INTERNAL_TEST_NETNS_H_
