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
