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
//   peer_client PATH pass-blocking         a descriptor whose close blocks (below), passed on
//   peer_client PATH pass-blocking-side    a connection to the clients' socket; to the side
//                                          socket with a made-up token. "passed" or "refused:
//                                          ...", then the connection is held until stdin ends
//   peer_client unix:PATH attach-then-pass a session and a data channel, claimed on the side
//                                          socket; then the blocking descriptor passed on that
//                                          connection, closed, and held until stdin ends
//
// The blocking descriptor is a TCP connection on loopback to a listener of this process that
// never accepts: its send queue is full behind the listener's shut window and it lingers
// (SO_LINGER 600 s), so its last close blocks until this process exits (its listener's close
// resets it) or the linger ends.
#include <grpcpp/grpcpp.h>
#include <netinet/in.h>
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

// A descriptor whose last close blocks while this process lives (the file's comment).
int BlockingDescriptor() {
  const int listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  if (bind(listener, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 || listen(listener, 1) != 0 ||
      getsockname(listener, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    return -1;
  }
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) return -1;
  const std::string chunk(64 * 1024, 'x');
  while (send(fd, chunk.data(), chunk.size(), MSG_DONTWAIT | MSG_NOSIGNAL) > 0) {
  }
  const linger l{.l_onoff = 1, .l_linger = 600};
  if (setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof(l)) != 0) return -1;
  return fd;  // the listener stays open until the process ends
}

// Sends `text` on `conn` with `fd` alongside (SCM_RIGHTS): "passed" or "refused: <errno>".
std::string Pass(int conn, const std::string& text, int fd) {
  iovec v{const_cast<char*>(text.data()), text.size()};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr m{};
  m.msg_iov = &v;
  m.msg_iovlen = 1;
  m.msg_control = control;
  m.msg_controllen = sizeof(control);
  cmsghdr* c = CMSG_FIRSTHDR(&m);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(c), &fd, sizeof(int));
  if (sendmsg(conn, &m, MSG_NOSIGNAL) < 0) {
    return "refused: " + std::string(quadsock::link::ErrnoStatus(errno, "sendmsg").message());
  }
  return "passed";
}

int ConnectUnix(const std::string& path, int type) {
  const int fd = socket(AF_UNIX, type | SOCK_CLOEXEC, 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::strncpy(a.sun_path, path.c_str(), sizeof(a.sun_path) - 1);
  if (fd < 0 || connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) return -1;
  return fd;
}

void WaitForStdinToEnd() {
  std::string line;
  while (std::getline(std::cin, line)) {
  }
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
  if (command == "pass-blocking" || command == "pass-blocking-side") {
    const bool side = command == "pass-blocking-side";
    const int conn = ConnectUnix(target, side ? SOCK_SEQPACKET : SOCK_STREAM);
    const int blocking = BlockingDescriptor();
    if (conn < 0 || blocking < 0) {
      std::printf("%s\n", std::string(quadsock::link::ErrnoStatus(errno, "set-up").message()).c_str());
      return 1;
    }
    // The side socket reads a token; the clients' socket an HTTP/2 preface.
    const std::string said =
        Pass(conn, side ? "not-a-token" : "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", blocking);
    std::printf("%s\n", said.c_str());
    std::fflush(stdout);
    // Passed, the copy in flight is the last once this one is closed. Refused, this copy is
    // the last: its close would block here, so it is left to the exit (a lingering close
    // waits only in a living process).
    if (said == "passed") close(blocking);
    WaitForStdinToEnd();
    return 0;
  }
  if (command == "connect" || command == "connect-side") {
    const int made = ConnectMany(target, command == "connect" ? SOCK_STREAM : SOCK_SEQPACKET,
                                 std::stoi(arg));
    std::printf("connected %d\n", made);
    std::fflush(stdout);
    WaitForStdinToEnd();
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
    WaitForStdinToEnd();
  } else if (command == "attach-then-pass") {
    const grpc::Status s = Create(*stub, token);
    grpc::ClientContext ctx;
    ctx.AddMetadata(quadsock::kSessionHeader, token);
    quadsock::v1::AttachChannelResponse offer;
    const grpc::Status attached =
        s.ok() ? stub->AttachChannel(&ctx, quadsock::v1::AttachChannelRequest(), &offer) : s;
    const int conn = ConnectUnix(offer.path(), SOCK_SEQPACKET);
    char reply[16] = {};
    if (!attached.ok() || conn < 0 ||
        send(conn, offer.token().data(), offer.token().size(), 0) < 0 ||
        recv(conn, reply, sizeof(reply) - 1, 0) != 2 || std::string(reply) != "ok") {
      std::printf("not attached: %s %s\n", attached.error_message().c_str(), reply);
      return 1;
    }
    const int blocking = BlockingDescriptor();
    const std::string said = Pass(conn, "x", blocking);
    std::printf("%s\n", said.c_str());
    std::fflush(stdout);
    if (said == "passed") close(blocking);  // as pass-blocking
    close(conn);  // quadsockd detaches the channel: its close of the connection is the last
    WaitForStdinToEnd();
  } else {
    std::fprintf(stderr, "peer_client: unknown command \"%s\"\n", command.c_str());
    return 2;
  }
  return 0;
}
