#include "service/metrics_http.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "stack/link/errno_status.h"
#include "stack/net/address.h"

namespace quadsock::service {

namespace {
constexpr size_t kMaxRequestHead = 8192;
// The reads one turn makes of a connection (64 KiB, more than a request head): a client that
// never stops sending gets its share of the thread, which then goes on to the others and to
// the deadlines.
constexpr int kReadsPerTurn = 16;

// A connection's client address (its IP without the port), for the per-address limit.
std::string ClientAddress(const sockaddr_storage& a) {
  if (a.ss_family == AF_INET) {
    const auto& in = reinterpret_cast<const sockaddr_in&>(a).sin_addr;
    return std::string(reinterpret_cast<const char*>(&in), sizeof(in));
  }
  if (a.ss_family == AF_INET6) {
    const auto& in6 = reinterpret_cast<const sockaddr_in6&>(a).sin6_addr;
    return std::string(reinterpret_cast<const char*>(&in6), sizeof(in6));
  }
  return "";
}
}  // namespace

// A client's connection: reading its request, writing the answer, then draining what it still
// sends until it closes (closing with unread bytes would reset the connection and could lose
// the answer before the client read it).
struct MetricsHttp::Connection {
  enum class State { kReading, kWriting, kDraining };
  int fd = -1;
  std::string address;  // ClientAddress
  State state = State::kReading;
  std::string request;
  std::string response;
  size_t sent = 0;
  absl::Time deadline;  // on options_.clock
  bool done = false;
};

absl::StatusOr<std::unique_ptr<MetricsHttp>> MetricsHttp::Start(
    const std::string& listen, std::function<std::string()> render, MetricsHttpOptions options) {
  if (options.max_connections < 1 || options.max_connections_per_address < 1 ||
      options.timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        "metrics endpoint: max_connections and timeout must be positive");
  }
  absl::StatusOr<net::Endpoint> at = net::Endpoint::Parse(listen);
  if (!at.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--metrics_listen: ", at.status().message()));
  }
  std::unique_ptr<MetricsHttp> m(new MetricsHttp());
  m->render_ = std::move(render);
  m->options_ = options;
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
  m->listen_fd_ = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  const int one = 1;
  setsockopt(m->listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (m->listen_fd_ < 0 || bind(m->listen_fd_, reinterpret_cast<sockaddr*>(&ss), len) != 0 ||
      ::listen(m->listen_fd_, 64) != 0) {
    const int err = errno;
    if (m->listen_fd_ >= 0) close(m->listen_fd_);
    m->listen_fd_ = -1;
    return link::ErrnoStatus(err, absl::StrCat("--metrics_listen: cannot listen on ", listen));
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
  std::vector<Connection> conns;
  std::vector<pollfd> fds;
  // After a failed accept (EMFILE, ENOMEM), the listening socket stays readable: not watched
  // until then, or the loop would spin on it.
  absl::Time accept_paused_until = absl::InfinitePast();
  while (!stop_.load()) {
    const bool accepting = conns.size() < static_cast<size_t>(options_.max_connections) &&
                           options_.clock() >= accept_paused_until;
    fds.assign(1, pollfd{listen_fd_, static_cast<short>(accepting ? POLLIN : 0), 0});
    absl::Time wake = options_.clock() + absl::Milliseconds(100);  // to notice stop_
    for (const Connection& c : conns) {
      fds.push_back({c.fd, static_cast<short>(c.state == Connection::State::kWriting ? POLLOUT
                                                                                     : POLLIN),
                     0});
      wake = std::min(wake, c.deadline);
    }
    const int64_t wait_ms =
        std::max<int64_t>(0, absl::ToInt64Milliseconds(wake - options_.clock()));
    if (poll(fds.data(), fds.size(), static_cast<int>(wait_ms) + 1) < 0 && errno != EINTR) {
      continue;
    }
    const absl::Time now = options_.clock();
    for (size_t i = 0; i < conns.size(); ++i) {
      Connection& c = conns[i];
      const short revents = fds[i + 1].revents;
      if (revents & (POLLIN | POLLHUP | POLLERR)) {
        if (c.state == Connection::State::kWriting) {
          c.done = true;  // hung up or failed before taking the answer
        } else {
          Read(c);
        }
      }
      if (!c.done && c.state == Connection::State::kWriting) {
        while (c.sent < c.response.size()) {
          const ssize_t n = send(c.fd, c.response.data() + c.sent, c.response.size() - c.sent,
                                 MSG_NOSIGNAL);
          if (n <= 0) {
            if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
            c.done = true;
            break;
          }
          c.sent += static_cast<size_t>(n);
        }
        if (c.sent == c.response.size()) {
          shutdown(c.fd, SHUT_WR);
          c.state = Connection::State::kDraining;
        }
      }
      if (now >= c.deadline) c.done = true;
    }
    for (Connection& c : conns) {
      if (c.done) close(c.fd);
    }
    conns.erase(std::remove_if(conns.begin(), conns.end(),
                               [](const Connection& c) { return c.done; }),
                conns.end());
    while (fds[0].revents & POLLIN &&
           conns.size() < static_cast<size_t>(options_.max_connections)) {
      sockaddr_storage from{};
      socklen_t from_len = sizeof(from);
      const int fd = accept4(listen_fd_, reinterpret_cast<sockaddr*>(&from), &from_len,
                             SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (fd < 0) {
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR && errno != ECONNABORTED) {
          accept_failures_.fetch_add(1, std::memory_order_relaxed);
          accept_paused_until = now + absl::Milliseconds(100);
        }
        break;
      }
      Connection c;
      c.address = ClientAddress(from);
      if (std::count_if(conns.begin(), conns.end(), [&](const Connection& other) {
            return other.address == c.address;
          }) >= options_.max_connections_per_address) {
        close(fd);
        refused_.fetch_add(1, std::memory_order_relaxed);
        continue;
      }
      c.fd = fd;
      c.deadline = now + options_.timeout;
      conns.push_back(std::move(c));
      if (conns.size() > most_connections_.load(std::memory_order_relaxed)) {
        most_connections_.store(conns.size(), std::memory_order_relaxed);
      }
    }
    // At the limit: how many wait in the kernel's accept queue (a listening socket's TCP_INFO
    // holds its length in tcpi_unacked).
    uint32_t waiting = 0;
    if (conns.size() >= static_cast<size_t>(options_.max_connections)) {
      tcp_info info{};
      socklen_t len = sizeof(info);
      if (getsockopt(listen_fd_, IPPROTO_TCP, TCP_INFO, &info, &len) == 0) {
        waiting = info.tcpi_unacked;
      }
    }
    waiting_at_limit_.store(waiting, std::memory_order_relaxed);
  }
  for (Connection& c : conns) close(c.fd);
}

void MetricsHttp::Read(Connection& c) {
  char buf[4096];
  for (int reads = 0; reads < kReadsPerTurn; ++reads) {
    const ssize_t n = recv(c.fd, buf, sizeof(buf), 0);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
      c.done = true;  // the client closed (or the connection failed): nothing more to do
      return;
    }
    if (n < 0) return;  // all read for now
    if (c.state == Connection::State::kDraining) continue;
    c.request.append(buf, static_cast<size_t>(n));
    if (c.request.size() >= kMaxRequestHead ||
        c.request.find("\r\n\r\n") != std::string::npos) {
      c.response = Answer(c.request);
      c.state = Connection::State::kWriting;
      return;
    }
  }
}

std::string MetricsHttp::Answer(const std::string& request) {
  std::string status = "200 OK";
  std::string body;
  if (absl::StartsWith(request, "GET /metrics ") || absl::StartsWith(request, "GET /metrics?")) {
    body = render_();
  } else {
    status = "404 Not Found";
    body = "quadsockd serves only GET /metrics\n";
  }
  return absl::StrCat("HTTP/1.0 ", status,
                      "\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n"
                      "Content-Length: ",
                      body.size(), "\r\nConnection: close\r\n\r\n", body);
}

}  // namespace quadsock::service
