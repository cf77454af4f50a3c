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

TEST(FrameFuzzTest, EveryErrorHasAName) {
  for (int i = 0; i < kParseErrorCount; ++i) {
    const std::string name = ParseErrorName(static_cast<ParseError>(i));
    EXPECT_FALSE(name.empty());
    EXPECT_NE(name, "unknown");
  }
}

}  // namespace
}  // namespace quadsock::net
