// Network namespaces and veth pairs for privileged tests of every layer (stack/, tests/,
// clients/), the one C++ helper for them: this process in a private network namespace of its
// own (the stack's side), veth pairs inside it (TestVeth), or a second named namespace for the
// kernel peer with a veth pair between (PeerNetwork), and kernel sockets made inside it.
// (Python tests have tests/netns.py.)
//
//   ::testing::AddGlobalTestEnvironment(new PrivateNamespaceEnvironment);
//   TestVeth veth("qsx0", "qsx1");                 // both ends here, up
//   PeerNetwork net("qs0", "qs1");                 // veth qs0 here, qs1 in the peer namespace
//   net.PeerShell("ip addr add 10.7.0.1/24 dev qs1");
//   int fd = net.PeerSocket(AF_INET, SOCK_DGRAM);  // a kernel socket on the peer's side
#ifndef QUADSOCK_STACK_TESTING_NETNS_H_
#define QUADSOCK_STACK_TESTING_NETNS_H_

#include <arpa/inet.h>
#include <fcntl.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include <gtest/gtest.h>

namespace quadsock::testing {

// A file of the test's runfiles ("service/quadsockd"), for tests that start binaries.
inline std::string Runfile(const std::string& path) {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  const char* workspace = std::getenv("TEST_WORKSPACE");
  EXPECT_NE(srcdir, nullptr) << "run under bazel test";
  return std::string(srcdir ? srcdir : ".") + "/" + (workspace ? workspace : "quadsock") + "/" +
         path;
}

// A sockaddr for a kernel socket call, from text: SockAddr a("10.7.0.2", 4000); bind(fd, a.get(), a.len).
struct SockAddr {
  sockaddr_storage ss{};
  socklen_t len = 0;
  SockAddr(const char* ip, uint16_t port) {
    if (inet_pton(AF_INET, ip, &reinterpret_cast<sockaddr_in*>(&ss)->sin_addr) == 1) {
      auto* a = reinterpret_cast<sockaddr_in*>(&ss);
      a->sin_family = AF_INET;
      a->sin_port = htons(port);
      len = sizeof(sockaddr_in);
    } else {
      auto* a = reinterpret_cast<sockaddr_in6*>(&ss);
      EXPECT_EQ(inet_pton(AF_INET6, ip, &a->sin6_addr), 1) << ip;
      a->sin6_family = AF_INET6;
      a->sin6_port = htons(port);
      len = sizeof(sockaddr_in6);
    }
  }
  const sockaddr* get() const { return reinterpret_cast<const sockaddr*>(&ss); }
};

// Runs `command` with /bin/sh; returns its exit status.
inline int Shell(const std::string& command) {
  const int status = std::system(command.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// Call once per process, before any thread starts: moves the process into a new network
// namespace that vanishes with it.
inline void EnterPrivateNamespace() {
  ASSERT_EQ(unshare(CLONE_NEWNET), 0)
      << "unshare(CLONE_NEWNET) needs root (these tests run as root in CI): "
      << std::strerror(errno);
  ASSERT_EQ(Shell("ip link set lo up"), 0);
}

// Puts the whole test binary in a private namespace:
//   ::testing::AddGlobalTestEnvironment(new PrivateNamespaceEnvironment);
class PrivateNamespaceEnvironment : public ::testing::Environment {
 public:
  void SetUp() override { EnterPrivateNamespace(); }
};

// A veth pair with both ends up in this namespace, deleted at the end of the scope; with
// `queues` RX and TX queues on each end (veth has one unless told).
class TestVeth {
 public:
  TestVeth(std::string name, std::string peer, int queues = 1)
      : name_(std::move(name)), peer_(std::move(peer)) {
    const std::string q = queues == 1 ? "" : " numrxqueues " + std::to_string(queues) +
                                                 " numtxqueues " + std::to_string(queues);
    const std::string command = "ip link add " + name_ + q + " type veth peer name " + peer_ +
                                q + " && ip link set " + name_ + " up && ip link set " + peer_ +
                                " up";
    EXPECT_EQ(Shell(command), 0) << command;
  }
  ~TestVeth() {
    if (Shell("ip link del " + name_ + " 2>/dev/null") != 0) {
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

// A veth pair whose second end lives in a named peer namespace, where the kernel plays the
// other host.
// A kernel socket created inside the network namespace `ns_fd` (named `ns` in failures), by a
// thread of its own: a socket stays in the namespace it was made in, whichever thread uses it
// later. -1 (a test failure) when it cannot be made.
inline int SocketInNamespace(int ns_fd, const std::string& ns, int domain, int type,
                             int protocol = 0) {
  int fd = -1;
  int err = 0;
  std::thread t([&] {
    if (setns(ns_fd, CLONE_NEWNET) != 0) {
      err = errno;
      return;
    }
    fd = socket(domain, type | SOCK_CLOEXEC, protocol);
    if (fd < 0) err = errno;
  });
  t.join();
  EXPECT_GE(fd, 0) << "socket in " << ns << ": " << std::strerror(err);
  return fd;
}

// The same, for a namespace made with `ip netns add NAME`.
inline int SocketInNamespace(const std::string& name, int domain, int type, int protocol = 0) {
  const int ns_fd = open(("/run/netns/" + name).c_str(), O_RDONLY | O_CLOEXEC);
  EXPECT_GE(ns_fd, 0) << "no network namespace " << name << ": " << std::strerror(errno);
  if (ns_fd < 0) return -1;
  const int fd = SocketInNamespace(ns_fd, name, domain, type, protocol);
  close(ns_fd);
  return fd;
}

class PeerNetwork {
 public:
  static void EnterPrivateNamespace() { testing::EnterPrivateNamespace(); }

  PeerNetwork(std::string local, std::string peer)
      : local_(std::move(local)), peer_(std::move(peer)),
        ns_("qs-peer-" + std::to_string(getpid()) + "-" + peer_) {
    EXPECT_EQ(Shell("ip netns add " + ns_), 0) << "cannot make network namespace " << ns_;
    EXPECT_EQ(Shell("ip link add " + local_ + " type veth peer name " + peer_ + " netns " + ns_),
              0);
    EXPECT_EQ(Shell("ip link set " + local_ + " up"), 0);
    PeerShell("ip link set lo up && ip link set " + peer_ + " up");
    // A veth hands frames on with the checksum still to do (CHECKSUM_PARTIAL), and XDP sees
    // them so; a NIC would have done it. Make the peer's kernel compute checksums itself.
    PeerShell("ethtool -K " + peer_ + " tx off >/dev/null");
    ns_fd_ = open(("/run/netns/" + ns_).c_str(), O_RDONLY | O_CLOEXEC);
    EXPECT_GE(ns_fd_, 0) << "cannot open namespace " << ns_ << ": " << std::strerror(errno);
  }
  ~PeerNetwork() {
    if (ns_fd_ >= 0) close(ns_fd_);
    Shell("ip link del " + local_ + " 2>/dev/null");
    EXPECT_EQ(Shell("ip netns del " + ns_), 0) << "cannot remove namespace " << ns_;
  }
  PeerNetwork(const PeerNetwork&) = delete;
  PeerNetwork& operator=(const PeerNetwork&) = delete;

  const std::string& ns() const { return ns_; }
  const std::string& local() const { return local_; }

  // Runs a shell command inside the peer namespace; expects success unless told otherwise.
  int PeerShell(const std::string& command, bool expect_ok = true) const {
    const int rc = Shell("ip netns exec " + ns_ + " sh -c '" + command + "'");
    if (expect_ok) {
      EXPECT_EQ(rc, 0) << "in " << ns_ << ": " << command;
    }
    return rc;
  }

  // The peer interface's index in its namespace.
  int PeerIfindex() const {
    int index = 0;
    std::thread t([&] {
      if (setns(ns_fd_, CLONE_NEWNET) == 0) index = static_cast<int>(if_nametoindex(peer_.c_str()));
    });
    t.join();
    EXPECT_GT(index, 0) << "no " << peer_ << " in " << ns_;
    return index;
  }

  // A kernel socket created inside the peer namespace (see SocketInNamespace).
  int PeerSocket(int domain, int type, int protocol = 0) const {
    return SocketInNamespace(ns_fd_, ns_, domain, type, protocol);
  }

 private:
  std::string local_;
  std::string peer_;
  std::string ns_;
  int ns_fd_ = -1;
};

}  // namespace quadsock::testing

#endif  // QUADSOCK_STACK_TESTING_NETNS_H_
