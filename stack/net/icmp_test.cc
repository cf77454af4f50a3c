#include "stack/net/icmp.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "stack/net/ip.h"
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

// An IPv4 packet (20-byte header, no options unless `ihl` says) with protocol `proto` and the
// flags/fragment offset word `frag`, then `rest`; and an IPv6 packet whose fixed header names
// `next`, then `rest`. Lengths and checksums do not matter to IcmpErrorAllowedAbout.
std::vector<uint8_t> V4(const std::string& proto, const std::string& rest,
                        const std::string& frag = "4000", const std::string& ihl = "45") {
  return FromHex(ihl + "00 0000 0000" + frag + "40" + proto + "0000 0a000001 0a000002" + rest);
}
std::vector<uint8_t> V6(const std::string& next, const std::string& rest) {
  return FromHex("60000000 0000" + next + "40" + std::string(64, '0') + rest);
}

TEST(IcmpErrorAllowedAboutTest, NeverAboutAnIcmpv4ErrorOrALaterFragment) {
  const std::string icmp = "0000 00000000";  // code, checksum, rest after the type
  EXPECT_TRUE(IcmpErrorAllowedAbout(V4("11", "1388 0fa0 0008 0000")));  // UDP
  EXPECT_TRUE(IcmpErrorAllowedAbout(V4("06", "1388 0050 00000000")));   // TCP
  EXPECT_TRUE(IcmpErrorAllowedAbout(V4("fd", "")));                     // protocol 253
  // Queries and their replies: echo, timestamp, information, address mask.
  for (const std::string type : {"00", "08", "0d", "0e", "0f", "10", "11", "12"}) {
    SCOPED_TRACE(type);
    EXPECT_TRUE(IcmpErrorAllowedAbout(V4("01", type + icmp)));
  }
  // Errors (unreachable, source quench, redirect, time exceeded, parameter problem), and types
  // nobody defined, as Linux counts them.
  for (const std::string type : {"03", "04", "05", "0b", "0c", "01", "09", "28", "ff"}) {
    SCOPED_TRACE(type);
    EXPECT_FALSE(IcmpErrorAllowedAbout(V4("01", type + icmp)));
  }
  EXPECT_FALSE(IcmpErrorAllowedAbout(V4("01", "")));  // no type to tell by
  // Behind options (a 24-byte header), the ICMP type is where the header length says.
  EXPECT_TRUE(IcmpErrorAllowedAbout(V4("01", "01010101 08" + icmp, "4000", "46")));
  EXPECT_FALSE(IcmpErrorAllowedAbout(V4("01", "01010101 03" + icmp, "4000", "46")));
  // The first fragment is answerable (unless an error); later ones are not (RFC 1122 3.2.2).
  EXPECT_TRUE(IcmpErrorAllowedAbout(V4("11", "1388 0fa0 0008 0000", "2000")));
  EXPECT_FALSE(IcmpErrorAllowedAbout(V4("01", "03" + icmp, "2000")));
  EXPECT_FALSE(IcmpErrorAllowedAbout(V4("11", "1388 0fa0 0008 0000", "0001")));
  EXPECT_FALSE(IcmpErrorAllowedAbout(V4("11", "1388 0fa0 0008 0000", "2001")));
  // Not a packet to tell anything of.
  EXPECT_FALSE(IcmpErrorAllowedAbout({}));
  EXPECT_FALSE(IcmpErrorAllowedAbout(FromHex("45000014")));
  EXPECT_FALSE(IcmpErrorAllowedAbout(FromHex("55000014 00000000 40110000 0a000001 0a000002")));
}

TEST(IcmpErrorAllowedAboutTest, NeverAboutAnIcmpv6ErrorOrALaterFragment) {
  const std::string icmp = "00 0000 00000000";
  const std::string udp = "1388 0fa0 0008 0000";
  const std::string pad_to_icmp = "3a00 0104 00000000";  // an extension header: PadN, then ICMPv6
  EXPECT_TRUE(IcmpErrorAllowedAbout(V6("11", udp)));
  EXPECT_TRUE(IcmpErrorAllowedAbout(V6("fd", "")));
  EXPECT_TRUE(IcmpErrorAllowedAbout(V6("3b", "")));  // no next header
  // Types below 128 are errors (RFC 4443 2.1), 128 and up informational.
  for (const std::string type : {"80", "81", "87", "88", "ff"}) {
    SCOPED_TRACE(type);
    EXPECT_TRUE(IcmpErrorAllowedAbout(V6("3a", type + icmp)));
    EXPECT_TRUE(IcmpErrorAllowedAbout(V6("3c", pad_to_icmp + type + icmp)));
  }
  for (const std::string type : {"01", "02", "03", "04", "00", "7f"}) {
    SCOPED_TRACE(type);
    EXPECT_FALSE(IcmpErrorAllowedAbout(V6("3a", type + icmp)));
    // Behind destination options, a routing header, hop-by-hop where it may not be: stepped
    // over, as the error may be about one of them.
    EXPECT_FALSE(IcmpErrorAllowedAbout(V6("3c", pad_to_icmp + type + icmp)));
    EXPECT_FALSE(IcmpErrorAllowedAbout(V6("2b", "3a000001 00000000" + type + icmp)));
    EXPECT_FALSE(IcmpErrorAllowedAbout(V6("3c", "0000 0104 00000000" + pad_to_icmp + type + icmp)));
    // An atomic fragment and a first fragment are whole enough to tell.
    EXPECT_FALSE(IcmpErrorAllowedAbout(V6("2c", "3a000000 12345678" + type + icmp)));
    EXPECT_FALSE(IcmpErrorAllowedAbout(V6("2c", "3a000001 12345678" + type + icmp)));
  }
  EXPECT_FALSE(IcmpErrorAllowedAbout(V6("3a", "")));  // no type to tell by
  EXPECT_TRUE(IcmpErrorAllowedAbout(V6("2c", "11000001 12345678" + udp)));
  // A later fragment: never (its upper-layer header is in the first).
  EXPECT_FALSE(IcmpErrorAllowedAbout(V6("2c", "11000010 12345678" + udp)));
  EXPECT_FALSE(IcmpErrorAllowedAbout(V6("3c", "2c000104 00000000 11000011 12345678" + udp)));
  // An extension header cut short, or more of them than the stack walks: cannot tell.
  EXPECT_FALSE(IcmpErrorAllowedAbout(V6("3c", "3a00 0104")));
  EXPECT_FALSE(IcmpErrorAllowedAbout(V6("3c", "3a01 0104 00000000")));
  std::string many;
  for (int i = 0; i < Ipv6Header::kMaxExtensionHeaders + 1; ++i) many += "3c00 0104 00000000";
  EXPECT_FALSE(IcmpErrorAllowedAbout(V6("3c", many + "1100 0104 00000000" + udp)));
  EXPECT_TRUE(IcmpErrorAllowedAbout(V6("3c", "3c00 0104 00000000 1100 0104 00000000" + udp)));
  EXPECT_FALSE(IcmpErrorAllowedAbout(FromHex("60000000")));  // shorter than the fixed header
}

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
