#include "stack/net/ip.h"

#include "stack/net/checksum.h"

namespace quadsock::net {

ParseError Ipv4Header::Parse(ByteReader& r) {
  const std::span<const uint8_t> packet = r.rest();
  uint8_t version_ihl, ttl_byte, proto;
  uint16_t flags_offset;
  uint8_t addr[8];
  if (!r.ReadU8(version_ihl) || !r.ReadU8(tos) || !r.ReadU16(total_length) || !r.ReadU16(id) ||
      !r.ReadU16(flags_offset) || !r.ReadU8(ttl_byte) || !r.ReadU8(proto) ||
      !r.ReadU16(checksum) || !r.ReadBytes(addr, 8)) {
    return ParseError::kTruncatedIpv4;
  }
  if ((version_ihl >> 4) != 4) return ParseError::kBadIpv4Version;
  header_length = static_cast<uint8_t>((version_ihl & 0x0f) * 4);
  if (header_length < kMinSize) return ParseError::kBadIpv4HeaderLength;
  if (header_length > packet.size()) return ParseError::kTruncatedIpv4;
  if (total_length < header_length || total_length > packet.size()) {
    return ParseError::kBadIpv4TotalLength;
  }
  if (ChecksumFinish(ChecksumAdd(0, packet.first(header_length))) != 0) {
    return ParseError::kBadIpv4Checksum;
  }
  dont_fragment = flags_offset & 0x4000;
  more_fragments = flags_offset & 0x2000;
  fragment_offset = flags_offset & 0x1fff;
  ttl = ttl_byte;
  protocol = proto;
  src = IpAddress::V4Bytes(addr);
  dst = IpAddress::V4Bytes(addr + 4);
  r.Skip(header_length - kMinSize);  // options: fits, checked above
  return ParseError::kOk;
}

void Ipv4Header::Write(ByteWriter& w) const {
  uint8_t* start = w.cursor();
  const size_t begin = w.offset();
  w.WriteU8(0x45);
  w.WriteU8(tos);
  w.WriteU16(total_length);
  w.WriteU16(id);
  w.WriteU16(static_cast<uint16_t>((dont_fragment ? 0x4000 : 0) | (more_fragments ? 0x2000 : 0) |
                                   (fragment_offset & 0x1fff)));
  w.WriteU8(ttl);
  w.WriteU8(protocol);
  w.WriteU16(0);
  w.WriteBytes(src.data(), 4);
  w.WriteBytes(dst.data(), 4);
  if (w.ok() && w.offset() - begin == kMinSize) {
    StoreBe16(start + 10, Ipv4HeaderChecksum({start, kMinSize}));
  }
}

ParseError Ipv6Header::Parse(ByteReader& r) {
  uint32_t first_word;
  uint8_t addr[32];
  if (!r.ReadU32(first_word) || !r.ReadU16(payload_length) || !r.ReadU8(next_header) ||
      !r.ReadU8(hop_limit) || !r.ReadBytes(addr, 32)) {
    return ParseError::kTruncatedIpv6;
  }
  if ((first_word >> 28) != 6) return ParseError::kBadIpv6Version;
  if (payload_length > r.remaining()) return ParseError::kBadIpv6PayloadLength;
  traffic_class = static_cast<uint8_t>(first_word >> 20);
  flow_label = first_word & 0xfffff;
  src = IpAddress::V6Bytes(addr);
  dst = IpAddress::V6Bytes(addr + 16);

  // Walk the extension headers, never past payload_length.
  ByteReader payload(r.rest().first(payload_length));
  uint8_t next = next_header;
  extension_count = 0;
  fragment = false;
  for (;;) {
    size_t length;
    uint8_t following, len_field;
    switch (next) {
      case kIpProtoHopByHop:
      case kIpProtoRouting:
      case kIpProtoDestOptions:
      case kIpProtoAh:
      case kIpProtoFragment:
        break;
      default:
        upper_protocol = next;
        upper_offset = static_cast<uint16_t>(kSize + payload.offset());
        r.Skip(payload.offset());
        return ParseError::kOk;
    }
    if (++extension_count > kMaxExtensionHeaders) return ParseError::kTooManyIpv6ExtensionHeaders;
    const std::span<const uint8_t> here = payload.rest();
    if (!payload.ReadU8(following) || !payload.ReadU8(len_field)) {
      return ParseError::kTruncatedIpv6ExtensionHeader;
    }
    if (next == kIpProtoFragment) {
      length = 8;
      if (here.size() >= 4) {
        const uint16_t offset_flags = LoadBe16(&here[2]);
        // An atomic fragment (offset 0, no M flag) is a whole packet (RFC 6946).
        if ((offset_flags & 0xfff9) != 0) fragment = true;
      }
    } else if (next == kIpProtoAh) {
      length = (size_t{len_field} + 2) * 4;
    } else {
      length = (size_t{len_field} + 1) * 8;
    }
    if (!payload.Skip(length - 2)) return ParseError::kTruncatedIpv6ExtensionHeader;
    next = following;
  }
}

void Ipv6Header::Write(ByteWriter& w) const {
  w.WriteU32(uint32_t{6} << 28 | uint32_t{traffic_class} << 20 | (flow_label & 0xfffff));
  w.WriteU16(payload_length);
  w.WriteU8(next_header);
  w.WriteU8(hop_limit);
  w.WriteBytes(src.bytes16().data(), 16);
  w.WriteBytes(dst.bytes16().data(), 16);
}

}  // namespace quadsock::net
