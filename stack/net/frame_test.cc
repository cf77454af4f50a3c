// ParseFrame and the frame builders, with golden frames made by an independent implementation
// (scapy) and the expected verdict for each kind of malformed frame.
#include "stack/net/frame.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "stack/net/checksum.h"
#include "stack/net/frame_builder.h"
#include "stack/net/test_frames.h"

namespace quadsock::net {
namespace {

using testing::FromHex;
using testing::TestLink;
using testing::UdpFrame;

std::span<const uint8_t> Bytes(const std::string& s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

// Golden frames, as scapy 2.5 builds them (see scapy_crosscheck_test.py for the wider check).
constexpr char kGoldenUdp4[] =
    "02000000000202000000000108004500002100004000401126c80a0100010a0100020fa00035000d982868656c6c"
    "6f";
constexpr char kGoldenUdp6[] =
    "02000000000202000000000186dd60000000000d1140fd000000000000000000000000000001fd00000000000000"
    "00000000000000020fa00035000db22868656c6c6f";
constexpr char kGoldenNa[] =
    "02000000000202000000000186dd6000000000203afffd000000000000000000000000000002fd00000000000000"
    "000000000000000188001c9b60000000fd0000000000000000000000000000020201020000000001";
constexpr char kGoldenEchoReply4[] =
    "02000000000202000000000108004500002400004000400126d50a0100020a010001000036331234000570696e67"
    "64617461";

TEST(FrameBuilderTest, UdpMatchesGoldenFrames) {
  EXPECT_EQ(UdpFrame("10.1.0.1", 4000, "10.1.0.2", 53, "hello"), FromHex(kGoldenUdp4));
  EXPECT_EQ(UdpFrame("fd00::1", 4000, "fd00::2", 53, "hello"), FromHex(kGoldenUdp6));
}

TEST(FrameBuilderTest, NdpAndIcmpMatchGoldenFrames) {
  uint8_t buf[256];
  NdpMessage na;
  na.target = *IpAddress::Parse("fd00::2");
  na.link_address = *MacAddress::Parse("02:00:00:00:00:01");
  std::optional<size_t> n =
      BuildNdp(TestLink(), *IpAddress::Parse("fd00::2"), *IpAddress::Parse("fd00::1"),
               kIcmpv6NeighborAdvertisement, na, buf,
               NdpMessage::kFlagSolicited | NdpMessage::kFlagOverride);
  ASSERT_TRUE(n.has_value());
  EXPECT_EQ(std::vector<uint8_t>(buf, buf + *n), FromHex(kGoldenNa));

  IcmpHeader echo;
  echo.type = kIcmpv4EchoReply;
  echo.rest = IcmpHeader::EchoRest(0x1234, 5);
  n = BuildIcmp(TestLink(), *IpAddress::Parse("10.1.0.2"), *IpAddress::Parse("10.1.0.1"), echo,
                Bytes("pingdata"), buf);
  ASSERT_TRUE(n.has_value());
  EXPECT_EQ(std::vector<uint8_t>(buf, buf + *n), FromHex(kGoldenEchoReply4));
}

TEST(FrameBuilderTest, RefusesSmallBuffersAndMixedFamilies) {
  uint8_t small[40];
  UdpAddresses a{{*IpAddress::Parse("10.1.0.1"), 1}, {*IpAddress::Parse("10.1.0.2"), 2}};
  EXPECT_FALSE(BuildUdp(TestLink(), a, Bytes("payload"), small).has_value());
  uint8_t buf[128];
  UdpAddresses mixed{{*IpAddress::Parse("10.1.0.1"), 1}, {*IpAddress::Parse("fd00::2"), 2}};
  EXPECT_FALSE(BuildUdp(TestLink(), mixed, Bytes("x"), buf).has_value());
  std::vector<uint8_t> huge(70000);
  std::vector<uint8_t> out(80000);
  EXPECT_FALSE(BuildUdp(TestLink(), a, huge, out).has_value());
}

TEST(ParseFrameTest, UdpV4) {
  std::vector<uint8_t> f = FromHex(kGoldenUdp4);
  ParsedFrame p;
  ASSERT_EQ(ParseFrame(f, p), ParseError::kOk);
  EXPECT_EQ(p.l3, L3::kIpv4);
  EXPECT_EQ(p.l4, L4::kUdp);
  EXPECT_EQ(p.src.ToString(), "10.1.0.1");
  EXPECT_EQ(p.dst.ToString(), "10.1.0.2");
  EXPECT_EQ(p.udp.src_port, 4000);
  EXPECT_EQ(p.udp.dst_port, 53);
  EXPECT_EQ(p.ttl, 64);
  std::span<const uint8_t> payload = p.payload(f);
  EXPECT_EQ(std::string(payload.begin(), payload.end()), "hello");
}

TEST(ParseFrameTest, UdpV6) {
  std::vector<uint8_t> f = FromHex(kGoldenUdp6);
  ParsedFrame p;
  ASSERT_EQ(ParseFrame(f, p), ParseError::kOk);
  EXPECT_EQ(p.l3, L3::kIpv6);
  EXPECT_EQ(p.l4, L4::kUdp);
  EXPECT_EQ(p.src.ToString(), "fd00::1");
  EXPECT_EQ(p.payload_length, 5u);
}

TEST(ParseFrameTest, EthernetPaddingIsIgnored) {
  std::vector<uint8_t> f = FromHex(kGoldenUdp4);
  f.resize(60, 0xee);  // minimum Ethernet frame, padded
  ParsedFrame p;
  ASSERT_EQ(ParseFrame(f, p), ParseError::kOk);
  EXPECT_EQ(p.payload_length, 5u);
  EXPECT_EQ(p.l4_length, 13u);
}

TEST(ParseFrameTest, UdpChecksumRules) {
  ParsedFrame p;
  std::vector<uint8_t> v4 = FromHex(kGoldenUdp4);
  v4.back() ^= 1;
  EXPECT_EQ(ParseFrame(v4, p), ParseError::kBadUdpChecksum);
  StoreBe16(&v4[40], 0);  // no checksum: allowed over IPv4
  EXPECT_EQ(ParseFrame(v4, p), ParseError::kOk);
  std::vector<uint8_t> v6 = FromHex(kGoldenUdp6);
  StoreBe16(&v6[60], 0);
  EXPECT_EQ(ParseFrame(v6, p), ParseError::kZeroUdpChecksumIpv6);
  v6 = FromHex(kGoldenUdp6);
  v6[30] ^= 0x10;  // a source address bit: the pseudo-header no longer matches
  EXPECT_EQ(ParseFrame(v6, p), ParseError::kBadUdpChecksum);
}

TEST(ParseFrameTest, UdpLengthRules) {
  ParsedFrame p;
  std::vector<uint8_t> f = FromHex(kGoldenUdp4);
  StoreBe16(&f[38], 7);
  EXPECT_EQ(ParseFrame(f, p), ParseError::kBadUdpLength);
  StoreBe16(&f[38], 14);  // one more than the IP payload
  EXPECT_EQ(ParseFrame(f, p), ParseError::kBadUdpLength);
  f = FromHex(kGoldenUdp4);
  f.resize(38);
  StoreBe16(&f[16], 24);  // IP total length still says 8 bytes of UDP; give it 4
  StoreBe16(&f[24], 0);
  StoreBe16(&f[24], Ipv4HeaderChecksum({f.data() + 14, 20}));
  EXPECT_EQ(ParseFrame(f, p), ParseError::kTruncatedUdp);
}

TEST(ParseFrameTest, VlanTaggedUdp) {
  uint8_t buf[128];
  LinkAddresses link = TestLink();
  link.vlan = VlanTag{kEtherTypeVlan, 42};
  UdpAddresses a{{*IpAddress::Parse("10.1.0.1"), 1}, {*IpAddress::Parse("10.1.0.2"), 2}};
  std::optional<size_t> n = BuildUdp(link, a, Bytes("v"), buf);
  ASSERT_TRUE(n.has_value());
  ParsedFrame p;
  ASSERT_EQ(ParseFrame({buf, *n}, p), ParseError::kOk);
  EXPECT_EQ(p.eth.vlan_count, 1);
  EXPECT_EQ(p.eth.vlans[0].vlan_id(), 42);
  EXPECT_EQ(p.l3_offset, 18u);
  EXPECT_EQ(p.l4, L4::kUdp);
}

TEST(ParseFrameTest, FragmentsAreRecognisedNotParsed) {
  std::vector<uint8_t> f = FromHex(kGoldenUdp4);
  StoreBe16(&f[20], 0x2000);  // MF
  StoreBe16(&f[24], 0);
  StoreBe16(&f[24], Ipv4HeaderChecksum({f.data() + 14, 20}));
  f.back() ^= 1;  // the UDP checksum cannot be checked on a fragment, and is not
  ParsedFrame p;
  ASSERT_EQ(ParseFrame(f, p), ParseError::kOk);
  EXPECT_TRUE(p.fragment);
  EXPECT_EQ(p.l4, L4::kNone);
}

TEST(ParseFrameTest, ArpAndOtherEthertypes) {
  std::vector<uint8_t> arp = FromHex(
      "ffffffffffff 020000000001 0806 0001 0800 06 04 0001 020000000001 0a010001 000000000000 "
      "0a010002");
  ParsedFrame p;
  ASSERT_EQ(ParseFrame(arp, p), ParseError::kOk);
  EXPECT_EQ(p.l3, L3::kArp);
  EXPECT_EQ(p.arp.target_ip.ToString(), "10.1.0.2");
  std::vector<uint8_t> lldp = FromHex("0180c200000e 020000000001 88cc 0000");
  ASSERT_EQ(ParseFrame(lldp, p), ParseError::kOk);
  EXPECT_EQ(p.l3, L3::kOther);
}

TEST(ParseFrameTest, TcpIsOtherNotAnError) {
  std::vector<uint8_t> f = FromHex(kGoldenUdp4);
  f[23] = kIpProtoTcp;
  StoreBe16(&f[24], 0);
  StoreBe16(&f[24], Ipv4HeaderChecksum({f.data() + 14, 20}));
  ParsedFrame p;
  ASSERT_EQ(ParseFrame(f, p), ParseError::kOk);
  EXPECT_EQ(p.l4, L4::kOther);
  EXPECT_EQ(p.protocol, kIpProtoTcp);
}

TEST(ParseFrameTest, IcmpEchoAndChecksum) {
  std::vector<uint8_t> f = FromHex(kGoldenEchoReply4);
  ParsedFrame p;
  ASSERT_EQ(ParseFrame(f, p), ParseError::kOk);
  EXPECT_EQ(p.l4, L4::kIcmpv4);
  EXPECT_EQ(p.icmp.type, kIcmpv4EchoReply);
  EXPECT_EQ(p.icmp.echo_id(), 0x1234);
  EXPECT_EQ(p.icmp.echo_sequence(), 5);
  EXPECT_EQ(p.payload_length, 8u);
  f.back() ^= 0x40;
  EXPECT_EQ(ParseFrame(f, p), ParseError::kBadIcmpChecksum);
}

TEST(ParseFrameTest, NeighbourAdvertisement) {
  std::vector<uint8_t> f = FromHex(kGoldenNa);
  ParsedFrame p;
  ASSERT_EQ(ParseFrame(f, p), ParseError::kOk);
  EXPECT_EQ(p.l4, L4::kIcmpv6);
  EXPECT_EQ(p.icmp.type, kIcmpv6NeighborAdvertisement);
  EXPECT_EQ(p.icmp.rest, NdpMessage::kFlagSolicited | NdpMessage::kFlagOverride);
  EXPECT_EQ(p.ndp.target.ToString(), "fd00::2");
  EXPECT_EQ(p.ndp.link_address->ToString(), "02:00:00:00:00:01");
}

TEST(ParseFrameTest, NdpMustNotBeRouted) {
  uint8_t buf[128];
  NdpMessage ns;
  ns.target = *IpAddress::Parse("fd00::2");
  IcmpHeader h;
  h.type = kIcmpv6NeighborSolicitation;
  uint8_t body[16];
  ByteWriter w(body);
  ns.Write(h.type, w);
  IpOptions routed;
  routed.ttl = 254;
  std::optional<size_t> n = BuildIcmp(TestLink(), *IpAddress::Parse("fd00::1"),
                                      SolicitedNodeMulticast(ns.target), h, body, buf, routed);
  ASSERT_TRUE(n.has_value());
  ParsedFrame p;
  EXPECT_EQ(ParseFrame({buf, *n}, p), ParseError::kBadNdpHopLimit);
}

}  // namespace
}  // namespace quadsock::net
