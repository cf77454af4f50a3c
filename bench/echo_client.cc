// The echo benchmark's client: sends 64-byte datagrams to an echo server at a steady rate and
// measures each one's round trip, on the kernel's own UDP socket (the other host's part).
//
//   echo_client --local=10.9.255.1 --server=10.9.0.2:7 --rate=1000 --seconds=5 --cpu=1
// Prints one JSON line: sent, received, p50/p99/p99.9 round trips in microseconds.
#include <arpa/inet.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <thread>
#include <vector>

#include "bench/internal/args.h"
#include "bench/internal/pin.h"

namespace {

uint64_t NowNs() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return uint64_t(t.tv_sec) * 1000000000 + uint64_t(t.tv_nsec);
}

double Percentile(std::vector<uint64_t>& v, double p) {
  if (v.empty()) return 0;
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(p * v.size()));
  std::nth_element(v.begin(), v.begin() + static_cast<long>(i), v.end());
  return v[i] / 1000.0;
}

}  // namespace

int main(int argc, char** argv) {
  quadsock::bench::Args args(argc, argv);
  const std::string local = args.String("local", "10.9.255.1");
  const std::string server = args.String("server", "10.9.0.2:7");
  const double rate = args.Double("rate", 1000);
  const double seconds = args.Double("seconds", 5);
  const int cpu = static_cast<int>(args.Int("cpu", 1));
  if (!args.Unused().empty() || rate <= 0 || server.find(':') == std::string::npos) {
    std::fprintf(stderr, "usage: echo_client --local=IP --server=IP:PORT --rate=PPS "
                         "--seconds=S --cpu=N\n");
    return 2;
  }
  (void)quadsock::bench::PinToCpu(cpu);
  const int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  sockaddr_in me{}, to{};
  me.sin_family = to.sin_family = AF_INET;
  inet_pton(AF_INET, local.c_str(), &me.sin_addr);
  inet_pton(AF_INET, server.substr(0, server.find(':')).c_str(), &to.sin_addr);
  to.sin_port = htons(static_cast<uint16_t>(std::stoi(server.substr(server.find(':') + 1))));
  if (bind(fd, reinterpret_cast<sockaddr*>(&me), sizeof(me)) != 0 ||
      connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof(to)) != 0) {
    std::fprintf(stderr, "echo_client: %s\n", std::strerror(errno));
    return 1;
  }
  timeval tv{0, 200000};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  const uint64_t count = static_cast<uint64_t>(rate * seconds);
  std::vector<uint64_t> rtts;
  rtts.reserve(count);
  std::atomic<bool> sending_done{false};
  std::atomic<uint64_t> sent{0};
  std::thread receiver([&] {
    uint8_t buf[2048];
    uint64_t quiet_since = 0;
    for (;;) {
      const ssize_t n = recv(fd, buf, sizeof(buf), 0);
      const uint64_t now = NowNs();
      if (n >= 16) {
        uint64_t stamp;
        std::memcpy(&stamp, buf + 8, 8);
        rtts.push_back(now - stamp);
        quiet_since = 0;
        if (sending_done && rtts.size() >= sent) break;
        continue;
      }
      if (!sending_done) continue;
      if (quiet_since == 0) quiet_since = now;
      if (now - quiet_since > 500000000) break;  // half a second without an answer: done
    }
  });
  const uint64_t start = NowNs();
  const double interval_ns = 1e9 / rate;
  uint8_t msg[64] = {};
  for (uint64_t i = 0; i < count; ++i) {
    const uint64_t due = start + static_cast<uint64_t>(i * interval_ns);
    while (NowNs() < due) {
      if (due - NowNs() > 200000) usleep(100);
    }
    const uint64_t now = NowNs();
    std::memcpy(msg, &i, 8);
    std::memcpy(msg + 8, &now, 8);
    if (send(fd, msg, sizeof(msg), 0) == sizeof(msg)) sent.fetch_add(1);
  }
  sending_done = true;
  receiver.join();
  std::printf("{\"sent\": %llu, \"received\": %zu, \"p50_us\": %.1f, \"p99_us\": %.1f, "
              "\"p999_us\": %.1f}\n",
              static_cast<unsigned long long>(sent.load()), rtts.size(),
              Percentile(rtts, 0.50), Percentile(rtts, 0.99), Percentile(rtts, 0.999));
  close(fd);
  return 0;
}
