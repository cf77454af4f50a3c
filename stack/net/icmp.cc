#include "stack/net/icmp.h"

#include "stack/net/ip.h"

namespace quadsock::net {
namespace {

// ICMPv4 queries and their replies (RFC 792, RFC 950): the messages that are not errors.
constexpr bool IsIcmpv4Query(uint8_t type) {
  constexpr uint8_t kTimestamp = 13, kAddressMaskReply = 18;  // 13-18: the three pairs
  return type == kIcmpv4EchoReply || type == kIcmpv4EchoRequest ||
         (type >= kTimestamp && type <= kAddressMaskReply);
}

}  // namespace

bool IcmpErrorAllowedAbout(std::span<const uint8_t> packet) {
  if (packet.empty()) return false;
  if (packet[0] >> 4 == 4) {
    if (packet.size() < Ipv4Header::kMinSize) return false;
    if ((LoadBe16(&packet[6]) & 0x1fff) != 0) return false;  // a later fragment
    if (packet[9] != kIpProtoIcmp) return true;
    const size_t icmp = size_t{packet[0] & 0x0fu} * 4;
    return icmp < packet.size() && IsIcmpv4Query(packet[icmp]);
  }
  if (packet[0] >> 4 != 6 || packet.size() < Ipv6Header::kSize) return false;
  uint8_t next = packet[6];
  size_t at = Ipv6Header::kSize;
  for (int i = 0; i <= Ipv6Header::kMaxExtensionHeaders; ++i) {
    if (next == kIpProtoIcmpv6) {
      // Types 0-127 are errors, 128-255 informational (RFC 4443 2.1).
      return at < packet.size() && packet[at] >= 128;
    }
    if (!IsIpv6ExtensionHeader(next)) return true;
    if (packet.size() - at < 8) return false;  // every extension header has at least 8 bytes
    if (next == kIpProtoFragment && (LoadBe16(&packet[at + 2]) & 0xfff8) != 0) {
      return false;  // a later fragment
    }
    const size_t length = Ipv6ExtensionHeaderLength(next, packet[at + 1]);
    next = packet[at];
    at += length;
    if (at > packet.size()) return false;
  }
  return false;
}

ParseError IcmpQuote::Parse(bool v6, ByteReader& r) {
  // Every read below fails on a quote that ends early: a bad quote, never a read past it.
  uint8_t version_ihl = 0;
  if (!r.ReadU8(version_ihl) || (version_ihl >> 4) != (v6 ? 6 : 4)) {
    return ParseError::kBadIcmpQuote;
  }
  uint8_t addr[16];
  if (v6) {
    // The rest of version, class and flow label (3 bytes), payload length (2), next header
    // (1), hop limit (1), source, destination.
    if (!r.Skip(3 + 2) || !r.ReadU8(protocol) || !r.Skip(1) || !r.ReadBytes(addr, 16)) {
      return ParseError::kBadIcmpQuote;
    }
    src = IpAddress::V6Bytes(addr);
    if (!r.ReadBytes(addr, 16)) return ParseError::kBadIcmpQuote;
    dst = IpAddress::V6Bytes(addr);
  } else {
    const size_t header_length = size_t{version_ihl & 0x0fu} * 4;
    // TOS (1), total length (2), id (2), flags and fragment offset (2), TTL (1), protocol,
    // checksum (2), source, destination, options.
    if (header_length < Ipv4Header::kMinSize || !r.Skip(1 + 2 + 2 + 2 + 1) || !r.ReadU8(protocol) ||
        !r.Skip(2) || !r.ReadBytes(addr, 4)) {
      return ParseError::kBadIcmpQuote;
    }
    src = IpAddress::V4Bytes(addr);
    if (!r.ReadBytes(addr, 4) || !r.Skip(header_length - Ipv4Header::kMinSize)) {
      return ParseError::kBadIcmpQuote;
    }
    dst = IpAddress::V4Bytes(addr);
  }
  if (r.remaining() < kTransportBytes || !r.ReadU16(src_port) || !r.ReadU16(dst_port)) {
    return ParseError::kBadIcmpQuote;
  }
  return ParseError::kOk;
}

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
