// Ethernet II headers with up to two VLAN tags (802.1Q, and 802.1ad outside it), and ARP for
// IPv4 over Ethernet (RFC 826). Fields are host order; Parse and Write convert.
//
//   EthernetHeader eth;
//   ByteReader r(frame);
//   if (eth.Parse(r) == ParseError::kOk && eth.ethertype == kEtherTypeIpv4) ...
#ifndef QUADSOCK_STACK_NET_ETHERNET_H_
#define QUADSOCK_STACK_NET_ETHERNET_H_

#include <array>
#include <cstdint>

#include "stack/net/address.h"
#include "stack/net/bytes.h"
#include "stack/net/parse_error.h"

namespace quadsock::net {

inline constexpr uint16_t kEtherTypeIpv4 = 0x0800;
inline constexpr uint16_t kEtherTypeArp = 0x0806;
inline constexpr uint16_t kEtherTypeVlan = 0x8100;  // 802.1Q
inline constexpr uint16_t kEtherTypeQinQ = 0x88a8;  // 802.1ad service tag
inline constexpr uint16_t kEtherTypeIpv6 = 0x86dd;
// 802.1Q VLAN ids a network may use: 1-4094 (0 is "no VLAN", 4095 is reserved). The XDP
// program's QS_MAX_VLAN (stack/xdp/steer_common.h) is the same.
inline constexpr uint16_t kMaxVlanId = 4094;

struct VlanTag {
  uint16_t tpid = kEtherTypeVlan;
  uint16_t tci = 0;  // priority (3 bits), DEI (1), VLAN id (12)
  uint16_t vlan_id() const { return tci & 0x0fff; }
  friend bool operator==(const VlanTag&, const VlanTag&) = default;
};

struct EthernetHeader {
  static constexpr size_t kSize = 14;
  static constexpr size_t kVlanTagSize = 4;
  static constexpr int kMaxVlanTags = 2;

  MacAddress dst;
  MacAddress src;
  // The type of the payload, after any VLAN tags.
  uint16_t ethertype = 0;
  int vlan_count = 0;
  std::array<VlanTag, kMaxVlanTags> vlans{};  // outermost first

  size_t size() const { return kSize + kVlanTagSize * vlan_count; }
  // The 802.1Q VLAN the frame is on: 0 when untagged or priority-tagged (one tag with VLAN id
  // 0), the id of a single 802.1Q tag, and kNoSingleVlan for 802.1ad or two tags (QinQ).
  static constexpr int kNoSingleVlan = -1;
  int vlan_id() const {
    if (vlan_count == 0) return 0;
    if (vlan_count > 1 || vlans[0].tpid != kEtherTypeVlan) return kNoSingleVlan;
    return vlans[0].vlan_id();
  }
  ParseError Parse(ByteReader& r);
  void Write(ByteWriter& w) const;
};

struct ArpPacket {
  static constexpr size_t kSize = 28;  // Ethernet hardware, IPv4 protocol
  static constexpr uint16_t kRequest = 1;
  static constexpr uint16_t kReply = 2;

  uint16_t op = kRequest;
  MacAddress sender_mac;
  IpAddress sender_ip = IpAddress::AnyV4();
  MacAddress target_mac;
  IpAddress target_ip = IpAddress::AnyV4();

  // Accepts only Ethernet/IPv4 requests and replies (kUnsupportedArp otherwise).
  ParseError Parse(ByteReader& r);
  void Write(ByteWriter& w) const;
};

}  // namespace quadsock::net

#endif  // QUADSOCK_STACK_NET_ETHERNET_H_
