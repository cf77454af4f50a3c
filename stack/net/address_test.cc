#include "stack/net/address.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"

namespace quadsock::net {
namespace {

TEST(IpAddressTest, ParsesAndPrintsV4) {
  absl::StatusOr<IpAddress> a = IpAddress::Parse("10.1.0.2");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_TRUE(a->is_v4());
  EXPECT_EQ(a->v4_host_order(), 0x0a010002u);
  EXPECT_EQ(a->ToString(), "10.1.0.2");
  EXPECT_EQ(*a, IpAddress::V4(0x0a010002));
  EXPECT_EQ(a->size(), 4u);
  EXPECT_EQ(a->data()[0], 10);
}

TEST(IpAddressTest, ParsesAndPrintsV6) {
  absl::StatusOr<IpAddress> a = IpAddress::Parse("fd00:1::2");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_TRUE(a->is_v6());
  EXPECT_EQ(a->ToString(), "fd00:1::2");
  EXPECT_EQ(a->size(), 16u);
}

TEST(IpAddressTest, RejectsMalformedWithInvalidArgument) {
  for (const char* text : {"", "10.1.0", "10.1.0.256", "1.2.3.4.5", "fd00::1::2", "hello",
                           "10.1.0.2 ", "::ffff:1.2.3", "0x0a.1.0.2",
                           "000000000000000000000000000000000000000000000000000000000"}) {
    absl::StatusOr<IpAddress> a = IpAddress::Parse(text);
    ASSERT_FALSE(a.ok()) << text;
    EXPECT_EQ(a.status().code(), absl::StatusCode::kInvalidArgument) << text;
  }
}

// What Parse gave when it was inet_pton alone: IPv4 first, then IPv6.
std::optional<IpAddress> ParsedByInetPton(const std::string& text) {
  uint8_t bytes[16];
  if (inet_pton(AF_INET, text.c_str(), bytes) == 1) return IpAddress::V4Bytes(bytes);
  if (inet_pton(AF_INET6, text.c_str(), bytes) == 1) return IpAddress::V6Bytes(bytes);
  return std::nullopt;
}

void ExpectParsesAsInetPton(const std::string& text) {
  const std::optional<IpAddress> want = ParsedByInetPton(text);
  absl::StatusOr<IpAddress> got = IpAddress::Parse(text);
  ASSERT_EQ(got.ok(), want.has_value()) << '"' << text << '"';
  if (want.has_value()) {
    EXPECT_EQ(*got, *want) << '"' << text << '"';
  }
}

std::string InetNtop(const IpAddress& a) {
  char buf[INET6_ADDRSTRLEN];
  inet_ntop(a.is_v4() ? AF_INET : AF_INET6, a.data(), buf, sizeof(buf));
  return buf;
}

TEST(IpAddressTest, FormatsV4AsInetNtop) {
  std::mt19937 random(19);
  std::vector<uint32_t> words;
  for (uint32_t octet = 0; octet < 256; ++octet) {
    for (int shift : {0, 8, 16, 24}) words.push_back(octet << shift);
    words.push_back(octet * 0x01010101u);
  }
  for (int i = 0; i < 100000; ++i) words.push_back(random());
  words.push_back(0xffffffffu);
  for (uint32_t w : words) {
    const IpAddress a = IpAddress::V4(w);
    char buf[IpAddress::kMaxText];
    const size_t n = a.Format(buf);
    ASSERT_EQ(std::string(buf), InetNtop(a)) << w;
    ASSERT_EQ(n, std::strlen(buf));
    ASSERT_EQ(a.ToString(), InetNtop(a));
    ExpectParsesAsInetPton(a.ToString());
  }
}

TEST(IpAddressTest, FormatsV6AsInetNtop) {
  std::mt19937 random(6);
  for (int i = 0; i < 10000; ++i) {
    uint8_t bytes[16];
    for (uint8_t& b : bytes) b = (random() % 3 == 0) ? 0 : static_cast<uint8_t>(random());
    const IpAddress a = IpAddress::V6Bytes(bytes);
    char buf[IpAddress::kMaxText];
    ASSERT_EQ(std::string(buf, a.Format(buf)), InetNtop(a));
    ExpectParsesAsInetPton(a.ToString());
  }
}

TEST(IpAddressTest, ParsesAsInetPtonOnNearAddresses) {
  for (const char* text : {"0.0.0.0", "255.255.255.255", "1.2.3.4", "01.2.3.4", "1.2.3.04",
                           "00.0.0.0", "256.1.1.1", "1.2.3.256", "1.2.3", "1.2.3.4.",
                           ".1.2.3.4", "1..2.3", "1.2.3.4 ", " 1.2.3.4", "+1.2.3.4", "1.2.3.-4",
                           "1234.1.1.1", "1.2.3.1234", "999.1.1.1", "::1.2.3.4",
                           "::ffff:10.0.0.1", "1.2.3.4/8", "1.2.3.4:80", "a.b.c.d"}) {
    ExpectParsesAsInetPton(text);
  }
  // Strings over the characters addresses are made of, most of them near an address.
  const std::string alphabet = "0123456789.....:af ";
  std::mt19937 random(4);
  for (int i = 0; i < 200000; ++i) {
    std::string text;
    const size_t length = 1 + random() % 18;
    for (size_t j = 0; j < length; ++j) text.push_back(alphabet[random() % alphabet.size()]);
    ExpectParsesAsInetPton(text);
  }
}

TEST(IpAddressTest, WildcardAndClasses) {
  EXPECT_TRUE(IpAddress::AnyV4().IsUnspecified());
  EXPECT_TRUE(IpAddress::AnyV6().IsUnspecified());
  EXPECT_TRUE(IpAddress::AnyV4().is_v4());
  EXPECT_NE(IpAddress::AnyV4(), IpAddress::AnyV6());
  EXPECT_TRUE(IpAddress::Parse("127.0.0.1")->IsLoopback());
  EXPECT_TRUE(IpAddress::Parse("::1")->IsLoopback());
  EXPECT_TRUE(IpAddress::Parse("224.0.0.1")->IsMulticast());
  EXPECT_TRUE(IpAddress::Parse("ff02::1")->IsMulticast());
  EXPECT_TRUE(IpAddress::Parse("fe80::1")->IsLinkLocal());
  EXPECT_FALSE(IpAddress::Parse("fec0::1")->IsLinkLocal());
}

TEST(IpAddressTest, V4MappedRoundTrip) {
  IpAddress v4 = *IpAddress::Parse("192.0.2.7");
  IpAddress mapped = *IpAddress::Parse("::ffff:192.0.2.7");
  EXPECT_TRUE(mapped.is_v6());
  EXPECT_TRUE(mapped.IsV4Mapped());
  EXPECT_FALSE(v4.IsV4Mapped());
  EXPECT_EQ(v4.ToV6(), mapped);
  EXPECT_EQ(mapped.Unmapped(), v4);
  EXPECT_EQ(v4.Unmapped(), v4);
  EXPECT_NE(v4, mapped);  // different families compare unequal
  EXPECT_EQ(v4.bytes16(), mapped.bytes16());
}

TEST(IpAddressTest, OrdersAndHashes) {
  IpAddress a = *IpAddress::Parse("10.0.0.1");
  IpAddress b = *IpAddress::Parse("10.0.0.2");
  EXPECT_LT(a, b);
  absl::flat_hash_set<IpAddress> set = {a, b, a, a.ToV6()};
  EXPECT_EQ(set.size(), 3u);
}

TEST(IpPrefixTest, ParsesAndContains) {
  IpPrefix p = *IpPrefix::Parse("10.1.0.2/24");
  EXPECT_EQ(p.address(), *IpAddress::Parse("10.1.0.2"));
  EXPECT_EQ(p.length(), 24);
  EXPECT_TRUE(p.Contains(*IpAddress::Parse("10.1.0.200")));
  EXPECT_FALSE(p.Contains(*IpAddress::Parse("10.1.1.2")));
  EXPECT_FALSE(p.Contains(*IpAddress::Parse("::ffff:10.1.0.3")));
  IpPrefix q = *IpPrefix::Parse("fd00:1::2/64");
  EXPECT_TRUE(q.Contains(*IpAddress::Parse("fd00:1::ffff")));
  EXPECT_FALSE(q.Contains(*IpAddress::Parse("fd00:2::2")));
  IpPrefix odd = *IpPrefix::Parse("10.1.0.0/13");
  EXPECT_TRUE(odd.Contains(*IpAddress::Parse("10.7.255.255")));
  EXPECT_FALSE(odd.Contains(*IpAddress::Parse("10.8.0.0")));
  EXPECT_TRUE(IpPrefix::Parse("0.0.0.0/0")->Contains(*IpAddress::Parse("8.8.8.8")));
  EXPECT_TRUE(IpPrefix::Parse("::/0")->Contains(*IpAddress::Parse("2001:db8::1")));
  EXPECT_EQ(p.ToString(), "10.1.0.2/24");
}

TEST(IpPrefixTest, NetworkClearsHostBits) {
  EXPECT_EQ(IpPrefix::Parse("10.1.0.2/24")->Network().ToString(), "10.1.0.0/24");
  EXPECT_EQ(IpPrefix::Parse("10.1.7.2/13")->Network().ToString(), "10.0.0.0/13");
  EXPECT_EQ(IpPrefix::Parse("10.1.0.2/32")->Network().ToString(), "10.1.0.2/32");
  EXPECT_EQ(IpPrefix::Parse("fd00:1::2/64")->Network().ToString(), "fd00:1::/64");
  EXPECT_EQ(IpPrefix::Parse("fd00:1::2/0")->Network().ToString(), "::/0");
}

TEST(IpPrefixTest, RejectsBadLengths) {
  for (const char* text : {"10.1.0.2", "10.1.0.2/33", "10.1.0.2/-1", "10.1.0.2/", "fd00::/129",
                           "10.1.0.2/+8", "10.1.0.2/8x", "/8"}) {
    absl::StatusOr<IpPrefix> p = IpPrefix::Parse(text);
    ASSERT_FALSE(p.ok()) << text;
    EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument) << text;
  }
}

TEST(EndpointTest, ParsesAndPrints) {
  Endpoint e = *Endpoint::Parse("10.1.0.2:53");
  EXPECT_EQ(e.address, *IpAddress::Parse("10.1.0.2"));
  EXPECT_EQ(e.port, 53);
  EXPECT_EQ(e.ToString(), "10.1.0.2:53");
  Endpoint f = *Endpoint::Parse("[fd00::2]:65535");
  EXPECT_EQ(f.port, 65535);
  EXPECT_EQ(f.ToString(), "[fd00::2]:65535");
  for (const char* text : {"10.1.0.2", "10.1.0.2:", "10.1.0.2:65536", "fd00::2:53", "[fd00::2]",
                           "[fd00::2]53", "10.1.0.2:-1", "10.1.0.2:+5", "[10.1.0.2:5"}) {
    absl::StatusOr<Endpoint> bad = Endpoint::Parse(text);
    ASSERT_FALSE(bad.ok()) << text;
    EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument) << text;
  }
}

TEST(MacAddressTest, ParsesPrintsAndClassifies) {
  MacAddress m = *MacAddress::Parse("02:00:5e:10:00:0A");
  EXPECT_EQ(m.ToString(), "02:00:5e:10:00:0a");
  EXPECT_FALSE(m.IsMulticast());
  EXPECT_TRUE(MacAddress::Broadcast().IsBroadcast());
  EXPECT_TRUE(MacAddress().IsZero());
  EXPECT_EQ(MacAddress::Ipv6Multicast(*IpAddress::Parse("ff02::1:ff00:2")).ToString(),
            "33:33:ff:00:00:02");
  for (const char* text : {"02:00:5e:10:00", "02:00:5e:10:00:0g", "2:00:5e:10:00:0a", ""}) {
    EXPECT_EQ(MacAddress::Parse(text).status().code(), absl::StatusCode::kInvalidArgument) << text;
  }
}

TEST(SolicitedNodeTest, KeepsLow24Bits) {
  EXPECT_EQ(SolicitedNodeMulticast(*IpAddress::Parse("fd00:1::12:3456")).ToString(),
            "ff02::1:ff12:3456");
}

TEST(IpPrefixTest, BroadcastIsTheIpv4NetworksAllOnesHost) {
  const IpPrefix p24 = *IpPrefix::Parse("10.1.0.2/24");
  EXPECT_TRUE(p24.IsBroadcast(*IpAddress::Parse("10.1.0.255")));
  EXPECT_FALSE(p24.IsBroadcast(*IpAddress::Parse("10.1.0.254")));
  EXPECT_FALSE(p24.IsBroadcast(*IpAddress::Parse("10.2.0.255")));  // another network
  EXPECT_FALSE(IpPrefix::Parse("10.1.0.2/31")->IsBroadcast(*IpAddress::Parse("10.1.0.3")));
  EXPECT_FALSE(IpPrefix::Parse("fd00::2/64")->IsBroadcast(
      *IpAddress::Parse("fd00::ffff:ffff:ffff:ffff")));
}

TEST(IpAddressTest, NotAHostReasonNamesWhatNoHostHas) {
  EXPECT_STREQ(IpAddress::Parse("::ffff:0.0.0.0")->NotAHostReason(), "the unspecified address");
  EXPECT_STREQ(IpAddress::Parse("ff02::1")->NotAHostReason(), "a multicast address");
  EXPECT_STREQ(IpAddress::Parse("::ffff:224.0.0.1")->NotAHostReason(), "a multicast address");
  EXPECT_STREQ(IpAddress::Parse("255.255.255.255")->NotAHostReason(), "the broadcast address");
  EXPECT_EQ(IpAddress::Parse("10.1.0.255")->NotAHostReason(), nullptr);
}

}  // namespace
}  // namespace quadsock::net
