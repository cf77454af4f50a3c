// The smallest XDP program: it passes every frame to the kernel. quadsock attaches it where
// the stack must step aside; it is also the check that the BPF build chain (clang -target bpf,
// embedding, libbpf loading) works end to end. The steering program joins it here.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

SEC("xdp")
int quadsock_pass(struct xdp_md *ctx) {
  (void)ctx;
  return XDP_PASS;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
