#include "clients/preload/internal/sockaddr.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cstring>

#include "gtest/gtest.h"

namespace quadsock::preload {
namespace {

net::Endpoint Parse(const char* text) { return net::Endpoint::Parse(text).value(); }

TEST(SockaddrTest, Ipv4RoundTrip) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(53);
  inet_pton(AF_INET, "10.1.0.2", &a.sin_addr);
  const std::optional<net::Endpoint> e = EndpointOf(reinterpret_cast<sockaddr*>(&a), sizeof(a));
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(*e, Parse("10.1.0.2:53"));
  sockaddr_in out{};
  socklen_t len = sizeof(out);
  WriteSockaddr(*e, AF_INET, reinterpret_cast<sockaddr*>(&out), &len);
  EXPECT_EQ(len, sizeof(sockaddr_in));
  EXPECT_EQ(std::memcmp(&out, &a, sizeof(a)), 0);
}

TEST(SockaddrTest, AnIpv6SocketSeesIpv4AsMapped) {
  sockaddr_in6 out{};
  socklen_t len = sizeof(out);
  WriteSockaddr(Parse("10.1.0.1:5000"), AF_INET6, reinterpret_cast<sockaddr*>(&out), &len);
  EXPECT_EQ(len, sizeof(sockaddr_in6));
  char text[INET6_ADDRSTRLEN];
  inet_ntop(AF_INET6, &out.sin6_addr, text, sizeof(text));
  EXPECT_STREQ(text, "::ffff:10.1.0.1");
  EXPECT_EQ(ntohs(out.sin6_port), 5000);
  // And back: the mapped address stays IPv6 (an IPv6 socket holds it so); Unmapped() is v4.
  const std::optional<net::Endpoint> e = EndpointOf(reinterpret_cast<sockaddr*>(&out), len);
  ASSERT_TRUE(e.has_value());
  EXPECT_TRUE(e->address.is_v6());
  EXPECT_EQ(e->address.Unmapped(), Parse("10.1.0.1:1").address);
}

TEST(SockaddrTest, ShortOrForeignAddressesAreNone) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  EXPECT_FALSE(EndpointOf(reinterpret_cast<sockaddr*>(&a), sizeof(a) - 1).has_value());
  EXPECT_FALSE(EndpointOf(nullptr, 0).has_value());
  sockaddr u{};
  u.sa_family = AF_UNIX;
  EXPECT_FALSE(EndpointOf(&u, sizeof(u)).has_value());
  EXPECT_EQ(FamilyOf(&u, sizeof(u)), AF_UNSPEC);
}

TEST(SockaddrTest, ACallersShortBufferIsFilledAsFarAsItGoesAndTheLengthSaysTheWhole) {
  char small[4] = {};
  socklen_t len = sizeof(small);
  WriteSockaddr(Parse("10.1.0.2:53"), AF_INET, reinterpret_cast<sockaddr*>(small), &len);
  EXPECT_EQ(len, sizeof(sockaddr_in));
  sa_family_t family;
  std::memcpy(&family, small, sizeof(family));
  EXPECT_EQ(family, AF_INET);
}

}  // namespace
}  // namespace quadsock::preload
