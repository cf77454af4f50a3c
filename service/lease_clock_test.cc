// Leases run on the monotonic clock: a step of the wall clock (NTP, an administrator's `date`)
// must neither expire every session at once nor keep dead ones for as long as it went back.
#include <gtest/gtest.h>

#include "absl/time/clock.h"
#include "service/server.h"
#include "stack/monotonic_clock.h"

namespace quadsock::service {
namespace {

// Within a second of `clock`; steady_clock counts from boot, the wall clock from 1970.
bool Near(absl::Time t, absl::Time clock) { return absl::AbsDuration(t - clock) < absl::Seconds(1); }

TEST(LeaseClockTest, LeasesRunOnTheMonotonicClock) {
  const ServerOptions o;
  EXPECT_TRUE(Near(o.clock(), stack::MonotonicNow()));
  EXPECT_FALSE(Near(o.clock(), absl::Now()));
}

// With the injected clock, a lease lasts its time on that clock alone.
TEST(LeaseClockTest, ASessionLastsItsLeaseOnTheInjectedClock) {
  absl::Time now = stack::MonotonicNow();
  Sessions sessions({}, [&now] { return now; });
  ASSERT_TRUE(sessions.Create("client", "", /*lease_seconds=*/10).ok());
  now += absl::Seconds(9);
  EXPECT_TRUE(sessions.Expire().empty());
  now += absl::Seconds(2);
  EXPECT_EQ(sessions.Expire().size(), 1u);
}

}  // namespace
}  // namespace quadsock::service
