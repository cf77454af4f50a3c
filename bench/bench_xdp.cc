#include "bench/bench_xdp.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/if_link.h>
#include <net/if.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <cstring>
#include <mutex>
#include <thread>

#include "absl/strings/str_cat.h"
#include "bench/bench_xdp_common.h"
#include "bench/bench_xdp_bpf_object.h"
#include "stack/link/errno_status.h"
#include "stack/net/frame_builder.h"

namespace quadsock::bench {
namespace {

using link::ErrnoStatus;

// Opens and loads the embedded object (both programs and their maps).
absl::StatusOr<bpf_object*> LoadObject() {
  const std::span<const uint8_t> bytes = BenchXdpObject();
  LIBBPF_OPTS(bpf_object_open_opts, open_options, .object_name = "qsbench");
  bpf_object* object = bpf_object__open_mem(bytes.data(), bytes.size(), &open_options);
  if (object == nullptr) return ErrnoStatus(errno, "opening the benchmark's BPF object");
  if (bpf_object__load(object) != 0) {
    const int err = errno;
    bpf_object__close(object);
    return ErrnoStatus(err, "loading the benchmark's BPF object");
  }
  return object;
}

absl::StatusOr<int> ProgramFd(bpf_object* object, const char* name) {
  bpf_program* program = bpf_object__find_program_by_name(object, name);
  if (program == nullptr) return absl::InternalError(absl::StrCat("no program ", name));
  return bpf_program__fd(program);
}

absl::StatusOr<int> MapFd(bpf_object* object, const char* name) {
  bpf_map* map = bpf_object__find_map_by_name(object, name);
  if (map == nullptr) return absl::InternalError(absl::StrCat("no map ", name));
  return bpf_map__fd(map);
}

absl::StatusOr<net::MacAddress> InterfaceMac(const std::string& interface) {
  std::string text(17, '\0');
  FILE* f = std::fopen(absl::StrCat("/sys/class/net/", interface, "/address").c_str(), "r");
  if (f == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat("no interface ", interface));
  }
  const size_t n = std::fread(text.data(), 1, text.size(), f);
  std::fclose(f);
  text.resize(n);
  return net::MacAddress::Parse(text);
}

double MonotonicSeconds() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Generator>> Generator::Create(const GeneratorOptions& options) {
  if (options.flows == 0 || options.ports_per_ip == 0 ||
      options.port_base + options.ports_per_ip - 1 > 0xffff) {
    return absl::InvalidArgumentError("flows and ports_per_ip must be positive, ports <= 65535");
  }
  if (!options.dst.address.is_v4()) {
    return absl::InvalidArgumentError("the generator sends IPv4 only");
  }
  if (options.batch_size == 0 || options.batch_size > 256) {
    return absl::InvalidArgumentError("batch_size must be 1..256");
  }
  std::unique_ptr<Generator> g(new Generator());
  g->options_ = options;
  g->ifindex_ = if_nametoindex(options.interface.c_str());
  if (g->ifindex_ == 0) {
    return absl::FailedPreconditionError(absl::StrCat("no interface ", options.interface));
  }
  if (g->options_.src_mac.IsZero()) {
    absl::StatusOr<net::MacAddress> mac = InterfaceMac(options.interface);
    if (!mac.ok()) return mac.status();
    g->options_.src_mac = *mac;
  }

  // The template: the program rewrites the source address and port of each copy.
  const net::Endpoint src{net::IpAddress::V4(options.ip_base),
                          static_cast<uint16_t>(options.port_base)};
  std::vector<uint8_t> payload(options.payload_bytes, 0x5a);
  g->frame_.resize(2048);
  std::optional<size_t> n = net::BuildUdp({.src = g->options_.src_mac, .dst = options.dst_mac},
                                          {.src = src, .dst = options.dst}, payload, g->frame_);
  if (!n.has_value()) return absl::InvalidArgumentError("payload too large for a frame");
  g->frame_.resize(*n);

  absl::StatusOr<bpf_object*> object = LoadObject();
  if (!object.ok()) return object.status();
  g->object_ = *object;
  absl::StatusOr<int> program = ProgramFd(g->object_, QSB_GEN_PROGRAM);
  absl::StatusOr<int> config_fd = MapFd(g->object_, QSB_MAP_GEN_CONFIG);
  absl::StatusOr<int> state_fd = MapFd(g->object_, QSB_MAP_GEN_STATE);
  if (!program.ok()) return program.status();
  if (!config_fd.ok()) return config_fd.status();
  if (!state_fd.ok()) return state_fd.status();
  g->program_fd_ = *program;
  g->config_fd_ = *config_fd;
  g->state_fd_ = *state_fd;
  if (absl::Status s = g->Configure(0); !s.ok()) return s;
  return g;
}

Generator::~Generator() {
  if (object_ != nullptr) bpf_object__close(object_);
}

absl::Status Generator::Configure(uint64_t interval_ns) {
  const qsb_gen_config config = {.flows = options_.flows,
                                 .ports_per_ip = options_.ports_per_ip,
                                 .ip_base = options_.ip_base,
                                 .port_base = options_.port_base,
                                 .pad = 0,
                                 .interval_ns = interval_ns};
  const uint32_t zero = 0;
  if (bpf_map_update_elem(config_fd_, &zero, &config, BPF_ANY) != 0) {
    return ErrnoStatus(errno, "writing the generator's configuration");
  }
  return absl::OkStatus();
}

uint64_t Generator::Sent() const {
  const int cpus = libbpf_num_possible_cpus();
  std::vector<qsb_gen_state> states(cpus > 0 ? cpus : 1);
  const uint32_t zero = 0;
  if (bpf_map_lookup_elem(state_fd_, &zero, states.data()) != 0) return 0;
  uint64_t sum = 0;
  for (const qsb_gen_state& s : states) sum += s.sent;
  return sum;
}

absl::Status Generator::Send(uint32_t runs) {
  xdp_md ctx = {};
  ctx.data_end = frame_.size();
  ctx.ingress_ifindex = ifindex_;
  LIBBPF_OPTS(bpf_test_run_opts, run, .data_in = frame_.data(),
              .data_size_in = static_cast<uint32_t>(frame_.size()), .ctx_in = &ctx,
              .ctx_size_in = sizeof(ctx), .repeat = static_cast<int>(runs),
              .flags = BPF_F_TEST_XDP_LIVE_FRAMES, .batch_size = options_.batch_size);
  if (bpf_prog_test_run_opts(program_fd_, &run) != 0) {
    const int err = errno;
    if (err == EINTR) return absl::AbortedError("BPF_PROG_RUN interrupted by a signal");
    return ErrnoStatus(err, "BPF_PROG_RUN (live frames)");
  }
  return absl::OkStatus();
}

absl::StatusOr<GeneratorResult> Generator::Run(absl::Duration duration, double rate_pps,
                                               const std::atomic<bool>* stop) {
  const uint64_t interval_ns =
      rate_pps > 0 ? std::max<uint64_t>(1, static_cast<uint64_t>(1e9 / rate_pps + 0.5)) : 0;
  if (absl::Status s = Configure(interval_ns); !s.ok()) return s;
  GeneratorResult result;
  const uint64_t sent_before = Sent();
  const double start = MonotonicSeconds();
  const double limit = absl::ToDoubleSeconds(duration);
  // Several threads on this CPU (they inherit its pinning), so that while one sleeps in a
  // call's fixed setup and teardown the others send. The program's per-CPU schedule and flow
  // sequence are shared by all of them, and each batch runs with bottom halves off, so the
  // pacing and the flow order stay those of one sender.
  std::atomic<uint64_t> runs{0};
  std::mutex mu;
  absl::Status error;
  auto sender = [&] {
    while (MonotonicSeconds() - start < limit &&
           !(stop != nullptr && stop->load(std::memory_order_relaxed))) {
      absl::Status s = Send(options_.chunk_frames);
      if (!s.ok()) {
        if (!absl::IsAborted(s)) {
          std::lock_guard<std::mutex> lock(mu);
          error = s;
        }
        return;
      }
      runs.fetch_add(options_.chunk_frames, std::memory_order_relaxed);
    }
  };
  std::vector<std::thread> threads;
  for (uint32_t i = 1; i < std::max<uint32_t>(1, options_.threads); ++i) {
    threads.emplace_back(sender);
  }
  sender();
  for (std::thread& t : threads) t.join();
  if (!error.ok()) return error;
  result.runs = runs.load();
  result.seconds = MonotonicSeconds() - start;
  result.frames = Sent() - sent_before;
  return result;
}

absl::StatusOr<std::unique_ptr<DropSink>> DropSink::Attach(const std::string& interface) {
  const uint32_t ifindex = if_nametoindex(interface.c_str());
  if (ifindex == 0) return absl::FailedPreconditionError(absl::StrCat("no interface ", interface));
  std::unique_ptr<DropSink> sink(new DropSink());
  absl::StatusOr<bpf_object*> object = LoadObject();
  if (!object.ok()) return object.status();
  sink->object_ = *object;
  absl::StatusOr<int> program = ProgramFd(sink->object_, QSB_DROP_PROGRAM);
  absl::StatusOr<int> count = MapFd(sink->object_, QSB_MAP_DROP_COUNT);
  if (!program.ok()) return program.status();
  if (!count.ok()) return count.status();
  sink->count_fd_ = *count;
  LIBBPF_OPTS(bpf_link_create_opts, link_options, .flags = XDP_FLAGS_DRV_MODE);
  sink->link_fd_ = bpf_link_create(*program, ifindex, BPF_XDP, &link_options);
  if (sink->link_fd_ < 0) {
    return ErrnoStatus(errno, absl::StrCat("attaching XDP_DROP to ", interface));
  }
  return sink;
}

DropSink::~DropSink() {
  if (link_fd_ >= 0) close(link_fd_);
  if (object_ != nullptr) bpf_object__close(object_);
}

uint64_t DropSink::Count() const {
  const int cpus = libbpf_num_possible_cpus();
  std::vector<uint64_t> values(cpus > 0 ? cpus : 1);
  const uint32_t zero = 0;
  if (bpf_map_lookup_elem(count_fd_, &zero, values.data()) != 0) return 0;
  uint64_t sum = 0;
  for (uint64_t v : values) sum += v;
  return sum;
}

}  // namespace quadsock::bench
