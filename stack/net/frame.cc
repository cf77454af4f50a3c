#include "stack/net/frame.h"

#include <memory>
#include <type_traits>

#include "stack/net/checksum.h"

namespace quadsock::net {
namespace {

// The checksum of an upper-layer segment over its pseudo-header; 0 when the segment verifies.
uint16_t UpperChecksum(const IpAddress& src, const IpAddress& dst, uint8_t protocol,
                       std::span<const uint8_t> segment) {
  const uint32_t sum = PseudoHeaderSum(src, dst, protocol, segment.size());
  return ChecksumFinish(ChecksumAdd(sum, segment));
}

ParseError ParseUdp(std::span<const uint8_t> frame, ParsedFrame& f) {
  if (ParseError e = ParseUdpDatagram(f.src, f.dst, frame.subspan(f.l4_offset, f.l4_length), f.udp);
      e != ParseError::kOk) {
    return e;
  }
  f.l4 = L4::kUdp;
  f.payload_offset = f.l4_offset + UdpHeader::kSize;
  f.payload_length = f.udp.length - UdpHeader::kSize;
  return ParseError::kOk;
}

ParseError ParseIcmp(std::span<const uint8_t> frame, ParsedFrame& f) {
  const std::span<const uint8_t> message = frame.subspan(f.l4_offset, f.l4_length);
  ByteReader r(message);
  if (ParseError e = f.icmp.Parse(r); e != ParseError::kOk) return e;
  const bool v6 = f.l3 == L3::kIpv6;
  // ICMPv4 sums the message alone; ICMPv6 adds the pseudo-header (RFC 4443 2.3).
  const uint16_t check = v6 ? UpperChecksum(f.src, f.dst, f.protocol, message)
                             : ChecksumFinish(ChecksumAdd(0, message));
  if (check != 0) return ParseError::kBadIcmpChecksum;
  f.l4 = v6 ? L4::kIcmpv6 : L4::kIcmpv4;
  f.payload_offset = f.l4_offset + IcmpHeader::kSize;
  f.payload_length = f.l4_length - IcmpHeader::kSize;
  if (v6 && (f.icmp.type == kIcmpv6NeighborSolicitation ||
             f.icmp.type == kIcmpv6NeighborAdvertisement)) {
    // RFC 4861 7.1.1 / 7.1.2: an NDP message that was routed, or is malformed, is invalid.
    if (f.ttl != 255) return ParseError::kBadNdpHopLimit;
    if (f.icmp.code != 0) return ParseError::kBadNdpMessage;
    return f.ndp.Parse(f.icmp.type, r);
  }
  if (IsIcmpError(v6, f.icmp.type)) return f.quote.Parse(v6, r);  // after the 8-byte header
  return ParseError::kOk;
}

ParseError ParseIp(std::span<const uint8_t> frame, ParsedFrame& f) {
  ByteReader r(frame.subspan(f.l3_offset));
  if (f.l3 == L3::kIpv4) {
    if (ParseError e = f.ipv4.Parse(r); e != ParseError::kOk) return e;
    f.src = f.ipv4.src;
    f.dst = f.ipv4.dst;
    f.ttl = f.ipv4.ttl;
    f.protocol = f.ipv4.protocol;
    f.fragment = f.ipv4.is_fragment();
    f.l4_offset = f.l3_offset + f.ipv4.header_length;
    f.l4_length = f.ipv4.total_length - f.ipv4.header_length;
  } else {
    if (ParseError e = f.ipv6.Parse(r); e != ParseError::kOk) return e;
    f.src = f.ipv6.src;
    f.dst = f.ipv6.dst;
    f.ttl = f.ipv6.hop_limit;
    f.protocol = f.ipv6.upper_protocol;
    f.fragment = f.ipv6.is_fragment();
    f.l4_offset = f.l3_offset + f.ipv6.upper_offset;
    f.l4_length = Ipv6Header::kSize + f.ipv6.payload_length - f.ipv6.upper_offset;
  }
  if (f.fragment) return ParseError::kOk;
  switch (f.protocol) {
    case kIpProtoUdp:
      return ParseUdp(frame, f);
    case kIpProtoIcmp:
      if (f.l3 == L3::kIpv4) return ParseIcmp(frame, f);
      break;
    case kIpProtoIcmpv6:
      if (f.l3 == L3::kIpv6) return ParseIcmp(frame, f);
      break;
    case kIpProtoNoNext:
      return ParseError::kOk;
  }
  f.l4 = L4::kOther;
  return ParseError::kOk;
}

// The UDP datagram at `udp` of a packet whose IP layer left `ip_payload` bytes for it: lengths
// and checksum as ParseUdp checks them (a zero checksum only over IPv4).
bool FinishPlainUdp(std::span<const uint8_t> frame, size_t udp, size_t ip_payload,
                    UdpFrameView& out) {
  const uint8_t* p = frame.data();
  const uint16_t udp_length = LoadBe16(p + udp + 4);
  if (udp_length < UdpHeader::kSize || udp_length > ip_payload) return false;
  const uint16_t checksum = LoadBe16(p + udp + 6);
  if (checksum == 0) {
    if (out.dst.is_v6()) return false;  // mandatory over IPv6 (RFC 8200 8.1)
  } else if (UpperChecksum(out.src, out.dst, kIpProtoUdp, frame.subspan(udp, udp_length)) != 0) {
    return false;
  }
  out.dst_mac = MacAddress::FromBytes(p);
  out.src_port = LoadBe16(p + udp);
  out.dst_port = LoadBe16(p + udp + 2);
  out.payload_offset = static_cast<uint32_t>(udp + UdpHeader::kSize);
  out.payload_length = udp_length - UdpHeader::kSize;
  return true;
}


}  // namespace

ParseError ParseUdpDatagram(const IpAddress& src, const IpAddress& dst,
                            std::span<const uint8_t> segment, UdpHeader& out) {
  ByteReader r(segment);
  if (ParseError e = out.Parse(r); e != ParseError::kOk) return e;
  // Bytes past the UDP length are padding; a UDP length past the IP payload is a lie.
  if (out.length < UdpHeader::kSize || out.length > segment.size()) {
    return ParseError::kBadUdpLength;
  }
  if (out.checksum == 0) {
    // RFC 768: no checksum over IPv4. RFC 8200 8.1: mandatory over IPv6.
    if (dst.is_v6()) return ParseError::kZeroUdpChecksumIpv6;
  } else if (UpperChecksum(src, dst, kIpProtoUdp, segment.first(out.length)) != 0) {
    return ParseError::kBadUdpChecksum;
  }
  return ParseError::kOk;
}

ParseError ParseFrame(std::span<const uint8_t> frame, ParsedFrame& out) {
  // Reset in place: `out = ParsedFrame()` would build a temporary and copy its 320 bytes.
  static_assert(std::is_trivially_destructible_v<ParsedFrame>);
  std::construct_at(&out);
  ByteReader r(frame);
  if (ParseError e = out.eth.Parse(r); e != ParseError::kOk) return e;
  out.l3_offset = r.offset();
  switch (out.eth.ethertype) {
    case kEtherTypeArp:
      out.l3 = L3::kArp;
      return out.arp.Parse(r);
    case kEtherTypeIpv4:
      out.l3 = L3::kIpv4;
      return ParseIp(frame, out);
    case kEtherTypeIpv6:
      out.l3 = L3::kIpv6;
      return ParseIp(frame, out);
    default:
      out.l3 = L3::kOther;
      return ParseError::kOk;
  }
}


bool ParsePlainUdpFrame(std::span<const uint8_t> frame, UdpFrameView& out) {
  constexpr size_t kIp = EthernetHeader::kSize;
  if (frame.size() < kIp + Ipv4Header::kMinSize + UdpHeader::kSize) return false;
  const uint8_t* p = frame.data();
  const uint16_t ethertype = LoadBe16(p + 12);
  if (ethertype == kEtherTypeIpv4) {
    constexpr size_t kUdp = kIp + Ipv4Header::kMinSize;
    if (p[kIp] != 0x45) return false;  // version 4, a 20-byte header (no options)
    const uint16_t total_length = LoadBe16(p + kIp + 2);
    const uint16_t flags_offset = LoadBe16(p + kIp + 6);
    if (total_length < Ipv4Header::kMinSize + UdpHeader::kSize ||
        total_length > frame.size() - kIp || (flags_offset & 0x3fff) != 0 ||
        p[kIp + 9] != kIpProtoUdp ||
        ChecksumFinish(ChecksumAdd(0, frame.subspan(kIp, Ipv4Header::kMinSize))) != 0) {
      return false;
    }
    out.src.AssignV4Bytes(p + kIp + 12);
    out.dst.AssignV4Bytes(p + kIp + 16);
    return FinishPlainUdp(frame, kUdp, total_length - Ipv4Header::kMinSize, out);
  }
  if (ethertype == kEtherTypeIpv6) {
    constexpr size_t kUdp = kIp + Ipv6Header::kSize;
    if (frame.size() < kUdp + UdpHeader::kSize || (p[kIp] >> 4) != 6) return false;
    const uint16_t payload_length = LoadBe16(p + kIp + 4);
    if (payload_length > frame.size() - kUdp || p[kIp + 6] != kIpProtoUdp) {
      return false;  // too long, or extension headers first: ParseFrame walks them
    }
    out.src.AssignV6Bytes(p + kIp + 8);
    out.dst.AssignV6Bytes(p + kIp + 24);
    return FinishPlainUdp(frame, kUdp, payload_length, out);
  }
  return false;
}

}  // namespace quadsock::net
