/* The benchmark's XDP programs. qsbench_gen is a traffic generator run by BPF_PROG_RUN with
 * live frames (see bench_xdp_common.h); qsbench_drop is the XDP_DROP ceiling: attached to the
 * receiving veth end, it counts and drops every frame. */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/udp.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "bench/bench_xdp_common.h"

struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct qsb_gen_config);
} qsb_gen_config SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct qsb_gen_state);
} qsb_gen_state SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, __u64);
} qsb_drop_count SEC(".maps");

/* The IPv4 header checksum of a 20-byte header (no options) whose check field is zero. */
static __always_inline __u16 ipv4_checksum(const struct iphdr *ip) {
  const __u16 *words = (const __u16 *)ip;
  __u32 sum = 0;
#pragma unroll
  for (int i = 0; i < 10; i++) sum += words[i];
  sum = (sum & 0xffff) + (sum >> 16);
  sum = (sum & 0xffff) + (sum >> 16);
  return (__u16)~sum;
}

struct spin_until {
  __u64 until_ns;
};

/* bpf_loop's callback: 1 (stop) once the clock has reached the time. */
static long spin_until_done(__u32 index, void *arg) {
  const struct spin_until *wait = arg;
  return bpf_ktime_get_ns() >= wait->until_ns ? 1 : 0;
}

SEC("xdp")
int qsbench_gen(struct xdp_md *ctx) {
  void *data = (void *)(long)ctx->data;
  void *end = (void *)(long)ctx->data_end;
  struct ethhdr *eth = data;
  struct iphdr *ip = (void *)(eth + 1);
  struct udphdr *udp = (void *)(ip + 1);
  if ((void *)(udp + 1) > end) return XDP_ABORTED;
  if (eth->h_proto != bpf_htons(ETH_P_IP) || ip->ihl != 5) return XDP_ABORTED;

  __u32 zero = 0;
  const struct qsb_gen_config *config = bpf_map_lookup_elem(&qsb_gen_config, &zero);
  struct qsb_gen_state *state = bpf_map_lookup_elem(&qsb_gen_state, &zero);
  if (config == 0 || state == 0 || config->flows == 0 || config->ports_per_ip == 0) {
    return XDP_ABORTED;
  }
  if (config->interval_ns != 0) {
    struct spin_until wait = {.until_ns = state->next_ns};
    const __u64 now = bpf_ktime_get_ns();
    if (now < state->next_ns) {
      /* Ahead of schedule: wait here rather than drop the frame (see bench_xdp_common.h). */
      bpf_loop(QSB_GEN_MAX_SPINS, spin_until_done, &wait, 0);
    } else if (now - state->next_ns > QSB_GEN_MAX_LAG_NS) {
      state->next_ns = now; /* after a gap: restart rather than burst */
    }
    state->next_ns += config->interval_ns;
  }
  /* Per-CPU sequence: the generator runs on one CPU, so this walks the flows in order. */
  const __u32 flow = (__u32)(state->sent % config->flows);
  state->sent += 1;

  ip->saddr = bpf_htonl(config->ip_base + flow / config->ports_per_ip);
  udp->source = bpf_htons((__u16)(config->port_base + flow % config->ports_per_ip));
  udp->check = 0;
  ip->check = 0;
  ip->check = ipv4_checksum(ip);
  return XDP_TX;
}

SEC("xdp")
int qsbench_drop(struct xdp_md *ctx) {
  __u32 zero = 0;
  __u64 *count = bpf_map_lookup_elem(&qsb_drop_count, &zero);
  if (count) *count += 1;
  return XDP_DROP;
}

char LICENSE[] SEC("license") = "GPL";
