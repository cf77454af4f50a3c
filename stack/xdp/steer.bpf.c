// quadsock's XDP steering program: sends to the AF_XDP socket of the RX queue only the frames
// that the userspace stack owns (UDP to owned addresses and ports, and the ARP, NDP and ICMP
// that the stack answers for its exclusive addresses) and passes everything else to the kernel,
// so SSH, TCP and the rest of the host keep working. What "owned" means, the maps and the
// counters are in steer_common.h; the loader is xdp_program.h. All logic that can live in
// userspace does: this program only parses, looks up and counts.
//
// Parsing is bounded (at most one 802.1Q tag, no IPv6 extension-header walk) and every read is
// checked against data_end right before it, in the shape the verifier follows.
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/udp.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#include "stack/xdp/steer_common.h"

struct {
  __uint(type, BPF_MAP_TYPE_XSKMAP);
  __uint(max_entries, QS_MAX_QUEUES);
  __type(key, __u32);
  __type(value, __u32);
} qs_xsks SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, QS_MAX_ADDRS);
  __type(key, struct qs_addr_key);
  __type(value, struct qs_addr_value);
} qs_addrs SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, QS_MAX_PORTS);
  __uint(map_flags, BPF_F_NO_PREALLOC);  // sized for every port; filled with few
  __type(key, struct qs_port_key);
  __type(value, struct qs_port_value);
} qs_ports SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, QS_MAX_NEIGHBORS);
  __uint(map_flags, BPF_F_NO_PREALLOC);  // the stack talks to few neighbours, mostly
  __type(key, struct qs_addr_key);
  __type(value, struct qs_neighbor_value);
} qs_neighbors SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, QS_COUNTER_MAX);
  __type(key, __u32);
  __type(value, __u64);
} qs_counters SEC(".maps");

#define ETH_P_8021AD_ 0x88A8
#define ARPHRD_ETHER_ 1
#define IPPROTO_ICMPV6_ 58
#define ICMPV6_NS 135
#define ICMPV6_NA 136
#define ICMP_HEADER_SIZE 8  // type, code, checksum and four type-specific bytes

// A VLAN tag as it follows the MAC addresses: TCI, then the next ethertype.
struct vlan_tag {
  __be16 tci;
  __be16 next_proto;
};

// ARP for IPv4 over Ethernet (RFC 826), the only kind the stack speaks.
struct arp_eth_ipv4 {
  __be16 htype;
  __be16 ptype;
  __u8 hlen;
  __u8 plen;
  __be16 op;
  __u8 sha[6];
  __u8 spa[4];
  __u8 tha[6];
  __u8 tpa[4];
};

// The ICMPv6 header and the target address of a neighbour solicitation (RFC 4861 4.3) or
// advertisement (4.4: the same layout, with flags in the reserved word).
struct icmp6_ns {
  __u8 type;
  __u8 code;
  __be16 checksum;
  __be32 reserved;
  __u8 target[16];
};

static __always_inline void count(__u32 index) {
  __u64* value = bpf_map_lookup_elem(&qs_counters, &index);
  if (value) *value += 1;  // per-CPU: no other writer
}

static __always_inline int pass(__u32 counter) {
  count(counter);
  return XDP_PASS;
}

static __always_inline int redirect(struct xdp_md* ctx, __u32 kind) {
  count(kind);
  // Falls back to XDP_PASS when the RX queue has no socket (yet, any more, or ever: a queue
  // quadsockd does not serve). Then the frame is the kernel's, and not counted as redirected.
  int verdict = bpf_redirect_map(&qs_xsks, ctx->rx_queue_index, XDP_PASS);
  count(verdict == XDP_REDIRECT ? QS_COUNTER_REDIRECT : QS_COUNTER_REDIRECT_NO_XSK);
  return verdict;
}

static __always_inline void v4_mapped(__u8 out[16], const __u8 v4[4]) {
  __builtin_memset(out, 0, 10);
  out[10] = 0xff;
  out[11] = 0xff;
  __builtin_memcpy(out + 12, v4, 4);
}

// The stack's entry for `addr` when the frame is on the address's VLAN (see steer_common.h).
static __always_inline struct qs_addr_value* owned(const __u8 addr[16], __u16 vlan) {
  struct qs_addr_key key;
  __builtin_memcpy(key.addr, addr, 16);
  struct qs_addr_value* value = bpf_map_lookup_elem(&qs_addrs, &key);
  if (value && value->vlan != vlan) return 0;
  return value;
}

// Whether UDP to (addr, port) belongs to the stack at a shared address: an entry for the address
// itself or for the family's unspecified address (:: or ::ffff:0.0.0.0).
static __always_inline int port_owned(const __u8 addr[16], __be16 port, int v4) {
  struct qs_port_key key;
  __builtin_memset(&key, 0, sizeof(key));
  __builtin_memcpy(key.addr, addr, 16);
  key.port = port;
  if (bpf_map_lookup_elem(&qs_ports, &key)) return 1;
  __builtin_memset(key.addr, 0, 16);
  if (v4) key.addr[10] = key.addr[11] = 0xff;
  return bpf_map_lookup_elem(&qs_ports, &key) != 0;
}

static __always_inline int steer_arp(struct xdp_md* ctx, void* l3, void* data_end, __u16 vlan) {
  struct arp_eth_ipv4* arp = l3;
  if ((void*)(arp + 1) > data_end) return pass(QS_COUNTER_MALFORMED);
  if (arp->htype != bpf_htons(ARPHRD_ETHER_) || arp->ptype != bpf_htons(ETH_P_IP) ||
      arp->hlen != 6 || arp->plen != 4) {
    return pass(QS_COUNTER_PASS_OTHER);
  }
  __u8 target[16];
  v4_mapped(target, arp->tpa);
  struct qs_addr_value* value = owned(target, vlan);
  if (!value || !(value->flags & QS_ADDR_EXCLUSIVE)) return pass(QS_COUNTER_PASS_NOT_OWNED);
  return redirect(ctx, QS_COUNTER_REDIRECT_ARP);
}

static __always_inline int steer_ipv4(struct xdp_md* ctx, void* l3, void* data_end, __u16 vlan) {
  struct iphdr* ip = l3;
  if ((void*)(ip + 1) > data_end) return pass(QS_COUNTER_MALFORMED);
  if (ip->version != 4 || ip->ihl < 5) return pass(QS_COUNTER_MALFORMED);
  __u8 dst[16];
  v4_mapped(dst, (const __u8*)&ip->daddr);
  struct qs_addr_value* value = owned(dst, vlan);
  if (!value) return pass(QS_COUNTER_PASS_NOT_OWNED);
  int exclusive = value->flags & QS_ADDR_EXCLUSIVE;

  void* l4 = l3 + ip->ihl * 4;
  if (ip->protocol == IPPROTO_UDP) {
    // Fragments (more to come, or not the first): a later fragment names no port, so at a
    // shared address every fragment, the first (with the UDP header) too, goes to the kernel;
    // split between the two, the datagram would be lost. At an exclusive address the stack
    // reassembles them all.
    if (ip->frag_off & bpf_htons(0x3fff)) {
      if (exclusive) return redirect(ctx, QS_COUNTER_REDIRECT_UDP);
      return pass(QS_COUNTER_PASS_NOT_OWNED);
    }
    struct udphdr* udp = l4;
    if ((void*)(udp + 1) > data_end) return pass(QS_COUNTER_MALFORMED);
    if (exclusive || port_owned(dst, udp->dest, 1)) return redirect(ctx, QS_COUNTER_REDIRECT_UDP);
    return pass(QS_COUNTER_PASS_NOT_OWNED);
  }
  if (!exclusive) return pass(QS_COUNTER_PASS_OTHER);
  if (ip->protocol == IPPROTO_ICMP) {
    if (l4 + ICMP_HEADER_SIZE > data_end) return pass(QS_COUNTER_MALFORMED);
    return redirect(ctx, QS_COUNTER_REDIRECT_ICMP);
  }
  if (l4 > data_end) return pass(QS_COUNTER_MALFORMED);  // options cut short
  return redirect(ctx, QS_COUNTER_REDIRECT_OTHER);
}

// ff02::1:ffXX:XXXX (RFC 4291 2.7.1).
static __always_inline int solicited_node(const struct in6_addr* a) {
  return a->in6_u.u6_addr32[0] == bpf_htonl(0xff020000) && a->in6_u.u6_addr32[1] == 0 &&
         a->in6_u.u6_addr32[2] == bpf_htonl(1) && a->in6_u.u6_addr8[12] == 0xff;
}

// ff02::1 (RFC 4291 2.7.1).
static __always_inline int all_nodes(const struct in6_addr* a) {
  return a->in6_u.u6_addr32[0] == bpf_htonl(0xff020000) && a->in6_u.u6_addr32[1] == 0 &&
         a->in6_u.u6_addr32[2] == 0 && a->in6_u.u6_addr32[3] == bpf_htonl(1);
}

// To all nodes: only neighbour advertisements, and only about a neighbour in the stack's
// table on the frame's VLAN (steer_common.h); the rest (advertisements about anyone else,
// router advertisements, MLD, pings) is the kernel's.
static __always_inline int steer_all_nodes(struct xdp_md* ctx, struct ipv6hdr* ip,
                                           void* data_end, __u16 vlan) {
  if (ip->nexthdr != IPPROTO_ICMPV6_) return pass(QS_COUNTER_PASS_NOT_OWNED);
  struct icmp6_ns* na = (void*)(ip + 1);
  if ((void*)na + 1 > data_end || na->type != ICMPV6_NA) return pass(QS_COUNTER_PASS_NOT_OWNED);
  if ((void*)(na + 1) > data_end) return pass(QS_COUNTER_MALFORMED);
  struct qs_addr_key key;
  __builtin_memcpy(key.addr, na->target, sizeof(key.addr));
  struct qs_neighbor_value* neighbor = bpf_map_lookup_elem(&qs_neighbors, &key);
  if (!neighbor || neighbor->vlan != vlan) return pass(QS_COUNTER_PASS_NOT_OWNED);
  return redirect(ctx, QS_COUNTER_REDIRECT_NS);
}

static __always_inline int steer_ipv6(struct xdp_md* ctx, void* l3, void* data_end, __u16 vlan) {
  struct ipv6hdr* ip = l3;
  if ((void*)(ip + 1) > data_end) return pass(QS_COUNTER_MALFORMED);
  if (ip->version != 6) return pass(QS_COUNTER_MALFORMED);

  if (all_nodes(&ip->daddr)) return steer_all_nodes(ctx, ip, data_end, vlan);

  if (solicited_node(&ip->daddr)) {
    if (ip->nexthdr != IPPROTO_ICMPV6_) return pass(QS_COUNTER_PASS_OTHER);
    struct icmp6_ns* ns = (void*)(ip + 1);
    if ((void*)(ns + 1) > data_end) {
      // Too short for a solicitation; other ICMPv6 to the group is not ours anyway.
      if ((void*)ns + 1 > data_end || ns->type == ICMPV6_NS) return pass(QS_COUNTER_MALFORMED);
      return pass(QS_COUNTER_PASS_OTHER);
    }
    if (ns->type != ICMPV6_NS) return pass(QS_COUNTER_PASS_OTHER);
    struct qs_addr_value* value = owned(ns->target, vlan);
    if (!value || !(value->flags & QS_ADDR_EXCLUSIVE)) return pass(QS_COUNTER_PASS_NOT_OWNED);
    return redirect(ctx, QS_COUNTER_REDIRECT_NS);
  }

  struct qs_addr_value* value = owned(ip->daddr.in6_u.u6_addr8, vlan);
  if (!value) return pass(QS_COUNTER_PASS_NOT_OWNED);
  int exclusive = value->flags & QS_ADDR_EXCLUSIVE;
  void* l4 = ip + 1;
  // UDP right after the fixed header only: no extension-header walk here. (To an exclusive
  // address, any next header goes to the stack below.)
  if (ip->nexthdr == IPPROTO_UDP) {
    struct udphdr* udp = l4;
    if ((void*)(udp + 1) > data_end) return pass(QS_COUNTER_MALFORMED);
    if (exclusive || port_owned(ip->daddr.in6_u.u6_addr8, udp->dest, 0)) {
      return redirect(ctx, QS_COUNTER_REDIRECT_UDP);
    }
    return pass(QS_COUNTER_PASS_NOT_OWNED);
  }
  if (!exclusive) return pass(QS_COUNTER_PASS_OTHER);
  if (ip->nexthdr == IPPROTO_ICMPV6_) {
    if (l4 + ICMP_HEADER_SIZE > data_end) return pass(QS_COUNTER_MALFORMED);
    return redirect(ctx, QS_COUNTER_REDIRECT_ICMP);
  }
  return redirect(ctx, QS_COUNTER_REDIRECT_OTHER);
}

SEC("xdp")
int quadsock_steer(struct xdp_md* ctx) {
  void* data = (void*)(long)ctx->data;
  void* data_end = (void*)(long)ctx->data_end;

  struct ethhdr* eth = data;
  if ((void*)(eth + 1) > data_end) return pass(QS_COUNTER_MALFORMED);
  __be16 proto = eth->h_proto;
  void* l3 = eth + 1;

  // The frame's VLAN: none (0), or the id of one 802.1Q tag (0 too for a priority tag). An
  // address's VLAN is one of these; 802.1ad and two tags are no address's.
  __u16 vlan = 0;
  if (proto == bpf_htons(ETH_P_8021AD_)) return pass(QS_COUNTER_PASS_OTHER);
  if (proto == bpf_htons(ETH_P_8021Q)) {
    struct vlan_tag* tag = l3;
    if ((void*)(tag + 1) > data_end) return pass(QS_COUNTER_MALFORMED);
    vlan = bpf_ntohs(tag->tci) & 0x0fff;
    proto = tag->next_proto;
    l3 = tag + 1;
    if (proto == bpf_htons(ETH_P_8021Q) || proto == bpf_htons(ETH_P_8021AD_)) {
      return pass(QS_COUNTER_PASS_OTHER);
    }
  }

  if (proto == bpf_htons(ETH_P_IP)) return steer_ipv4(ctx, l3, data_end, vlan);
  if (proto == bpf_htons(ETH_P_IPV6)) return steer_ipv6(ctx, l3, data_end, vlan);
  if (proto == bpf_htons(ETH_P_ARP)) return steer_arp(ctx, l3, data_end, vlan);
  return pass(QS_COUNTER_PASS_OTHER);
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
