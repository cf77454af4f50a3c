#include "stack/net/icmp.h"

#include <gtest/gtest.h>

#include "stack/net/test_frames.h"

namespace quadsock::net {
namespace {

using testing::FromHex;

TEST(IcmpTest, EchoFields) {
  std::vector<uint8_t> m = FromHex("08 00 1234 abcd 0007");
  ByteReader r(m);
  IcmpHeader icmp;
  ASSERT_EQ(icmp.Parse(r), ParseError::kOk);
  EXPECT_EQ(icmp.type, kIcmpv4EchoRequest);
  EXPECT_EQ(icmp.checksum, 0x1234);
  EXPECT_EQ(icmp.echo_id(), 0xabcd);
  EXPECT_EQ(icmp.echo_sequence(), 7);
  EXPECT_EQ(IcmpHeader::EchoRest(0xabcd, 7), icmp.rest);
  m.resize(7);
  ByteReader cut(m);
  EXPECT_EQ(icmp.Parse(cut), ParseError::kTruncatedIcmp);
}

TEST(NdpTest, ParsesSolicitationWithSourceLinkAddress) {
  // Target fd00::2, an unknown option (type 14, 8 bytes) skipped, then source link address.
  std::vector<uint8_t> body = FromHex(
      "fd000000000000000000000000000002 0e01 000000000000 0101 020000000001");
  ByteReader r(body);
  NdpMessage ns;
  ASSERT_EQ(ns.Parse(kIcmpv6NeighborSolicitation, r), ParseError::kOk);
  EXPECT_EQ(ns.target.ToString(), "fd00::2");
  ASSERT_TRUE(ns.link_address.has_value());
  EXPECT_EQ(ns.link_address->ToString(), "02:00:00:00:00:01");
}

TEST(NdpTest, AdvertisementWantsTargetOption) {
  std::vector<uint8_t> body =
      FromHex("fd000000000000000000000000000002 0101 020000000001 0201 020000000002");
  ByteReader r(body);
  NdpMessage na;
  ASSERT_EQ(na.Parse(kIcmpv6NeighborAdvertisement, r), ParseError::kOk);
  ASSERT_TRUE(na.link_address.has_value());
  EXPECT_EQ(na.link_address->ToString(), "02:00:00:00:00:02");
}

TEST(NdpTest, RejectsBadOptions) {
  for (const char* hex : {"fd000000000000000000000000000002 0100 020000000001",  // length 0
                          "fd000000000000000000000000000002 0102 020000000001",  // past the end
                          "fd000000000000000000000000000002 01"}) {
    std::vector<uint8_t> body = FromHex(hex);
    ByteReader r(body);
    NdpMessage ns;
    EXPECT_EQ(ns.Parse(kIcmpv6NeighborSolicitation, r), ParseError::kBadNdpOption) << hex;
  }
  std::vector<uint8_t> short_body = FromHex("fd00000000000000");
  ByteReader r(short_body);
  NdpMessage ns;
  EXPECT_EQ(ns.Parse(kIcmpv6NeighborSolicitation, r), ParseError::kBadNdpMessage);
}

TEST(NdpTest, WriteRoundTrips) {
  NdpMessage na;
  na.target = *IpAddress::Parse("fd00:1::2");
  na.link_address = *MacAddress::Parse("02:00:00:00:00:02");
  uint8_t buf[24];
  ByteWriter w(buf);
  na.Write(kIcmpv6NeighborAdvertisement, w);
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(w.offset(), 24u);
  EXPECT_EQ(buf[16], kNdpOptionTargetLinkAddress);
  ByteReader r(buf);
  NdpMessage back;
  ASSERT_EQ(back.Parse(kIcmpv6NeighborAdvertisement, r), ParseError::kOk);
  EXPECT_EQ(back.target, na.target);
  EXPECT_EQ(back.link_address, na.link_address);
}

}  // namespace
}  // namespace quadsock::net
