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

TEST(IcmpQuoteTest, IsIcmpErrorTakesErrorsOnly) {
  EXPECT_TRUE(IsIcmpError(false, kIcmpv4DestUnreachable));
  EXPECT_TRUE(IsIcmpError(false, kIcmpv4TimeExceeded));
  EXPECT_TRUE(IsIcmpError(false, kIcmpv4ParameterProblem));
  EXPECT_FALSE(IsIcmpError(false, kIcmpv4EchoRequest));
  EXPECT_FALSE(IsIcmpError(false, 5));  // redirect
  EXPECT_FALSE(IsIcmpError(false, 4));  // source quench
  EXPECT_TRUE(IsIcmpError(true, kIcmpv6DestUnreachable));
  EXPECT_TRUE(IsIcmpError(true, kIcmpv6PacketTooBig));
  EXPECT_TRUE(IsIcmpError(true, kIcmpv6TimeExceeded));
  EXPECT_TRUE(IsIcmpError(true, kIcmpv6ParameterProblem));
  EXPECT_FALSE(IsIcmpError(true, kIcmpv6EchoRequest));
  EXPECT_FALSE(IsIcmpError(true, kIcmpv6NeighborSolicitation));
  EXPECT_FALSE(IsIcmpError(false, kIcmpv6DestUnreachable));  // type 1 is not an ICMPv4 error
}

// IPv4 10.1.0.1 -> 10.1.0.2, UDP 40000 -> 9, with a bad checksum and a total length past the
// quote, as a router's quote may have: neither is checked.
constexpr char kQuotedV4[] =
    "45 00 0400 0001 0000 3f 11 dead 0a010001 0a010002  9c40 0009 0010 0000";

TEST(IcmpQuoteTest, Ipv4QuoteNamesTheFlow) {
  std::vector<uint8_t> m = FromHex(kQuotedV4);
  ByteReader r(m);
  IcmpQuote q;
  ASSERT_EQ(q.Parse(false, r), ParseError::kOk);
  EXPECT_EQ(q.src.ToString(), "10.1.0.1");
  EXPECT_EQ(q.dst.ToString(), "10.1.0.2");
  EXPECT_EQ(q.protocol, 17);
  EXPECT_EQ(q.src_port, 40000);
  EXPECT_EQ(q.dst_port, 9);
}

TEST(IcmpQuoteTest, Ipv4OptionsAreSkipped) {
  // IHL 6: four bytes of options (NOPs) before the transport header.
  std::vector<uint8_t> m =
      FromHex("46 00 0400 0001 0000 3f 11 0000 0a010001 0a010002 01010101 9c40 0009 0010 0000");
  ByteReader r(m);
  IcmpQuote q;
  ASSERT_EQ(q.Parse(false, r), ParseError::kOk);
  EXPECT_EQ(q.src_port, 40000);
  EXPECT_EQ(q.dst_port, 9);
}

TEST(IcmpQuoteTest, Ipv6QuoteNamesTheFlow) {
  std::vector<uint8_t> m = FromHex(
      "60000000 0010 11 40 fd000001000000000000000000000001 fd000001000000000000000000000002"
      " 9c40 0009 0010 0000 61626364");
  ByteReader r(m);
  IcmpQuote q;
  ASSERT_EQ(q.Parse(true, r), ParseError::kOk);
  EXPECT_EQ(q.src.ToString(), "fd00:1::1");
  EXPECT_EQ(q.dst.ToString(), "fd00:1::2");
  EXPECT_EQ(q.protocol, 17);
  EXPECT_EQ(q.src_port, 40000);
  EXPECT_EQ(q.dst_port, 9);
}

TEST(IcmpQuoteTest, ShortOrWrongVersionQuotesAreBad) {
  IcmpQuote q;
  const std::vector<uint8_t> whole = FromHex(kQuotedV4);
  // Every cut short of the IPv4 header and 8 transport bytes.
  for (size_t n = 0; n < whole.size(); ++n) {
    std::vector<uint8_t> m(whole.begin(), whole.begin() + n);
    ByteReader r(m);
    EXPECT_EQ(q.Parse(false, r), ParseError::kBadIcmpQuote) << n << " bytes";
  }
  ByteReader as_v6(whole);
  EXPECT_EQ(q.Parse(true, as_v6), ParseError::kBadIcmpQuote);  // version 4 in an ICMPv6 error
  std::vector<uint8_t> short_ihl = whole;
  short_ihl[0] = 0x44;  // a header length of 16 bytes
  ByteReader r(short_ihl);
  EXPECT_EQ(q.Parse(false, r), ParseError::kBadIcmpQuote);
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
