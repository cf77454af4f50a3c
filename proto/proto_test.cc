// The generated code builds, links and round-trips: the protoc/grpc_cpp_plugin chain works.
#include <gtest/gtest.h>

#include "quadsock/v1/common.pb.h"

namespace {

TEST(ProtoTest, EndpointRoundTrips) {
  quadsock::v1::Endpoint e;
  e.set_address("fd00:1::2");
  e.set_port(4000);
  std::string wire;
  ASSERT_TRUE(e.SerializeToString(&wire));
  quadsock::v1::Endpoint back;
  ASSERT_TRUE(back.ParseFromString(wire));
  EXPECT_EQ(back.address(), "fd00:1::2");
  EXPECT_EQ(back.port(), 4000u);
  EXPECT_EQ(quadsock::v1::Family_Name(quadsock::v1::FAMILY_IPV6), "FAMILY_IPV6");
}

}  // namespace
