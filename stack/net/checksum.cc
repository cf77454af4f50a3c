#include "stack/net/checksum.h"

#include "stack/net/bytes.h"

namespace quadsock::net {

uint32_t ChecksumAdd(uint32_t sum, std::span<const uint8_t> bytes) {
  uint64_t acc = sum;  // 64 bits: no carry is lost for any frame size
  size_t i = 0;
  // Big-endian 32-bit words: each is hi * 2^16 + lo, and 2^16 = 1 in one's complement
  // arithmetic (mod 2^16 - 1), so they add up to the same folded sum as the 16-bit words.
  for (; i + 3 < bytes.size(); i += 4) acc += LoadBe32(&bytes[i]);
  for (; i + 1 < bytes.size(); i += 2) acc += LoadBe16(&bytes[i]);
  if (i < bytes.size()) acc += uint32_t{bytes[i]} << 8;
  while (acc >> 16) acc = (acc & 0xffff) + (acc >> 16);  // the same folded sum either way
  return static_cast<uint32_t>(acc);
}

uint16_t ChecksumFinish(uint32_t sum) {
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  return static_cast<uint16_t>(~sum);
}

uint32_t PseudoHeaderSum(const IpAddress& src, const IpAddress& dst, uint8_t protocol,
                         uint32_t upper_length) {
  uint32_t sum = ChecksumAdd(0, {src.data(), src.size()});
  sum = ChecksumAdd(sum, {dst.data(), dst.size()});
  uint64_t acc = sum;
  acc += protocol;
  acc += upper_length >> 16;
  acc += upper_length & 0xffff;
  while (acc >> 32) acc = (acc & 0xffffffff) + (acc >> 32);
  return static_cast<uint32_t>(acc);
}

uint16_t ChecksumUpdate16(uint16_t checksum, uint16_t old_word, uint16_t new_word) {
  // HC' = ~(~HC + ~m + m')
  uint32_t sum = static_cast<uint16_t>(~checksum);
  sum += static_cast<uint16_t>(~old_word);
  sum += new_word;
  return ChecksumFinish(sum);
}

uint16_t ChecksumUpdate32(uint16_t checksum, uint32_t old_value, uint32_t new_value) {
  checksum = ChecksumUpdate16(checksum, old_value >> 16, new_value >> 16);
  return ChecksumUpdate16(checksum, old_value & 0xffff, new_value & 0xffff);
}

}  // namespace quadsock::net
