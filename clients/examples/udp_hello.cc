// udp_hello: a quadsock application built outside Bazel, against the installed C++ client
// library (`pkg-config --cflags --libs quadsock`; see Makefile). It starts a session with
// quadsockd, opens a UDP socket, binds it, prints the address it got and, with --receive,
// waits for one datagram and prints it.
//
//   make && ./udp_hello --target=unix:/run/quadsock/quadsock.sock 0.0.0.0:4000 --receive=10
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "absl/time/time.h"
#include "clients/cpp/client.h"

namespace {

constexpr char kUsage[] =
    "usage: udp_hello [--target=TARGET] [--receive=SECONDS] [LOCAL]\n"
    "Opens a UDP socket on quadsockd, binds it to LOCAL (default 0.0.0.0:0, any port) and\n"
    "prints the address it got; with --receive, waits that long for one datagram and prints it.\n"
    "TARGET: quadsockd's clients' socket (default $QUADSOCK_TARGET, else\n"
    "unix:/run/quadsock/quadsock.sock).\n";

int Fail(const std::string& what, const absl::Status& status) {
  std::fprintf(stderr, "udp_hello: %s: %s\n", what.c_str(), status.ToString().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  const char* env_target = std::getenv("QUADSOCK_TARGET");
  std::string target = env_target ? env_target : "unix:/run/quadsock/quadsock.sock";
  std::string local = "0.0.0.0:0";
  int receive_seconds = 0;
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if (arg.starts_with("--target=")) {
      target = arg.substr(9);
    } else if (arg.starts_with("--receive=")) {
      std::string_view value = arg.substr(10);
      auto [end, error] = std::from_chars(value.begin(), value.end(), receive_seconds);
      if (error != std::errc() || end != value.end() || receive_seconds <= 0) {
        std::fprintf(stderr, "udp_hello: --receive takes whole seconds, not %s\n", argv[i]);
        return 2;
      }
    } else if (!arg.starts_with("-")) {
      local = arg;
    } else {
      std::fprintf(stderr, "udp_hello: unknown flag %s\n%s", argv[i], kUsage);
      return 2;
    }
  }

  absl::StatusOr<quadsock::Endpoint> endpoint = quadsock::Endpoint::Parse(local);
  if (!endpoint.ok()) return Fail("LOCAL " + local, endpoint.status());
  quadsock::ClientOptions options;
  options.client_name = "udp_hello";
  auto client = quadsock::Client::Connect(target, options);
  if (!client.ok()) return Fail("connecting to " + target, client.status());
  auto socket = (*client)->Open(quadsock::v1::FAMILY_IPV4);
  if (!socket.ok()) return Fail("open", socket.status());
  absl::StatusOr<quadsock::Endpoint> bound = socket->Bind(*endpoint);
  if (!bound.ok()) return Fail("bind " + local, bound.status());
  std::printf("socket %s bound to %s\n", socket->handle().c_str(), bound->ToString().c_str());
  std::fflush(stdout);

  if (receive_seconds > 0) {
    absl::StatusOr<quadsock::Datagram> d = socket->Receive(absl::Seconds(receive_seconds));
    if (!d.ok()) return Fail("receive", d.status());
    std::printf("%s -> %s: %s\n", d->peer.ToString().c_str(), d->local.ToString().c_str(),
                d->payload.c_str());
  }
  return 0;
}
