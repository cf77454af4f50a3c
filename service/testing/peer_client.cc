// A client of quadsockd for unix_peer_test to run as another user (setpriv): it says what the
// server answered, a line per call ("OK <token>", or the gRPC code's name and the message).
//
//   peer_client unix:PATH create N        N CreateSession calls
//   peer_client unix:PATH keepalive TOKEN  a KeepAlive call in that session
//   peer_client unix:PATH hold             a session, then keeps its connection until stdin ends
//   peer_client PATH claim TOKEN           claims a data channel offer on the side socket PATH
//   peer_client PATH connect N             N bare connections to the Unix socket PATH (the
//   peer_client PATH connect-side N        clients' socket; the side socket), held until stdin
//                                          ends: "connected N" once all are made
#include <grpcpp/grpcpp.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <iostream>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "common/protocol.h"
#include "quadsock/v1/socket.grpc.pb.h"
#include "stack/link/errno_status.h"

namespace {

using quadsock::v1::SocketService;

void Say(const grpc::Status& s, const std::string& what = "") {
  if (s.ok()) {
    std::printf("OK%s%s\n", what.empty() ? "" : " ", what.c_str());
  } else {
    std::printf("%s %s\n",
                absl::StatusCodeToString(static_cast<absl::StatusCode>(s.error_code())).c_str(),
                s.error_message().c_str());
  }
  std::fflush(stdout);
}

grpc::Status Create(SocketService::Stub& stub, std::string& token) {
  grpc::ClientContext ctx;
  quadsock::v1::CreateSessionRequest req;
  req.set_client_name("peer_client");
  quadsock::v1::CreateSessionResponse resp;
  grpc::Status s = stub.CreateSession(&ctx, req, &resp);
  token = resp.session();
  return s;
}

// The side socket's answer to `token`: "ok" or "error: ...".
std::string Claim(const std::string& path, const std::string& token) {
  const int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::strncpy(a.sun_path, path.c_str(), sizeof(a.sun_path) - 1);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    return std::string(quadsock::link::ErrnoStatus(errno, "connect").message());
  }
  if (send(fd, token.data(), token.size(), 0) != static_cast<ssize_t>(token.size())) {
    return std::string(quadsock::link::ErrnoStatus(errno, "send").message());
  }
  char reply[256];
  // No room for passed fds: the kernel closes any that come (MSG_CTRUNC).
  const ssize_t n = recv(fd, reply, sizeof(reply), 0);
  close(fd);
  return n < 0 ? std::string(quadsock::link::ErrnoStatus(errno, "recv").message())
               : std::string(reply, static_cast<size_t>(n));
}

// `n` connections to the Unix socket `path` of `type`, each closed when the process ends: how
// many connect() made.
int ConnectMany(const std::string& path, int type, int n) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::strncpy(a.sun_path, path.c_str(), sizeof(a.sun_path) - 1);
  // The soft descriptor limit may be what a test lowered it to before starting us: up to the
  // hard limit, as any process may.
  rlimit l{};
  if (getrlimit(RLIMIT_NOFILE, &l) == 0) {
    l.rlim_cur = l.rlim_max;
    (void)setrlimit(RLIMIT_NOFILE, &l);
  }
  int made = 0;
  for (int i = 0; i < n; ++i) {
    const int fd = socket(AF_UNIX, type | SOCK_CLOEXEC, 0);
    if (fd < 0 || connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
      std::fprintf(stderr, "peer_client: %s\n",
                   std::string(quadsock::link::ErrnoStatus(errno, "connect").message()).c_str());
      break;
    }
    ++made;
  }
  return made;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: peer_client unix:PATH create N|keepalive TOKEN|hold\n"
                         "       peer_client PATH claim TOKEN|connect N|connect-side N\n");
    return 2;
  }
  const std::string target = argv[1];
  const std::string command = argv[2];
  const std::string arg = argc > 3 ? argv[3] : "";
  if (command == "claim") {
    std::printf("%s\n", Claim(target, arg).c_str());
    return 0;
  }
  if (command == "connect" || command == "connect-side") {
    const int made = ConnectMany(target, command == "connect" ? SOCK_STREAM : SOCK_SEQPACKET,
                                 std::stoi(arg));
    std::printf("connected %d\n", made);
    std::fflush(stdout);
    std::string line;
    while (std::getline(std::cin, line)) {
    }
    return 0;
  }
  std::unique_ptr<SocketService::Stub> stub =
      SocketService::NewStub(grpc::CreateChannel(target, grpc::InsecureChannelCredentials()));
  std::string token;
  if (command == "create") {
    for (int i = 0; i < std::stoi(arg); ++i) {
      const grpc::Status s = Create(*stub, token);
      Say(s, token);
    }
  } else if (command == "keepalive") {
    grpc::ClientContext ctx;
    ctx.AddMetadata(quadsock::kSessionHeader, arg);
    quadsock::v1::KeepAliveResponse resp;
    Say(stub->KeepAlive(&ctx, quadsock::v1::KeepAliveRequest(), &resp));
  } else if (command == "hold") {
    const grpc::Status s = Create(*stub, token);
    Say(s, token);
    std::string line;
    while (std::getline(std::cin, line)) {
    }
  } else {
    std::fprintf(stderr, "peer_client: unknown command \"%s\"\n", command.c_str());
    return 2;
  }
  return 0;
}
