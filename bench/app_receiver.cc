// app_receiver: the application of the benchmark's app_quadsock_* cases, a separate process
// beside a running quadsockd (bench/netbench.py starts both in the receiving namespace, pinned
// to the receiving CPU). Through the C++ client (clients/cpp) it opens the case's sockets on
// quadsockd's Unix listener, attaches the session's data channel (--transport=shm: shared
// memory, the _shm cases; --transport=grpc: the StreamChannel stream, the _grpc cases), and
// counts the datagrams it takes from the channel. It speaks bench/internal/run.h's protocol: "READY",
// then --serve (a running count on "COUNT" lines) or the measured windows, then one JSON line.
//
// The sockets are the receiver's (bench/receiver.cc): --listener (one unconnected socket) and/or
// --sockets=N connected to the generator's flows, all on --local:--port with reuse_port; flow i
// comes from ip_base + i / ports_per_ip, port port_base + i % ports_per_ip. They are made with
// the Batch RPC (open, bind, connect in one call per --batch operations), so 100k sockets take
// seconds, not minutes of unary calls.
//
// Every datagram is counted, its socket index checked against its peer (a connected socket's
// datagrams come from its own flow: `misdirected` otherwise), and its first payload byte read.
// The details at the end hold the accounting, taken from quadsockd after the channel is
// drained: the datagrams the stack delivered to sockets (`udp_delivered`, GetCounters) must be
// those received here plus those the sockets counted as dropped (a full ring) or hold in a
// queue (List: rx_dropped, queued), and the sockets' rx_datagrams those received here
// (`accounting_ok`).
//
//   ip netns exec rx app_receiver --listen=unix:/tmp/q/quadsock.sock --sockets=500 --cpu=0 --serve
//   READY
//   COUNT
//   COUNT 1234567
//   {"mode": "app_shm", "total": 1234567, "details": {"accounting_ok": 1, ...}}  ("app_grpc")
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "bench/internal/args.h"
#include "bench/internal/pin.h"
#include "bench/internal/run.h"
#include "clients/cpp/client.h"
#include "clients/cpp/data_channel.h"
#include "quadsock/v1/socket.grpc.pb.h"

namespace quadsock::bench {
namespace {

// The session metadata header (common/protocol.h, part of the API: socket.proto).
constexpr char kSessionHeader[] = "quadsock-session";

struct Config {
  std::string listen;
  std::string local = "10.9.0.2";
  uint16_t port = 4000;
  uint32_t sockets = 0;   // connected
  bool listener = false;  // one unconnected socket too
  uint32_t ip_base = 0;
  uint32_t port_base = 10000;
  uint32_t ports_per_ip = 50000;
  uint32_t ring_slots = 0;  // per channel ring; 0: quadsockd's default
  uint32_t batch = 1020;    // operations per Batch call
  ChannelTransport transport = ChannelTransport::kSharedMemory;
};

std::string Ipv4Text(uint32_t a) {
  return absl::StrCat(a >> 24, ".", (a >> 16) & 255, ".", (a >> 8) & 255, ".", a & 255);
}

absl::Status FromGrpc(const grpc::Status& s, absl::string_view what) {
  if (s.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()),
                      absl::StrCat(what, ": ", s.error_message()));
}

class AppReceiver : public Receiver {
 public:
  static absl::StatusOr<std::unique_ptr<AppReceiver>> Create(const Config& c) {
    std::unique_ptr<AppReceiver> r(new AppReceiver(c));
    absl::StatusOr<std::unique_ptr<Client>> client =
        Client::Connect(c.listen, {.client_name = "app_receiver"});
    if (!client.ok()) return client.status();
    r->client_ = std::move(*client);
    if (absl::Status s = r->OpenSockets(); !s.ok()) return s;
    absl::StatusOr<std::unique_ptr<DataChannel>> ch =
        r->client_->AttachChannel(
            {.ring_slots = c.ring_slots, .transport = c.transport});
    if (!ch.ok()) return ch.status();
    r->channel_ = std::move(*ch);
    if (absl::Status s = r->WaitOnChannel(absl::Seconds(60)); !s.ok()) return s;
    return r;
  }

  uint64_t Step() override {
    const size_t n = channel_->Receive(batch_, absl::Milliseconds(20));
    for (size_t i = 0; i < n; ++i) Count(batch_[i]);
    channel_->Release();
    received_ += n;
    return n;
  }

  std::map<std::string, double> Details() override {
    std::map<std::string, double> d;
    // Drained, then quadsockd's counters; if anything arrived meanwhile, or quadsockd did not
    // answer, again. The generator may still be sending for a moment after the windows (at
    // full load quadsockd's CPU then has no time for calls): bounded by four minutes (listing
    // 100k sockets on a loaded machine has taken most of one), not by count; netbench waits
    // five.
    const absl::Time deadline = absl::Now() + absl::Minutes(4);
    while (absl::Now() < deadline) {
      Drain();
      absl::StatusOr<v1::Counters> counters = client_->Counters();
      absl::StatusOr<std::vector<v1::Socket>> list = client_->List({.page_size = 1000});
      if (!counters.ok() || !list.ok()) {
        std::fprintf(stderr, "app_receiver: no counters yet: %s %s\n",
                     counters.status().ToString().c_str(), list.status().ToString().c_str());
        absl::SleepFor(absl::Milliseconds(500));
        continue;
      }
      if (Drain() > 0) {
        absl::SleepFor(absl::Milliseconds(100));
        continue;
      }
      uint64_t rx_datagrams = 0, rx_dropped = 0, queued = 0, on_channel = 0;
      for (const v1::Socket& s : *list) {
        rx_datagrams += s.counters().rx_datagrams();
        rx_dropped += s.counters().rx_dropped();
        queued += s.counters().queued();
        on_channel += s.on_channel() ? 1 : 0;
      }
      const v1::StackCounters& st = counters->stack();
      d = {{"received", double(received_)},
           {"sockets", double(list->size())},
           {"sockets_on_channel", double(on_channel)},
           {"socket_rx_datagrams", double(rx_datagrams)},
           {"socket_rx_dropped", double(rx_dropped)},
           {"socket_queued", double(queued)},
           {"rx_frames", double(st.rx_frames())},
           {"udp_delivered", double(st.udp_delivered())},
           {"udp_no_socket", double(st.udp_no_socket())},
           {"misdirected", double(misdirected_)},
           {"payload_bytes", double(bytes_)},
           {"payload_check", double(check_)},
           {"accounting_ok", received_ == rx_datagrams &&
                                     received_ + rx_dropped + queued == st.udp_delivered()
                                 ? 1.0
                                 : 0.0}};
      for (const v1::Queue& q : counters->queues()) {
        d["link_rx_dropped"] += q.counters().rx_dropped();
        d["link_fill_ring_empty"] += q.counters().fill_ring_empty();
        d["busy_polls"] += q.counters().busy_polls();
        d["busy_poll_unavailable"] += q.counters().busy_poll_unavailable();
      }
      absl::Status frames = client_->CheckFrameAccounting();
      d["frame_accounting_ok"] = frames.ok() ? 1.0 : 0.0;
      return d;
    }
    std::fprintf(stderr, "app_receiver: no quiet moment to read the counters in four minutes\n");
    d["accounting_ok"] = 0;
    return d;
  }

 private:
  explicit AppReceiver(const Config& c) : c_(c) {}

  // Opens, binds and connects the sockets with Batch calls; records each index's flow.
  absl::Status OpenSockets() {
    const uint32_t total = c_.sockets + (c_.listener ? 1 : 0);
    if (total == 0) return absl::InvalidArgumentError("no sockets: --listener and/or --sockets");
    const uint32_t ops_per_socket = c_.sockets > 0 ? 3 : 2;
    const uint32_t per_call = std::max<uint32_t>(1, c_.batch / ops_per_socket);
    std::shared_ptr<grpc::Channel> channel =
        grpc::CreateChannel(c_.listen, grpc::InsecureChannelCredentials());
    std::unique_ptr<v1::SocketService::Stub> stub = v1::SocketService::NewStub(channel);
    expected_.assign(1, kNone);  // indexes run from 1
    for (uint32_t first = 0; first < total; first += per_call) {
      const uint32_t n = std::min(per_call, total - first);
      v1::BatchRequest req;
      for (uint32_t k = 0; k < n; ++k) {
        const uint32_t i = first + k;  // socket i < sockets: connected to flow i
        const std::string self = absl::StrCat("#", req.ops_size());
        v1::OpenRequest* open = req.add_ops()->mutable_open();
        open->set_family(v1::FAMILY_IPV4);
        open->set_reuse_port(true);
        v1::BindRequest* bind = req.add_ops()->mutable_bind();
        bind->set_socket(self);
        bind->mutable_local()->set_address(c_.local);
        bind->mutable_local()->set_port(c_.port);
        if (i < c_.sockets) {
          v1::ConnectRequest* connect = req.add_ops()->mutable_connect();
          connect->set_socket(self);
          connect->mutable_peer()->set_address(Ipv4Text(c_.ip_base + i / c_.ports_per_ip));
          connect->mutable_peer()->set_port(c_.port_base + i % c_.ports_per_ip);
        }
      }
      grpc::ClientContext ctx;
      ctx.AddMetadata(kSessionHeader, client_->session());
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
      v1::BatchResponse resp;
      if (absl::Status s = FromGrpc(stub->Batch(&ctx, req, &resp), "Batch"); !s.ok()) return s;
      if (resp.results_size() != req.ops_size()) {
        return absl::InternalError(absl::StrCat("Batch: ", resp.results_size(), " results for ",
                                                req.ops_size(), " operations"));
      }
      int op = 0;
      for (uint32_t k = 0; k < n; ++k) {
        const uint32_t i = first + k;
        const v1::SocketOpResult& opened = resp.results(op);
        for (int j = 0; j < (i < c_.sockets ? 3 : 2); ++j, ++op) {
          const v1::SocketOpResult& r = resp.results(op);
          if (r.code() != 0) {
            return absl::Status(static_cast<absl::StatusCode>(r.code()),
                                absl::StrCat("socket ", i, ", operation ", j, ": ", r.message()));
          }
        }
        if (opened.index() >= expected_.size()) expected_.resize(opened.index() + 1, kNone);
        expected_[opened.index()] = i < c_.sockets ? i : kAny;
      }
    }
    return absl::OkStatus();
  }

  void Count(const channel::ReceivedView& v) {
    bytes_ += v.payload.size();
    if (!v.payload.empty()) check_ ^= v.payload[0];
    const uint32_t want = v.socket < expected_.size() ? expected_[v.socket] : kNone;
    if (want == kAny) return;
    const uint8_t* a = v.peer.address.data();
    const uint32_t ip = v.peer.address.is_v4()
                            ? (uint32_t{a[0]} << 24) | (uint32_t{a[1]} << 16) |
                                  (uint32_t{a[2]} << 8) | a[3]
                            : 0;
    const uint64_t flow = uint64_t{ip - c_.ip_base} * c_.ports_per_ip +
                          uint16_t(v.peer.port - c_.port_base);
    if (want == kNone || flow != want) ++misdirected_;
  }

  // Waits until quadsockd has put every socket of the session on the channel (it does so
  // after the side socket's answer, on its own time).
  absl::Status WaitOnChannel(absl::Duration timeout) {
    const absl::Time deadline = absl::Now() + timeout;
    for (;;) {
      absl::StatusOr<std::vector<v1::Socket>> list = client_->List({.page_size = 1000});
      if (!list.ok()) return list.status();
      if (list->size() != expected_.size() - 1) {
        return absl::InternalError(absl::StrCat("the session has ", list->size(),
                                                " sockets, not ", expected_.size() - 1));
      }
      size_t off = 0;
      for (const v1::Socket& s : *list) off += s.on_channel() ? 0 : 1;
      if (off == 0) return absl::OkStatus();
      if (absl::Now() > deadline) {
        return absl::DeadlineExceededError(
            absl::StrCat(off, " sockets still not on the channel after ",
                         absl::FormatDuration(timeout)));
      }
      absl::SleepFor(absl::Milliseconds(50));
    }
  }

  // Takes whatever is left in the channel; returns how many.
  uint64_t Drain() {
    uint64_t got = 0;
    for (;;) {
      const size_t n = channel_->Receive(batch_, absl::Milliseconds(100));
      if (n == 0) return got;
      for (size_t i = 0; i < n; ++i) Count(batch_[i]);
      channel_->Release();
      received_ += n;
      got += n;
    }
  }

  static constexpr uint32_t kNone = 0xffffffff;  // no socket of ours has this index
  static constexpr uint32_t kAny = 0xfffffffe;   // the unconnected socket: any flow

  Config c_;
  std::unique_ptr<Client> client_;
  std::unique_ptr<DataChannel> channel_;
  std::vector<uint32_t> expected_;  // by socket index: the flow it is connected to
  channel::ReceivedView batch_[64];
  uint64_t received_ = 0;
  uint64_t misdirected_ = 0;
  uint64_t bytes_ = 0;
  uint8_t check_ = 0;
};

int Fail(const absl::Status& s) {
  std::fprintf(stderr, "app_receiver: %s\n", s.ToString().c_str());
  return 1;
}

int Main(int argc, char** argv) {
  Args args(argc, argv);
  Config c;
  c.listen = args.String("listen", "");
  c.local = args.String("local", c.local);
  c.port = args.Int("port", 4000);
  c.sockets = args.Int("sockets", 0);
  c.listener = args.Bool("listener", false);
  const std::string ip_base = args.String("ip_base", "10.9.1.1");
  c.port_base = args.Int("port_base", 10000);
  c.ports_per_ip = args.Int("ports_per_ip", 50000);
  c.ring_slots = args.Int("ring_slots", 0);
  c.batch = args.Int("batch", 1020);
  const std::string transport = args.String("transport", "shm");
  RunTiming timing;
  timing.wait = args.Double("wait", 10);
  timing.warmup = args.Double("warmup", 0.5);
  timing.window = args.Double("window", 1);
  timing.samples = args.Int("samples", 5);
  const int cpu = args.Int("cpu", 0);
  const bool serve = args.Bool("serve", false);
  if (!args.Unused().empty() || c.listen.empty()) {
    std::fprintf(stderr, "usage: %s --listen=unix:PATH [options; see the header of "
                 "bench/app_receiver.cc]\nunknown: %s\n", argv[0],
                 absl::StrJoin(args.Unused(), " ").c_str());
    return 2;
  }
  if (transport == "grpc") {
    c.transport = ChannelTransport::kGrpcStream;
  } else if (transport != "shm") {
    return Fail(absl::InvalidArgumentError("--transport must be shm or grpc"));
  }
  const std::string mode = absl::StrCat("app_", transport);
  unsigned b[4];
  if (std::sscanf(ip_base.c_str(), "%u.%u.%u.%u", &b[0], &b[1], &b[2], &b[3]) != 4) {
    return Fail(absl::InvalidArgumentError("--ip_base must be an IPv4 address"));
  }
  c.ip_base = (b[0] << 24) | (b[1] << 16) | (b[2] << 8) | b[3];
  if (absl::Status s = PinToCpu(cpu); !s.ok()) return Fail(s);

  const double setup_start = MonotonicSeconds();
  absl::StatusOr<std::unique_ptr<AppReceiver>> r = AppReceiver::Create(c);
  if (!r.ok()) return Fail(r.status());
  const double setup_seconds = MonotonicSeconds() - setup_start;
  std::printf("READY\n");
  std::fflush(stdout);
  if (serve) {
    const uint64_t total = Serve(**r);
    return PrintServed(mode, total, DetailsJson(setup_seconds, (*r)->Details()));
  }
  const std::vector<double> samples = Measure(timing, **r);
  return PrintMeasured(mode, samples, DetailsJson(setup_seconds, (*r)->Details()));
}

}  // namespace
}  // namespace quadsock::bench

int main(int argc, char** argv) { return quadsock::bench::Main(argc, argv); }
