// The Internet checksum (RFC 1071) and its uses: the IPv4 header, UDP and ICMPv6 over the
// IPv4/IPv6 pseudo-header, and incremental updates (RFC 1624).
//
// Checksums are accumulated as a 32-bit one's-complement partial sum, then folded:
//
//   uint32_t sum = PseudoHeaderSum(src, dst, kIpProtoUdp, udp_length);
//   sum = ChecksumAdd(sum, udp_bytes);
//   uint16_t csum = ChecksumFinish(sum);   // 0 means the data verified (when it held a checksum)
#ifndef QUADSOCK_STACK_NET_CHECKSUM_H_
#define QUADSOCK_STACK_NET_CHECKSUM_H_

#include <cstdint>
#include <span>

#include "stack/net/address.h"

namespace quadsock::net {

// Adds `bytes` (as big-endian 16-bit words, an odd last byte padded with zero) to `sum`.
// The caller must add chunks at even offsets, as the checksum is over 16-bit words.
uint32_t ChecksumAdd(uint32_t sum, std::span<const uint8_t> bytes);
// Folds a partial sum and complements it: the value to store in a checksum field.
uint16_t ChecksumFinish(uint32_t sum);
// The sum of the pseudo-header of UDP/ICMPv6 over IPv4 (RFC 768) or IPv6 (RFC 8200 8.1).
// Source and destination must be of one family.
uint32_t PseudoHeaderSum(const IpAddress& src, const IpAddress& dst, uint8_t protocol,
                         uint32_t upper_length);

// The checksum to store in an IPv4 header whose checksum field is zero.
inline uint16_t Ipv4HeaderChecksum(std::span<const uint8_t> header) {
  return ChecksumFinish(ChecksumAdd(0, header));
}

// RFC 1624 eqn. 3: the new checksum after one 16-bit word of the data changed from `old_word`
// to `new_word`. Words are in host order, as read with LoadBe16.
uint16_t ChecksumUpdate16(uint16_t checksum, uint16_t old_word, uint16_t new_word);
// The same for a 32-bit field (two words), such as an IPv4 address.
uint16_t ChecksumUpdate32(uint16_t checksum, uint32_t old_value, uint32_t new_value);

}  // namespace quadsock::net

#endif  // QUADSOCK_STACK_NET_CHECKSUM_H_
