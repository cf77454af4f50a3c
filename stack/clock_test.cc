// The stack's two clocks: timers (neighbours, the ICMP rate limit) on the monotonic one, which a
// step of the wall clock does not move; arrival times of datagrams on the wall clock.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "stack/monotonic_clock.h"
#include "stack/net/frame.h"
#include "stack/stack.h"
#include "stack/testing/stack_fixtures.h"

namespace quadsock::stack {
namespace {

using testing_fixtures::Bytes;
using testing_fixtures::Ep;
using testing_fixtures::StackWireTest;

// Within a second of `clock`, and nowhere near the other (steady_clock counts from boot, the
// wall clock from 1970).
bool Near(absl::Time t, absl::Time clock) { return absl::AbsDuration(t - clock) < absl::Seconds(1); }

TEST(ClockTest, TheStacksTimersRunOnTheMonotonicClock) {
  const StackOptions o;
  EXPECT_TRUE(Near(o.clock(), MonotonicNow()));
  EXPECT_FALSE(Near(o.clock(), absl::Now()));
  EXPECT_TRUE(Near(o.wall_clock(), absl::Now()));
}

// The wall clock steps back an hour while a neighbour is being resolved: the retransmissions
// still go out a second apart (on a wall clock they stopped for the hour), and a datagram's
// arrival time shows the step once the engine has read the wall clock again.
TEST_F(StackWireTest, AWallClockStepNeitherFreezesTimersNorHidesFromArrivalTimes) {
  SocketId s = stack_->Open(net::Family::kV4).value();
  ASSERT_TRUE(stack_->Bind(s, Ep("0.0.0.0:7")).ok());
  ASSERT_EQ(stack_->Send(s, Bytes("waits"), Ep("10.1.0.5:9")), absl::OkStatus());
  stack_->PollOnce();
  EXPECT_EQ(wire_->TakeSent().size(), 1u);  // the first ARP request
  clock_.wall_step = -absl::Hours(1);
  clock_.now += absl::Seconds(1);
  stack_->PollOnce();
  EXPECT_EQ(wire_->TakeSent().size(), 1u);  // the second, on time
  EXPECT_EQ(stack_->Counters().neighbor_probes, 2u);

  ASSERT_TRUE(wire_->Inject(Udp("10.1.0.1:5000", "10.1.0.2:7", "stamped")));
  stack_->PollOnce();
  std::optional<ReceivedDatagram> d = stack_->Receive(s).value();
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->arrival, clock_.now - absl::Hours(1));
}

}  // namespace
}  // namespace quadsock::stack
