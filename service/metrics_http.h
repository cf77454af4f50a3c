// A minimal HTTP endpoint for Prometheus: GET /metrics answers the counters in the text
// exposition format; anything else is 404. One request per connection, requests bounded to
// 8 KiB and 5 seconds, one connection at a time: a scrape endpoint, not a web server.
//
//   MetricsHttp m = MetricsHttp::Start("127.0.0.1:9464", [&] { return RenderMetrics(...); }).value();
#ifndef QUADSOCK_SERVICE_METRICS_HTTP_H_
#define QUADSOCK_SERVICE_METRICS_HTTP_H_

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"

namespace quadsock::service {

class MetricsHttp {
 public:
  // `listen` is HOST:PORT (IPv4 or [IPv6]). UNAVAILABLE when the port cannot be bound.
  static absl::StatusOr<std::unique_ptr<MetricsHttp>> Start(const std::string& listen,
                                                            std::function<std::string()> render);
  ~MetricsHttp();
  uint16_t port() const { return port_; }

 private:
  MetricsHttp() = default;
  void Serve();
  void Answer(int fd);

  int listen_fd_ = -1;
  uint16_t port_ = 0;
  std::function<std::string()> render_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace quadsock::service

#endif  // QUADSOCK_SERVICE_METRICS_HTTP_H_
