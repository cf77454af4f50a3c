#include "stack/net/ip.h"

#include <gtest/gtest.h>

#include "stack/net/checksum.h"
#include "stack/net/test_frames.h"

namespace quadsock::net {
namespace {

using testing::FromHex;

// 20-byte header, total length 28 (8 bytes of UDP), TTL 64, UDP, 10.1.0.1 -> 10.1.0.2.
std::vector<uint8_t> Ipv4Packet(const std::string& first_bytes = "45") {
  std::vector<uint8_t> p = FromHex(first_bytes + "00 001c 1234 4000 40 11 0000 0a010001 0a010002"
                                   "0001 0002 0008 0000");
  StoreBe16(&p[10], Ipv4HeaderChecksum({p.data(), 20}));
  return p;
}

TEST(Ipv4Test, ParsesHeader) {
  std::vector<uint8_t> p = Ipv4Packet();
  ByteReader r(p);
  Ipv4Header ip;
  ASSERT_EQ(ip.Parse(r), ParseError::kOk);
  EXPECT_EQ(ip.header_length, 20);
  EXPECT_EQ(ip.total_length, 28);
  EXPECT_EQ(ip.id, 0x1234);
  EXPECT_TRUE(ip.dont_fragment);
  EXPECT_FALSE(ip.is_fragment());
  EXPECT_EQ(ip.ttl, 64);
  EXPECT_EQ(ip.protocol, kIpProtoUdp);
  EXPECT_EQ(ip.src.ToString(), "10.1.0.1");
  EXPECT_EQ(ip.dst.ToString(), "10.1.0.2");
  EXPECT_EQ(r.offset(), 20u);
}

TEST(Ipv4Test, SkipsOptions) {
  // IHL 6: four bytes of options (NOP NOP NOP EOL).
  std::vector<uint8_t> p =
      FromHex("46 00 0020 0000 0000 40 11 0000 0a010001 0a010002 01010100 0001 0002 0008 0000");
  StoreBe16(&p[10], Ipv4HeaderChecksum({p.data(), 24}));
  ByteReader r(p);
  Ipv4Header ip;
  ASSERT_EQ(ip.Parse(r), ParseError::kOk);
  EXPECT_EQ(ip.header_length, 24);
  EXPECT_EQ(r.offset(), 24u);
}

TEST(Ipv4Test, RecognisesFragments) {
  std::vector<uint8_t> p = Ipv4Packet();
  StoreBe16(&p[6], 0x2000);  // MF, offset 0: the first fragment
  StoreBe16(&p[10], 0);
  StoreBe16(&p[10], Ipv4HeaderChecksum({p.data(), 20}));
  ByteReader r(p);
  Ipv4Header ip;
  ASSERT_EQ(ip.Parse(r), ParseError::kOk);
  EXPECT_TRUE(ip.is_fragment());
  StoreBe16(&p[6], 0x0010);  // a later fragment, offset 16*8
  StoreBe16(&p[10], 0);
  StoreBe16(&p[10], Ipv4HeaderChecksum({p.data(), 20}));
  ByteReader r2(p);
  ASSERT_EQ(ip.Parse(r2), ParseError::kOk);
  EXPECT_TRUE(ip.is_fragment());
  EXPECT_EQ(ip.fragment_offset, 16);
}

TEST(Ipv4Test, NamesEachMalformation) {
  Ipv4Header ip;
  {
    std::vector<uint8_t> p = Ipv4Packet("65");
    ByteReader r(p);
    EXPECT_EQ(ip.Parse(r), ParseError::kBadIpv4Version);
  }
  {
    std::vector<uint8_t> p = Ipv4Packet("44");
    ByteReader r(p);
    EXPECT_EQ(ip.Parse(r), ParseError::kBadIpv4HeaderLength);
  }
  {
    std::vector<uint8_t> p = Ipv4Packet("4f");  // 60-byte header in a 28-byte packet
    ByteReader r(p);
    EXPECT_EQ(ip.Parse(r), ParseError::kTruncatedIpv4);
  }
  {
    std::vector<uint8_t> p = Ipv4Packet();
    p.resize(19);
    ByteReader r(p);
    EXPECT_EQ(ip.Parse(r), ParseError::kTruncatedIpv4);
  }
  for (uint16_t total : {uint16_t{19}, uint16_t{29}, uint16_t{0xffff}}) {
    std::vector<uint8_t> p = Ipv4Packet();
    StoreBe16(&p[2], total);
    StoreBe16(&p[10], 0);
    StoreBe16(&p[10], Ipv4HeaderChecksum({p.data(), 20}));
    ByteReader r(p);
    EXPECT_EQ(ip.Parse(r), ParseError::kBadIpv4TotalLength) << total;
  }
  {
    std::vector<uint8_t> p = Ipv4Packet();
    p[8] = 63;  // TTL changed, checksum not
    ByteReader r(p);
    EXPECT_EQ(ip.Parse(r), ParseError::kBadIpv4Checksum);
  }
}

// A UDP packet whose header carries `options` (hex, a multiple of four bytes).
std::vector<uint8_t> Ipv4WithOptions(const std::string& options) {
  const std::vector<uint8_t> o = FromHex(options);
  std::vector<uint8_t> p = Ipv4Packet();
  p.insert(p.begin() + 20, o.begin(), o.end());
  p[0] = static_cast<uint8_t>(0x40 | (20 + o.size()) / 4);
  StoreBe16(&p[2], static_cast<uint16_t>(p.size()));
  StoreBe16(&p[10], 0);
  StoreBe16(&p[10], Ipv4HeaderChecksum({p.data(), 20 + o.size()}));
  return p;
}

ParseError ParseIpv4(const std::vector<uint8_t>& p) {
  ByteReader r(p);
  Ipv4Header ip;
  return ip.Parse(r);
}

TEST(Ipv4Test, ChecksEachOptionsLength) {
  EXPECT_EQ(ParseIpv4(Ipv4WithOptions("0701 0000")), ParseError::kBadIpv4Option);  // < 2
  EXPECT_EQ(ParseIpv4(Ipv4WithOptions("0700 0000")), ParseError::kBadIpv4Option);
  EXPECT_EQ(ParseIpv4(Ipv4WithOptions("0109 0400")), ParseError::kBadIpv4Option);  // past the end
  EXPECT_EQ(ParseIpv4(Ipv4WithOptions("0101 0107")), ParseError::kBadIpv4Option);  // no length
  // Record route (7), length 7, pointer 4, one empty slot; then End: fine.
  EXPECT_EQ(ParseIpv4(Ipv4WithOptions("0707 0400 0000 0000")), ParseError::kOk);
  // After End of Option List the rest is padding, not options.
  EXPECT_EQ(ParseIpv4(Ipv4WithOptions("00ff ffff")), ParseError::kOk);
}

TEST(Ipv4Test, RefusesSourceRoutesNamingAFurtherHop) {
  for (const char* type : {"83", "89"}) {  // LSRR, SSRR
    SCOPED_TRACE(type);
    const std::string t(type);
    // Length 11: two addresses. Pointer 4 and 8 name one still to visit; 12 is past the end.
    EXPECT_EQ(ParseIpv4(Ipv4WithOptions("01" + t + "0b04 0a010009 0a010002")),
              ParseError::kIpv4SourceRoute);
    EXPECT_EQ(ParseIpv4(Ipv4WithOptions("01" + t + "0b08 0a010009 0a010002")),
              ParseError::kIpv4SourceRoute);
    EXPECT_EQ(ParseIpv4(Ipv4WithOptions("01" + t + "0b0c 0a010009 0a010002")), ParseError::kOk);
    EXPECT_EQ(ParseIpv4(Ipv4WithOptions("01" + t + "0b03 0a010009 0a010002")),
              ParseError::kBadIpv4Option);  // a pointer before the first address
    EXPECT_EQ(ParseIpv4(Ipv4WithOptions("0101" + t + "02")), ParseError::kBadIpv4Option);
  }
}

TEST(Ipv4Test, WriteRoundTrips) {
  Ipv4Header ip;
  ip.total_length = 20;
  ip.id = 7;
  ip.ttl = 3;
  ip.protocol = kIpProtoIcmp;
  ip.src = *IpAddress::Parse("192.0.2.1");
  ip.dst = *IpAddress::Parse("192.0.2.2");
  uint8_t buf[20];
  ByteWriter w(buf);
  ip.Write(w);
  ASSERT_TRUE(w.ok());
  ByteReader r(buf);
  Ipv4Header back;
  ASSERT_EQ(back.Parse(r), ParseError::kOk);
  EXPECT_EQ(back.src, ip.src);
  EXPECT_EQ(back.dst, ip.dst);
  EXPECT_EQ(back.ttl, 3);
  EXPECT_EQ(back.id, 7);
  EXPECT_TRUE(back.dont_fragment);
}

std::vector<uint8_t> Ipv6Packet(const std::string& next_header, const std::string& payload) {
  std::vector<uint8_t> p = FromHex("6000 0000 0000" + next_header + "40" +
                                   "fd000000000000000000000000000001"
                                   "fd000000000000000000000000000002" +
                                   payload);
  StoreBe16(&p[4], static_cast<uint16_t>(p.size() - 40));
  return p;
}

TEST(Ipv6Test, ParsesFixedHeader) {
  std::vector<uint8_t> p = Ipv6Packet("11", "0001 0002 0008 0000");
  p[1] = 0x12;  // traffic class low nibble and flow label
  ByteReader r(p);
  Ipv6Header ip;
  ASSERT_EQ(ip.Parse(r), ParseError::kOk);
  EXPECT_EQ(ip.payload_length, 8);
  EXPECT_EQ(ip.upper_protocol, kIpProtoUdp);
  EXPECT_EQ(ip.upper_offset, 40);
  EXPECT_EQ(ip.upper_naming, 6);  // the fixed header's Next Header
  EXPECT_EQ(ip.hop_limit, 64);
  EXPECT_EQ(ip.traffic_class, 0x01);
  EXPECT_EQ(ip.flow_label, 0x20000u);
  EXPECT_EQ(ip.src.ToString(), "fd00::1");
  EXPECT_EQ(r.offset(), 40u);
}

TEST(Ipv6Test, WalksExtensionHeaders) {
  // Hop-by-hop (8 bytes) -> destination options (16 bytes) -> UDP.
  std::vector<uint8_t> p = Ipv6Packet(
      "00", "3c00 0104 00000000  1101 0106 00000000 00000000 00000000  0001 0002 0008 0000");
  ByteReader r(p);
  Ipv6Header ip;
  ASSERT_EQ(ip.Parse(r), ParseError::kOk);
  EXPECT_EQ(ip.extension_count, 2);
  EXPECT_EQ(ip.upper_protocol, kIpProtoUdp);
  EXPECT_EQ(ip.upper_offset, 40 + 8 + 16);
  EXPECT_EQ(ip.upper_naming, 40 + 8);  // the destination options header's Next Header
  EXPECT_FALSE(ip.is_fragment());
  EXPECT_EQ(r.offset(), 64u);
}

TEST(Ipv6Test, RecognisesFragmentsButNotAtomicOnes) {
  std::vector<uint8_t> frag = Ipv6Packet("2c", "1100 0001 12345678 0001 0002 0008 0000");
  ByteReader r(frag);
  Ipv6Header ip;
  ASSERT_EQ(ip.Parse(r), ParseError::kOk);
  EXPECT_TRUE(ip.is_fragment());
  std::vector<uint8_t> atomic = Ipv6Packet("2c", "1100 0000 12345678 0001 0002 0008 0000");
  ByteReader r2(atomic);
  ASSERT_EQ(ip.Parse(r2), ParseError::kOk);
  EXPECT_FALSE(ip.is_fragment());
  EXPECT_EQ(ip.upper_protocol, kIpProtoUdp);
}

TEST(Ipv6Test, BoundsTheWalk) {
  std::string chain;
  for (int i = 0; i < 9; ++i) chain += "3c00 0104 00000000 ";
  std::vector<uint8_t> p = Ipv6Packet("3c", chain + "0001 0002 0008 0000");
  ByteReader r(p);
  Ipv6Header ip;
  EXPECT_EQ(ip.Parse(r), ParseError::kTooManyIpv6ExtensionHeaders);
}

TEST(Ipv6Test, NamesEachMalformation) {
  Ipv6Header ip;
  {
    std::vector<uint8_t> p = Ipv6Packet("11", "0001 0002 0008 0000");
    p[0] = 0x40;
    ByteReader r(p);
    EXPECT_EQ(ip.Parse(r), ParseError::kBadIpv6Version);
  }
  {
    std::vector<uint8_t> p = Ipv6Packet("11", "0001 0002 0008 0000");
    p.resize(39);
    ByteReader r(p);
    EXPECT_EQ(ip.Parse(r), ParseError::kTruncatedIpv6);
  }
  {
    std::vector<uint8_t> p = Ipv6Packet("11", "0001 0002 0008 0000");
    StoreBe16(&p[4], 9);
    ByteReader r(p);
    EXPECT_EQ(ip.Parse(r), ParseError::kBadIpv6PayloadLength);
  }
  {
    // A destination-options header claiming 16 bytes in an 8-byte payload.
    std::vector<uint8_t> p = Ipv6Packet("3c", "1101 0000 00000000");
    ByteReader r(p);
    EXPECT_EQ(ip.Parse(r), ParseError::kTruncatedIpv6ExtensionHeader);
  }
  {
    std::vector<uint8_t> p = Ipv6Packet("00", "11");
    ByteReader r(p);
    EXPECT_EQ(ip.Parse(r), ParseError::kTruncatedIpv6ExtensionHeader);
  }
}

// RFC 8200 4.2: an unrecognised option is skipped (type 00xxxxxx), discards the packet silently
// (01), or discards it and asks for a Parameter Problem code 2 pointing at the option's type
// (10, and 11 unless the destination is multicast). Options in a destination options header
// are read the same way.
TEST(Ipv6Test, UnrecognisedOptionsDoWhatTheirTypeSays) {
  for (const char* header : {"00", "3c"}) {
    SCOPED_TRACE(header);
    const struct {
      const char* type;
      ParseError error;
      bool problem;
    } cases[] = {
        {"1e", ParseError::kOk, false},
        {"5e", ParseError::kIpv6UnrecognizedOption, false},
        {"9e", ParseError::kIpv6UnrecognizedOption, true},
        {"de", ParseError::kIpv6UnrecognizedOption, true},
    };
    for (const auto& c : cases) {
      SCOPED_TRACE(c.type);
      // Pad1, the option (2 bytes of data), Pad1.
      std::vector<uint8_t> p =
          Ipv6Packet(header, std::string("1100 00") + c.type + "02 0000 00 0001 0002 0008 0000");
      ByteReader r(p);
      Ipv6Header ip;
      EXPECT_EQ(ip.Parse(r), c.error);
      EXPECT_EQ(ip.problem.asked, c.problem);
      if (c.problem) {
        EXPECT_EQ(ip.problem.code, 2);
        EXPECT_EQ(ip.problem.pointer, 40u + 3);
      }
      // To a multicast group, type 11 asks for no Parameter Problem.
      p[24] = 0xff;
      ByteReader r2(p);
      EXPECT_EQ(ip.Parse(r2), c.error);
      EXPECT_EQ(ip.problem.asked, c.type == std::string("9e"));
    }
  }
}

TEST(Ipv6Test, AnOptionPastItsHeaderIsMalformed) {
  // PadN claiming 8 bytes in a header with 6 left.
  std::vector<uint8_t> p = Ipv6Packet("00", "1100 0108 00000000 0001 0002 0008 0000");
  ByteReader r(p);
  Ipv6Header ip;
  EXPECT_EQ(ip.Parse(r), ParseError::kBadIpv6Option);
  // An option type in the header's last byte, with no room for its length.
  std::vector<uint8_t> q = Ipv6Packet("00", "1100 0103 000000 1e 0001 0002 0008 0000");
  ByteReader r2(q);
  EXPECT_EQ(ip.Parse(r2), ParseError::kBadIpv6Option);
}

// A routing header with segments left is for further hops: we route nothing, and every type is
// one we do not process (type 0 is deprecated, RFC 5095): Parameter Problem code 0 pointing at
// the routing type (RFC 8200 4.4). With no segments left it is ignored.
TEST(Ipv6Test, RoutingHeaderWithSegmentsLeftIsNotForUs) {
  for (const char* type : {"00", "02", "04", "fe"}) {
    SCOPED_TRACE(type);
    std::vector<uint8_t> p =
        Ipv6Packet("2b", std::string("1100 ") + type + "01 00000000 0001 0002 0008 0000");
    ByteReader r(p);
    Ipv6Header ip;
    EXPECT_EQ(ip.Parse(r), ParseError::kIpv6RoutingHeader);
    EXPECT_TRUE(ip.problem.asked);
    EXPECT_EQ(ip.problem.code, 0);
    EXPECT_EQ(ip.problem.pointer, 40u + 2);
    std::vector<uint8_t> done =
        Ipv6Packet("2b", std::string("1100 ") + type + "00 00000000 0001 0002 0008 0000");
    ByteReader r2(done);
    EXPECT_EQ(ip.Parse(r2), ParseError::kOk);
    EXPECT_EQ(ip.upper_protocol, kIpProtoUdp);
  }
}

TEST(Ipv6Test, HopByHopOnlyRightAfterTheFixedHeader) {
  // Destination options (8 bytes), then hop-by-hop: Parameter Problem code 1 (an unrecognised
  // Next Header) pointing at the destination options' Next Header field.
  std::vector<uint8_t> p =
      Ipv6Packet("3c", "0000 0104 00000000  1100 0104 00000000  0001 0002 0008 0000");
  ByteReader r(p);
  Ipv6Header ip;
  EXPECT_EQ(ip.Parse(r), ParseError::kIpv6HopByHopNotFirst);
  EXPECT_TRUE(ip.problem.asked);
  EXPECT_EQ(ip.problem.code, 1);
  EXPECT_EQ(ip.problem.pointer, 40u);
}

// Past a Fragment header that is not an atomic fragment the bytes are payload: the walk stops.
TEST(Ipv6Test, TheWalkStopsAtAFragment) {
  // A later fragment whose payload would read as a destination options header of 2 KiB.
  std::vector<uint8_t> p = Ipv6Packet("2c", "3c00 0011 12345678  11ff 0000 00000000");
  ByteReader r(p);
  Ipv6Header ip;
  ASSERT_EQ(ip.Parse(r), ParseError::kOk);
  EXPECT_TRUE(ip.is_fragment());
  EXPECT_EQ(ip.upper_protocol, kIpProtoDestOptions);
  EXPECT_EQ(ip.upper_offset, 48);
  EXPECT_EQ(ip.extension_count, 1);
}

TEST(Ipv6Test, NoNextHeaderHasNoUpperLayer) {
  std::vector<uint8_t> p = Ipv6Packet("3b", "");
  ByteReader r(p);
  Ipv6Header ip;
  ASSERT_EQ(ip.Parse(r), ParseError::kOk);
  EXPECT_EQ(ip.upper_protocol, kIpProtoNoNext);
}

}  // namespace
}  // namespace quadsock::net
