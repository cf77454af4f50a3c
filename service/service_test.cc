// The gRPC services in-process over a MemoryLink stack: every RPC, every documented error code,
// ownership between sessions, lease expiry, quotas, a slow Receive consumer. A second stack on
// the same in-memory wire plays the remote host.
#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <mutex>
#include <set>
#include <thread>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>

#include "absl/strings/str_join.h"
#include "service/testing/service_fixture.h"

namespace quadsock::service {
namespace {

TEST_F(ServiceTest, LifecycleAndReceiveStream) {
  const std::string s = OpenBound(session_, "0.0.0.0", 4000);
  EXPECT_EQ(s.size(), 32u);  // 128 random bits
  v1::Socket info = Get(s);
  EXPECT_EQ(info.state(), v1::SOCKET_STATE_BOUND);
  EXPECT_EQ(info.local().port(), 4000u);

  ClientContext rctx;
  Auth(rctx, session_);
  v1::ReceiveRequest rreq;
  rreq.set_socket(s);
  std::unique_ptr<grpc::ClientReader<v1::Datagram>> reader = sockets_->Receive(&rctx, rreq);
  const stack::SocketId peer = PeerSocket(5000);
  for (int i = 0; i < 5; ++i) PeerSend(peer, "d" + std::to_string(i), 4000);
  for (int i = 0; i < 5; ++i) {
    v1::Datagram d;
    ASSERT_TRUE(reader->Read(&d));
    EXPECT_EQ(d.payload(), "d" + std::to_string(i));
    EXPECT_EQ(d.peer().address(), "10.1.0.1");
    EXPECT_EQ(d.peer().port(), 5000u);
    EXPECT_EQ(d.sequence(), static_cast<uint64_t>(i + 1));
    EXPECT_GT(d.arrival_unix_nanos(), 0);
  }
  // Connect, send back, rehash, disconnect, close.
  {
    ClientContext ctx;
    Auth(ctx, session_);
    v1::ConnectRequest req;
    req.set_socket(s);
    *req.mutable_peer() = Ep("10.1.0.1", 5000);
    v1::ConnectResponse resp;
    ASSERT_TRUE(sockets_->Connect(&ctx, req, &resp).ok());
    EXPECT_EQ(resp.local().address(), "10.1.0.2");  // the route's source
  }
  EXPECT_TRUE(Get(s).in_hash4());
  {
    ClientContext ctx;
    Auth(ctx, session_);
    v1::SendRequest req;
    req.set_socket(s);
    req.set_payload("reply");
    v1::SendResponse resp;
    ASSERT_TRUE(sockets_->Send(&ctx, req, &resp).ok());
  }
  absl::Time deadline = absl::Now() + absl::Seconds(30);
  std::optional<stack::ReceivedDatagram> got;
  while (!got.has_value() && absl::Now() < deadline) {
    got = peer_->Receive(peer).value();
    if (!got) absl::SleepFor(absl::Milliseconds(1));
  }
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->payload, "reply");
  {
    ClientContext ctx;
    Auth(ctx, session_);
    v1::RehashRequest req;
    req.set_socket(s);
    req.set_change_port(true);
    req.set_local_port(4001);
    v1::RehashResponse resp;
    ASSERT_TRUE(sockets_->Rehash(&ctx, req, &resp).ok());
    EXPECT_EQ(resp.local().port(), 4001u);
  }
  {
    ClientContext ctx;
    Auth(ctx, session_);
    v1::DisconnectRequest req;
    req.set_socket(s);
    v1::DisconnectResponse resp;
    ASSERT_TRUE(sockets_->Disconnect(&ctx, req, &resp).ok());
  }
  EXPECT_FALSE(Get(s).in_hash4());
  {
    ClientContext ctx;
    Auth(ctx, session_);
    v1::CloseRequest req;
    req.set_socket(s);
    v1::CloseResponse resp;
    ASSERT_TRUE(sockets_->Close(&ctx, req, &resp).ok());
  }
  // Closing the socket ends its Receive stream with OK.
  v1::Datagram d;
  EXPECT_FALSE(reader->Read(&d));
  EXPECT_TRUE(reader->Finish().ok());
}

TEST_F(ServiceTest, EveryDocumentedErrorCode) {
  auto open = [&](const std::string& session, v1::Family f) {
    ClientContext ctx;
    if (!session.empty()) Auth(ctx, session);
    v1::OpenRequest req;
    req.set_family(f);
    v1::OpenResponse resp;
    return sockets_->Open(&ctx, req, &resp).error_code();
  };
  EXPECT_EQ(open("", v1::FAMILY_IPV4), StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(open("not-a-session", v1::FAMILY_IPV4), StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(open(session_, v1::FAMILY_UNSPECIFIED), StatusCode::INVALID_ARGUMENT);

  const std::string s = OpenBound(session_, "10.1.0.2", 4000);
  auto bind = [&](const std::string& handle, const std::string& addr, uint32_t port) {
    ClientContext ctx;
    Auth(ctx, session_);
    v1::BindRequest req;
    req.set_socket(handle);
    *req.mutable_local() = Ep(addr, port);
    v1::BindResponse resp;
    return sockets_->Bind(&ctx, req, &resp);
  };
  std::string other;
  {
    ClientContext ctx;
    Auth(ctx, session_);
    v1::OpenRequest req;
    req.set_family(v1::FAMILY_IPV4);
    v1::OpenResponse resp;
    ASSERT_TRUE(sockets_->Open(&ctx, req, &resp).ok());
    other = resp.socket();
  }
  grpc::Status st = bind(other, "10.1.0.2", 4000);
  EXPECT_EQ(st.error_code(), StatusCode::ALREADY_EXISTS) << st.error_message();
  st = bind(other, "10.1.0.300", 1);
  EXPECT_EQ(st.error_code(), StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(st.error_message().find("local.address"), std::string::npos) << st.error_message();
  EXPECT_EQ(bind(other, "10.1.0.2", 70000).error_code(), StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(bind("0123456789abcdef0123456789abcdef", "10.1.0.2", 1).error_code(),
            StatusCode::NOT_FOUND);
  {  // FAILED_PRECONDITION: send on an unconnected socket without a destination
    ClientContext ctx;
    Auth(ctx, session_);
    v1::SendRequest req;
    req.set_socket(s);
    req.set_payload("x");
    v1::SendResponse resp;
    EXPECT_EQ(sockets_->Send(&ctx, req, &resp).error_code(), StatusCode::FAILED_PRECONDITION);
  }
  {  // FAILED_PRECONDITION: rehash of an unbound socket
    ClientContext ctx;
    Auth(ctx, session_);
    v1::RehashRequest req;
    req.set_socket(other);
    req.set_change_port(true);
    req.set_local_port(9);
    v1::RehashResponse resp;
    EXPECT_EQ(sockets_->Rehash(&ctx, req, &resp).error_code(), StatusCode::FAILED_PRECONDITION);
  }
  {  // DEADLINE_EXCEEDED
    ClientContext ctx;
    Auth(ctx, session_);
    ctx.set_deadline(std::chrono::system_clock::now() - std::chrono::seconds(1));
    v1::GetRequest req;
    req.set_socket(s);
    v1::Socket resp;
    EXPECT_EQ(sockets_->Get(&ctx, req, &resp).error_code(), StatusCode::DEADLINE_EXCEEDED);
  }
  {  // RESOURCE_EXHAUSTED: the per-session quota is 8
    for (int i = 2; i < 8; ++i) EXPECT_EQ(open(session_, v1::FAMILY_IPV4), StatusCode::OK);
    EXPECT_EQ(open(session_, v1::FAMILY_IPV4), StatusCode::RESOURCE_EXHAUSTED);
  }
  {  // RESOURCE_EXHAUSTED: sessions (4 at most; one exists)
    NewSession("b");
    NewSession("c");
    NewSession("d");
    ClientContext ctx;
    v1::CreateSessionRequest req;
    v1::CreateSessionResponse resp;
    EXPECT_EQ(sockets_->CreateSession(&ctx, req, &resp).error_code(),
              StatusCode::RESOURCE_EXHAUSTED);
  }
  {  // INVALID_ARGUMENT: over the largest UDP datagram (over the MTU, it goes in fragments)
    ClientContext ctx;
    Auth(ctx, session_);
    v1::SendRequest req;
    req.set_socket(s);
    req.set_payload(std::string(65508, 'x'));
    *req.mutable_destination() = Ep("10.1.0.1", 9);
    v1::SendResponse resp;
    EXPECT_EQ(sockets_->Send(&ctx, req, &resp).error_code(), StatusCode::INVALID_ARGUMENT);
  }
}

TEST_F(ServiceTest, ShutdownEndsStreamsWithUnavailable) {
  // Over the Unix socket, as a real client: gRPC 1.51's in-process transport does not survive
  // its server's shutdown.
  std::shared_ptr<grpc::Channel> channel =
      grpc::CreateChannel(server_->listening_on(), grpc::InsecureChannelCredentials());
  std::unique_ptr<v1::SocketService::Stub> stub = v1::SocketService::NewStub(channel);
  const std::string s = OpenBound(session_, "10.1.0.2", 4600);
  ClientContext ctx;
  Auth(ctx, session_);
  v1::ReceiveRequest req;
  req.set_socket(s);
  std::unique_ptr<grpc::ClientReader<v1::Datagram>> reader = stub->Receive(&ctx, req);
  // The stream is up: it has delivered a datagram.
  PeerSend(PeerSocket(5600), "before the shutdown", 4600);
  v1::Datagram d;
  ASSERT_TRUE(reader->Read(&d));
  EXPECT_EQ(d.payload(), "before the shutdown");
  std::thread stopper([&] { server_->Shutdown(absl::Seconds(2)); });
  while (reader->Read(&d)) {
  }
  const grpc::Status st = reader->Finish();
  stopper.join();
  EXPECT_EQ(st.error_code(), StatusCode::UNAVAILABLE) << st.error_message();
  EXPECT_TRUE(stack_->List().empty()) << "shutdown closes every session's sockets";
}

// Another client's socket is PERMISSION_DENIED, whatever the call; a handle that no session
// has (never given out, closed, or of an ended session) is NOT_FOUND.
TEST_F(ServiceTest, SessionsCannotTouchEachOthersSockets) {
  const std::string mine = OpenBound(session_, "10.1.0.2", 4000);
  const std::string intruder = NewSession("intruder");
  const auto get = [&](const std::string& handle) {
    ClientContext ctx;
    Auth(ctx, intruder);
    v1::GetRequest req;
    req.set_socket(handle);
    v1::Socket resp;
    return sockets_->Get(&ctx, req, &resp);
  };
  grpc::Status st = get(mine);
  EXPECT_EQ(st.error_code(), StatusCode::PERMISSION_DENIED) << st.error_message();
  EXPECT_EQ(st.error_message(), "socket \"" + mine + "\" belongs to another client");
  {
    ClientContext ctx;
    Auth(ctx, intruder);
    v1::CloseRequest req;
    req.set_socket(mine);
    v1::CloseResponse resp;
    EXPECT_EQ(sockets_->Close(&ctx, req, &resp).error_code(), StatusCode::PERMISSION_DENIED);
  }
  {
    ClientContext ctx;
    Auth(ctx, intruder);
    v1::BatchRequest req;
    req.add_ops()->mutable_disconnect()->set_socket(mine);
    v1::BatchResponse resp;
    ASSERT_TRUE(sockets_->Batch(&ctx, req, &resp).ok());
    ASSERT_EQ(resp.results_size(), 1);
    EXPECT_EQ(resp.results(0).code(), static_cast<int32_t>(StatusCode::PERMISSION_DENIED));
  }
  {
    TestStream<ExchangeStream> x = OpenExchange(intruder, mine);
    v1::ExchangeResponse r;
    EXPECT_FALSE(x->Read(&r));
    EXPECT_EQ(x.Finish().error_code(), StatusCode::PERMISSION_DENIED);
  }
  EXPECT_EQ(Get(mine).local().port(), 4000u) << "the owner's socket is untouched";
  ClientContext lctx;
  Auth(lctx, intruder);
  v1::ListResponse list;
  ASSERT_TRUE(sockets_->List(&lctx, v1::ListRequest(), &list).ok());
  EXPECT_EQ(list.sockets_size(), 0);

  EXPECT_EQ(get("0123456789abcdef0123456789abcdef").error_code(), StatusCode::NOT_FOUND);
  v1::CloseRequest close;
  close.set_socket(mine);
  v1::CloseResponse closed;
  ASSERT_TRUE(Call(&v1::SocketService::Stub::Close, close, &closed).ok());
  EXPECT_EQ(get(mine).error_code(), StatusCode::NOT_FOUND) << "a closed socket's handle is gone";
  const std::string brief = NewSession("brief");
  const std::string theirs = OpenBound(brief, "10.1.0.2", 4001);
  EXPECT_EQ(get(theirs).error_code(), StatusCode::PERMISSION_DENIED);
  ClientContext ectx;
  Auth(ectx, brief);
  v1::EndSessionResponse ended;
  ASSERT_TRUE(sockets_->EndSession(&ectx, v1::EndSessionRequest(), &ended).ok());
  EXPECT_EQ(get(theirs).error_code(), StatusCode::NOT_FOUND) << "an ended session's handles go";
}

TEST_F(ServiceTest, LapsedLeaseClosesTheSessionsSockets) {
  const std::string short_lived = NewSession("brief", 2);
  OpenBound(short_lived, "10.1.0.2", 4100);
  EXPECT_EQ(stack_->List().size(), 1u);
  clock_offset_ = 5;  // the lease is long gone
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (!stack_->List().empty() && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(50));
  EXPECT_TRUE(stack_->List().empty());
  ClientContext ctx;
  Auth(ctx, short_lived);
  v1::KeepAliveResponse resp;
  EXPECT_EQ(sockets_->KeepAlive(&ctx, v1::KeepAliveRequest(), &resp).error_code(),
            StatusCode::UNAUTHENTICATED);
}

class SessionLogTest : public ServiceTest {
 protected:
  void Configure(ServerOptions& o) override {
    o.log = [this](absl::string_view line) {
      std::lock_guard<std::mutex> lock(mu_);
      lines_.emplace_back(line);
    };
  }
  // The logged lines that contain every one of `words`.
  std::vector<std::string> Lines(const std::vector<std::string>& words) {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<std::string> out;
    for (const std::string& l : lines_) {
      bool all = true;
      for (const std::string& w : words) all = all && l.find(w) != std::string::npos;
      if (all) out.push_back(l);
    }
    return out;
  }
  std::mutex mu_;
  std::vector<std::string> lines_;
};

TEST_F(SessionLogTest, TheLogSaysWhenSessionsStartAndEnd) {
  const std::string brief = NewSession("brief-client", 2);
  const std::string id = brief.substr(0, 8);
  EXPECT_EQ(Lines({"session " + id, "\"brief-client\"", "created for", "lease 2 s"}).size(), 1u);
  OpenBound(brief, "10.1.0.2", 4110);
  OpenBound(brief, "10.1.0.2", 4111);
  clock_offset_ = 5;  // the lease is long gone: the reaper ends the session
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (!stack_->List().empty() && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(50));
  const std::vector<std::string> expired = Lines({"session " + id, "expired", "closed 2 sockets"});
  EXPECT_EQ(expired.size(), 1u) << absl::StrJoin(Lines({}), "\n");
  EXPECT_TRUE(Lines({brief}).empty()) << "the log has a whole token";
  clock_offset_ = 0;
  ClientContext ctx;
  Auth(ctx, session_);
  v1::EndSessionResponse resp;
  ASSERT_TRUE(sockets_->EndSession(&ctx, v1::EndSessionRequest(), &resp).ok());
  EXPECT_EQ(Lines({"session " + session_.substr(0, 8), "ended by EndSession"}).size(), 1u);
}

// SetNeighbor takes only a unicast host on a connected network (10.1.0.0/24, fd00:1::/64 here)
// that is not the stack itself, with a unicast MAC; anything else is INVALID_ARGUMENT, saying why.
// (On the administration listener: on the ordinary one it is PERMISSION_DENIED.)
TEST_F(ServiceTest, SetNeighborRefusesWhatIsNoNeighbour) {
  const auto set = [&](const std::string& address, const std::string& mac) {
    ClientContext ctx;
    v1::SetNeighborRequest req;
    req.set_address(address);
    req.set_mac(mac);
    v1::SetNeighborResponse resp;
    return administration_->SetNeighbor(&ctx, req, &resp);
  };
  const std::string good_mac = "02:00:00:00:00:99";
  for (const auto& [address, mac, why] : std::vector<std::array<std::string, 3>>{
           {"10.1.0.2", good_mac, "own"},
           {"fd00:1::2", good_mac, "own"},
           {"192.0.2.1", good_mac, "connected networks"},
           {"fd00:2::1", good_mac, "connected networks"},
           {"10.1.0.255", good_mac, "broadcast address of 10.1.0.2/24"},
           {"224.0.0.1", good_mac, "multicast"},
           {"10.1.0.9", "ff:ff:ff:ff:ff:ff", "broadcast"},
           {"10.1.0.9", "00:00:00:00:00:00", "zeros"},
           {"10.1.0.9", "33:33:00:00:00:01", "multicast"}}) {
    const grpc::Status st = set(address, mac);
    EXPECT_EQ(st.error_code(), StatusCode::INVALID_ARGUMENT) << address << " " << mac;
    EXPECT_NE(st.error_message().find(why), std::string::npos) << st.error_message();
  }
  EXPECT_TRUE(set("fd00:1::9", good_mac).ok());
  ClientContext ctx;
  v1::RemoveNeighborRequest req;
  req.set_address("ff02::1");
  v1::RemoveNeighborResponse resp;
  EXPECT_EQ(administration_->RemoveNeighbor(&ctx, req, &resp).error_code(),
            StatusCode::INVALID_ARGUMENT);
}

TEST_F(ServiceTest, ClosingTheSessionStreamClosesItsSockets) {
  const std::string held = NewSession("held", 1);
  auto ctx = std::make_unique<ClientContext>();
  Auth(*ctx, held);
  std::unique_ptr<grpc::ClientReader<v1::SessionEvent>> stream =
      sockets_->Session(ctx.get(), v1::SessionRequest());
  v1::SessionEvent hello;
  ASSERT_TRUE(stream->Read(&hello));
  OpenBound(held, "10.1.0.2", 4200);
  // A witness with the same lease, made after the held session's last call and held by
  // nothing: once the reaper has ended it, the reaper has seen the held one lapsed too.
  OpenBound(NewSession("witness", 1), "10.1.0.2", 4201);
  clock_offset_ = 10;  // both leases are over; a held session does not lapse
  ASSERT_TRUE(t_->WaitUntilPortFree(4201)) << "the reaper did not end the witness session";
  EXPECT_EQ(stack_->List().size(), 1u) << "the held session lapsed";
  ctx->TryCancel();
  stream->Finish();
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (!stack_->List().empty() && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(50));
  EXPECT_TRUE(stack_->List().empty());
}

TEST_F(ServiceTest, SlowReaderCostsBoundedMemory) {
  const std::string s = OpenBound(session_, "10.1.0.2", 4300, v1::FAMILY_IPV4, 8);
  ASSERT_FALSE(s.empty());
  const stack::SocketId peer = PeerSocket(5300);
  // The peer knows our MAC: otherwise its first datagrams wait for ARP in a queue of 16, and on
  // a busy machine more than 16 are sent before the answer comes (dropped there, not here).
  ASSERT_EQ(peer_->SetNeighbor(*net::IpAddress::Parse("10.1.0.2"), testing::kServerMac),
            absl::OkStatus());
  for (int i = 0; i < 100; ++i) {
    PeerSend(peer, std::string(1000, 'x'), 4300);
    if (i % 10 == 9) absl::SleepFor(absl::Milliseconds(5));
  }
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (Get(s).counters().rx_dropped() + Get(s).counters().queued() < 100 && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  const v1::Socket info = Get(s);
  EXPECT_EQ(info.counters().queued(), 8u);
  EXPECT_EQ(info.counters().rx_dropped(), 92u);
  EXPECT_EQ(info.counters().rx_datagrams(), 8u);
}

TEST_F(ServiceTest, SendBatchAndExchange) {
  const std::string s = OpenBound(session_, "10.1.0.2", 4400);
  const stack::SocketId peer = PeerSocket(5400);
  {
    ClientContext ctx;
    Auth(ctx, session_);
    v1::SendBatchRequest req;
    req.set_socket(s);
    for (int i = 0; i < 10; ++i) {
      v1::Datagram* d = req.add_datagrams();
      d->set_payload("b" + std::to_string(i));
      *d->mutable_peer() = Ep("10.1.0.1", 5400);
    }
    req.add_datagrams()->set_payload("no destination");  // fails: not connected
    v1::SendBatchResponse resp;
    grpc::Status st = sockets_->SendBatch(&ctx, req, &resp);
    EXPECT_EQ(st.error_code(), StatusCode::FAILED_PRECONDITION);
    EXPECT_NE(st.error_message().find("datagram 10"), std::string::npos) << st.error_message();
  }
  int got = 0;
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (got < 10 && absl::Now() < deadline) {
    if (peer_->Receive(peer).value().has_value()) ++got; else absl::SleepFor(absl::Milliseconds(1));
  }
  EXPECT_EQ(got, 10);

  ClientContext ctx;
  Auth(ctx, session_);
  auto stream = sockets_->Exchange(&ctx);
  v1::ExchangeRequest req;
  req.set_socket(s);
  v1::Datagram* d = req.add_datagrams();
  d->set_payload("via exchange");
  *d->mutable_peer() = Ep("10.1.0.1", 5400);
  ASSERT_TRUE(stream->Write(req));
  for (int i = 0; i < 20; ++i) PeerSend(peer, "in" + std::to_string(i), 4400);
  int received = 0;
  v1::ExchangeResponse resp;
  while (received < 20 && stream->Read(&resp)) received += resp.datagrams_size();
  EXPECT_EQ(received, 20);
  stream->WritesDone();
  ctx.TryCancel();
  stream->Finish();
  std::optional<stack::ReceivedDatagram> echo;
  const absl::Time d2 = absl::Now() + absl::Seconds(30);
  while (!echo && absl::Now() < d2) {
    echo = peer_->Receive(peer).value();
    if (!echo) absl::SleepFor(absl::Milliseconds(1));
  }
  ASSERT_TRUE(echo.has_value());
  EXPECT_EQ(echo->payload, "via exchange");
}

// The peer host has no socket on port 5999 and answers with port unreachable, as a kernel does.
TEST_F(ServiceTest, AClosedPeerPortFailsTheConnectedSocketsNextSend) {
  const std::string s = OpenBound(session_, "10.1.0.2", 4401);
  v1::ConnectRequest conn;
  conn.set_socket(s);
  *conn.mutable_peer() = Ep("10.1.0.1", 5999);
  v1::ConnectResponse connected;
  ASSERT_TRUE(Call(&v1::SocketService::Stub::Connect, conn, &connected).ok());
  v1::SendRequest send;
  send.set_socket(s);
  send.set_payload("knock");
  v1::SendResponse sent;
  ASSERT_TRUE(Call(&v1::SocketService::Stub::Send, send, &sent).ok());
  v1::Socket got = Get(s);
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (got.pending_error().empty() && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(2));
    got = Get(s);
  }
  EXPECT_EQ(got.pending_error(), "ECONNREFUSED (ICMP port unreachable)");
  EXPECT_EQ(got.counters().icmp_errors(), 1u);

  grpc::Status refused = Call(&v1::SocketService::Stub::Send, send, &sent);
  EXPECT_EQ(refused.error_code(), StatusCode::ABORTED);
  EXPECT_NE(refused.error_message().find("ECONNREFUSED"), std::string::npos)
      << refused.error_message();
  EXPECT_NE(refused.error_message().find(s), std::string::npos) << refused.error_message();
  EXPECT_EQ(Get(s).pending_error(), "");  // reported once

  ClientContext ctx;
  Auth(ctx, session_);
  v1::Counters counters;
  ASSERT_TRUE(admin_->GetCounters(&ctx, v1::GetCountersRequest(), &counters).ok());
  EXPECT_EQ(counters.stack().icmp_errors_received(), 1u);
  EXPECT_EQ(counters.stack().icmp_errors_unmatched(), 0u);
}

TEST_F(ServiceTest, BatchRunsEachOperationAndReportsEach) {
  ClientContext ctx;
  Auth(ctx, session_);
  v1::BatchRequest req;
  req.add_ops()->mutable_open()->set_family(v1::FAMILY_IPV4);           // 0
  v1::BindRequest* bind = req.add_ops()->mutable_bind();                 // 1
  bind->set_socket("#0");
  *bind->mutable_local() = Ep("0.0.0.0", 4700);
  v1::ConnectRequest* conn = req.add_ops()->mutable_connect();          // 2
  conn->set_socket("#0");
  *conn->mutable_peer() = Ep("10.1.0.1", 5700);
  v1::BindRequest* taken = req.add_ops()->mutable_bind();               // 3: no such socket
  taken->set_socket("#7");
  req.add_ops()->mutable_open()->set_family(v1::FAMILY_UNSPECIFIED);    // 4: bad family
  req.add_ops()->mutable_close()->set_socket("#0");                     // 5
  v1::BatchResponse resp;
  ASSERT_TRUE(sockets_->Batch(&ctx, req, &resp).ok());
  ASSERT_EQ(resp.results_size(), 6);
  EXPECT_EQ(resp.results(0).code(), 0);
  EXPECT_EQ(resp.results(0).socket().size(), 32u);
  EXPECT_EQ(resp.results(1).local().port(), 4700u);
  EXPECT_EQ(resp.results(2).code(), 0);
  EXPECT_EQ(resp.results(2).local().address(), "10.1.0.2");
  EXPECT_EQ(resp.results(3).code(), static_cast<int>(StatusCode::INVALID_ARGUMENT));
  EXPECT_EQ(resp.results(4).code(), static_cast<int>(StatusCode::INVALID_ARGUMENT));
  EXPECT_EQ(resp.results(5).code(), 0);
  EXPECT_TRUE(stack_->List().empty());
}

TEST_F(ServiceTest, ListFiltersAndPages) {
  for (int i = 0; i < 5; ++i) OpenBound(session_, "10.1.0.2", 4500 + i);
  ClientContext ctx;
  Auth(ctx, session_);
  v1::ListRequest req;
  req.set_page_size(2);
  v1::ListResponse page1;
  ASSERT_TRUE(sockets_->List(&ctx, req, &page1).ok());
  EXPECT_EQ(page1.sockets_size(), 2);
  ASSERT_FALSE(page1.next_page_token().empty());
  int total = page1.sockets_size();
  std::string token = page1.next_page_token();
  while (!token.empty()) {
    ClientContext c2;
    Auth(c2, session_);
    req.set_page_token(token);
    v1::ListResponse page;
    ASSERT_TRUE(sockets_->List(&c2, req, &page).ok());
    total += page.sockets_size();
    token = page.next_page_token();
  }
  EXPECT_EQ(total, 5);
  ClientContext c3;
  Auth(c3, session_);
  v1::ListRequest by_port;
  by_port.set_local_port(4502);
  v1::ListResponse one;
  ASSERT_TRUE(sockets_->List(&c3, by_port, &one).ok());
  ASSERT_EQ(one.sockets_size(), 1);
  EXPECT_EQ(one.sockets(0).local().port(), 4502u);
}

// Pages of a filtered listing, one socket a page, while the matching sockets lie apart among
// those that do not match: every match once, in handle order, and the last page says no more.
TEST_F(ServiceTest, FilteredPagesFindEveryMatchOnce) {
  std::set<std::string> want;
  for (int i = 0; i < 8; ++i) {
    const std::string h = OpenBound(session_, "10.1.0.2", 4500 + i);
    if (i % 3 == 0) {
      v1::ConnectRequest req;
      req.set_socket(h);
      *req.mutable_peer() = Ep("10.1.0.1", 53);
      v1::ConnectResponse resp;
      ASSERT_TRUE(Call(&v1::SocketService::Stub::Connect, req, &resp).ok());
      want.insert(h);
    }
  }
  std::vector<std::string> got;
  std::string token;
  for (int pages = 0; pages < 20; ++pages) {
    ClientContext ctx;
    Auth(ctx, session_);
    v1::ListRequest req;
    req.set_page_size(1);
    req.set_state(v1::SOCKET_STATE_CONNECTED);
    req.set_page_token(token);
    v1::ListResponse page;
    ASSERT_TRUE(sockets_->List(&ctx, req, &page).ok());
    for (const v1::Socket& s : page.sockets()) got.push_back(s.socket());
    token = page.next_page_token();
    if (token.empty()) break;
  }
  EXPECT_TRUE(token.empty());
  EXPECT_TRUE(std::is_sorted(got.begin(), got.end()));
  EXPECT_EQ(std::set<std::string>(got.begin(), got.end()), want);
  EXPECT_EQ(got.size(), want.size());
}

TEST_F(ServiceTest, AdminReportsAndChanges) {
  {
    ClientContext ctx;
    Auth(ctx, session_);
    v1::ListInterfacesResponse resp;
    ASSERT_TRUE(admin_->ListInterfaces(&ctx, v1::ListInterfacesRequest(), &resp).ok());
    ASSERT_EQ(resp.interfaces_size(), 1);
    EXPECT_EQ(resp.interfaces(0).name(), "mem0");
    EXPECT_EQ(resp.interfaces(0).mac(), "02:00:00:00:00:0b");
    EXPECT_EQ(resp.interfaces(0).queues_size(), 1);
  }
  {
    ClientContext ctx;
    Auth(ctx, session_);
    v1::ListAddressesResponse resp;
    ASSERT_TRUE(admin_->ListAddresses(&ctx, v1::ListAddressesRequest(), &resp).ok());
    ASSERT_EQ(resp.prefixes_size(), 2);
    EXPECT_EQ(resp.prefixes(0), "10.1.0.2/24");
  }
  {
    ClientContext ctx;
    Auth(ctx, session_);
    v1::ListRoutesResponse resp;
    ASSERT_TRUE(admin_->ListRoutes(&ctx, v1::ListRoutesRequest(), &resp).ok());
    ASSERT_EQ(resp.routes_size(), 2);
    EXPECT_EQ(resp.routes(0).destination(), "10.1.0.0/24");
    EXPECT_EQ(resp.routes(0).source(), "10.1.0.2");
    EXPECT_EQ(resp.routes(1).destination(), "fd00:1::/64");
  }
  {  // Changes go to the administration listener, without a session.
    ClientContext ctx;
    v1::SetNeighborRequest req;
    req.set_address("10.1.0.9");
    req.set_mac("02:00:00:00:00:99");
    v1::SetNeighborResponse resp;
    ASSERT_TRUE(administration_->SetNeighbor(&ctx, req, &resp).ok());
    ClientContext bad;
    req.set_mac("not-a-mac");
    EXPECT_EQ(administration_->SetNeighbor(&bad, req, &resp).error_code(),
              StatusCode::INVALID_ARGUMENT);
  }
  {
    ClientContext ctx;
    Auth(ctx, session_);
    v1::ListNeighborsResponse resp;
    ASSERT_TRUE(admin_->ListNeighbors(&ctx, v1::ListNeighborsRequest(), &resp).ok());
    ASSERT_EQ(resp.neighbors_size(), 1);
    EXPECT_EQ(resp.neighbors(0).state(), "permanent");
    ClientContext rm;
    v1::RemoveNeighborRequest req;
    req.set_address("10.1.0.77");
    v1::RemoveNeighborResponse r;
    EXPECT_EQ(administration_->RemoveNeighbor(&rm, req, &r).error_code(), StatusCode::NOT_FOUND);
  }
  {
    ClientContext ctx;
    Auth(ctx, session_);
    v1::Counters resp;
    ASSERT_TRUE(admin_->GetCounters(&ctx, v1::GetCountersRequest(), &resp).ok());
    EXPECT_TRUE(resp.table().hash4_enabled());
    EXPECT_EQ(resp.table().chain_histogram_size(), 8);
    EXPECT_EQ(resp.sessions(), 1u);
  }
  {
    ClientContext ctx;
    Auth(ctx, session_);
    v1::CheckFrameAccountingResponse resp;
    ASSERT_TRUE(admin_->CheckFrameAccounting(&ctx, v1::CheckFrameAccountingRequest(), &resp).ok());
    EXPECT_TRUE(resp.ok());
  }
}

// A reuseport group is one session's: another session cannot join it and take half its flows.
TEST_F(ServiceTest, ReusePortSharesOnlyWithinASession) {
  auto open_reuse = [this](const std::string& session) {
    ClientContext ctx;
    Auth(ctx, session);
    v1::OpenRequest req;
    req.set_family(v1::FAMILY_IPV4);
    req.set_reuse_port(true);
    v1::OpenResponse resp;
    EXPECT_TRUE(sockets_->Open(&ctx, req, &resp).ok());
    return resp.socket();
  };
  auto bind = [this](const std::string& session, const std::string& handle) {
    ClientContext ctx;
    Auth(ctx, session);
    v1::BindRequest req;
    req.set_socket(handle);
    *req.mutable_local() = Ep("10.1.0.2", 4500);
    v1::BindResponse resp;
    return sockets_->Bind(&ctx, req, &resp).error_code();
  };
  const std::string other = NewSession("other");
  EXPECT_EQ(bind(session_, open_reuse(session_)), StatusCode::OK);
  EXPECT_EQ(bind(session_, open_reuse(session_)), StatusCode::OK);
  EXPECT_EQ(bind(other, open_reuse(other)), StatusCode::ALREADY_EXISTS);
}

// Clients know their sockets by handle; the stack's own socket numbers mean nothing to them.
TEST_F(ServiceTest, ErrorsNameTheSocketByItsHandle) {
  const std::string s = OpenBound(session_, "10.1.0.2", 4900);
  auto expect_named = [&s](const grpc::Status& st, StatusCode code) {
    EXPECT_EQ(st.error_code(), code) << st.error_message();
    EXPECT_NE(st.error_message().find(s), std::string::npos) << st.error_message();
    for (char digit = '0'; digit <= '9'; ++digit) {
      EXPECT_EQ(st.error_message().find(std::string("socket ") + digit), std::string::npos)
          << st.error_message();
    }
  };
  v1::SendRequest send;  // the stack: "socket N is not connected"
  send.set_socket(s);
  send.set_payload("x");
  v1::SendResponse sent;
  expect_named(Call(&v1::SocketService::Stub::Send, send, &sent),
               StatusCode::FAILED_PRECONDITION);
  v1::BindRequest bind;  // the socket table: "socket N is already bound"
  bind.set_socket(s);
  *bind.mutable_local() = Ep("10.1.0.2", 4901);
  v1::BindResponse bound;
  expect_named(Call(&v1::SocketService::Stub::Bind, bind, &bound),
               StatusCode::FAILED_PRECONDITION);
  v1::SendBatchRequest batch;  // "destination ... is of the wrong family for socket N"
  batch.set_socket(s);
  v1::Datagram* d = batch.add_datagrams();
  d->set_payload("x");
  *d->mutable_peer() = Ep("fd00:1::1", 9);
  v1::SendBatchResponse queued;
  expect_named(Call(&v1::SocketService::Stub::SendBatch, batch, &queued),
               StatusCode::INVALID_ARGUMENT);
}

// A relative Unix socket path without a folder: there is no parent to create.
TEST(ServerStartTest, ListensOnARelativeUnixPathWithoutAFolder) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  ASSERT_NE(tmp, nullptr);
  ASSERT_EQ(chdir(tmp), 0);
  ServerOptions o;
  o.listen = "unix:q.sock";
  absl::StatusOr<std::unique_ptr<testing::TwoStacks>> t = testing::TwoStacks::Start(o);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ((*t)->server->listening_on(), "unix:q.sock");
  struct stat st;
  ASSERT_EQ(lstat("q.sock", &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ((*t)->Stop(), absl::OkStatus());
}

}  // namespace
}  // namespace quadsock::service
