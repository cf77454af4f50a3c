#include "stack/net/checksum.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <span>
#include <vector>

#include "stack/net/bytes.h"
#include "stack/net/test_frames.h"

namespace quadsock::net {
namespace {

using testing::FromHex;

TEST(ChecksumTest, Rfc1071Example) {
  // RFC 1071 section 3: the sum of these words is ddf2 (folded).
  std::vector<uint8_t> data = FromHex("0001f203f4f5f6f7");
  EXPECT_EQ(ChecksumFinish(ChecksumAdd(0, data)), static_cast<uint16_t>(~0xddf2));
}

TEST(ChecksumTest, KnownIpv4Header) {
  std::vector<uint8_t> header = FromHex("4500 0073 0000 4000 4011 0000 c0a8 0001 c0a8 00c7");
  EXPECT_EQ(Ipv4HeaderChecksum(header), 0xb861);
  StoreBe16(&header[10], 0xb861);
  EXPECT_EQ(ChecksumFinish(ChecksumAdd(0, header)), 0) << "a header with its checksum sums to 0";
}

TEST(ChecksumTest, OddLengthPadsWithZero) {
  std::vector<uint8_t> odd = {0x12, 0x34, 0x56};
  std::vector<uint8_t> even = {0x12, 0x34, 0x56, 0x00};
  EXPECT_EQ(ChecksumAdd(0, odd), ChecksumAdd(0, even));
}

TEST(ChecksumTest, ChunksAtEvenOffsetsAddUp) {
  std::vector<uint8_t> data(1001);
  std::mt19937 rng(7);
  for (auto& b : data) b = static_cast<uint8_t>(rng());
  const std::span<const uint8_t> all(data);
  EXPECT_EQ(ChecksumFinish(ChecksumAdd(ChecksumAdd(0, all.first(500)), all.subspan(500))),
            ChecksumFinish(ChecksumAdd(0, all)));
}

TEST(ChecksumTest, LargeBuffersDoNotLoseCarries) {
  std::vector<uint8_t> data(65534, 0xff);
  // The sum of all-ones words is all ones: checksum 0 (or, in one's complement, negative zero).
  EXPECT_EQ(ChecksumFinish(ChecksumAdd(0, data)), 0);
}

// RFC 1071 word by word, as the definition reads: the reference for ChecksumAdd.
uint32_t ReferenceSum(uint32_t sum, std::span<const uint8_t> bytes) {
  uint64_t acc = sum;
  for (size_t i = 0; i < bytes.size(); i += 2) {
    acc += uint32_t{bytes[i]} << 8 | (i + 1 < bytes.size() ? bytes[i + 1] : 0);
  }
  while (acc >> 16) acc = (acc & 0xffff) + (acc >> 16);
  return static_cast<uint32_t>(acc);
}

TEST(ChecksumTest, MatchesWordByWordSumForEveryLengthAndAlignment) {
  std::mt19937 rng(11);
  std::vector<uint8_t> data(300);
  for (int round = 0; round < 20; ++round) {
    for (auto& b : data) b = static_cast<uint8_t>(rng());
    if (round == 0) std::fill(data.begin(), data.end(), 0xff);  // every word all ones
    if (round == 1) std::fill(data.begin(), data.end(), 0);
    for (size_t start = 0; start < 8; ++start) {  // the words need not be aligned in memory
      for (size_t length = 0; length + start <= 200; ++length) {
        const std::span<const uint8_t> bytes(data.data() + start, length);
        for (uint32_t sum : {0u, 1u, 0xffffu, 0x1234abcdu, 0xffffffffu, uint32_t(rng())}) {
          ASSERT_EQ(ChecksumFinish(ChecksumAdd(sum, bytes)),
                    ChecksumFinish(ReferenceSum(sum, bytes)))
              << "round " << round << " start " << start << " length " << length << " sum " << sum;
        }
      }
    }
  }
}

TEST(ChecksumTest, PseudoHeaderV4MatchesManualSum) {
  IpAddress src = *IpAddress::Parse("192.168.0.1");
  IpAddress dst = *IpAddress::Parse("192.168.0.199");
  std::vector<uint8_t> manual = FromHex("c0a80001 c0a800c7 0011 0010");
  EXPECT_EQ(ChecksumFinish(PseudoHeaderSum(src, dst, 17, 16)),
            ChecksumFinish(ChecksumAdd(0, manual)));
}

TEST(ChecksumTest, PseudoHeaderV6MatchesManualSum) {
  IpAddress src = *IpAddress::Parse("fd00::1");
  IpAddress dst = *IpAddress::Parse("fd00::2");
  std::vector<uint8_t> manual =
      FromHex("fd000000000000000000000000000001 fd000000000000000000000000000002 "
              "00010000 0000003a");
  EXPECT_EQ(ChecksumFinish(PseudoHeaderSum(src, dst, 58, 0x10000)),
            ChecksumFinish(ChecksumAdd(0, manual)));
}

TEST(ChecksumTest, IncrementalUpdateMatchesRecompute) {
  std::mt19937 rng(42);
  for (int trial = 0; trial < 2000; ++trial) {
    std::vector<uint8_t> data(20);
    for (auto& b : data) b = static_cast<uint8_t>(rng());
    StoreBe16(&data[10], 0);
    const uint16_t before = Ipv4HeaderChecksum(data);
    // Change a 16-bit word and a 32-bit field, as NAT or a TTL decrement would.
    const uint16_t old16 = LoadBe16(&data[8]);
    const uint16_t new16 = static_cast<uint16_t>(rng());
    StoreBe16(&data[8], new16);
    const uint32_t old32 = LoadBe32(&data[12]);
    const uint32_t new32 = static_cast<uint32_t>(rng());
    StoreBe32(&data[12], new32);
    uint16_t updated = ChecksumUpdate16(before, old16, new16);
    updated = ChecksumUpdate32(updated, old32, new32);
    const uint16_t recomputed = Ipv4HeaderChecksum(data);
    // 0x0000 and 0xffff are the same value in one's complement.
    EXPECT_TRUE(updated == recomputed || (updated ^ recomputed) == 0xffff)
        << "trial " << trial << ": " << updated << " vs " << recomputed;
  }
}

}  // namespace
}  // namespace quadsock::net
