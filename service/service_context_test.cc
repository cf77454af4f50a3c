// Who the per-peer limits count a TCP client as (ServiceContext::TcpPeerKey).
#include <gtest/gtest.h>

#include "service/service_context.h"

namespace quadsock::service {
namespace {

TEST(TcpPeerKeyTest, AnIpv4ClientIsItsHost) {
  EXPECT_EQ(ServiceContext::TcpPeerKey("ipv4:10.0.0.7:41234"), "ipv4:10.0.0.7");
  EXPECT_EQ(ServiceContext::TcpPeerKey("ipv4:10.0.0.8:41234"), "ipv4:10.0.0.8");
}

TEST(TcpPeerKeyTest, AnIpv6ClientIsItsSlash64) {
  // gRPC escapes the brackets; either form is read.
  EXPECT_EQ(ServiceContext::TcpPeerKey("ipv6:%5Bfd00:99::11%5D:34435"), "ipv6:fd00:99::/64");
  EXPECT_EQ(ServiceContext::TcpPeerKey("ipv6:[fd00:99::ffff:1:2]:1"), "ipv6:fd00:99::/64");
  EXPECT_EQ(ServiceContext::TcpPeerKey("ipv6:[fd00:99:0:1::11]:1"), "ipv6:fd00:99:0:1::/64");
  // An IPv4 client on a dual-stack listener is its IPv4 host.
  EXPECT_EQ(ServiceContext::TcpPeerKey("ipv6:%5B::ffff:10.0.0.7%5D:41234"), "ipv4:10.0.0.7");
}

TEST(TcpPeerKeyTest, AnythingElseIsNoTcpPeer) {
  EXPECT_EQ(ServiceContext::TcpPeerKey("fd:12"), "");
  EXPECT_EQ(ServiceContext::TcpPeerKey("unix:/run/q.sock"), "");
  EXPECT_EQ(ServiceContext::TcpPeerKey("ipv6:[not-an-address]:1"), "");
  EXPECT_EQ(ServiceContext::TcpPeerKey("ipv4:nonsense"), "");
}

}  // namespace
}  // namespace quadsock::service
