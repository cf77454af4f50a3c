// quadsock::Client against the real gRPC services in-process, over a MemoryLink stack; a second
// stack on the same in-memory wire plays the remote host. Every method, and that the server's
// error codes and messages reach the caller unchanged.
#include "clients/cpp/client.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <thread>

#include "absl/strings/match.h"

#include "service/server.h"
#include "service/testing/freezable_relay.h"
#include "service/testing/two_stacks.h"

namespace quadsock {
namespace {

using absl::StatusCode;

class ClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    service::ServerOptions o;
    o.sessions.max_sockets_per_session = 8;
    o.clock = [this] { return absl::Now() + clock_offset_.load() * absl::Seconds(1); };
    o.admin_listen = service::testing::TwoStacks::UnixTarget();
    absl::StatusOr<std::unique_ptr<service::testing::TwoStacks>> t =
        service::testing::TwoStacks::Start(o);
    ASSERT_TRUE(t.ok()) << t.status();
    t_ = std::move(*t);
    stack_ = t_->stack.get();
    peer_ = t_->peer.get();
    server_ = t_->server.get();
    absl::StatusOr<std::unique_ptr<Client>> client =
        Client::Create(server_->InProcessChannel(), {.client_name = "client_test"});
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = std::move(*client);
  }
  void TearDown() override {
    client_.reset();  // before the server: the in-process transport does not outlive it
    if (t_ != nullptr) {
      EXPECT_EQ(t_->Stop(), absl::OkStatus());
    }
  }

  stack::SocketId PeerSocket(uint16_t port) { return t_->PeerSocket(port).value(); }
  void PeerSend(stack::SocketId s, const std::string& payload, uint16_t port) {
    EXPECT_EQ(t_->PeerSend(s, payload, port), absl::OkStatus());
  }
  std::optional<std::string> PeerReceive(stack::SocketId s) {
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    while (absl::Now() < deadline) {
      std::optional<stack::ReceivedDatagram> got = peer_->Receive(s).value();
      if (got.has_value()) return got->payload;
      absl::SleepFor(absl::Milliseconds(1));
    }
    return std::nullopt;
  }
  // A witness of the reaper: a session with a one-second lease that nothing renews, made after
  // the test's last call in the session under test, with a socket bound to `port`. Once the
  // reaper has ended it (t_->WaitUntilPortFree(port)), it has seen that session's lease over.
  void OpenWitness(uint16_t port) {
    std::unique_ptr<Client> witness =
        Client::Create(server_->InProcessChannel(),
                       {.lease_seconds = 1, .keep = ClientOptions::KeepSession::kNone})
            .value();
    RemoteSocket s = witness->Open(v1::FAMILY_IPV4).value();
    ASSERT_TRUE(s.Bind({"10.1.0.2", port}).ok());
    (void)s.Release();
  }
  // Waits until the server stack has exactly `n` sockets.
  bool StackHasSockets(size_t n) {
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    while (stack_->List().size() != n && absl::Now() < deadline) {
      absl::SleepFor(absl::Milliseconds(20));
    }
    return stack_->List().size() == n;
  }

  std::unique_ptr<service::testing::TwoStacks> t_;
  stack::Stack* stack_ = nullptr;  // the server's stack
  stack::Stack* peer_ = nullptr;   // the remote host
  service::Server* server_ = nullptr;
  std::unique_ptr<Client> client_;
  std::atomic<int> clock_offset_{0};
};

TEST(EndpointTest, ParsesAndFormatsBothFamilies) {
  EXPECT_EQ(*Endpoint::Parse("10.1.0.2:4000"), (Endpoint{"10.1.0.2", 4000}));
  EXPECT_EQ(*Endpoint::Parse("[fd00:1::2]:53"), (Endpoint{"fd00:1::2", 53}));
  EXPECT_EQ((Endpoint{"fd00:1::2", 53}).ToString(), "[fd00:1::2]:53");
  EXPECT_EQ((Endpoint{"10.1.0.2", 0}).ToString(), "10.1.0.2:0");
  for (const char* bad : {"10.1.0.2", "10.1.0.2:65536", "fd00::1:53", "[fd00::1]", ":53",
                          "10.1.0.2:x", "[fd00::1]53"}) {
    EXPECT_EQ(Endpoint::Parse(bad).status().code(), StatusCode::kInvalidArgument) << bad;
  }
}

TEST_F(ClientTest, SocketLifecycle) {
  RemoteSocket s = client_->Open(v1::FAMILY_IPV4).value();
  EXPECT_EQ(s.handle().size(), 32u);
  absl::StatusOr<Endpoint> local = s.Bind({"0.0.0.0", 4000});
  ASSERT_TRUE(local.ok()) << local.status();
  EXPECT_EQ(local->port, 4000);
  EXPECT_EQ(s.Get()->state(), v1::SOCKET_STATE_BOUND);

  const stack::SocketId peer = PeerSocket(5000);
  for (int i = 0; i < 3; ++i) PeerSend(peer, "d" + std::to_string(i), 4000);
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<Datagram> d = s.Receive(absl::Seconds(3));
    ASSERT_TRUE(d.ok()) << d.status();
    EXPECT_EQ(d->payload, "d" + std::to_string(i));
    EXPECT_EQ(d->peer, (Endpoint{"10.1.0.1", 5000}));
    EXPECT_EQ(d->local, (Endpoint{"10.1.0.2", 4000}));
    EXPECT_EQ(d->sequence, static_cast<uint64_t>(i + 1));
    EXPECT_GT(d->arrival, absl::Now() - absl::Minutes(1));
  }

  // Unconnected send with a destination, then connected.
  ASSERT_EQ(s.Send("to", Endpoint{"10.1.0.1", 5000}), absl::OkStatus());
  EXPECT_EQ(PeerReceive(peer), "to");
  local = s.Connect({"10.1.0.1", 5000});
  ASSERT_TRUE(local.ok()) << local.status();
  EXPECT_EQ(*local, (Endpoint{"10.1.0.2", 4000}));  // the route's source
  v1::Socket info = s.Get().value();
  EXPECT_EQ(info.state(), v1::SOCKET_STATE_CONNECTED);
  EXPECT_TRUE(info.in_hash4());
  EXPECT_EQ(info.peer().port(), 5000u);
  ASSERT_EQ(s.Send("reply"), absl::OkStatus());
  EXPECT_EQ(PeerReceive(peer), "reply");

  local = s.Rehash("", 4001);
  ASSERT_TRUE(local.ok()) << local.status();
  EXPECT_EQ(local->port, 4001);
  PeerSend(peer, "after rehash", 4001);
  absl::StatusOr<Datagram> d = s.Receive(absl::Seconds(3));
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->payload, "after rehash");
  local = s.Rehash("10.1.0.2");  // keeps the port
  ASSERT_TRUE(local.ok()) << local.status();
  EXPECT_EQ(*local, (Endpoint{"10.1.0.2", 4001}));

  ASSERT_EQ(s.Disconnect(), absl::OkStatus());
  EXPECT_EQ(s.Get()->state(), v1::SOCKET_STATE_BOUND);
  EXPECT_FALSE(s.Get()->in_hash4());

  const std::string handle = s.handle();
  ASSERT_EQ(s.Close(), absl::OkStatus());
  EXPECT_EQ(s.Close(), absl::OkStatus());  // idempotent
  EXPECT_EQ(s.Get().status().code(), StatusCode::kFailedPrecondition);
  RemoteSocket again = client_->Attach(handle);
  EXPECT_EQ(again.Get().status().code(), StatusCode::kNotFound);
  (void)peer_->Close(peer);
}

TEST_F(ClientTest, ExchangeSendsAndReceivesOnOneStream) {
  RemoteSocket s = client_->Open(v1::FAMILY_IPV4).value();
  ASSERT_TRUE(s.Bind({"0.0.0.0", 4000}).ok());
  std::unique_ptr<ExchangeStream> x = s.Exchange().value();
  const stack::SocketId peer = PeerSocket(5000);
  const Endpoint to{"10.1.0.1", 5000};
  ASSERT_EQ(x->Send({{.payload = "x0", .peer = to}, {.payload = "x1", .peer = to}}),
            absl::OkStatus());
  EXPECT_EQ(PeerReceive(peer), "x0");
  EXPECT_EQ(PeerReceive(peer), "x1");

  for (int i = 0; i < 3; ++i) PeerSend(peer, "p" + std::to_string(i), 4000);
  std::vector<std::string> got;
  while (got.size() < 3) {
    absl::StatusOr<ExchangeEvent> e = x->Next(absl::Seconds(3));
    ASSERT_TRUE(e.ok()) << e.status();
    EXPECT_FALSE(e->send_failure.has_value());
    for (const Datagram& d : e->received) {
      got.push_back(d.payload);
      EXPECT_EQ(d.peer, to);
      EXPECT_EQ(d.local, (Endpoint{"10.1.0.2", 4000}));
    }
  }
  EXPECT_EQ(got, (std::vector<std::string>{"p0", "p1", "p2"}));

  // One datagram goes, the next has no destination (the socket is not connected): the server
  // reports how many went and why the rest did not.
  ASSERT_EQ(x->Send({{.payload = "x2", .peer = to}, {.payload = "nowhere"}}), absl::OkStatus());
  absl::StatusOr<ExchangeEvent> e = x->Next(absl::Seconds(3));
  ASSERT_TRUE(e.ok()) << e.status();
  ASSERT_TRUE(e->send_failure.has_value());
  EXPECT_EQ(e->send_failure->queued, 1u);
  EXPECT_EQ(e->send_failure->status.code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(PeerReceive(peer), "x2");
  EXPECT_EQ(x->Send({}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(x->Next(absl::Milliseconds(50)).status().code(), StatusCode::kDeadlineExceeded);

  // Closing the socket ends the stream; then Send says so too.
  ASSERT_EQ(s.Close(), absl::OkStatus());
  EXPECT_EQ(x->Next(absl::Seconds(3)).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(x->Send({{.payload = "late", .peer = to}}).code(), StatusCode::kFailedPrecondition);
  (void)peer_->Close(peer);
}

TEST_F(ClientTest, ExchangeOnASocketThatIsNotThereEndsWithNotFound) {
  RemoteSocket ghost = client_->Attach(std::string(32, 'a'));
  absl::StatusOr<std::unique_ptr<ExchangeStream>> x = ghost.Exchange();
  ASSERT_TRUE(x.ok()) << x.status();  // the server answers on the stream
  EXPECT_EQ((*x)->Next(absl::Seconds(3)).status().code(), StatusCode::kNotFound);
  ghost.Release();
  RemoteSocket closed = client_->Open(v1::FAMILY_IPV4).value();
  ASSERT_EQ(closed.Close(), absl::OkStatus());
  EXPECT_EQ(closed.Exchange().status().code(), StatusCode::kFailedPrecondition);
}

TEST_F(ClientTest, SendBatchQueuesAllOrSaysWhichFailed) {
  RemoteSocket s = client_->Open(v1::FAMILY_IPV4).value();
  ASSERT_TRUE(s.Bind({"10.1.0.2", 0}).ok());
  const stack::SocketId peer = PeerSocket(5001);
  std::vector<Datagram> batch(3);
  for (int i = 0; i < 3; ++i) {
    batch[i].payload = "b" + std::to_string(i);
    batch[i].peer = {"10.1.0.1", 5001};
  }
  absl::StatusOr<uint32_t> queued = s.SendBatch(batch);
  ASSERT_TRUE(queued.ok()) << queued.status();
  EXPECT_EQ(*queued, 3u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(PeerReceive(peer), "b" + std::to_string(i));

  batch[1].peer = {};  // unconnected and no destination
  queued = s.SendBatch(batch);
  EXPECT_EQ(queued.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StartsWith(queued.status().message(), "datagram 1: "))
      << queued.status().message();
  // The count is a field too, for a retry of only the rest (the first went).
  EXPECT_EQ(SendBatchQueued(queued.status()), std::optional<uint32_t>(1));
  EXPECT_EQ(PeerReceive(peer), "b0");
  EXPECT_EQ(SendBatchQueued(absl::NotFoundError("no such socket")), std::nullopt);
  (void)peer_->Close(peer);
}

TEST_F(ClientTest, ReceiveTimesOutThenStillDelivers) {
  RemoteSocket s = client_->Open(v1::FAMILY_IPV4).value();
  ASSERT_TRUE(s.Bind({"10.1.0.2", 4100}).ok());
  const absl::Time start = absl::Now();
  absl::StatusOr<Datagram> d = s.Receive(absl::Milliseconds(200));
  EXPECT_EQ(d.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(190));
  EXPECT_LT(absl::Now() - start, absl::Seconds(2));
  const stack::SocketId peer = PeerSocket(5100);
  PeerSend(peer, "late", 4100);
  d = s.Receive(absl::Seconds(3));
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->payload, "late");
  (void)peer_->Close(peer);
}

TEST_F(ClientTest, ReceiveEndsWithNotFoundWhenTheSocketIsClosedElsewhere) {
  RemoteSocket s = client_->Open(v1::FAMILY_IPV4).value();
  ASSERT_TRUE(s.Bind({"10.1.0.2", 4150}).ok());
  EXPECT_EQ(s.Receive(absl::Milliseconds(50)).status().code(), StatusCode::kDeadlineExceeded);
  ASSERT_EQ(client_->Attach(s.handle()).Close(), absl::OkStatus());
  EXPECT_EQ(s.Receive(absl::Seconds(3)).status().code(), StatusCode::kNotFound);
}

TEST_F(ClientTest, ServerErrorsKeepTheirCodeAndMessage) {
  RemoteSocket a = client_->Open(v1::FAMILY_IPV4).value();
  ASSERT_TRUE(a.Bind({"10.1.0.2", 4200}).ok());
  RemoteSocket b = client_->Open(v1::FAMILY_IPV4).value();
  absl::Status s = b.Bind({"10.1.0.2", 4200}).status();
  EXPECT_EQ(s.code(), StatusCode::kAlreadyExists) << s;
  s = b.Bind({"10.1.0.999", 4200}).status();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("10.1.0.999"), absl::string_view::npos) << s;
  s = a.Send("nowhere");  // unconnected, no destination
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition) << s;
  s = b.Rehash("10.1.0.2", 4300).status();  // not bound
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition) << s;
  s = client_->Attach("0123456789abcdef0123456789abcdef").Get().status();
  EXPECT_EQ(s.code(), StatusCode::kNotFound) << s;
  s = client_->Open(v1::FAMILY_UNSPECIFIED).status();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s;
  // The quota: 8 sockets per session.
  std::vector<RemoteSocket> more;
  absl::StatusOr<RemoteSocket> next = client_->Open(v1::FAMILY_IPV4);
  while (next.ok() && more.size() < 10) {
    more.push_back(std::move(*next));
    next = client_->Open(v1::FAMILY_IPV4);
  }
  EXPECT_EQ(next.status().code(), StatusCode::kResourceExhausted) << next.status();
  EXPECT_EQ(more.size(), 6u);
  // The exact message the server wrote.
  ListOptions too_big{.page_size = 5000};
  s = client_->List(too_big).status();
  EXPECT_EQ(s, absl::InvalidArgumentError("page_size: at most 1000"));
}

TEST_F(ClientTest, DestructionClosesReleaseKeeps) {
  std::string released;
  {
    RemoteSocket s = client_->Open(v1::FAMILY_IPV4).value();
    RemoteSocket kept = client_->Open(v1::FAMILY_IPV4).value();
    ASSERT_TRUE(kept.Bind({"10.1.0.2", 4400}).ok());
    released = kept.Release();
    EXPECT_EQ(kept.Get().status().code(), StatusCode::kFailedPrecondition);
    RemoteSocket moved = std::move(s);
    EXPECT_EQ(s.Get().status().code(), StatusCode::kFailedPrecondition);  // NOLINT: moved from
    EXPECT_TRUE(moved.Get().ok());
    EXPECT_EQ(stack_->List().size(), 2u);
  }
  EXPECT_EQ(stack_->List().size(), 1u);
  RemoteSocket again = client_->Attach(released);
  EXPECT_EQ(again.Get()->local().port(), 4400u);
}

TEST_F(ClientTest, ListFollowsPagesAndFilters) {
  std::vector<RemoteSocket> sockets;
  for (int i = 0; i < 5; ++i) {
    sockets.push_back(client_->Open(v1::FAMILY_IPV4).value());
    if (i < 3) {
      ASSERT_TRUE(sockets.back().Bind({"10.1.0.2", static_cast<uint16_t>(4500 + i)}).ok());
    }
  }
  absl::StatusOr<std::vector<v1::Socket>> all = client_->List({.page_size = 2});
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ(all->size(), 5u);
  absl::StatusOr<std::vector<v1::Socket>> bound =
      client_->List({.state = v1::SOCKET_STATE_BOUND, .page_size = 2});
  ASSERT_TRUE(bound.ok()) << bound.status();
  EXPECT_EQ(bound->size(), 3u);
  absl::StatusOr<std::vector<v1::Socket>> one = client_->List({.local_port = 4501});
  ASSERT_TRUE(one.ok()) << one.status();
  ASSERT_EQ(one->size(), 1u);
  EXPECT_EQ((*one)[0].socket(), sockets[1].handle());
}

TEST_F(ClientTest, HeldSessionEndsWithTheClient) {
  std::unique_ptr<Client> other = Client::Create(server_->InProcessChannel(), {}).value();
  const std::string token = other->session();
  RemoteSocket s = other->Open(v1::FAMILY_IPV4).value();
  ASSERT_TRUE(s.Bind({"10.1.0.2", 4600}).ok());
  (void)s.Release();
  OpenWitness(4601);
  clock_offset_ = 3600;  // both leases are over; a held session does not lapse
  ASSERT_TRUE(t_->WaitUntilPortFree(4601)) << "the reaper did not end the witness session";
  EXPECT_EQ(stack_->List().size(), 1u) << "the held session lapsed";
  other.reset();
  EXPECT_TRUE(StackHasSockets(0));
  absl::StatusOr<std::unique_ptr<Client>> attach =
      Client::Create(server_->InProcessChannel(), {.session = token});
  EXPECT_EQ(attach.status().code(), StatusCode::kUnauthenticated) << attach.status();
}

TEST_F(ClientTest, AttachedSessionOutlivesTheClientUntilItsLease) {
  std::unique_ptr<Client> creator = Client::Create(
      server_->InProcessChannel(), {.lease_seconds = 5, .keep = ClientOptions::KeepSession::kNone})
      .value();
  const std::string token = creator->session();
  EXPECT_EQ(creator->lease_seconds(), 5u);
  std::string handle = creator->Open(v1::FAMILY_IPV4).value().Release();
  creator.reset();
  // A later "process" picks the session and socket up.
  std::unique_ptr<Client> later =
      Client::Create(server_->InProcessChannel(), {.session = token}).value();
  EXPECT_EQ(later->session(), token);
  RemoteSocket s = later->Attach(handle);
  ASSERT_TRUE(s.Bind({"10.1.0.2", 4700}).ok());
  (void)s.Release();
  later.reset();
  EXPECT_EQ(stack_->List().size(), 1u);
  clock_offset_ = 10;  // the lease lapses
  EXPECT_TRUE(StackHasSockets(0));
  EXPECT_EQ(Client::Create(server_->InProcessChannel(), {.session = token}).status().code(),
            StatusCode::kUnauthenticated);
}

TEST_F(ClientTest, KeepAliveThreadRenewsTheLease) {
  std::unique_ptr<Client> kept = Client::Create(
      server_->InProcessChannel(), {.lease_seconds = 1, .keep = ClientOptions::KeepSession::kKeepAlive})
      .value();
  (void)kept->Open(v1::FAMILY_IPV4).value().Release();
  OpenWitness(4801);
  ASSERT_TRUE(t_->WaitUntilPortFree(4801)) << "the reaper did not end the witness session";
  EXPECT_EQ(stack_->List().size(), 1u) << "the kept session lapsed";
  EXPECT_EQ(kept->KeepAlive(), absl::OkStatus());
  absl::StatusOr<uint32_t> closed = kept->EndSession();
  ASSERT_TRUE(closed.ok()) << closed.status();
  EXPECT_EQ(*closed, 1u);
  EXPECT_EQ(kept->KeepAlive().code(), StatusCode::kUnauthenticated);
  EXPECT_TRUE(stack_->List().empty());
}

TEST_F(ClientTest, AdminHelpers) {
  absl::StatusOr<std::vector<v1::Interface>> ifs = client_->Interfaces();
  ASSERT_TRUE(ifs.ok()) << ifs.status();
  ASSERT_EQ(ifs->size(), 1u);
  EXPECT_EQ((*ifs)[0].name(), "mem0");
  EXPECT_EQ((*ifs)[0].mac(), "02:00:00:00:00:0b");
  absl::StatusOr<std::vector<std::string>> addrs = client_->Addresses();
  ASSERT_TRUE(addrs.ok()) << addrs.status();
  EXPECT_EQ(*addrs, (std::vector<std::string>{"10.1.0.2/24", "fd00:1::2/64"}));
  absl::StatusOr<std::vector<v1::Route>> routes = client_->Routes();
  ASSERT_TRUE(routes.ok()) << routes.status();
  EXPECT_GE(routes->size(), 2u);
  // The connected networks (the server writes them with its own address: "10.1.0.2/24").
  EXPECT_TRUE(absl::StartsWith((*routes)[0].destination(), "10.1.0.")) << (*routes)[0].destination();
  EXPECT_TRUE(absl::EndsWith((*routes)[0].destination(), "/24")) << (*routes)[0].destination();
  EXPECT_EQ((*routes)[0].gateway(), "");

  // The neighbour table changes on the administration listener, without a session.
  EXPECT_EQ(client_->SetNeighbor("10.1.0.9", "02:00:00:00:00:99").code(),
            StatusCode::kPermissionDenied);
  std::unique_ptr<Client> admin =
      Client::Connect(server_->admin_listening_on(), {.create_session = false}).value();
  ASSERT_EQ(admin->SetNeighbor("10.1.0.9", "02:00:00:00:00:99"), absl::OkStatus());
  EXPECT_EQ(admin->SetNeighbor("10.1.0.9", "not-a-mac").code(), StatusCode::kInvalidArgument);
  absl::StatusOr<std::vector<v1::Neighbor>> neigh = client_->Neighbors();
  ASSERT_TRUE(neigh.ok()) << neigh.status();
  ASSERT_EQ(neigh->size(), 1u);
  EXPECT_EQ((*neigh)[0].address(), "10.1.0.9");
  EXPECT_EQ((*neigh)[0].state(), "permanent");
  EXPECT_EQ(client_->RemoveNeighbor("10.1.0.9").code(), StatusCode::kPermissionDenied);
  ASSERT_EQ(admin->RemoveNeighbor("10.1.0.9"), absl::OkStatus());
  EXPECT_EQ(admin->RemoveNeighbor("10.1.0.9").code(), StatusCode::kNotFound);
  EXPECT_EQ(admin->Health().value(), HealthStatus::kServing);
  EXPECT_EQ(admin->Health("quadsock.v1.AdminService").value(), HealthStatus::kServing);

  RemoteSocket s = client_->Open(v1::FAMILY_IPV4).value();
  absl::StatusOr<v1::Counters> counters = client_->Counters();
  ASSERT_TRUE(counters.ok()) << counters.status();
  EXPECT_EQ(counters->sockets(), 1u);
  EXPECT_EQ(counters->sessions(), 1u);
  EXPECT_EQ(client_->CheckFrameAccounting(), absl::OkStatus());
}

TEST_F(ClientTest, HealthFollowsTheServer) {
  EXPECT_EQ(client_->Health().value(), HealthStatus::kServing);
  EXPECT_EQ(client_->Health("quadsock.v1.SocketService").value(), HealthStatus::kServing);
  EXPECT_EQ(client_->Health("no.such.Service").status().code(), StatusCode::kNotFound);
  server_->SetServing(false);
  EXPECT_EQ(client_->Health().value(), HealthStatus::kNotServing);
  EXPECT_EQ(HealthStatusName(HealthStatus::kNotServing), "NOT_SERVING");
  // A probe without a session.
  std::unique_ptr<Client> probe =
      Client::Create(server_->InProcessChannel(), {.create_session = false}).value();
  EXPECT_EQ(probe->session(), "");
  EXPECT_EQ(probe->Health().value(), HealthStatus::kNotServing);
  EXPECT_EQ(probe->Counters().status().code(), StatusCode::kUnauthenticated);
  EXPECT_EQ(server_->sessions().size(), 1u);
}

TEST_F(ClientTest, ConnectOverUnixSocketAndShutdownEndsReceive) {
  absl::StatusOr<std::unique_ptr<Client>> c =
      Client::Connect(server_->listening_on(), {.client_name = "unix"});
  ASSERT_TRUE(c.ok()) << c.status();
  RemoteSocket s = (*c)->Open(v1::FAMILY_IPV6).value();
  ASSERT_TRUE(s.Bind({"fd00:1::2", 4800}).ok());
  EXPECT_EQ(s.Receive(absl::Milliseconds(100)).status().code(), StatusCode::kDeadlineExceeded);
  client_.reset();  // in-process calls after the shutdown would crash gRPC 1.51
  std::thread stopper([&] { server_->Shutdown(absl::Seconds(2)); });
  EXPECT_EQ(s.Receive(absl::Seconds(5)).status().code(), StatusCode::kUnavailable);
  stopper.join();
  EXPECT_EQ(s.Get().status().code(), StatusCode::kUnavailable);
}

// The client's own HTTP/2 keepalive: a stream to a server that stopped answering (no FIN, no
// RST: its host lost power) fails with UNAVAILABLE once a ping goes unanswered, instead of
// waiting out its deadline. The server here never pings, so only the client can notice.
TEST(ClientKeepaliveTest, AStreamToAServerThatStoppedAnsweringFails) {
  service::ServerOptions o;
  o.keepalive = service::Keepalive{.time = absl::Hours(1),
                                   .timeout = absl::Seconds(20),
                                   .min_client_interval = absl::Milliseconds(100)};
  std::unique_ptr<service::testing::TwoStacks> t = service::testing::TwoStacks::Start(o).value();
  {
    service::testing::FreezableRelay relay(t->server->listening_on());
    std::unique_ptr<Client> client =
        Client::Connect(relay.target(), {.call_timeout = absl::Seconds(1),
                                         .keepalive = absl::Milliseconds(200),
                                         .keepalive_timeout = absl::Milliseconds(300)})
            .value();
    RemoteSocket s = client->Open(v1::FAMILY_IPV4).value();
    ASSERT_TRUE(s.Bind({"10.1.0.2", 4950}).ok());
    EXPECT_EQ(s.Receive(absl::Milliseconds(500)).status().code(), StatusCode::kDeadlineExceeded)
        << "pings that are answered keep the stream";
    relay.Freeze();
    const absl::Time start = absl::Now();
    const absl::Status st = s.Receive(absl::Seconds(20)).status();
    EXPECT_EQ(st.code(), StatusCode::kUnavailable) << st;
    EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  }
  EXPECT_EQ(t->Stop(), absl::OkStatus());
}

// A client that makes no calls for a while still answers pings, the server's and its own
// (every 200 ms here, to be answered within 500 ms or the connection is dropped): it keeps its
// session and its connection. Nothing of the application's polls gRPC meanwhile.
TEST(ClientKeepaliveTest, AnIdleClientKeepsAnsweringPings) {
  service::ServerOptions o;
  o.keepalive = service::Keepalive{.time = absl::Milliseconds(200),
                                   .timeout = absl::Milliseconds(500),
                                   .min_client_interval = absl::Milliseconds(100)};
  std::unique_ptr<service::testing::TwoStacks> t = service::testing::TwoStacks::Start(o).value();
  {
    service::testing::FreezableRelay relay(t->server->listening_on());
    std::unique_ptr<Client> client =
        Client::Connect(relay.target(), {.keepalive = absl::Milliseconds(200),
                                         .keepalive_timeout = absl::Milliseconds(500)})
            .value();
    RemoteSocket s = client->Open(v1::FAMILY_IPV4).value();
    ASSERT_TRUE(s.Bind({"10.1.0.2", 4951}).ok());
    absl::SleepFor(absl::Seconds(3));
    EXPECT_GE(relay.ping_acks(), 3) << "the client did not keep pinging";
    EXPECT_TRUE(s.Get().ok()) << s.Get().status();
    EXPECT_EQ(relay.connections(), 1) << "the idle client lost its connection";
    EXPECT_EQ(t->stack->List().size(), 1u) << "the idle client lost its session";
  }
  EXPECT_EQ(t->Stop(), absl::OkStatus());
}

// By default a stream to a vanished server ends within half a minute, and the pings stay as
// far apart as quadsockd takes them (down to every 5 s; more often is GOAWAY).
TEST(ClientKeepaliveTest, DefaultsEndWithinHalfAMinuteAndAsTheServerAllows) {
  const ClientOptions defaults;
  EXPECT_LE(defaults.keepalive + defaults.keepalive_timeout, absl::Seconds(30));
  EXPECT_GE(defaults.keepalive,
            service::Keepalive::ForLease(absl::Seconds(30)).min_client_interval);
}

TEST(ClientConnectTest, FailsFastWithTheRightCode) {
  absl::StatusOr<std::unique_ptr<Client>> c =
      Client::Connect("unix:/tmp/quadsock-nobody-" + std::to_string(getpid()) + ".sock");
  EXPECT_EQ(c.status().code(), StatusCode::kUnavailable) << c.status();
  EXPECT_EQ(Client::Connect("localhost").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Client::Connect("unix:").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Client::Connect("localhost:1", {.tls_cert = "/x.pem"}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(Client::Connect("localhost:1", {.tls_ca = "/nonexistent/ca.pem"}).status().code(),
            StatusCode::kFailedPrecondition);
  // TLS to a port where nobody listens: UNAVAILABLE, not a hang.
  EXPECT_EQ(Client::Connect("127.0.0.1:1", {.call_timeout = absl::Seconds(3)}).status().code(),
            StatusCode::kUnavailable);
}

}  // namespace
}  // namespace quadsock
