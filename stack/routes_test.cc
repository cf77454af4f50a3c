#include "stack/routes.h"

#include <gtest/gtest.h>

namespace quadsock::stack {
namespace {

net::IpAddress Ip(const char* t) { return *net::IpAddress::Parse(t); }

TEST(RouteTableTest, ConnectedGatewayAndLongestPrefix) {
  RouteTable r;
  ASSERT_EQ(r.AddAddress(*net::IpPrefix::Parse("10.1.0.2/24")), absl::OkStatus());
  ASSERT_EQ(r.AddAddress(*net::IpPrefix::Parse("10.1.0.130/25")), absl::OkStatus());
  ASSERT_EQ(r.AddAddress(*net::IpPrefix::Parse("fd00:1::2/64")), absl::OkStatus());
  EXPECT_EQ(r.Lookup(Ip("10.1.0.9"))->source, Ip("10.1.0.2"));
  EXPECT_EQ(r.Lookup(Ip("10.1.0.200"))->source, Ip("10.1.0.130"));  // the /25 is longer
  EXPECT_EQ(r.Lookup(Ip("192.0.2.1")).status().code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_EQ(r.SetGateway(Ip("10.1.0.1")), absl::OkStatus());
  absl::StatusOr<Route> via = r.Lookup(Ip("192.0.2.1"));
  ASSERT_TRUE(via.ok());
  EXPECT_EQ(via->next_hop, Ip("10.1.0.1"));
  EXPECT_TRUE(via->via_gateway);
  EXPECT_EQ(r.Lookup(Ip("2001:db8::1")).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(r.SetGateway(Ip("10.2.0.1")).code(), absl::StatusCode::kFailedPrecondition);
}

TEST(RouteTableTest, MappedPeersGetMappedSources) {
  RouteTable r;
  ASSERT_EQ(r.AddAddress(*net::IpPrefix::Parse("10.1.0.2/24")), absl::OkStatus());
  EXPECT_EQ(*r.SourceFor(Ip("::ffff:10.1.0.7")), Ip("::ffff:10.1.0.2"));
  EXPECT_EQ(r.Lookup(Ip("::ffff:10.1.0.7"))->next_hop, Ip("10.1.0.7"));
}

TEST(RouteTableTest, AddressErrors) {
  RouteTable r;
  EXPECT_EQ(r.AddAddress(*net::IpPrefix::Parse("0.0.0.0/0")).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(r.AddAddress(*net::IpPrefix::Parse("224.0.0.1/4")).code(),
            absl::StatusCode::kInvalidArgument);
  ASSERT_EQ(r.AddAddress(*net::IpPrefix::Parse("10.1.0.2/24")), absl::OkStatus());
  EXPECT_EQ(r.AddAddress(*net::IpPrefix::Parse("10.1.0.2/16")).code(),
            absl::StatusCode::kAlreadyExists);
  EXPECT_TRUE(r.IsLocal(Ip("10.1.0.2")));
  EXPECT_EQ(r.RemoveAddress(Ip("10.1.0.3")).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(r.RemoveAddress(Ip("10.1.0.2")), absl::OkStatus());
  EXPECT_FALSE(r.IsLocal(Ip("10.1.0.2")));
}

// The usual IPv6 gateway is link-local: a datagram beyond the link goes from a global address,
// one on the link from the link-local one.
TEST(RouteTableTest, LinkLocalGatewayGivesAGlobalSourceBeyondTheLink) {
  RouteTable r;
  ASSERT_EQ(r.AddAddress(*net::IpPrefix::Parse("fe80::2/64")), absl::OkStatus());
  ASSERT_EQ(r.AddAddress(*net::IpPrefix::Parse("fd00:1::2/64")), absl::OkStatus());
  ASSERT_EQ(r.SetGateway(Ip("fe80::1")), absl::OkStatus());
  absl::StatusOr<Route> beyond = r.Lookup(Ip("2001:db8::7"));
  ASSERT_TRUE(beyond.ok()) << beyond.status();
  EXPECT_EQ(beyond->next_hop, Ip("fe80::1"));
  EXPECT_EQ(beyond->source, Ip("fd00:1::2"));
  EXPECT_EQ(*r.SourceFor(Ip("2001:db8::7")), Ip("fd00:1::2"));
  EXPECT_EQ(r.Lookup(Ip("fe80::9"))->source, Ip("fe80::2"));
}

// A gateway whose network went away is no route, not a loop looking for one.
TEST(RouteTableTest, GatewayOffEveryNetworkIsNoRoute) {
  RouteTable r;
  ASSERT_EQ(r.AddAddress(*net::IpPrefix::Parse("10.1.0.2/24")), absl::OkStatus());
  ASSERT_EQ(r.SetGateway(Ip("10.1.0.1")), absl::OkStatus());
  ASSERT_EQ(r.RemoveAddress(Ip("10.1.0.2")), absl::OkStatus());
  EXPECT_EQ(r.Lookup(Ip("192.0.2.1")).status().code(), absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace quadsock::stack
