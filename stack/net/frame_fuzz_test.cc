// Fuzz-style tests of ParseFrame: random bytes, every truncation of valid frames, and random
// bit flips. The parser must return a verdict for each without reading out of bounds (run
// under --config=asan to check the "without") and must never accept a truncated UDP datagram.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "stack/net/frame.h"
#include "stack/net/frame_builder.h"
#include "stack/net/test_frames.h"

namespace quadsock::net {
namespace {

using testing::UdpFrame;

std::vector<std::vector<uint8_t>> ValidFrames() {
  std::vector<std::vector<uint8_t>> frames = {
      UdpFrame("10.1.0.1", 4000, "10.1.0.2", 53, "hello"),
      UdpFrame("fd00::1", 4000, "fd00::2", 53, std::string(300, 'x')),
      UdpFrame("10.1.0.1", 1, "10.1.0.2", 2, ""),
  };
  uint8_t buf[256];
  NdpMessage ns;
  ns.target = *IpAddress::Parse("fd00::2");
  ns.link_address = *MacAddress::Parse("02:00:00:00:00:01");
  std::optional<size_t> n = BuildNdp(testing::TestLink(), *IpAddress::Parse("fd00::1"),
                                     SolicitedNodeMulticast(ns.target),
                                     kIcmpv6NeighborSolicitation, ns, buf);
  frames.emplace_back(buf, buf + n.value());
  ArpPacket arp;
  arp.sender_ip = *IpAddress::Parse("10.1.0.1");
  arp.target_ip = *IpAddress::Parse("10.1.0.2");
  n = BuildArp(testing::TestLink(), arp, buf);
  frames.emplace_back(buf, buf + n.value());
  return frames;
}

TEST(FrameFuzzTest, EveryTruncationGetsAVerdict) {
  for (const std::vector<uint8_t>& frame : ValidFrames()) {
    ParsedFrame p;
    ASSERT_EQ(ParseFrame(frame, p), ParseError::kOk);
    const L4 full_l4 = p.l4;
    for (size_t len = 0; len < frame.size(); ++len) {
      // A copy of exactly `len` bytes, so that ASAN sees any read past it.
      std::vector<uint8_t> cut(frame.begin(), frame.begin() + len);
      ParseError e = ParseFrame(cut, p);
      if (full_l4 == L4::kUdp) {
        EXPECT_NE(e, ParseError::kOk) << "a truncated datagram was accepted at " << len;
      }
    }
  }
}

TEST(FrameFuzzTest, RandomBytes) {
  std::mt19937 rng(1234);
  int accepted = 0;
  for (int i = 0; i < 20000; ++i) {
    std::vector<uint8_t> bytes(rng() % 200);
    for (auto& b : bytes) b = static_cast<uint8_t>(rng());
    // Aim some at the interesting ethertypes.
    if (bytes.size() >= 14 && i % 2 == 0) {
      static constexpr uint16_t kTypes[] = {kEtherTypeIpv4, kEtherTypeIpv6, kEtherTypeArp,
                                            kEtherTypeVlan};
      const uint16_t t = kTypes[rng() % 4];
      bytes[12] = static_cast<uint8_t>(t >> 8);
      bytes[13] = static_cast<uint8_t>(t);
      if (bytes.size() > 14 && t == kEtherTypeIpv4) bytes[14] = 0x45;
      if (bytes.size() > 14 && t == kEtherTypeIpv6) bytes[14] = 0x60;
    }
    ParsedFrame p;
    if (ParseFrame(bytes, p) == ParseError::kOk) {
      ++accepted;
      ASSERT_LE(p.payload_offset + p.payload_length, bytes.size());
      ASSERT_LE(p.l4_offset + p.l4_length, bytes.size());
    }
  }
  EXPECT_GT(accepted, 0);  // some random frames are of "other" types and parse fine
}

TEST(FrameFuzzTest, BitFlipsNeverEscapeTheFrame) {
  std::mt19937 rng(99);
  for (const std::vector<uint8_t>& frame : ValidFrames()) {
    for (int i = 0; i < 3000; ++i) {
      std::vector<uint8_t> mutated = frame;
      const int flips = 1 + static_cast<int>(rng() % 4);
      for (int k = 0; k < flips; ++k) mutated[rng() % mutated.size()] ^= 1 << (rng() % 8);
      ParsedFrame p;
      if (ParseFrame(mutated, p) == ParseError::kOk) {
        ASSERT_LE(p.payload_offset + p.payload_length, mutated.size());
        ASSERT_LE(p.l4_offset + p.l4_length, mutated.size());
      }
    }
  }
}

// The fast path agrees with ParseFrame: whatever it accepts, ParseFrame accepts as untagged
// UDP over IPv4 or IPv6, not a fragment, with the same fields; and it accepts the plain
// datagrams.
void ExpectFastPathAgrees(const std::vector<uint8_t>& frame, int* accepted) {
  UdpFrameView v;
  if (!ParsePlainUdpFrame(frame, v)) return;
  ++*accepted;
  ParsedFrame p;
  ASSERT_EQ(ParseFrame(frame, p), ParseError::kOk);
  ASSERT_TRUE(p.l3 == L3::kIpv4 || p.l3 == L3::kIpv6);
  ASSERT_EQ(p.l4, L4::kUdp);
  ASSERT_EQ(p.eth.vlan_count, 0);
  ASSERT_FALSE(p.fragment);
  EXPECT_EQ(v.dst_mac, p.eth.dst);
  EXPECT_EQ(v.src, p.src);
  EXPECT_EQ(v.dst, p.dst);
  EXPECT_EQ(v.src_port, p.udp.src_port);
  EXPECT_EQ(v.dst_port, p.udp.dst_port);
  EXPECT_EQ(v.payload_offset, p.payload_offset);
  EXPECT_EQ(v.payload_length, p.payload_length);
}

TEST(FrameFuzzTest, FastPathAgreesWithParseFrame) {
  std::vector<std::vector<uint8_t>> frames = ValidFrames();
  std::vector<uint8_t> no_checksum = testing::UdpFrame("10.1.0.1", 9, "10.1.0.2", 53, "zero");
  no_checksum[14 + 20 + 6] = no_checksum[14 + 20 + 7] = 0;  // UDP over IPv4 may omit it
  frames.push_back(no_checksum);
  std::vector<uint8_t> padded = testing::UdpFrame("10.1.0.1", 9, "10.1.0.2", 53, "pad");
  padded.resize(padded.size() + 11, 0);  // Ethernet padding past the IP packet
  frames.push_back(padded);
  std::vector<uint8_t> v6_zero = testing::UdpFrame("fd00::1", 9, "fd00::2", 53, "zero");
  v6_zero[14 + 40 + 6] = v6_zero[14 + 40 + 7] = 0;  // mandatory over IPv6: an error
  UdpFrameView unused;
  EXPECT_FALSE(ParsePlainUdpFrame(v6_zero, unused));
  frames.push_back(v6_zero);
  int plain = 0;
  for (const std::vector<uint8_t>& f : frames) ExpectFastPathAgrees(f, &plain);
  EXPECT_EQ(plain, 5);  // the UDP datagrams of ValidFrames (two IPv4, one IPv6) and the two here
  std::mt19937 rng(77);
  int accepted = 0, tried = 0;
  for (const std::vector<uint8_t>& frame : frames) {
    for (size_t len = 0; len < frame.size(); ++len) {
      ExpectFastPathAgrees(std::vector<uint8_t>(frame.begin(), frame.begin() + len), &accepted);
    }
    for (int i = 0; i < 5000; ++i, ++tried) {
      std::vector<uint8_t> mutated = frame;
      const int flips = 1 + static_cast<int>(rng() % 3);
      for (int k = 0; k < flips; ++k) mutated[rng() % mutated.size()] ^= 1 << (rng() % 8);
      ExpectFastPathAgrees(mutated, &accepted);
      if (::testing::Test::HasFatalFailure()) return;
    }
  }
  EXPECT_GT(accepted, 0);  // mutations in the MACs, ports and payload are still datagrams
}

TEST(FrameFuzzTest, EveryErrorHasAName) {
  for (int i = 0; i < kParseErrorCount; ++i) {
    const std::string name = ParseErrorName(static_cast<ParseError>(i));
    EXPECT_FALSE(name.empty());
    EXPECT_NE(name, "unknown");
  }
}

}  // namespace
}  // namespace quadsock::net
