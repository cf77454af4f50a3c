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
  EXPECT_EQ(r.Lookup(Ip("192.0.2.1")).status().code(), absl::StatusCode::kNotFound);
  ASSERT_EQ(r.SetGateway(Ip("10.1.0.1")), absl::OkStatus());
  absl::StatusOr<Route> via = r.Lookup(Ip("192.0.2.1"));
  ASSERT_TRUE(via.ok());
  EXPECT_EQ(via->next_hop, Ip("10.1.0.1"));
  EXPECT_TRUE(via->via_gateway);
  EXPECT_EQ(r.Lookup(Ip("2001:db8::1")).status().code(), absl::StatusCode::kNotFound);
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

}  // namespace
}  // namespace quadsock::stack
