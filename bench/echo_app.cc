// The echo benchmark's server application: answers every datagram with itself.
//   --mode=kernel      the kernel's own UDP socket (recvmmsg, sendmmsg)
//   --mode=shm         quadsockd's data channel in shared memory, sleeping on its eventfd
//   --mode=shm_busy    the same, busy polling (Receive with a zero timeout; yielding the CPU
//                      when there is nothing, to a poll thread on the same CPU)
//   --mode=grpc        the data channel on its gRPC stream (StreamChannel)
//
//   echo_app --mode=shm --listen=unix:/tmp/q.sock --local=10.9.0.2 --port=7 --cpu=0
// Prints READY once it answers; runs until SIGINT or SIGTERM, then (on quadsockd) prints
// COUNTERS and the socket's counters as JSON.
#include <arpa/inet.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "bench/internal/args.h"
#include "bench/internal/pin.h"
#include "clients/cpp/client.h"
#include "clients/cpp/data_channel.h"

namespace {

std::atomic<bool> stopping{false};

int KernelEcho(const std::string& local, int port) {
  const int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, local.c_str(), &a.sin_addr);
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    std::fprintf(stderr, "echo_app: bind: %s\n", std::strerror(errno));
    return 1;
  }
  timeval tv{0, 200000};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  std::printf("READY\n");
  std::fflush(stdout);
  constexpr int kBatch = 64;
  mmsghdr msgs[kBatch];
  iovec iov[kBatch];
  sockaddr_in from[kBatch];
  static uint8_t bufs[kBatch][2048];
  while (!stopping) {
    for (int i = 0; i < kBatch; ++i) {
      iov[i] = {bufs[i], sizeof(bufs[i])};
      msgs[i].msg_hdr = {};
      msgs[i].msg_hdr.msg_iov = &iov[i];
      msgs[i].msg_hdr.msg_iovlen = 1;
      msgs[i].msg_hdr.msg_name = &from[i];
      msgs[i].msg_hdr.msg_namelen = sizeof(from[i]);
    }
    const int n = recvmmsg(fd, msgs, kBatch, MSG_WAITFORONE, nullptr);
    if (n <= 0) continue;
    for (int i = 0; i < n; ++i) iov[i].iov_len = msgs[i].msg_len;
    (void)sendmmsg(fd, msgs, static_cast<unsigned>(n), 0);
  }
  close(fd);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  quadsock::bench::Args args(argc, argv);
  const std::string mode = args.String("mode", "kernel");
  const std::string listen = args.String("listen", "");
  const std::string local = args.String("local", "10.9.0.2");
  const int port = static_cast<int>(args.Int("port", 7));
  const int cpu = static_cast<int>(args.Int("cpu", 0));
  if (!args.Unused().empty() ||
      (mode != "kernel" && mode != "shm" && mode != "shm_busy" && mode != "grpc") ||
      (mode != "kernel" && listen.empty())) {
    std::fprintf(stderr, "usage: echo_app --mode=kernel|shm|shm_busy|grpc [--listen=TARGET] "
                         "--local=IP --port=N --cpu=N\n");
    return 2;
  }
  (void)quadsock::bench::PinToCpu(cpu);
  signal(SIGINT, [](int) { stopping = true; });
  signal(SIGTERM, [](int) { stopping = true; });
  if (mode == "kernel") return KernelEcho(local, port);

  absl::StatusOr<std::unique_ptr<quadsock::Client>> client =
      quadsock::Client::Connect(listen, {.client_name = "echo_app"});
  if (!client.ok()) {
    std::fprintf(stderr, "echo_app: %s\n", client.status().ToString().c_str());
    return 1;
  }
  absl::StatusOr<quadsock::RemoteSocket> s = (*client)->Open(quadsock::v1::FAMILY_IPV4);
  if (!s.ok() || !s->Bind({local, static_cast<uint16_t>(port)}).ok()) {
    std::fprintf(stderr, "echo_app: cannot open and bind %s:%d\n", local.c_str(), port);
    return 1;
  }
  const bool grpc = mode == "grpc";
  absl::StatusOr<std::unique_ptr<quadsock::DataChannel>> ch = (*client)->AttachChannel(
      {.transport = grpc ? quadsock::ChannelTransport::kGrpcStream
                         : quadsock::ChannelTransport::kSharedMemory});
  if (!ch.ok()) {
    std::fprintf(stderr, "echo_app: %s\n", ch.status().ToString().c_str());
    return 1;
  }
  std::printf("READY\n");
  std::fflush(stdout);
  const absl::Duration wait = mode == "shm_busy" ? absl::ZeroDuration() : absl::Milliseconds(100);
  quadsock::channel::ReceivedView batch[64];
  quadsock::channel::SendView replies[64];
  while (!stopping) {
    const size_t n = (*ch)->Receive(batch, wait);
    // Busy polling on the CPU quadsockd's poll thread shares (this machine has two): give it
    // the CPU whenever there is nothing to answer.
    if (n == 0 && wait == absl::ZeroDuration()) sched_yield();
    for (size_t i = 0; i < n; ++i) replies[i] = {batch[i].socket, batch[i].payload, batch[i].peer};
    (void)(*ch)->SendBatch({replies, n});
    (*ch)->Release();
  }
  // What quadsockd counted for the socket, so that the benchmark tells a datagram the stack
  // dropped from one lost before it or after it.
  // (Why a send was dropped: the queues' TX ring full, no TX buffer, or it waited for the
  // client's MAC in vain or past the neighbour's queue.)
  absl::StatusOr<quadsock::v1::Socket> got = s->Get();
  absl::StatusOr<quadsock::v1::Counters> all = (*client)->Counters();
  if (got.ok() && all.ok()) {
    const quadsock::v1::SocketCounters& c = got->counters();
    unsigned long long ring_full = 0, no_buffer = all->stack().tx_no_buffer();
    for (const quadsock::v1::Queue& q : all->queues()) {
      ring_full += q.counters().tx_ring_full();
      no_buffer += q.counters().no_tx_buffer();
    }
    std::printf("COUNTERS {\"rx_datagrams\": %llu, \"rx_dropped\": %llu, \"tx_datagrams\": %llu, "
                "\"tx_dropped\": %llu, \"send_refused\": %d, \"tx_ring_full\": %llu, "
                "\"tx_no_buffer\": %llu, \"neighbor_dropped\": %llu}\n",
                static_cast<unsigned long long>(c.rx_datagrams()),
                static_cast<unsigned long long>(c.rx_dropped()),
                static_cast<unsigned long long>(c.tx_datagrams()),
                static_cast<unsigned long long>(c.tx_dropped()),
                (*ch)->last_send_error().ok() ? 0 : 1, ring_full, no_buffer,
                static_cast<unsigned long long>(all->stack().neighbor_dropped()));
    std::fflush(stdout);
  }
  return 0;
}
