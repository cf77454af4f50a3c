#include "stack/net/ethernet.h"

namespace quadsock::net {
namespace {

bool ReadMac(ByteReader& r, MacAddress& mac) {
  MacAddress::Bytes b;
  if (!r.ReadBytes(b.data(), b.size())) return false;
  mac = MacAddress(b);
  return true;
}

bool IsVlanTpid(uint16_t type) { return type == kEtherTypeVlan || type == kEtherTypeQinQ; }

}  // namespace

ParseError EthernetHeader::Parse(ByteReader& r) {
  vlan_count = 0;
  if (!ReadMac(r, dst) || !ReadMac(r, src) || !r.ReadU16(ethertype)) {
    return ParseError::kTruncatedEthernet;
  }
  while (IsVlanTpid(ethertype)) {
    if (vlan_count == kMaxVlanTags) return ParseError::kTooManyVlanTags;
    VlanTag& tag = vlans[vlan_count++];
    tag.tpid = ethertype;
    if (!r.ReadU16(tag.tci) || !r.ReadU16(ethertype)) return ParseError::kTruncatedEthernet;
  }
  return ParseError::kOk;
}

void EthernetHeader::Write(ByteWriter& w) const {
  w.WriteBytes(dst.bytes().data(), 6);
  w.WriteBytes(src.bytes().data(), 6);
  for (int i = 0; i < vlan_count; ++i) {
    w.WriteU16(vlans[i].tpid);
    w.WriteU16(vlans[i].tci);
  }
  w.WriteU16(ethertype);
}

ParseError ArpPacket::Parse(ByteReader& r) {
  uint16_t htype, ptype;
  uint8_t hlen, plen;
  if (!r.ReadU16(htype) || !r.ReadU16(ptype) || !r.ReadU8(hlen) || !r.ReadU8(plen) ||
      !r.ReadU16(op)) {
    return ParseError::kTruncatedArp;
  }
  if (htype != 1 || ptype != kEtherTypeIpv4 || hlen != 6 || plen != 4 ||
      (op != kRequest && op != kReply)) {
    return ParseError::kUnsupportedArp;
  }
  uint8_t spa[4], tpa[4];
  if (!ReadMac(r, sender_mac) || !r.ReadBytes(spa, 4) || !ReadMac(r, target_mac) ||
      !r.ReadBytes(tpa, 4)) {
    return ParseError::kTruncatedArp;
  }
  sender_ip = IpAddress::V4Bytes(spa);
  target_ip = IpAddress::V4Bytes(tpa);
  return ParseError::kOk;
}

void ArpPacket::Write(ByteWriter& w) const {
  w.WriteU16(1);
  w.WriteU16(kEtherTypeIpv4);
  w.WriteU8(6);
  w.WriteU8(4);
  w.WriteU16(op);
  w.WriteBytes(sender_mac.bytes().data(), 6);
  w.WriteBytes(sender_ip.data(), 4);
  w.WriteBytes(target_mac.bytes().data(), 6);
  w.WriteBytes(target_ip.data(), 4);
}

}  // namespace quadsock::net
