#include "service/metrics_http.h"

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "stack/net/address.h"

namespace quadsock::service {
namespace {

void Metric(std::string& out, const std::string& name, const std::string& help, uint64_t value,
            const std::string& labels = "") {
  absl::StrAppend(&out, "# HELP quadsock_", name, " ", help, "\n# TYPE quadsock_", name,
                  " counter\nquadsock_", name, labels, " ", value, "\n");
}

}  // namespace

std::string RenderMetrics(const v1::Counters& c) {
  std::string out;
  const v1::StackCounters& s = c.stack();
  Metric(out, "rx_frames_total", "Frames the stack received.", s.rx_frames());
  for (const auto& [reason, n] : s.parse_errors()) {
    absl::StrAppend(&out, "quadsock_parse_errors_total{reason=\"", reason, "\"} ", n, "\n");
  }
  Metric(out, "udp_delivered_total", "Datagrams delivered to a socket.", s.udp_delivered());
  Metric(out, "udp_no_socket_total", "Datagrams to a port with no socket.", s.udp_no_socket());
  Metric(out, "not_for_us_total", "IP packets to addresses that are not ours.", s.not_for_us());
  Metric(out, "fragments_total", "IP fragments dropped (no reassembly).", s.fragments());
  Metric(out, "icmp_echo_replies_total", "Echo replies sent.", s.icmp_echo_replies());
  Metric(out, "icmp_errors_sent_total", "ICMP errors sent.", s.icmp_errors_sent());
  Metric(out, "icmp_errors_rate_limited_total", "ICMP errors not sent (rate limit).",
         s.icmp_errors_rate_limited());
  Metric(out, "icmp_errors_received_total",
         "ICMP errors received about a datagram of one of our sockets.",
         s.icmp_errors_received());
  Metric(out, "icmp_errors_unmatched_total",
         "ICMP errors received about no datagram of ours.", s.icmp_errors_unmatched());
  Metric(out, "tx_queue_full_total", "Sends refused: the send queue was full.", s.tx_queue_full());
  Metric(out, "neighbor_failed_total", "Neighbours that never answered.", s.neighbor_failed());
  Metric(out, "neighbor_messages_ignored_total",
         "ARP and NDP messages for no neighbour (a group, ours) or from a non-unicast MAC.",
         s.neighbor_messages_ignored());
  Metric(out, "receive_budget_full_total",
         "Datagrams dropped: all receive queues together held --max_receive_mib.",
         s.receive_budget_full());
  const v1::TableCounters& t = c.table();
  Metric(out, "table_lookups_total", "Socket table lookups.", t.lookups());
  Metric(out, "table_hash4_hits_total", "Lookups answered by hash4.", t.hash4_hits());
  Metric(out, "table_hash4_misses_total", "hash4 tried without a match.", t.hash4_misses());
  Metric(out, "table_resizes_total", "Online resizes of the table.", t.resizes());
  static const char* kBuckets[] = {"0", "1", "2", "3", "7", "15", "31", "+Inf"};
  uint64_t cumulative = 0;
  absl::StrAppend(&out, "# HELP quadsock_table_chain_steps Entries visited per lookup.\n"
                        "# TYPE quadsock_table_chain_steps histogram\n");
  for (int i = 0; i < t.chain_histogram_size() && i < 8; ++i) {
    cumulative += t.chain_histogram(i);
    absl::StrAppend(&out, "quadsock_table_chain_steps_bucket{le=\"", kBuckets[i], "\"} ",
                    cumulative, "\n");
  }
  absl::StrAppend(&out, "quadsock_table_chain_steps_count ", cumulative, "\n");
  absl::StrAppend(&out, "# TYPE quadsock_receive_bytes_queued gauge\n",
                  "quadsock_receive_bytes_queued ", s.receive_bytes_queued(), "\n");
  absl::StrAppend(&out, "# TYPE quadsock_sockets gauge\nquadsock_sockets ", c.sockets(),
                  "\n# TYPE quadsock_sessions gauge\nquadsock_sessions ", c.sessions(), "\n");
  for (const v1::Queue& q : c.queues()) {
    const std::string l = absl::StrCat("{queue=\"", q.queue(), "\"}");
    absl::StrAppend(&out, "quadsock_queue_rx_frames_total", l, " ", q.counters().rx_frames(), "\n",
                    "quadsock_queue_tx_frames_total", l, " ", q.counters().tx_frames(), "\n",
                    "quadsock_queue_rx_dropped_total", l, " ", q.counters().rx_dropped(), "\n",
                    "quadsock_queue_busy_polls_total", l, " ", q.counters().busy_polls(), "\n");
  }
  if (c.has_xdp()) {
    Metric(out, "xdp_redirect_total", "Frames the XDP program steered to the stack.",
           c.xdp().redirect());
    Metric(out, "xdp_pass_total", "Frames the XDP program left to the kernel.",
           c.xdp().pass_not_owned() + c.xdp().pass_other());
  }
  return out;
}

absl::StatusOr<std::unique_ptr<MetricsHttp>> MetricsHttp::Start(
    const std::string& listen, std::function<std::string()> render) {
  absl::StatusOr<net::Endpoint> at = net::Endpoint::Parse(listen);
  if (!at.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--metrics_listen: ", at.status().message()));
  }
  std::unique_ptr<MetricsHttp> m(new MetricsHttp());
  m->render_ = std::move(render);
  sockaddr_storage ss{};
  socklen_t len;
  if (at->address.is_v4()) {
    auto* a = reinterpret_cast<sockaddr_in*>(&ss);
    a->sin_family = AF_INET;
    a->sin_port = htons(at->port);
    std::memcpy(&a->sin_addr, at->address.data(), 4);
    len = sizeof(*a);
  } else {
    auto* a = reinterpret_cast<sockaddr_in6*>(&ss);
    a->sin6_family = AF_INET6;
    a->sin6_port = htons(at->port);
    std::memcpy(&a->sin6_addr, at->address.data(), 16);
    len = sizeof(*a);
  }
  m->listen_fd_ = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const int one = 1;
  setsockopt(m->listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (m->listen_fd_ < 0 || bind(m->listen_fd_, reinterpret_cast<sockaddr*>(&ss), len) != 0 ||
      ::listen(m->listen_fd_, 16) != 0) {
    const int err = errno;
    if (m->listen_fd_ >= 0) close(m->listen_fd_);
    m->listen_fd_ = -1;
    return absl::UnavailableError(
        absl::StrCat("--metrics_listen: cannot listen on ", listen, ": ", std::strerror(err)));
  }
  getsockname(m->listen_fd_, reinterpret_cast<sockaddr*>(&ss), &len);
  m->port_ = ntohs(ss.ss_family == AF_INET ? reinterpret_cast<sockaddr_in*>(&ss)->sin_port
                                           : reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port);
  MetricsHttp* self = m.get();
  m->thread_ = std::thread([self] { self->Serve(); });
  return m;
}

MetricsHttp::~MetricsHttp() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
  if (listen_fd_ >= 0) close(listen_fd_);
}

void MetricsHttp::Serve() {
  while (!stop_.load()) {
    pollfd p{listen_fd_, POLLIN, 0};
    if (poll(&p, 1, 100) <= 0) continue;
    const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    Answer(fd);
    close(fd);
  }
}

void MetricsHttp::Answer(int fd) {
  // Read the request head: at most 8 KiB, at most 5 s.
  std::string request;
  char buf[1024];
  const absl::Time deadline = absl::Now() + absl::Seconds(5);
  while (request.size() < 8192 && request.find("\r\n\r\n") == std::string::npos) {
    const int left = static_cast<int>(absl::ToInt64Milliseconds(deadline - absl::Now()));
    pollfd p{fd, POLLIN, 0};
    if (left <= 0 || poll(&p, 1, left) <= 0) return;
    const ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) return;
    request.append(buf, static_cast<size_t>(n));
  }
  std::string status = "200 OK";
  std::string body;
  if (absl::StartsWith(request, "GET /metrics ") || absl::StartsWith(request, "GET /metrics?")) {
    body = render_();
  } else {
    status = "404 Not Found";
    body = "quadsockd serves only GET /metrics\n";
  }
  const std::string response = absl::StrCat(
      "HTTP/1.0 ", status, "\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: ",
      body.size(), "\r\nConnection: close\r\n\r\n", body);
  size_t sent = 0;
  while (sent < response.size()) {
    const ssize_t n = send(fd, response.data() + sent, response.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) return;
    sent += static_cast<size_t>(n);
  }
}

}  // namespace quadsock::service
