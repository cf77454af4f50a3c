#include "stack/net/ip.h"

#include "stack/net/checksum.h"
#include "stack/net/icmp.h"

namespace quadsock::net {
namespace {

constexpr uint8_t kIpv4OptionEnd = 0;
constexpr uint8_t kIpv4OptionNop = 1;
constexpr uint8_t kIpv4OptionLooseRoute = 0x83;   // LSRR
constexpr uint8_t kIpv4OptionStrictRoute = 0x89;  // SSRR

// RFC 791 3.1: every option but End and No-op is type, length (itself included), data. A source
// route's pointer (from the option's start, at least 4) names its next address while it is at
// most the length: the datagram is not at its final destination, and we forward nothing (a
// host's kernel drops it as ip_options_rcv_srr does without forwarding).
ParseError CheckIpv4Options(std::span<const uint8_t> options) {
  size_t i = 0;
  while (i < options.size()) {
    const uint8_t type = options[i];
    if (type == kIpv4OptionEnd) break;
    if (type == kIpv4OptionNop) {
      ++i;
      continue;
    }
    if (options.size() - i < 2) return ParseError::kBadIpv4Option;
    const uint8_t length = options[i + 1];
    if (length < 2 || length > options.size() - i) return ParseError::kBadIpv4Option;
    if (type == kIpv4OptionLooseRoute || type == kIpv4OptionStrictRoute) {
      if (length < 3 || options[i + 2] < 4) return ParseError::kBadIpv4Option;
      if (options[i + 2] <= length) return ParseError::kIpv4SourceRoute;
    }
    i += length;
  }
  return ParseError::kOk;
}

constexpr uint8_t kIpv6OptionPad1 = 0;
constexpr uint8_t kIpv6OptionPadN = 1;

// The options of a hop-by-hop or destination options header `header` (RFC 8200 4.2), which
// starts `at` bytes into the IPv6 packet. We recognise only the padding; an unrecognised option
// is skipped, or discards the packet, as the two high bits of its type say.
ParseError CheckIpv6Options(std::span<const uint8_t> header, size_t at, const IpAddress& dst,
                            Ipv6Header::ParameterProblem& problem) {
  size_t i = 2;  // past Next Header and Hdr Ext Len
  while (i < header.size()) {
    const uint8_t type = header[i];
    if (type == kIpv6OptionPad1) {
      ++i;
      continue;
    }
    if (header.size() - i < 2 || header[i + 1] > header.size() - i - 2) {
      return ParseError::kBadIpv6Option;
    }
    if (type != kIpv6OptionPadN) {
      switch (type >> 6) {
        case 0:  // skip over it
          break;
        case 3:  // as 2, but not to a multicast destination
          if (dst.IsMulticast()) return ParseError::kIpv6UnrecognizedOption;
          [[fallthrough]];
        case 2:
          problem = {.asked = true,
                     .code = kIcmpv6CodeUnrecognizedOption,
                     .pointer = static_cast<uint32_t>(at + i)};
          [[fallthrough]];
        case 1:  // discard silently
          return ParseError::kIpv6UnrecognizedOption;
      }
    }
    i += size_t{header[i + 1]} + 2;
  }
  return ParseError::kOk;
}

}  // namespace

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
  if (header_length > kMinSize) {
    if (ParseError e = CheckIpv4Options(packet.subspan(kMinSize, header_length - kMinSize));
        e != ParseError::kOk) {
      return e;
    }
    r.Skip(header_length - kMinSize);  // fits, checked above
  }
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

  // Walk the extension headers, never past payload_length, as a destination processes them
  // (RFC 8200 4.1-4.5).
  ByteReader payload(r.rest().first(payload_length));
  uint8_t next = next_header;
  size_t naming = 6;  // the offset of the Next Header field that names `next`
  extension_count = 0;
  fragment = false;
  problem = {};
  for (;;) {
    if (!IsIpv6ExtensionHeader(next)) {
      upper_protocol = next;
      upper_offset = static_cast<uint16_t>(kSize + payload.offset());
      upper_naming = static_cast<uint16_t>(naming);
      r.Skip(payload.offset());
      return ParseError::kOk;
    }
    if (++extension_count > kMaxExtensionHeaders) return ParseError::kTooManyIpv6ExtensionHeaders;
    const size_t at = kSize + payload.offset();
    if (next == kIpProtoHopByHop && extension_count != 1) {
      // Only right after the IPv6 header (RFC 8200 4.3): as an unrecognised Next Header.
      problem = {.asked = true,
                 .code = kIcmpv6CodeUnrecognizedNextHeader,
                 .pointer = static_cast<uint32_t>(naming)};
      return ParseError::kIpv6HopByHopNotFirst;
    }
    const std::span<const uint8_t> rest = payload.rest();
    if (rest.size() < 2) return ParseError::kTruncatedIpv6ExtensionHeader;
    const size_t length = Ipv6ExtensionHeaderLength(next, rest[1]);
    if (!payload.Skip(length)) return ParseError::kTruncatedIpv6ExtensionHeader;
    const std::span<const uint8_t> header = rest.first(length);
    switch (next) {
      case kIpProtoHopByHop:
      case kIpProtoDestOptions:
        if (ParseError e = CheckIpv6Options(header, at, dst, problem); e != ParseError::kOk) {
          return e;
        }
        break;
      case kIpProtoRouting:
        // Segments left > 0: the packet is for further hops, and we route nothing. Every type
        // is one we do not process (type 0 is deprecated, RFC 5095), so RFC 8200 4.4 asks for
        // a Parameter Problem pointing at the routing type. With none left, it is ignored.
        if (header[3] != 0) {
          problem = {.asked = true,
                     .code = kIcmpv6CodeErroneousField,
                     .pointer = static_cast<uint32_t>(at + 2)};
          return ParseError::kIpv6RoutingHeader;
        }
        break;
      case kIpProtoFragment:
        // An atomic fragment (offset 0, no M flag) is a whole packet (RFC 6946). Any other
        // ends the walk: past the first fragment the bytes are payload, not headers, which
        // reassembly puts together (stack/internal/reassembly.h).
        if ((LoadBe16(&header[2]) & 0xfff9) != 0) {
          fragment = true;
          fragment_offset = LoadBe16(&header[2]) >> 3;
          more_fragments = (header[3] & 1) != 0;
          fragment_id = LoadBe32(&header[4]);
          upper_protocol = header[0];
          upper_offset = static_cast<uint16_t>(at + length);
          upper_naming = static_cast<uint16_t>(at);
          r.Skip(payload.offset());
          return ParseError::kOk;
        }
        break;
    }
    naming = at;
    next = header[0];
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
