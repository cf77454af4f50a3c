// rx_ring_fill on a real AF_XDP socket: datagrams the kernel queued on the RX ring while no
// poll thread looked are counted as waiting at the next look, and none once it took them.
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "absl/time/clock.h"
#include "stack/afxdp_stack.h"
#include "stack/testing/netns.h"

namespace quadsock {
namespace {

using testing::Shell;

const ::testing::Environment* const kPrivateNamespace =
    ::testing::AddGlobalTestEnvironment(new testing::PrivateNamespaceEnvironment);

constexpr int kDatagrams = 5;

TEST(AfXdpRingFillTest, DatagramsQueuedWhileNobodyPolledWaitOnTheRing) {
  testing::TestVeth veth("qf0", "qf1");
  stack::AfXdpOptions o;
  o.interface = "qf0";
  o.stack.addresses = {*net::IpPrefix::Parse("10.7.9.2/24")};
  o.log = [](absl::string_view m) { std::printf("quadsock: %.*s\n", int(m.size()), m.data()); };
  absl::StatusOr<std::unique_ptr<stack::AfXdpStack>> s = stack::AfXdpStack::Create(o);
  ASSERT_TRUE(s.ok()) << s.status();
  stack::Stack& st = (*s)->stack();
  // The kernel knows quadsock's MAC, so it sends at once: no ARP that nobody would answer yet.
  const std::string mac = st.Links()[0].mac.ToString();
  ASSERT_EQ(Shell("ip addr add 10.7.9.1/24 dev qf1 && ethtool -K qf1 tx off >/dev/null && "
                  "ip neigh replace 10.7.9.2 lladdr " + mac + " dev qf1 nud permanent"),
            0);

  // Not started: the test polls by hand, once the XDP program redirected every datagram.
  const int fd = socket(AF_INET, SOCK_DGRAM, 0);
  ASSERT_GE(fd, 0);
  const testing::SockAddr to("10.7.9.2", 4000);
  for (int i = 0; i < kDatagrams; ++i) ASSERT_EQ(sendto(fd, "x", 1, 0, to.get(), to.len), 1);
  close(fd);
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  uint64_t redirected = 0;
  while (absl::Now() < deadline) {
    redirected = (*s)->xdp_program().Counters().value().redirect_udp;
    if (redirected == kDatagrams) break;
    absl::SleepFor(absl::Milliseconds(10));
  }
  ASSERT_EQ(redirected, uint64_t{kDatagrams});

  // The first look finds them waiting. (The program counts a frame just before the kernel puts
  // it on the ring: a look in between would miss that one, hence at least, not exactly.)
  st.PollOnce();
  const uint64_t first = st.LinkCounters()[0].rx_ring_fill;
  std::printf("rx_ring_fill at the first look: %llu\n", static_cast<unsigned long long>(first));
  EXPECT_GE(first, 1u);
  EXPECT_LE(first, uint64_t{kDatagrams});
  // Then the poll thread took them all: none waits.
  while (absl::Now() < deadline && st.LinkCounters()[0].rx_frames < kDatagrams) st.PollOnce();
  ASSERT_EQ(st.LinkCounters()[0].rx_frames, uint64_t{kDatagrams});
  st.PollOnce();
  EXPECT_EQ(st.LinkCounters()[0].rx_ring_fill, 0u);
  EXPECT_EQ(st.CheckFrameAccounting(), absl::OkStatus());
}

}  // namespace
}  // namespace quadsock
