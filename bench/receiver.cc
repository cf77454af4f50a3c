// receiver: the receiving side of the network benchmarks, one process per case, run inside
// the receiving namespace and pinned to one CPU (--cpu). It sets a receiver up, prints
// "READY" on a line of its own, waits for the first packet (at most --wait seconds), lets
// --warmup seconds pass, then counts received packets over --samples windows of --window
// seconds and prints one JSON line: {"mode": ..., "samples": [pps, ...], "details": {...}}.
//
// Modes (--mode):
//   kernel    kernel UDP sockets: --listener (one unconnected socket) and/or --sockets=N
//             sockets connected to the generator's flows, all on --local:--port (SO_REUSEPORT).
//             One socket alone is read with recvmmsg; several with epoll + recvmmsg.
//   quadsock  quadsock's AfXdpStack on --interface (AF_XDP copy mode), the same sockets, each
//             with a zero-copy receive callback that counts (the in-process discard consumer);
//             the stack's own poll thread (Start()) runs on --cpu. --hash4=false is
//             "without hash4" (Linux before 6.13).
//   afxdp     the AF_XDP ceiling: quadsock's steering program and a bare AF_XDP socket (XskLink)
//             that only gives frames back to the fill ring, sleeping in poll() when idle.
//   xdpdrop   the XDP_DROP ceiling: a program that counts and drops (bench_xdp.h).
// quadsock and afxdp take --ring_size (each AF_XDP ring; default 2048, the UMEM twice that),
// so that both measure with the same buffering.
//
// Flow i of the generator comes from ip_base + i / ports_per_ip, port port_base + i %
// ports_per_ip; connected socket i is connected to that peer.
//
//   ip netns exec rx receiver --mode=quadsock --interface=qsb-r0 --sockets=500 --cpu=0
//   READY
//   {"mode": "quadsock", "samples": [2101000, 2098000, ...], "details": {...}}
//
// --serve (the capacity search of bench/netbench.py): after READY the receiver receives until
// its stdin ends, keeping a running count of the packets received; each line "COUNT" on stdin
// is answered with "COUNT <packets so far>" (a thread that sleeps in read() answers, so the
// receive loop does not poll stdin). At the end it prints
//   {"mode": ..., "total": N, "details": {...}}
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "bench/bench_xdp.h"
#include "bench/internal/args.h"
#include "bench/internal/pin.h"
#include "bench/internal/run.h"
#include "stack/afxdp_stack.h"
#include "stack/link/errno_status.h"
#include "stack/link/xsk_link.h"
#include "stack/xdp/xdp_program.h"

namespace quadsock::bench {
namespace {

using link::ErrnoStatus;

struct Config {
  std::string mode;
  std::string interface;
  net::IpAddress local;
  uint16_t port = 4000;
  int prefix_length = 16;
  uint32_t sockets = 0;  // connected
  bool listener = false;  // one unconnected socket too
  bool hash4 = true;
  bool busy_poll = false;  // quadsock and afxdp: preferred busy polling (XskPort::Options)
  uint32_t ring_size = 2048;  // quadsock and afxdp: each AF_XDP ring; the UMEM has twice this
  uint32_t ip_base = 0;
  uint32_t port_base = 10000;
  uint32_t ports_per_ip = 50000;
  int rcvbuf = 4 << 20;
  RunTiming timing;
};

net::Endpoint Peer(const Config& c, uint32_t i) {
  return {net::IpAddress::V4(c.ip_base + i / c.ports_per_ip),
          static_cast<uint16_t>(c.port_base + i % c.ports_per_ip)};
}

sockaddr_in ToSockaddr(const net::Endpoint& e) {
  sockaddr_in a = {};
  a.sin_family = AF_INET;
  a.sin_port = htons(e.port);
  std::memcpy(&a.sin_addr, e.address.data(), 4);
  return a;
}

// Kernel sockets: recvmmsg on one, epoll + recvmmsg on several.
class KernelReceiver : public Receiver {
 public:
  static absl::StatusOr<std::unique_ptr<KernelReceiver>> Create(const Config& c) {
    std::unique_ptr<KernelReceiver> r(new KernelReceiver());
    const uint32_t total = c.sockets + (c.listener ? 1 : 0);
    if (total == 0) return absl::InvalidArgumentError("no sockets: --listener and/or --sockets");
    rlimit nofile;
    getrlimit(RLIMIT_NOFILE, &nofile);
    nofile.rlim_cur = nofile.rlim_max;
    setrlimit(RLIMIT_NOFILE, &nofile);
    const sockaddr_in local = ToSockaddr({c.local, c.port});
    for (uint32_t i = 0; i < total; ++i) {
      const bool connected = i < c.sockets;
      const int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
      if (fd < 0) return ErrnoStatus(errno, "socket");
      r->fds_.push_back(fd);
      const int one = 1;
      setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one));
      setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &c.rcvbuf, sizeof(c.rcvbuf));
      if (bind(fd, reinterpret_cast<const sockaddr*>(&local), sizeof(local)) != 0) {
        return ErrnoStatus(errno, "bind");
      }
      if (connected) {
        const sockaddr_in peer = ToSockaddr(Peer(c, i));
        if (connect(fd, reinterpret_cast<const sockaddr*>(&peer), sizeof(peer)) != 0) {
          return ErrnoStatus(errno, "connect");
        }
      }
    }
    for (size_t i = 0; i < kBatch; ++i) {
      r->iov_[i] = {r->buffers_[i], sizeof(r->buffers_[i])};
      r->msgs_[i].msg_hdr.msg_iov = &r->iov_[i];
      r->msgs_[i].msg_hdr.msg_iovlen = 1;
    }
    if (total == 1) {
      timeval tv = {0, 20000};
      setsockopt(r->fds_[0], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
      return r;
    }
    r->epoll_ = epoll_create1(EPOLL_CLOEXEC);
    if (r->epoll_ < 0) return ErrnoStatus(errno, "epoll_create1");
    for (int fd : r->fds_) {
      epoll_event ev = {};
      ev.events = EPOLLIN;
      ev.data.fd = fd;
      if (epoll_ctl(r->epoll_, EPOLL_CTL_ADD, fd, &ev) != 0) return ErrnoStatus(errno, "epoll_ctl");
    }
    return r;
  }

  ~KernelReceiver() override {
    if (epoll_ >= 0) close(epoll_);
    for (int fd : fds_) close(fd);
  }

  uint64_t Step() override {
    if (epoll_ < 0) {
      const int n = recvmmsg(fds_[0], msgs_, kBatch, MSG_WAITFORONE, nullptr);
      return n > 0 ? n : 0;
    }
    epoll_event events[kBatch];
    const int ready = epoll_wait(epoll_, events, kBatch, 20);
    uint64_t got = 0;
    for (int i = 0; i < ready; ++i) {
      const int n = recvmmsg(events[i].data.fd, msgs_, kBatch, MSG_DONTWAIT, nullptr);
      if (n > 0) got += n;
    }
    return got;
  }

 private:
  static constexpr size_t kBatch = 64;
  KernelReceiver() = default;

  std::vector<int> fds_;
  int epoll_ = -1;
  uint8_t buffers_[kBatch][2048];
  iovec iov_[kBatch];
  mmsghdr msgs_[kBatch] = {};
};

// quadsock: AfXdpStack with counting callbacks, polled on this thread.
class QuadsockReceiver : public Receiver {
 public:
  static absl::StatusOr<std::unique_ptr<QuadsockReceiver>> Create(const Config& c) {
    std::unique_ptr<QuadsockReceiver> r(new QuadsockReceiver());
    stack::AfXdpOptions o;
    o.interface = c.interface;
    o.mode = xdp::XdpMode::kCopy;
    o.umem_frames = 2 * c.ring_size;
    o.ring_size = c.ring_size;
    absl::StatusOr<net::IpPrefix> prefix = net::IpPrefix::Make(c.local, c.prefix_length);
    if (!prefix.ok()) return prefix.status();
    o.stack.addresses = {*prefix};
    o.stack.hash4 = c.hash4;
    o.busy_poll = c.busy_poll;
    absl::StatusOr<std::unique_ptr<stack::AfXdpStack>> s = stack::AfXdpStack::Create(o);
    if (!s.ok()) return s.status();
    r->afxdp_ = std::move(*s);
    stack::Stack& st = r->afxdp_->stack();
    // One writer (the poll thread), one reader (Step): a relaxed load and store suffice.
    std::atomic<uint64_t>* delivered = &r->delivered_;
    auto count = [delivered](const net::Endpoint&, std::span<const uint8_t>) {
      delivered->store(delivered->load(std::memory_order_relaxed) + 1,
                       std::memory_order_relaxed);
    };
    const uint32_t total = c.sockets + (c.listener ? 1 : 0);
    for (uint32_t i = 0; i < total; ++i) {
      absl::StatusOr<stack::SocketId> id = st.Open(net::Family::kV4, {.reuse_port = true});
      if (!id.ok()) return id.status();
      if (auto b = st.Bind(*id, {c.local, c.port}); !b.ok()) return b.status();
      if (i < c.sockets) {
        if (auto k = st.Connect(*id, Peer(c, i)); !k.ok()) return k.status();
      }
      if (absl::Status cb = st.SetReceiveCallback(*id, count); !cb.ok()) return cb;
    }
    // The stack's own poll thread (it inherits this thread's CPU and nice value), as in
    // quadsockd: it spins while frames come and sleeps in poll() when idle.
    if (absl::Status s = st.Start(); !s.ok()) return s;
    return r;
  }

  ~QuadsockReceiver() override {
    if (afxdp_ != nullptr) afxdp_->stack().Stop();
  }

  uint64_t Step() override {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    const uint64_t now = delivered_.load(std::memory_order_relaxed);
    const uint64_t delta = now - last_;
    last_ = now;
    return delta;
  }

  std::map<std::string, double> Details() override {
    stack::Stack& st = afxdp_->stack();
    st.Stop();  // so that the frame accounting does not race with the poll thread
    const stack::StackCounters c = st.Counters();
    const demux::TableStats t = st.TableStats();
    std::map<std::string, double> d = {
        {"rx_frames", double(c.rx_frames)},
        {"udp_delivered", double(c.udp_delivered)},
        {"udp_no_socket", double(c.udp_no_socket)},
        {"lookups", double(t.lookups)},
        {"hash4_hits", double(t.hash4_hits)},
        {"hash4_misses", double(t.hash4_misses)},
        {"chain_steps", double(t.chain_steps)},
        {"sockets", double(t.sockets)},
        {"frame_accounting_ok", st.CheckFrameAccounting().ok() ? 1.0 : 0.0},
        // Datagrams bigger than a frame (bench/fragments_bench.py).
        {"fragments", double(c.fragments)},
        {"reassembled", double(c.reassembled)},
        {"reassembly_lost",
         double(c.reassembly_overlap + c.reassembly_stale + c.reassembly_evicted +
                c.reassembly_source_full + c.reassembly_budget_full + c.reassembly_malformed +
                c.reassembly_timed_out)},
        {"reassembly_stale", double(c.reassembly_stale)},
        {"reassembly_evicted", double(c.reassembly_evicted)},
        {"reassembly_source_full", double(c.reassembly_source_full)},
        {"reassembly_overlap", double(c.reassembly_overlap)},
        {"reassembly_duplicate", double(c.reassembly_duplicate)},
        {"bad_udp_checksum",
         double(c.parse_errors[static_cast<int>(net::ParseError::kBadUdpChecksum)])},
    };
    for (const link::LinkCounters& l : st.LinkCounters()) {
      d["link_rx_dropped"] += l.rx_dropped;
      d["link_fill_ring_empty"] += l.fill_ring_empty;
      d["busy_polls"] += l.busy_polls;
      d["busy_poll_unavailable"] += l.busy_poll_unavailable;
    }
    return d;
  }

 private:
  QuadsockReceiver() = default;
  std::unique_ptr<stack::AfXdpStack> afxdp_;
  std::atomic<uint64_t> delivered_{0};
  uint64_t last_ = 0;
};

// The bare AF_XDP socket behind quadsock's steering program: receive, give back.
class AfXdpReceiver : public Receiver {
 public:
  static absl::StatusOr<std::unique_ptr<AfXdpReceiver>> Create(const Config& c) {
    std::unique_ptr<AfXdpReceiver> r(new AfXdpReceiver());
    absl::StatusOr<std::unique_ptr<xdp::XdpProgram>> program = xdp::XdpProgram::Load();
    if (!program.ok()) return program.status();
    r->program_ = std::move(*program);
    link::XskPort::Options o;
    o.interface = c.interface;
    o.frames = 2 * c.ring_size;
    o.frame_size = 4096;
    o.ring_size = c.ring_size;
    o.bind_mode = link::XskBindMode::kCopy;
    o.busy_poll = c.busy_poll;
    absl::StatusOr<std::unique_ptr<link::XskPort>> port = link::XskPort::Create(o);
    if (!port.ok()) return port.status();
    r->port_ = std::move(*port);
    absl::StatusOr<std::unique_ptr<link::XskLink>> q = r->port_->OpenQueue(0);
    if (!q.ok()) return q.status();
    r->link_ = std::move(*q);
    if (absl::Status s = r->program_->AddAddress(c.local, /*exclusive=*/true); !s.ok()) return s;
    if (absl::Status s = r->program_->SetXsk(0, r->link_->socket_fd()); !s.ok()) return s;
    absl::StatusOr<xdp::XdpMode> mode =
        r->program_->Attach(r->port_->ifindex(), xdp::XdpMode::kCopy);
    if (!mode.ok()) return mode.status();
    return r;
  }

  ~AfXdpReceiver() override {
    link_.reset();  // the socket before its UMEM, the program last
    port_.reset();
  }

  uint64_t Step() override {
    link::FrameBuffer frames[64];
    const size_t n = link_->Receive(frames);
    link_->Release({frames, n});
    link_->Poll();
    if (link_->IsBusyPolling()) {
      // As the stack's poll thread: Receive runs the NAPI here; keep polling while frames come.
      const auto now = std::chrono::steady_clock::now();
      if (n > 0) last_frame_ = now;
      if (now - last_frame_ < std::chrono::milliseconds(1)) return n;
    }
    if (n == 0) {
      // Idle: sleep until the kernel has frames (as the stack's poll thread does).
      pollfd p = {link_->socket_fd(), POLLIN, 0};
      poll(&p, 1, 1);
    }
    return n;
  }

  std::map<std::string, double> Details() override {
    const link::LinkCounters l = link_->counters();
    return {{"link_rx_dropped", double(l.rx_dropped)}, {"napi_id", double(link_->napi_id())},
            {"busy_polls", double(l.busy_polls)},
            {"busy_poll_unavailable", double(l.busy_poll_unavailable)},
            {"link_fill_ring_empty", double(l.fill_ring_empty)},
            {"frame_accounting_ok", link_->CheckFrameAccounting().ok() ? 1.0 : 0.0}};
  }

 private:
  AfXdpReceiver() = default;
  std::unique_ptr<xdp::XdpProgram> program_;
  std::unique_ptr<link::XskPort> port_;
  std::unique_ptr<link::XskLink> link_;
  std::chrono::steady_clock::time_point last_frame_;
};

// The XDP_DROP ceiling: the count lives in the program's map.
class XdpDropReceiver : public Receiver {
 public:
  static absl::StatusOr<std::unique_ptr<XdpDropReceiver>> Create(const Config& c) {
    std::unique_ptr<XdpDropReceiver> r(new XdpDropReceiver());
    absl::StatusOr<std::unique_ptr<DropSink>> sink = DropSink::Attach(c.interface);
    if (!sink.ok()) return sink.status();
    r->sink_ = std::move(*sink);
    return r;
  }

  uint64_t Step() override {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    const uint64_t now = sink_->Count();
    const uint64_t delta = now - last_;
    last_ = now;
    return delta;
  }

 private:
  XdpDropReceiver() = default;
  std::unique_ptr<DropSink> sink_;
  uint64_t last_ = 0;
};

int Fail(const absl::Status& s) {
  std::fprintf(stderr, "receiver: %s\n", s.ToString().c_str());
  return 1;
}

int Main(int argc, char** argv) {
  Args args(argc, argv);
  Config c;
  c.mode = args.String("mode", "");
  c.interface = args.String("interface", "");
  const std::string local = args.String("local", "10.9.0.2");
  c.port = args.Int("port", 4000);
  c.prefix_length = args.Int("prefix_length", 16);
  c.sockets = args.Int("sockets", 0);
  c.listener = args.Bool("listener", false);
  c.hash4 = args.Bool("hash4", true);
  c.busy_poll = args.Bool("busy_poll", false);
  c.ring_size = args.Int("ring_size", 2048);
  const std::string ip_base = args.String("ip_base", "10.9.1.1");
  c.port_base = args.Int("port_base", 10000);
  c.ports_per_ip = args.Int("ports_per_ip", 50000);
  c.rcvbuf = args.Int("rcvbuf", 4 << 20);
  c.timing.wait = args.Double("wait", 10);
  c.timing.warmup = args.Double("warmup", 0.5);
  c.timing.window = args.Double("window", 1);
  c.timing.samples = args.Int("samples", 5);
  const int cpu = args.Int("cpu", 0);
  const bool serve = args.Bool("serve", false);
  if (!args.Unused().empty() || c.mode.empty()) {
    std::fprintf(stderr, "usage: %s --mode=kernel|quadsock|afxdp|xdpdrop [options; see the "
                 "header of bench/receiver.cc]\nunknown: %s\n", argv[0],
                 absl::StrJoin(args.Unused(), " ").c_str());
    return 2;
  }
  absl::StatusOr<net::IpAddress> l = net::IpAddress::Parse(local);
  absl::StatusOr<net::IpAddress> b = net::IpAddress::Parse(ip_base);
  if (!l.ok() || !l->is_v4() || !b.ok() || !b->is_v4()) {
    return Fail(absl::InvalidArgumentError("--local and --ip_base must be IPv4 addresses"));
  }
  c.local = *l;
  const uint8_t* bb = b->data();
  c.ip_base = (uint32_t{bb[0]} << 24) | (uint32_t{bb[1]} << 16) | (uint32_t{bb[2]} << 8) | bb[3];
  if (c.mode != "kernel" && c.interface.empty()) {
    return Fail(absl::InvalidArgumentError("--interface is needed for mode " + c.mode));
  }
  if (absl::Status s = PinToCpu(cpu); !s.ok()) return Fail(s);

  const double setup_start = MonotonicSeconds();
  std::unique_ptr<Receiver> r;
  absl::Status status;
  if (c.mode == "kernel") {
    auto k = KernelReceiver::Create(c);
    status = k.status();
    if (k.ok()) r = std::move(*k);
  } else if (c.mode == "quadsock") {
    auto q = QuadsockReceiver::Create(c);
    status = q.status();
    if (q.ok()) r = std::move(*q);
  } else if (c.mode == "afxdp") {
    auto a = AfXdpReceiver::Create(c);
    status = a.status();
    if (a.ok()) r = std::move(*a);
  } else if (c.mode == "xdpdrop") {
    auto x = XdpDropReceiver::Create(c);
    status = x.status();
    if (x.ok()) r = std::move(*x);
  } else {
    status = absl::InvalidArgumentError("unknown --mode " + c.mode);
  }
  if (!status.ok()) return Fail(status);
  const double setup_seconds = MonotonicSeconds() - setup_start;
  std::printf("READY\n");
  std::fflush(stdout);

  if (serve) {
    const uint64_t total = Serve(*r);
    return PrintServed(c.mode, total, DetailsJson(setup_seconds, r->Details()));
  }
  const std::vector<double> samples = Measure(c.timing, *r);
  return PrintMeasured(c.mode, samples, DetailsJson(setup_seconds, r->Details()));
}

}  // namespace
}  // namespace quadsock::bench

int main(int argc, char** argv) { return quadsock::bench::Main(argc, argv); }
