/* The contract between quadsock's XDP steering program (steer.bpf.c) and its loader
 * (xdp_program.cc): map names, key and value layouts, flags and counter indexes. C, so that both
 * clang -target bpf and g++ include it (xdp-tools' common_kern_user.h habit). Userspace should
 * reach the maps through quadsock::xdp::XdpProgram; this header is what that class writes.
 *
 *   struct qs_addr_key key = {0};           // 10.1.0.2 is ::ffff:10.1.0.2
 *   memcpy(key.addr, ip.bytes16().data(), 16);
 *   struct qs_addr_value value = {.flags = QS_ADDR_EXCLUSIVE, .vlan = 0};
 *   bpf_map_update_elem(addrs_fd, &key, &value, BPF_ANY);
 *
 * What the program steers to the AF_XDP socket of the frame's RX queue (everything else passes
 * to the kernel):
 *   - to an EXCLUSIVE address: all IP to it (UDP to any port, ICMP/ICMPv6, other protocols),
 *     ARP whose target is the address, and neighbour solicitations for it (to its
 *     solicited-node multicast group). The stack owns the address outright and answers for it,
 *     so it can send port unreachable for closed ports (and the kernel, which does not hold the
 *     address, loses nothing).
 *   - neighbour advertisements to all nodes (ff02::1) whose target is in qs_neighbors on the
 *     frame's VLAN: a neighbour in the stack's own table (XdpProgram::AddNeighbor, called as
 *     the table makes and drops entries). A neighbour announces a new MAC so (RFC 4861 7.2.6),
 *     and the stack must hear it to mend an entry a forged advertisement moved. XDP cannot
 *     copy a frame to both, so the kernel does not hear those; every other advertisement to
 *     all nodes (a defender of a kernel address in duplicate address detection, a neighbour
 *     only the kernel talks to) and all other traffic to all nodes (router advertisements,
 *     MLD, pings) stays the kernel's.
 *   - to a shared (non-exclusive) owned address: only UDP to an owned port, looked up as
 *     (address, port) and then (the family's unspecified address, port), and only when UDP
 *     follows the IP header directly (no IPv6 extension headers, first IPv4 fragment). The
 *     kernel keeps ARP, NDP, ICMP and the other ports, since it holds the address too and must
 *     hear the replies to its own ARP/NDP requests. So the stack does not see ARP/NDP replies
 *     addressed to a shared address: it must resolve neighbours some other way there.
 */
#ifndef QUADSOCK_STACK_XDP_STEER_COMMON_H_
#define QUADSOCK_STACK_XDP_STEER_COMMON_H_

#include <linux/types.h>

/* Map names, as libbpf's bpf_object__find_map_by_name() knows them (the variables in
 * steer.bpf.c carry these names). */
#define QS_MAP_XSKS "qs_xsks"
#define QS_MAP_ADDRS "qs_addrs"
#define QS_MAP_PORTS "qs_ports"
#define QS_MAP_NEIGHBORS "qs_neighbors"
#define QS_MAP_COUNTERS "qs_counters"

/* The program's name (bpf_prog_info.name, at most 15 characters). Every quadsock XDP program is
 * named "quadsock_*": the loader removes a stale one with that prefix left by a crashed run. */
#define QS_PROGRAM_NAME "quadsock_steer"
#define QS_PROGRAM_NAME_PREFIX "quadsock_"

/* qs_xsks: BPF_MAP_TYPE_XSKMAP, key __u32 RX queue index, value an AF_XDP socket fd. */
#define QS_MAX_QUEUES 64

/* qs_addrs: BPF_MAP_TYPE_HASH, struct qs_addr_key -> struct qs_addr_value. */
#define QS_MAX_ADDRS 1024

struct qs_addr_key {
  __u8 addr[16]; /* IPv6, or IPv4 in v4-mapped form ::ffff:a.b.c.d */
};

/* qs_addr_value.flags */
#define QS_ADDR_EXCLUSIVE (1u << 0) /* the stack owns the address outright (see above) */

/* The VLAN an address is on, as its frames carry it: 0 for untagged frames and for frames with
 * one 802.1Q tag of VLAN id 0 (priority-tagged); else the id of their one 802.1Q tag. Frames
 * with an 802.1ad tag or two tags are on no address's VLAN: they pass (PASS_OTHER). A frame to
 * an owned address on another VLAN than the address's is not owned (PASS_NOT_OWNED). */
#define QS_MAX_VLAN 4094

struct qs_addr_value {
  __u32 flags;
  __u16 vlan; /* 0-QS_MAX_VLAN, see above */
  __u16 pad;  /* zero */
};

/* qs_ports: BPF_MAP_TYPE_HASH, struct qs_port_key -> struct qs_port_value. Consulted only for
 * addresses in qs_addrs that are not exclusive. */
#define QS_MAX_PORTS 65536

struct qs_port_key {
  /* An owned address, or the family's unspecified address for "any owned address of this
   * family": :: for IPv6, ::ffff:0.0.0.0 for IPv4. (Per family, as a socket bound to 0.0.0.0
   * does not take IPv6; a dual-stack socket adds both.) */
  __u8 addr[16];
  __be16 port; /* UDP destination port, network byte order */
  __u16 pad;   /* zero */
};

struct qs_port_value {
  __u32 flags; /* none yet; zero */
};

/* qs_neighbors: BPF_MAP_TYPE_HASH, struct qs_addr_key (an IPv6 neighbour of the stack) ->
 * struct qs_neighbor_value. As many as the stack's neighbour table holds by default. */
#define QS_MAX_NEIGHBORS 4096

struct qs_neighbor_value {
  __u16 vlan; /* the VLAN the neighbour is on, as for qs_addr_value */
  __u16 pad;  /* zero */
};

/* qs_counters: BPF_MAP_TYPE_PERCPU_ARRAY, key enum qs_counter, value __u64 (frames).
 * Each frame adds to exactly one of REDIRECT, PASS_NOT_OWNED, PASS_OTHER, MALFORMED,
 * REDIRECT_NO_XSK; the REDIRECT_<kind> ones say what the stack's frames were (REDIRECT and
 * REDIRECT_NO_XSK together). */
enum qs_counter {
  QS_COUNTER_REDIRECT = 0,     /* steered to the stack: redirected to the queue's socket */
  QS_COUNTER_PASS_NOT_OWNED,   /* IP or ARP for an address or port the stack does not own */
  QS_COUNTER_PASS_OTHER,       /* not ours by protocol: TCP, other ethertypes, 802.1ad/QinQ */
  QS_COUNTER_MALFORMED,        /* too short or impossible headers; passed to the kernel */
  QS_COUNTER_REDIRECT_NO_XSK,  /* the stack's, but its RX queue has no socket: passed instead */
  QS_COUNTER_REDIRECT_UDP,     /* of REDIRECT: UDP (IPv4 or IPv6) */
  QS_COUNTER_REDIRECT_ICMP,    /* of REDIRECT: ICMP, ICMPv6 (NDP to an exclusive address too) */
  QS_COUNTER_REDIRECT_ARP,     /* of REDIRECT: ARP */
  QS_COUNTER_REDIRECT_NS,      /* of REDIRECT: NDP to a group: solicitations to a
                                * solicited-node group, advertisements to all nodes about
                                * the stack's neighbours */
  QS_COUNTER_REDIRECT_OTHER,   /* of REDIRECT: other IP protocols to an exclusive address */
  QS_COUNTER_MAX
};

#endif /* QUADSOCK_STACK_XDP_STEER_COMMON_H_ */
