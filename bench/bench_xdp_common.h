/* The contract between the benchmark's XDP programs (bench_xdp.bpf.c) and their loader
 * (bench_xdp.cc): map names, the generator's configuration and the counters. C, so that both
 * clang -target bpf and g++ include it (the steer_common.h habit).
 *
 * The generator program runs under BPF_PROG_RUN with BPF_F_TEST_XDP_LIVE_FRAMES: the kernel
 * feeds it copies of one template frame (Ethernet + IPv4 + UDP); the program gives each copy
 * the source address and port of the next flow and returns XDP_TX, so the frame leaves through
 * the ingress interface (a veth end) and arrives at its peer.
 *
 *   struct qsb_gen_config c = {.flows = 500, .ports_per_ip = 500, .ip_base = 0x0a090101,
 *                              .port_base = 10000, .interval_ns = 0};
 *   bpf_map_update_elem(config_fd, &zero, &c, BPF_ANY);
 */
#ifndef QUADSOCK_BENCH_BENCH_XDP_COMMON_H_
#define QUADSOCK_BENCH_BENCH_XDP_COMMON_H_

#include <linux/types.h>

/* Program names (bpf_prog_info.name, at most 15 characters). Not "quadsock_*": those are the
 * stack's, and its loader removes stale ones by that prefix. */
#define QSB_GEN_PROGRAM "qsbench_gen"
#define QSB_DROP_PROGRAM "qsbench_drop"

/* BPF_MAP_TYPE_ARRAY, one entry (key 0): struct qsb_gen_config. */
#define QSB_MAP_GEN_CONFIG "qsb_gen_config"
/* BPF_MAP_TYPE_PERCPU_ARRAY, one entry: struct qsb_gen_state. */
#define QSB_MAP_GEN_STATE "qsb_gen_state"
/* BPF_MAP_TYPE_PERCPU_ARRAY, one entry: __u64 frames dropped by the XDP_DROP program. */
#define QSB_MAP_DROP_COUNT "qsb_drop_count"

/* Pacing: with interval_ns non-zero, the program waits (spinning on the clock in bpf_loop) until
 * the next send time, sends (XDP_TX), and moves the send time on by interval_ns. So the offered
 * rate is smooth down to the nanosecond. It does not drop the frames it is not to send yet: a
 * frame freed on the generator's CPU goes back through its run's page-pool ring (returns are
 * not "direct" under BPF_PROG_RUN), the ring the receiver's CPU returns every delivered frame
 * to, so at a low paced rate nearly every run was a second producer on that ring's lock. After
 * a gap longer than QSB_GEN_MAX_LAG_NS (between two BPF_PROG_RUN calls) the schedule restarts
 * instead of bursting to catch up.
 *
 * Flow i (0 <= i < flows) has source address ip_base + i / ports_per_ip and source port
 * port_base + i % ports_per_ip; consecutive frames take consecutive flows. Host byte order
 * here; the program converts. The UDP checksum is set to 0 ("none", valid for IPv4) and the
 * IPv4 header checksum is recomputed. */
struct qsb_gen_config {
  __u32 flows;        /* at least 1 */
  __u32 ports_per_ip; /* at least 1 */
  __u32 ip_base;
  __u32 port_base;    /* port_base + ports_per_ip - 1 must fit in 16 bits */
  __u32 pad;
  __u64 interval_ns;  /* 0: unpaced, every run sends */
};

/* Per CPU: frames sent (XDP_TX; also the flow sequence) and the next send time (paced). */
struct qsb_gen_state {
  __u64 sent;
  __u64 next_ns;
};

/* Paced: how far (ns) the schedule may fall behind before it restarts. Until then the program
 * catches up, at most one BPF_PROG_RUN batch (256 frames) at a time. */
#define QSB_GEN_MAX_LAG_NS 5000000ull

/* Paced: the most clock reads one frame waits for (bpf_loop iterations; about 20 ns each), so a
 * wait ends by itself even if the schedule is far ahead. */
#define QSB_GEN_MAX_SPINS (1u << 20)

#endif /* QUADSOCK_BENCH_BENCH_XDP_COMMON_H_ */
