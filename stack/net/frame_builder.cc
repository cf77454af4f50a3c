#include "stack/net/frame_builder.h"

#include "stack/net/bytes.h"
#include "stack/net/checksum.h"
#include "stack/net/ip.h"
#include "stack/net/udp.h"

namespace quadsock::net {
namespace {

void WriteLink(const LinkAddresses& link, uint16_t ethertype, ByteWriter& w) {
  EthernetHeader eth;
  eth.dst = link.dst;
  eth.src = link.src;
  eth.ethertype = ethertype;
  if (link.vlan.has_value()) {
    eth.vlan_count = 1;
    eth.vlans[0] = *link.vlan;
  }
  eth.Write(w);
}

// Writes the link and IP headers for an upper-layer segment of `upper_length` bytes.
void WriteIp(const LinkAddresses& link, const IpAddress& src, const IpAddress& dst,
             uint8_t protocol, size_t upper_length, const IpOptions& options, ByteWriter& w) {
  if (src.is_v4()) {
    WriteLink(link, kEtherTypeIpv4, w);
    Ipv4Header ip;
    ip.tos = options.tos;
    ip.total_length = static_cast<uint16_t>(Ipv4Header::kMinSize + upper_length);
    ip.id = options.id;
    ip.dont_fragment = options.dont_fragment;
    ip.ttl = options.ttl;
    ip.protocol = protocol;
    ip.src = src;
    ip.dst = dst;
    ip.Write(w);
  } else {
    WriteLink(link, kEtherTypeIpv6, w);
    Ipv6Header ip;
    ip.traffic_class = options.tos;
    ip.payload_length = static_cast<uint16_t>(upper_length);
    ip.next_header = protocol;
    ip.hop_limit = options.ttl;
    ip.src = src;
    ip.dst = dst;
    ip.Write(w);
  }
}

bool FitsInIp(const IpAddress& src, const IpAddress& dst, size_t upper_length) {
  if (src.family() != dst.family()) return false;
  const size_t ip_header = src.is_v4() ? Ipv4Header::kMinSize : 0;
  return ip_header + upper_length <= 0xffff;
}

// Fills the checksum at `checksum_at` over the segment [segment, segment + length).
void FillUpperChecksum(const IpAddress& src, const IpAddress& dst, uint8_t protocol,
                       uint8_t* segment, size_t length, uint8_t* checksum_at, bool pseudo) {
  uint32_t sum = pseudo ? PseudoHeaderSum(src, dst, protocol, length) : 0;
  uint16_t csum = ChecksumFinish(ChecksumAdd(sum, {segment, length}));
  if (protocol == kIpProtoUdp && csum == 0) csum = 0xffff;  // RFC 768: 0 means "none"
  StoreBe16(checksum_at, csum);
}

}  // namespace

std::optional<size_t> BuildUdp(const LinkAddresses& link, const UdpAddresses& addresses,
                               std::span<const uint8_t> payload, std::span<uint8_t> out,
                               const IpOptions& ip) {
  const IpAddress& src = addresses.src.address;
  const IpAddress& dst = addresses.dst.address;
  const size_t udp_length = UdpHeader::kSize + payload.size();
  if (udp_length > 0xffff || !FitsInIp(src, dst, udp_length)) return std::nullopt;
  ByteWriter w(out);
  WriteIp(link, src, dst, kIpProtoUdp, udp_length, ip, w);
  uint8_t* segment = w.cursor();
  UdpHeader udp{addresses.src.port, addresses.dst.port, static_cast<uint16_t>(udp_length), 0};
  udp.Write(w);
  w.WriteBytes(payload.data(), payload.size());
  if (!w.ok()) return std::nullopt;
  FillUpperChecksum(src, dst, kIpProtoUdp, segment, udp_length, segment + 6, true);
  return w.offset();
}

std::optional<size_t> BuildUdpSegment(const UdpAddresses& addresses,
                                      std::span<const uint8_t> payload, std::span<uint8_t> out) {
  const IpAddress& src = addresses.src.address;
  const IpAddress& dst = addresses.dst.address;
  const size_t udp_length = UdpHeader::kSize + payload.size();
  if (udp_length > 0xffff || src.family() != dst.family()) return std::nullopt;
  ByteWriter w(out);
  UdpHeader udp{addresses.src.port, addresses.dst.port, static_cast<uint16_t>(udp_length), 0};
  udp.Write(w);
  w.WriteBytes(payload.data(), payload.size());
  if (!w.ok()) return std::nullopt;
  FillUpperChecksum(src, dst, kIpProtoUdp, out.data(), udp_length, out.data() + 6, true);
  return w.offset();
}

std::optional<size_t> BuildIpFragment(const LinkAddresses& link, const FragmentFields& fragment,
                                      std::span<const uint8_t> piece, std::span<uint8_t> out,
                                      const IpOptions& options) {
  constexpr size_t kFragmentHeaderSize = 8;
  if (fragment.src.family() != fragment.dst.family() || fragment.offset % 8 != 0 ||
      fragment.offset / 8 > 0x1fff) {
    return std::nullopt;
  }
  ByteWriter w(out);
  if (fragment.src.is_v4()) {
    if (Ipv4Header::kMinSize + piece.size() > 0xffff) return std::nullopt;
    WriteLink(link, kEtherTypeIpv4, w);
    Ipv4Header ip;
    ip.tos = options.tos;
    ip.total_length = static_cast<uint16_t>(Ipv4Header::kMinSize + piece.size());
    ip.id = static_cast<uint16_t>(fragment.id);
    ip.dont_fragment = false;
    ip.more_fragments = fragment.more;
    ip.fragment_offset = static_cast<uint16_t>(fragment.offset / 8);
    ip.ttl = options.ttl;
    ip.protocol = fragment.protocol;
    ip.src = fragment.src;
    ip.dst = fragment.dst;
    ip.Write(w);
  } else {
    if (kFragmentHeaderSize + piece.size() > 0xffff) return std::nullopt;
    WriteLink(link, kEtherTypeIpv6, w);
    Ipv6Header ip;
    ip.traffic_class = options.tos;
    ip.payload_length = static_cast<uint16_t>(kFragmentHeaderSize + piece.size());
    ip.next_header = kIpProtoFragment;
    ip.hop_limit = options.ttl;
    ip.src = fragment.src;
    ip.dst = fragment.dst;
    ip.Write(w);
    w.WriteU8(fragment.protocol);
    w.WriteU8(0);
    w.WriteU16(static_cast<uint16_t>(fragment.offset | (fragment.more ? 1 : 0)));
    w.WriteU32(fragment.id);
  }
  w.WriteBytes(piece.data(), piece.size());
  if (!w.ok()) return std::nullopt;
  return w.offset();
}

std::optional<size_t> BuildArp(const LinkAddresses& link, const ArpPacket& arp,
                               std::span<uint8_t> out) {
  if (!arp.sender_ip.is_v4() || !arp.target_ip.is_v4()) return std::nullopt;
  ByteWriter w(out);
  WriteLink(link, kEtherTypeArp, w);
  arp.Write(w);
  if (!w.ok()) return std::nullopt;
  return w.offset();
}

std::optional<size_t> BuildIcmp(const LinkAddresses& link, const IpAddress& src,
                                const IpAddress& dst, const IcmpHeader& header,
                                std::span<const uint8_t> body, std::span<uint8_t> out,
                                const IpOptions& ip) {
  const size_t length = IcmpHeader::kSize + body.size();
  if (!FitsInIp(src, dst, length) || (src.is_v6() && length > 0xffff)) return std::nullopt;
  const uint8_t protocol = src.is_v4() ? kIpProtoIcmp : kIpProtoIcmpv6;
  ByteWriter w(out);
  WriteIp(link, src, dst, protocol, length, ip, w);
  uint8_t* segment = w.cursor();
  IcmpHeader h = header;
  h.checksum = 0;
  h.Write(w);
  w.WriteBytes(body.data(), body.size());
  if (!w.ok()) return std::nullopt;
  FillUpperChecksum(src, dst, protocol, segment, length, segment + 2, src.is_v6());
  return w.offset();
}

std::optional<size_t> BuildNdp(const LinkAddresses& link, const IpAddress& src,
                               const IpAddress& dst, uint8_t type, const NdpMessage& message,
                               std::span<uint8_t> out, uint32_t flags) {
  if (!src.is_v6() || !dst.is_v6()) return std::nullopt;
  uint8_t body[32];  // target (16) and one link-layer option (8)
  ByteWriter bw(body);
  message.Write(type, bw);
  IcmpHeader header;
  header.type = type;
  header.rest = type == kIcmpv6NeighborAdvertisement ? flags : 0;
  IpOptions ip;
  ip.ttl = 255;
  return BuildIcmp(link, src, dst, header, {body, bw.offset()}, out, ip);
}

size_t IcmpQuoteLimit(Family family) {
  return family == Family::kV4 ? 576 - Ipv4Header::kMinSize - IcmpHeader::kSize
                               : 1280 - Ipv6Header::kSize - IcmpHeader::kSize;
}

}  // namespace quadsock::net
