#include "stack/net/icmp.h"

namespace quadsock::net {

ParseError NdpMessage::Parse(uint8_t icmp_type, ByteReader& r) {
  uint8_t addr[16];
  if (!r.ReadBytes(addr, 16)) return ParseError::kBadNdpMessage;
  target = IpAddress::V6Bytes(addr);
  link_address.reset();
  const uint8_t wanted = icmp_type == kIcmpv6NeighborSolicitation ? kNdpOptionSourceLinkAddress
                                                                  : kNdpOptionTargetLinkAddress;
  while (r.remaining() > 0) {
    const std::span<const uint8_t> option = r.rest();
    if (option.size() < 2 || option[1] == 0 || option[1] * size_t{8} > option.size()) {
      return ParseError::kBadNdpOption;
    }
    if (option[0] == wanted && option[1] == 1) {
      link_address = MacAddress::FromBytes(&option[2]);
    }
    r.Skip(option[1] * size_t{8});
  }
  return ParseError::kOk;
}

void NdpMessage::Write(uint8_t icmp_type, ByteWriter& w) const {
  w.WriteBytes(target.bytes16().data(), 16);
  if (!link_address.has_value()) return;
  w.WriteU8(icmp_type == kIcmpv6NeighborSolicitation ? kNdpOptionSourceLinkAddress
                                                     : kNdpOptionTargetLinkAddress);
  w.WriteU8(1);  // in units of 8 bytes
  w.WriteBytes(link_address->bytes().data(), 6);
}

}  // namespace quadsock::net
