// trafficgen: the benchmark's traffic generator (bench_xdp.h) as a command. Run it inside the
// namespace of the sending veth end; it pins itself to --cpu, sends 64-byte UDP/IPv4 frames
// spread over --flows source (address, port) pairs for --duration seconds, as fast as it can
// or paced to --rate pps, and prints one JSON line with what it sent. SIGINT/SIGTERM stop it
// early (it still prints).
//
//   ip netns exec gen trafficgen --interface=qsb-g0 --dst_mac=02:00:00:00:00:02
//       --dst=10.9.0.2:4000 --flows=500 --ip_base=10.9.1.1 --port_base=10000
//       --duration=5 --cpu=1          (one command line)
//   {"frames": 18000000, "seconds": 5.000, "pps": 3600000}
#include <signal.h>

#include <atomic>
#include <cstdio>

#include "absl/time/time.h"
#include "bench/bench_xdp.h"
#include "bench/internal/args.h"
#include "bench/internal/pin.h"

namespace {

std::atomic<bool> g_stop{false};

void OnSignal(int) { g_stop.store(true); }

int Fail(const absl::Status& s) {
  std::fprintf(stderr, "trafficgen: %s\n", s.ToString().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace quadsock;
  bench::Args args(argc, argv);
  bench::GeneratorOptions o;
  o.interface = args.String("interface", "");
  const std::string dst_mac = args.String("dst_mac", "");
  const std::string dst = args.String("dst", "");
  const std::string ip_base = args.String("ip_base", "10.9.1.1");
  o.flows = args.Int("flows", 1);
  o.ports_per_ip = args.Int("ports_per_ip", 50000);
  o.port_base = args.Int("port_base", 10000);
  o.batch_size = args.Int("batch", 256);
  o.chunk_frames = args.Int("chunk", 1 << 16);
  o.threads = args.Int("threads", 3);
  const double duration = args.Double("duration", 5);
  const double rate = args.Double("rate", 0);
  const int cpu = args.Int("cpu", 1);
  if (!args.Unused().empty() || o.interface.empty() || dst_mac.empty() || dst.empty()) {
    std::fprintf(stderr,
                 "usage: %s --interface=DEV --dst_mac=MAC --dst=IP:PORT [--flows=N] "
                 "[--ports_per_ip=N] [--ip_base=IP] [--port_base=P] [--duration=S] [--rate=PPS] "
                 "[--cpu=N] [--batch=N] [--chunk=N] [--threads=N]\n",
                 argv[0]);
    return 2;
  }
  absl::StatusOr<net::MacAddress> mac = net::MacAddress::Parse(dst_mac);
  absl::StatusOr<net::Endpoint> endpoint = net::Endpoint::Parse(dst);
  absl::StatusOr<net::IpAddress> base = net::IpAddress::Parse(ip_base);
  if (!mac.ok()) return Fail(mac.status());
  if (!endpoint.ok()) return Fail(endpoint.status());
  if (!base.ok() || !base->is_v4()) return Fail(absl::InvalidArgumentError("bad --ip_base"));
  o.dst_mac = *mac;
  o.dst = *endpoint;
  const uint8_t* b = base->data();
  o.ip_base = (uint32_t{b[0]} << 24) | (uint32_t{b[1]} << 16) | (uint32_t{b[2]} << 8) | b[3];

  if (absl::Status s = bench::PinToCpu(cpu); !s.ok()) return Fail(s);
  signal(SIGINT, OnSignal);
  signal(SIGTERM, OnSignal);
  absl::StatusOr<std::unique_ptr<bench::Generator>> g = bench::Generator::Create(o);
  if (!g.ok()) return Fail(g.status());
  absl::StatusOr<bench::GeneratorResult> r =
      (*g)->Run(absl::Seconds(duration), rate, &g_stop);
  if (!r.ok()) return Fail(r.status());
  std::printf("{\"frames\": %llu, \"runs\": %llu, \"seconds\": %.4f, \"pps\": %.0f}\n",
              static_cast<unsigned long long>(r->frames),
              static_cast<unsigned long long>(r->runs), r->seconds, r->pps());
  std::fflush(stdout);
  return 0;
}
