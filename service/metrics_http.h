// A minimal HTTP endpoint for Prometheus: GET /metrics answers the counters in the text
// exposition format; anything else is 404. One request per connection, a request head bounded
// to 8 KiB: a scrape endpoint, not a web server. One thread serves every connection at once
// (poll), so an idle or slow client never stalls another's scrape; each connection has
// `timeout` in all to send its request and take the answer, and at most `max_connections` are
// served at a time (more wait in the listen backlog until one ends), at most
// `max_connections_per_address` of them from one client address (more are closed at once and
// counted): one client cannot hold every connection and blind the scrapes of others.
//
//   auto m = MetricsHttp::Start("127.0.0.1:9464", [&] { return RenderMetrics(...); });
#ifndef QUADSOCK_SERVICE_METRICS_HTTP_H_
#define QUADSOCK_SERVICE_METRICS_HTTP_H_

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "stack/monotonic_clock.h"

namespace quadsock::service {

struct MetricsHttpOptions {
  int max_connections = 64;
  int max_connections_per_address = 8;
  absl::Duration timeout = absl::Seconds(5);
  // What times the connections: monotonic, so that a step of the wall clock neither ends every
  // connection at once nor keeps a stalled one open. Tests pass a fake.
  std::function<absl::Time()> clock = stack::MonotonicNow;
};

class MetricsHttp {
 public:
  // `listen` is HOST:PORT (IPv4 or [IPv6]). INVALID_ARGUMENT for a malformed one or bad
  // options, UNAVAILABLE when the port cannot be bound.
  static absl::StatusOr<std::unique_ptr<MetricsHttp>> Start(
      const std::string& listen, std::function<std::string()> render,
      MetricsHttpOptions options = {});
  ~MetricsHttp();
  uint16_t port() const { return port_; }
  // Connections closed at once: their address had max_connections_per_address already.
  uint64_t refused_connections() const { return refused_.load(std::memory_order_relaxed); }
  // accept() failures (no descriptor or memory left): the endpoint then stops accepting for
  // 100 ms rather than spin on its readable socket.
  uint64_t accept_failures() const { return accept_failures_.load(std::memory_order_relaxed); }
  // The most connections it held at once so far: never more than max_connections.
  size_t most_connections() const { return most_connections_.load(std::memory_order_relaxed); }
  // Connections waiting in the kernel's accept queue while max_connections are open, as the
  // endpoint last looked (it looks at least every 100 ms); 0 below the limit.
  uint32_t waiting_at_limit() const { return waiting_at_limit_.load(std::memory_order_relaxed); }

 private:
  struct Connection;
  MetricsHttp() = default;
  void Serve();
  // Reads what `c` sent; once its request head is whole (or too long), makes the answer.
  void Read(Connection& c);
  std::string Answer(const std::string& request);

  int listen_fd_ = -1;
  uint16_t port_ = 0;
  std::function<std::string()> render_;
  MetricsHttpOptions options_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> refused_{0};
  std::atomic<uint64_t> accept_failures_{0};
  std::atomic<size_t> most_connections_{0};
  std::atomic<uint32_t> waiting_at_limit_{0};
  std::thread thread_;
};

}  // namespace quadsock::service

#endif  // QUADSOCK_SERVICE_METRICS_HTTP_H_
