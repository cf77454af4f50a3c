// The benchmark's own XDP tools (bench_xdp.bpf.c): a traffic generator and an XDP_DROP sink.
//
// Generator runs the qsbench_gen program with BPF_PROG_RUN and BPF_F_TEST_XDP_LIVE_FRAMES on
// one end of a veth pair: every run of the program rewrites a copy of a 64-byte UDP/IPv4
// template to the next flow and returns XDP_TX, which the kernel turns into a transmission out
// of that interface, so the frames arrive at the peer end (and its XDP program, AF_XDP socket
// or kernel stack). The program runs on the calling thread's CPU; pin the thread first.
// (xdp-trafficgen from xdp-tools does the same but fails on this kernel.)
//
// DropSink attaches qsbench_drop (count, then XDP_DROP) to an interface as a bpf_link: the
// XDP_DROP ceiling of that interface.
//
//   GeneratorOptions o;
//   o.interface = "qsb-gen0";
//   o.dst_mac = ...; o.dst = *net::Endpoint::Parse("10.9.0.2:4000");
//   o.flows = 500; o.ip_base = 0x0a090101; o.port_base = 10000;
//   std::unique_ptr<Generator> g = Generator::Create(o).value();
//   GeneratorResult r = g->Run(absl::Seconds(5), /*rate_pps=*/0, &stop).value();
#ifndef QUADSOCK_BENCH_BENCH_XDP_H_
#define QUADSOCK_BENCH_BENCH_XDP_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "stack/net/address.h"

struct bpf_object;

namespace quadsock::bench {

struct GeneratorOptions {
  std::string interface;      // the veth end the frames leave through
  net::MacAddress src_mac;    // zero: the interface's own
  net::MacAddress dst_mac;    // the receiving end's
  net::Endpoint dst;          // IPv4
  uint32_t flows = 1;         // source (address, port) pairs, see bench_xdp_common.h
  uint32_t ports_per_ip = 50000;
  uint32_t ip_base = 0;       // host byte order
  uint32_t port_base = 10000;
  size_t payload_bytes = 18;  // 18: 60-byte frames, 64 on the wire with the FCS
  uint32_t batch_size = 256;  // frames per BPF_PROG_RUN batch (the most the kernel allows)
  // Program runs per BPF_PROG_RUN call. Each call costs a fixed ~25 ms here (the live-frames
  // page pool is set up and torn down per call), so calls must be long.
  uint32_t chunk_frames = 1 << 20;
  // Threads calling BPF_PROG_RUN at once on the calling thread's CPU. The fixed cost of a
  // call is mostly sleeping: with one thread, a paced run with short calls (1 << 16 frames)
  // sent only 22-30% of the rate asked for; with two 91%, with three 97% (one sends while the
  // others sleep).
  uint32_t threads = 3;
};

struct GeneratorResult {
  uint64_t frames = 0;  // frames the program sent (XDP_TX); the peer may still drop some
  uint64_t runs = 0;    // program runs (paced: most of them send nothing)
  double seconds = 0;
  double pps() const { return seconds > 0 ? frames / seconds : 0; }
};

class Generator {
 public:
  // Loads the program and writes its configuration. INVALID_ARGUMENT for bad options,
  // FAILED_PRECONDITION for no such interface, PERMISSION_DENIED without BPF privileges.
  static absl::StatusOr<std::unique_ptr<Generator>> Create(const GeneratorOptions& options);
  ~Generator();

  // Sends for `duration` (rounded up to whole BPF_PROG_RUN calls), as fast as possible
  // (`rate_pps` 0) or paced to `rate_pps` by the program. Returns early when `stop` becomes
  // true. The error is the kernel's (BPF_PROG_RUN).
  absl::StatusOr<GeneratorResult> Run(absl::Duration duration, double rate_pps,
                                      const std::atomic<bool>* stop);

 private:
  Generator() = default;
  // One BPF_PROG_RUN of `runs` program runs.
  absl::Status Send(uint32_t runs);
  absl::Status Configure(uint64_t interval_ns);
  // Frames sent so far (the program's per-CPU counters).
  uint64_t Sent() const;

  GeneratorOptions options_;
  bpf_object* object_ = nullptr;
  int program_fd_ = -1;
  int config_fd_ = -1;
  int state_fd_ = -1;
  uint32_t ifindex_ = 0;
  std::vector<uint8_t> frame_;
};

class DropSink {
 public:
  // Loads qsbench_drop and attaches it natively to `interface` (a bpf_link, gone with the
  // object or the process).
  static absl::StatusOr<std::unique_ptr<DropSink>> Attach(const std::string& interface);
  ~DropSink();

  // Frames dropped so far, over all CPUs.
  uint64_t Count() const;

 private:
  DropSink() = default;

  bpf_object* object_ = nullptr;
  int link_fd_ = -1;
  int count_fd_ = -1;
};

}  // namespace quadsock::bench

#endif  // QUADSOCK_BENCH_BENCH_XDP_H_
