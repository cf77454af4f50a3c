// Test and benchmark plumbing: a quadsockd server in-process over the first stack of a
// StackPair (stack/testing), the second playing the remote host (10.1.0.1); both stacks run
// their own poll threads. No root needed.
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
#include <utility>

#include "absl/status/statusor.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "service/server.h"
#include "stack/testing/stack_pair.h"

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
    stack::StackOptions so;
    so.addresses = {*net::IpPrefix::Parse("10.1.0.2/24"), *net::IpPrefix::Parse("fd00:1::2/64")};
    so.receive_queue_depth = options.receive_queue_depth;
    stack::StackOptions po;
    po.addresses = {*net::IpPrefix::Parse("10.1.0.1/24")};
    using stack::testing_fixtures::StackPair;
    absl::StatusOr<StackPair> pair = StackPair::Create(
        {.link = {.name = "mem0", .mac = kServerMac, .frames = options.frames,
                  .rx_queue = options.rx_queue},
         .options = std::move(so)},
        {.link = {.name = "peer0", .mac = kPeerMac, .frames = options.frames},
         .options = std::move(po)});
    if (!pair.ok()) return pair.status();
    t->stack = std::move(pair->a);
    t->peer = std::move(pair->b);
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

  // Waits up to `timeout` until the server's stack has no socket bound to local `port` (its
  // session lapsed, say): whether it went. Asks the stack, below the service, so that the
  // waiting renews no session's lease.
  bool WaitUntilPortFree(uint16_t port, absl::Duration timeout = absl::Seconds(10)) const {
    const absl::Time deadline = absl::Now() + timeout;
    for (;;) {
      bool taken = false;
      for (stack::SocketId id : stack->List()) {
        absl::StatusOr<stack::SocketStatus> s = stack->Get(id);
        taken = taken || (s.ok() && s->info.local.port == port);
      }
      if (!taken) return true;
      if (absl::Now() > deadline) return false;
      absl::SleepFor(absl::Milliseconds(10));
    }
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
