// Spinning poll threads (StackOptions::poll_spin, quadsockd's --poll_spin_us): they carry
// traffic both ways as sleeping ones do, and sleep once the spin after their last frame is
// over, so that an idle stack burns no CPU.
#include <sys/resource.h>

#include <gtest/gtest.h>

#include <atomic>

#include "absl/time/clock.h"
#include "stack/stack.h"
#include "stack/testing/stack_fixtures.h"

namespace quadsock::stack {
namespace {

using namespace testing_fixtures;  // NOLINT: the fixtures' short helpers

// The CPU this process has used so far, on all its threads.
absl::Duration ProcessCpu() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return absl::DurationFromTimeval(u.ru_utime) + absl::DurationFromTimeval(u.ru_stime);
}

// Options on the real clocks (the defaults): a spin is measured in the time that passes.
StackOptions Spinning(const char* v4, const char* v6, absl::Duration spin) {
  StackOptions o;
  o.addresses = {*net::IpPrefix::Parse(v4), *net::IpPrefix::Parse(v6)};
  o.poll_spin = spin;
  return o;
}

TEST(PollSpinTest, SpinningThreadsCarryTrafficBothWaysThenSleep) {
  constexpr absl::Duration kSpin = absl::Milliseconds(2);
  StackPair pair = StackPair::Create(
                       {.link = {.name = "a", .mac = kMacA},
                        .options = Spinning("10.1.0.1/24", "fd00:1::1/64", kSpin)},
                       {.link = {.name = "b", .mac = kMacB},
                        .options = Spinning("10.1.0.2/24", "fd00:1::2/64", kSpin)})
                       .value();
  Stack& a = *pair.a;
  Stack& b = *pair.b;
  // A pings B, and B answers, one datagram at a time: each comes while both threads spin.
  const SocketId server = b.Open(net::Family::kV4).value();
  ASSERT_TRUE(b.Bind(server, Ep("10.1.0.2:4000")).ok());
  std::atomic<int> pings{0};
  ASSERT_EQ(b.SetReceiveCallback(server, [&](const net::Endpoint&, std::span<const uint8_t> p) {
    if (Str(p) == "ping") pings.fetch_add(1);
  }), absl::OkStatus());
  const SocketId client = a.Open(net::Family::kV4).value();
  ASSERT_TRUE(a.Bind(client, Ep("10.1.0.1:5000")).ok());
  ASSERT_TRUE(a.Connect(client, Ep("10.1.0.2:4000")).ok());
  std::atomic<int> pongs{0};
  ASSERT_EQ(a.SetReceiveCallback(client, [&](const net::Endpoint&, std::span<const uint8_t> p) {
    if (Str(p) == "pong") pongs.fetch_add(1);
  }), absl::OkStatus());
  ASSERT_EQ(a.SetNeighbor(Ip("10.1.0.2"), kMacB), absl::OkStatus());
  ASSERT_EQ(b.SetNeighbor(Ip("10.1.0.1"), kMacA), absl::OkStatus());
  ASSERT_EQ(a.Start(), absl::OkStatus());
  ASSERT_EQ(b.Start(), absl::OkStatus());

  constexpr int kCount = 200;
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  const auto await = [&](const std::atomic<int>& count, int want) {
    while (count.load() < want && absl::Now() < deadline) absl::SleepFor(absl::Microseconds(10));
    return count.load() >= want;
  };
  for (int i = 1; i <= kCount; ++i) {
    ASSERT_TRUE(a.Send(client, Bytes("ping")).ok());
    ASSERT_TRUE(await(pings, i)) << "ping " << i << " did not arrive";
    ASSERT_TRUE(b.Send(server, Bytes("pong"), Ep("10.1.0.1:5000")).ok());
    ASSERT_TRUE(await(pongs, i)) << "pong " << i << " did not arrive";
  }

  // Idle: after the spin, both threads sleep. A thread that went on spinning would use about
  // as much CPU as the time that passes, even sharing a loaded machine's CPUs with others.
  absl::SleepFor(absl::Milliseconds(50));
  const absl::Duration before = ProcessCpu();
  absl::SleepFor(absl::Milliseconds(500));
  const absl::Duration used = ProcessCpu() - before;
  a.Stop();
  b.Stop();
  EXPECT_EQ(pongs.load(), kCount);
  EXPECT_LT(used, absl::Milliseconds(100)) << "a poll thread kept spinning with no frames";
  EXPECT_EQ(a.CheckFrameAccounting(), absl::OkStatus());
  EXPECT_EQ(b.CheckFrameAccounting(), absl::OkStatus());
}

}  // namespace
}  // namespace quadsock::stack
