// Test and benchmark plumbing: a quadsockd server in-process, its stack over MemoryLink, and a
// second stack on the same in-memory wire playing the remote host (10.1.0.1). No root needed.
//
//   absl::StatusOr<std::unique_ptr<TwoStacks>> t = TwoStacks::Start(server_options);
//   stack::SocketId peer = (*t)->PeerSocket(5000);
//   (*t)->PeerSend(peer, "hello", 4000);                    // to 10.1.0.2:4000
//   ... (*t)->server->InProcessChannel() ...
//   EXPECT_EQ((*t)->Stop(), absl::OkStatus());              // frame accounting included
#ifndef QUADSOCK_SERVICE_TESTING_TWO_STACKS_H_
#define QUADSOCK_SERVICE_TESTING_TWO_STACKS_H_

#include <unistd.h>

#include <atomic>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "service/server.h"
#include "stack/link/memory_link.h"

namespace quadsock::service::testing {

inline const net::MacAddress kServerMac = *net::MacAddress::Parse("02:00:00:00:00:0b");
inline const net::MacAddress kPeerMac = *net::MacAddress::Parse("02:00:00:00:00:0a");

struct TwoStacks {
  struct Options {
    uint32_t frames = 1024;      // per side
    uint32_t rx_queue = 1024;    // frames the server's side of the wire holds
    size_t receive_queue_depth = 256;
    bool known_neighbors = false;  // skip ARP: both sides know each other's MAC
  };

  std::unique_ptr<stack::Stack> stack;  // the server's: 10.1.0.2/24, fd00:1::2/64
  std::unique_ptr<stack::Stack> peer;   // the remote host: 10.1.0.1/24
  std::unique_ptr<Server> server;

  // Starts both stacks and the server. `server_options.listen` defaults to a UnixTarget().
  static absl::StatusOr<std::unique_ptr<TwoStacks>> Start(ServerOptions server_options,
                                                          Options options) {
    auto t = std::make_unique<TwoStacks>();
    auto [server_link, peer_link] = link::MemoryLink::CreatePair(
        {.name = "mem0", .mac = kServerMac, .frames = options.frames, .rx_queue = options.rx_queue},
        {.name = "peer0", .mac = kPeerMac, .frames = options.frames});
    std::vector<std::unique_ptr<link::Link>> ls, lp;
    ls.push_back(std::move(server_link));
    lp.push_back(std::move(peer_link));
    stack::StackOptions so;
    so.addresses = {*net::IpPrefix::Parse("10.1.0.2/24"), *net::IpPrefix::Parse("fd00:1::2/64")};
    so.receive_queue_depth = options.receive_queue_depth;
    absl::StatusOr<std::unique_ptr<stack::Stack>> s = stack::Stack::Create(so, std::move(ls));
    if (!s.ok()) return s.status();
    t->stack = std::move(*s);
    stack::StackOptions po;
    po.addresses = {*net::IpPrefix::Parse("10.1.0.1/24")};
    absl::StatusOr<std::unique_ptr<stack::Stack>> p = stack::Stack::Create(po, std::move(lp));
    if (!p.ok()) return p.status();
    t->peer = std::move(*p);
    if (options.known_neighbors) {
      (void)t->stack->SetNeighbor(*net::IpAddress::Parse("10.1.0.1"), kPeerMac);
      (void)t->peer->SetNeighbor(*net::IpAddress::Parse("10.1.0.2"), kServerMac);
    }
    if (absl::Status st = t->stack->Start(); !st.ok()) return st;
    if (absl::Status st = t->peer->Start(); !st.ok()) return st;
    if (server_options.listen == ServerOptions().listen) server_options.listen = UnixTarget();
    absl::StatusOr<std::unique_ptr<Server>> server = Server::Start(server_options, *t->stack);
    if (!server.ok()) return server.status();
    t->server = std::move(*server);
    t->server->SetServing(true);
    return t;
  }
  static absl::StatusOr<std::unique_ptr<TwoStacks>> Start(ServerOptions server_options) {
    return Start(std::move(server_options), Options());
  }

  // "unix:PATH" of a socket under /tmp that no other call or test process names (Bazel's
  // TEST_TMPDIR is too long for a socket path): for ServerOptions::listen and admin_listen.
  static std::string UnixTarget() {
    static std::atomic<int> count{0};
    return "unix:/tmp/quadsock-test-" + std::to_string(getpid()) + "-" +
           std::to_string(count++) + ".sock";
  }

  // A socket of the remote host bound to 10.1.0.1:port.
  absl::StatusOr<stack::SocketId> PeerSocket(uint16_t port) {
    absl::StatusOr<stack::SocketId> s = peer->Open(net::Family::kV4);
    if (!s.ok()) return s;
    absl::StatusOr<net::Endpoint> b =
        peer->Bind(*s, net::Endpoint{*net::IpAddress::Parse("10.1.0.1"), port});
    if (!b.ok()) return b.status();
    return s;
  }
  // Sends `payload` from the remote host's socket to 10.1.0.2:port.
  absl::Status PeerSend(stack::SocketId s, const std::string& payload, uint16_t port) {
    return peer->Send(s, {reinterpret_cast<const uint8_t*>(payload.data()), payload.size()},
                      net::Endpoint{*net::IpAddress::Parse("10.1.0.2"), port});
  }

  // Shuts the server down, stops both stacks, and checks the server stack's frame accounting.
  absl::Status Stop() {
    if (server != nullptr) server->Shutdown(absl::Seconds(1));
    stack->Stop();
    peer->Stop();
    return stack->CheckFrameAccounting();
  }
};

}  // namespace quadsock::service::testing

#endif  // QUADSOCK_SERVICE_TESTING_TWO_STACKS_H_
