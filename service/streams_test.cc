// The service's streams, Receive and Exchange, over a MemoryLink stack: what bounds their
// memory, what keeps their session alive, and what they refuse. A second stack on the same
// in-memory wire plays the remote host.
#include <gtest/gtest.h>

#include <thread>

#include "service/testing/service_fixture.h"

namespace quadsock::service {
namespace {

// The next datagram on the remote host's socket within `timeout`, if any.
std::optional<stack::ReceivedDatagram> PeerReceive(stack::Stack& peer, stack::SocketId s,
                                                   absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  for (;;) {
    std::optional<stack::ReceivedDatagram> d = peer.Receive(s).value();
    if (d.has_value() || absl::Now() > deadline) return d;
    absl::SleepFor(absl::Milliseconds(1));
  }
}

// A request of one datagram to the remote host (10.1.0.1:port).
v1::ExchangeRequest ToPeer(const std::string& payload, uint32_t port) {
  v1::ExchangeRequest req;
  v1::Datagram* d = req.add_datagrams();
  d->set_payload(payload);
  *d->mutable_peer() = Ep("10.1.0.1", port);
  return req;
}

// The stream was refused: no response, and the call ends with `code`.
template <typename Stream, typename Response>
void ExpectRefused(TestStream<Stream>& stream, Response& response, StatusCode code) {
  EXPECT_FALSE(stream->Read(&response));
  const grpc::Status st = stream.Finish();
  EXPECT_EQ(st.error_code(), code) << st.error_message();
}

class ExchangeLimitTest : public ServiceTest {
 protected:
  void Configure(ServerOptions& o) override { o.max_batch = 4; }
};

TEST_F(ExchangeLimitTest, ExchangeRejectsARequestOverTheBatchLimit) {
  const std::string s = OpenBound(session_, "10.1.0.2", 4800);
  const stack::SocketId peer = PeerSocket(5800);
  TestStream<ExchangeStream> stream = OpenExchange(session_, s);
  v1::ExchangeRequest req = ToPeer("over", 5800);
  for (int i = 1; i < 5; ++i) *req.add_datagrams() = req.datagrams(0);
  ASSERT_TRUE(stream->Write(req));
  v1::ExchangeResponse resp;
  ASSERT_TRUE(stream->Read(&resp));
  EXPECT_EQ(resp.send_result().code(), static_cast<int>(StatusCode::INVALID_ARGUMENT));
  EXPECT_EQ(resp.send_result().queued(), 0u);
  EXPECT_NE(resp.send_result().message().find("at most 4"), std::string::npos)
      << resp.send_result().message();
  // A request within the limit, on the same stream, arrives; nothing of the rejected one came
  // before it.
  ASSERT_TRUE(stream->Write(ToPeer("within", 5800)));
  std::optional<stack::ReceivedDatagram> first = PeerReceive(*peer_, peer, absl::Seconds(5));
  EXPECT_EQ(first.has_value() ? first->payload : "(none)", "within")
      << "something of a rejected request was sent";
}

// A client that writes requests but never reads: each failed send leaves a SendResult to
// deliver. The server must stop taking requests while they pile up, not keep them all.
TEST_F(ServiceTest, ExchangeStopsReadingWhileItsResultsAreUnread) {
  const std::string s = OpenBound(session_, "10.1.0.2", 4810);  // unconnected: sends need a peer
  const stack::SocketId peer = PeerSocket(5810);
  // Over the Unix socket, as a real client: without BDP probing the client's receive window
  // stays at 64 KiB, so the server's Writes block after a known amount of unread responses.
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  std::unique_ptr<v1::SocketService::Stub> stub = UnixStub(args);
  TestStream<ExchangeStream> stream = OpenExchange(session_, s, absl::Seconds(30), stub.get());
  constexpr int kFailing = 20000;  // each one's result is ~70 bytes: far over the window
  std::thread writer([&] {
    v1::ExchangeRequest fails;
    fails.add_datagrams()->set_payload("no destination");  // FAILED_PRECONDITION
    for (int i = 0; i < kFailing; ++i) {
      if (!stream->Write(fails)) return;
    }
    stream->Write(ToPeer("last", 5810));  // completes into gRPC's buffers: only the send tells
  });
  EXPECT_FALSE(PeerReceive(*peer_, peer, absl::Seconds(2)).has_value())
      << "the server took every request although none of their results was read";
  // Reading the results lets the server go on, and none of them is lost.
  int results = 0;
  v1::ExchangeResponse resp;
  while (results < kFailing && stream->Read(&resp)) {
    if (resp.has_send_result()) {
      EXPECT_EQ(resp.send_result().code(), static_cast<int>(StatusCode::FAILED_PRECONDITION));
      ++results;
    }
  }
  EXPECT_EQ(results, kFailing);
  std::optional<stack::ReceivedDatagram> last = PeerReceive(*peer_, peer, absl::Seconds(5));
  EXPECT_EQ(last.has_value() ? last->payload : "(none)", "last");
  stream.ctx->TryCancel();  // unblocks the writer if the server still does not read
  writer.join();
}

// A stream outlives a 1 s lease: its session, and so its socket, stay while it is open.
TEST_F(ServiceTest, OpenStreamsRenewTheirSessionsLease) {
  const std::string brief = NewSession("brief", 1);
  const std::string r = OpenBound(brief, "10.1.0.2", 4820);
  const std::string x = OpenBound(brief, "10.1.0.2", 4821);
  const stack::SocketId peer = PeerSocket(5820);
  TestStream<ReceiveStream> receive = OpenReceive(brief, r);
  TestStream<ExchangeStream> exchange = OpenExchange(brief, x);
  // Both streams carry datagrams, before the lease is over and after.
  const auto expect_both_streams_deliver = [&](const std::string& when) {
    PeerSend(peer, "to receive " + when, 4820);
    PeerSend(peer, "to exchange " + when, 4821);
    v1::Datagram d;
    ASSERT_TRUE(receive->Read(&d));
    EXPECT_EQ(d.payload(), "to receive " + when);
    v1::ExchangeResponse resp;
    ASSERT_TRUE(exchange->Read(&resp));
    ASSERT_EQ(resp.datagrams_size(), 1);
    EXPECT_EQ(resp.datagrams(0).payload(), "to exchange " + when);
  };
  expect_both_streams_deliver("first");
  // A witness session with the same lease, made after the streams were up and held by nothing:
  // once the reaper has ended it, it has seen the brief session's lease over too.
  OpenBound(NewSession("witness", 1), "10.1.0.2", 4822);
  ASSERT_TRUE(t_->WaitUntilPortFree(4822)) << "the reaper did not end the witness session";
  EXPECT_EQ(stack_->List().size(), 2u) << "the session lapsed under its open streams";
  expect_both_streams_deliver("after the lease");
}

// A stream whose client reads nothing: the remote host sends 300 datagrams of 1,400 bytes to
// `port` (of socket `s`), far over the client's 64 KiB receive window, and the call returns once
// the stream's server side is blocked in Write (what the socket holds stops going down).
class BlockedStreamTest : public ServiceTest {
 protected:
  // A stub over the Unix socket whose streams' window stays at 64 KiB.
  v1::SocketService::Stub* SlowStub() {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
    stub_ = UnixStub(args);
    return stub_.get();
  }
  // A Receive stream of `handle` over SlowStub.
  TestStream<ReceiveStream> ReceiveUnread(const std::string& session, const std::string& handle) {
    SlowStub();
    std::unique_ptr<ClientContext> ctx = StreamContext(session, absl::Seconds(60));
    v1::ReceiveRequest req;
    req.set_socket(handle);
    std::unique_ptr<ReceiveStream> stream = stub_->Receive(ctx.get(), req);
    return TestStream<ReceiveStream>(std::move(ctx), std::move(stream));
  }
  // The counters of socket `handle` of `session`.
  v1::SocketCounters Counters(const std::string& session, const std::string& handle) {
    ClientContext ctx;
    Auth(ctx, session);
    v1::GetRequest req;
    req.set_socket(handle);
    v1::Socket resp;
    EXPECT_TRUE(sockets_->Get(&ctx, req, &resp).ok());
    return resp.counters();
  }
  void FloodUntilBlocked(const std::string& session, const std::string& s, uint16_t port) {
    const stack::SocketId peer = PeerSocket(port + 1000);
    ASSERT_EQ(peer_->SetNeighbor(*net::IpAddress::Parse("10.1.0.2"), testing::kServerMac),
              absl::OkStatus());
    for (int i = 0; i < 300; ++i) {
      PeerSend(peer, std::string(1400, 'a' + i % 26), port);
      if (i % 10 == 9) absl::SleepFor(absl::Milliseconds(5));
    }
    const absl::Time deadline = absl::Now() + absl::Seconds(20);
    uint64_t before = ~uint64_t{0};
    for (;;) {
      absl::SleepFor(absl::Seconds(1));
      const v1::SocketCounters c = Counters(session, s);
      if (c.rx_datagrams() == 300 && c.queued() > 0 && c.queued() == before) return;
      before = c.queued();
      ASSERT_LT(absl::Now(), deadline) << "the stream never blocked: " << c.ShortDebugString();
    }
  }

  std::unique_ptr<v1::SocketService::Stub> stub_;
};

// A Receive stream whose client does not read for longer than the lease: it is open, so the
// session and its sockets stay, and the client then reads on.
TEST_F(BlockedStreamTest, ASlowReadersStreamKeepsItsSession) {
  const std::string brief = NewSession("brief", 1);
  const std::string s = OpenBound(brief, "10.1.0.2", 4870, v1::FAMILY_IPV4, 1024);
  TestStream<ReceiveStream> receive = ReceiveUnread(brief, s);
  ASSERT_NO_FATAL_FAILURE(FloodUntilBlocked(brief, s, 4870));
  // A witness session with the same lease, made now and held by nothing: once the reaper has
  // ended it, it has seen the brief session's lease over too (and the flood took seconds).
  OpenBound(NewSession("witness", 1), "10.1.0.2", 4872);
  ASSERT_TRUE(t_->WaitUntilPortFree(4872)) << "the reaper did not end the witness session";
  ASSERT_EQ(stack_->List().size(), 1u) << "the session lapsed under its blocked stream";
  v1::Datagram d;
  for (int i = 0; i < 300; ++i) {
    ASSERT_TRUE(receive->Read(&d)) << i;
    EXPECT_EQ(d.payload(), std::string(1400, 'a' + i % 26));
  }
}

// A Receive stream blocked in Write holds a datagram it took off the socket: when its client
// goes, the datagram is counted (the socket's rx_dropped, the stack's stream_dropped), not lost.
TEST_F(BlockedStreamTest, ADatagramAStreamCouldNotWriteIsCounted) {
  const std::string s = OpenBound(session_, "10.1.0.2", 4880, v1::FAMILY_IPV4, 1024);
  TestStream<ReceiveStream> receive = ReceiveUnread(session_, s);
  ASSERT_NO_FATAL_FAILURE(FloodUntilBlocked(session_, s, 4880));
  EXPECT_EQ(Get(s).counters().rx_dropped(), 0u);
  receive.Cancel();
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (Get(s).counters().rx_dropped() == 0 && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_EQ(Get(s).counters().rx_dropped(), 1u);
  EXPECT_EQ(stack_->Counters().stream_dropped, 1u);
}

// The same for an Exchange stream: what its failed Write held is counted.
TEST_F(BlockedStreamTest, DatagramsAnExchangeCouldNotWriteAreCounted) {
  const std::string s = OpenBound(session_, "10.1.0.2", 4890, v1::FAMILY_IPV4, 1024);
  TestStream<ExchangeStream> exchange = OpenExchange(session_, s, absl::Seconds(60), SlowStub());
  ASSERT_NO_FATAL_FAILURE(FloodUntilBlocked(session_, s, 4890));
  EXPECT_EQ(Get(s).counters().rx_dropped(), 0u);
  exchange.Cancel();
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (Get(s).counters().rx_dropped() == 0 && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_GT(Get(s).counters().rx_dropped(), 0u);
  EXPECT_EQ(stack_->Counters().stream_dropped, Get(s).counters().rx_dropped());
}

// Exchange names its socket in the first request, but the session is in the call's metadata:
// a caller without one is refused at once, before it sends anything.
TEST_F(ServiceTest, ExchangeChecksTheSessionBeforeReading) {
  std::unique_ptr<ClientContext> ctx = StreamContext("not-a-session", absl::Seconds(3));
  TestStream<ExchangeStream> stream(std::move(ctx), nullptr);
  stream.stream = sockets_->Exchange(stream.ctx.get());
  v1::ExchangeResponse resp;
  ExpectRefused(stream, resp, StatusCode::UNAUTHENTICATED);
}

class StreamLimitTest : public ServiceTest {
 protected:
  void Configure(ServerOptions& o) override { o.sessions.max_streams_per_session = 2; }
  void SetUp() override {
    ServiceTest::SetUp();
    peer_socket_ = PeerSocket(5830);
  }

  // A Receive stream on a new socket at `port`, known to be running on the server.
  TestStream<ReceiveStream> Running(const std::string& session, uint16_t port) {
    TestStream<ReceiveStream> r = OpenReceive(session, OpenBound(session, "10.1.0.2", port));
    PeerSend(peer_socket_, "up", port);
    v1::Datagram d;
    EXPECT_TRUE(r->Read(&d));
    return r;
  }
  stack::SocketId peer_socket_ = 0;
};

TEST_F(StreamLimitTest, ASessionHasAtMostItsNumberOfStreams) {
  std::optional<TestStream<ReceiveStream>> first = Running(session_, 4830);
  TestStream<ReceiveStream> second = Running(session_, 4831);
  const std::string third = OpenBound(session_, "10.1.0.2", 4832);
  {
    TestStream<ExchangeStream> exchange = OpenExchange(session_, third, absl::Seconds(3));
    v1::ExchangeResponse resp;
    ExpectRefused(exchange, resp, StatusCode::RESOURCE_EXHAUSTED);
  }
  Running(NewSession("other"), 4833);  // another session has streams of its own
  // A stream that ends makes room, also for a stream opened right after the cancel, before the
  // server's handler has noticed it (at its next 100 ms wait slice).
  first->Cancel();
  first.reset();
  TestStream<ReceiveStream> again = OpenReceive(session_, third);
  PeerSend(peer_socket_, "room", 4832);
  v1::Datagram d;
  EXPECT_TRUE(again->Read(&d));
}

// A Session stream holds one of the server's threads as long as it is open, like the others:
// it counts against the same per-session cap, or one session could hold every thread.
TEST_F(StreamLimitTest, SessionStreamsCountAgainstTheStreamCap) {
  v1::SessionEvent event;
  std::optional<TestStream<SessionStream>> first = OpenSession(session_, absl::Seconds(30));
  ASSERT_TRUE((*first)->Read(&event));
  TestStream<SessionStream> second = OpenSession(session_, absl::Seconds(30));
  ASSERT_TRUE(second->Read(&event));
  {
    TestStream<SessionStream> third = OpenSession(session_, absl::Seconds(3));
    ExpectRefused(third, event, StatusCode::RESOURCE_EXHAUSTED);
  }
  {
    const std::string s = OpenBound(session_, "10.1.0.2", 4835);
    TestStream<ReceiveStream> receive = OpenReceive(session_, s, absl::Seconds(3));
    v1::Datagram d;
    ExpectRefused(receive, d, StatusCode::RESOURCE_EXHAUSTED);
  }
  // One ending makes room; the session stays, held by the other.
  first->Cancel();
  first.reset();
  TestStream<ReceiveStream> receive = Running(session_, 4836);
}

// A later request that names another socket is refused, not sent from the stream's socket.
TEST_F(ServiceTest, ExchangeRefusesARequestForAnotherSocket) {
  const std::string mine = OpenBound(session_, "10.1.0.2", 4840);
  const std::string other = OpenBound(session_, "10.1.0.2", 4841);
  const stack::SocketId peer = PeerSocket(5840);
  TestStream<ExchangeStream> stream = OpenExchange(session_, mine);
  v1::ExchangeRequest req = ToPeer("from the wrong socket", 5840);
  req.set_socket(other);
  ASSERT_TRUE(stream->Write(req));
  req = ToPeer("from mine", 5840);
  req.set_socket(mine);  // the stream's own socket, named again: fine
  ASSERT_TRUE(stream->Write(req));
  v1::ExchangeResponse resp;
  ASSERT_TRUE(stream->Read(&resp));
  EXPECT_EQ(resp.send_result().code(), static_cast<int>(StatusCode::INVALID_ARGUMENT));
  EXPECT_EQ(resp.send_result().queued(), 0u);
  std::optional<stack::ReceivedDatagram> got = PeerReceive(*peer_, peer, absl::Seconds(3));
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->payload, "from mine");
  EXPECT_EQ(got->source.port, 4840);
}

// The stack wakes one waiter per socket: a second stream reading the same socket is refused.
TEST_F(ServiceTest, ASocketHasOneReadingStreamAtATime) {
  const std::string s = OpenBound(session_, "10.1.0.2", 4850);
  const stack::SocketId peer = PeerSocket(5850);
  TestStream<ReceiveStream> first = OpenReceive(session_, s);
  PeerSend(peer, "up", 4850);
  v1::Datagram d;
  ASSERT_TRUE(first->Read(&d));  // the first stream is running on the server
  {
    TestStream<ReceiveStream> second = OpenReceive(session_, s, absl::Seconds(3));
    ExpectRefused(second, d, StatusCode::FAILED_PRECONDITION);
  }
  {
    TestStream<ExchangeStream> exchange = OpenExchange(session_, s, absl::Seconds(3));
    v1::ExchangeResponse resp;
    ExpectRefused(exchange, resp, StatusCode::FAILED_PRECONDITION);
  }
  // One after the other is fine, even while the server is still ending the first stream (it
  // notices the cancel at its next wait slice): a client's next receive must not fail on it.
  first.Cancel();
  TestStream<ReceiveStream> again = OpenReceive(session_, s);
  PeerSend(peer, "again", 4850);
  ASSERT_TRUE(again->Read(&d));
  EXPECT_EQ(d.payload(), "again");
}

// A client that half-closes (WritesDone) still gets what the stream holds for it: the results
// of its last requests come before the stream ends OK.
TEST_F(ServiceTest, ExchangeDeliversPendingResultsAfterTheClientHalfCloses) {
  const std::string s = OpenBound(session_, "10.1.0.2", 4870);  // unconnected: sends need a peer
  TestStream<ExchangeStream> stream = OpenExchange(session_, s);
  constexpr int kFailing = 40;
  v1::ExchangeRequest fails;
  fails.add_datagrams()->set_payload("no destination");  // FAILED_PRECONDITION
  for (int i = 0; i < kFailing; ++i) ASSERT_TRUE(stream->Write(fails));
  ASSERT_TRUE(stream->WritesDone());
  int results = 0;
  v1::ExchangeResponse resp;
  while (stream->Read(&resp)) {
    if (resp.has_send_result()) ++results;
  }
  EXPECT_EQ(results, kFailing);
  const grpc::Status st = stream.Finish();
  EXPECT_TRUE(st.ok()) << st.error_message();
}

class SmallMessageTest : public ServiceTest {
 protected:
  void Configure(ServerOptions& o) override { o.max_message_bytes = 64 << 10; }
};

// 100 queued datagrams of 1400 bytes are twice the message limit: Exchange splits them over
// responses instead of failing the Write (and losing what it had taken off the socket).
TEST_F(SmallMessageTest, ExchangeResponsesStayUnderTheMessageLimit) {
  const std::string s = OpenBound(session_, "10.1.0.2", 4860);
  const stack::SocketId peer = PeerSocket(5860);
  for (int i = 0; i < 100; ++i) {
    PeerSend(peer, std::string(1400, 'a' + i % 26), 4860);
    if (i % 10 == 9) absl::SleepFor(absl::Milliseconds(5));
  }
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (Get(s).counters().queued() < 100 && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  ASSERT_EQ(Get(s).counters().queued(), 100u);
  TestStream<ExchangeStream> stream = OpenExchange(session_, s);
  int received = 0;
  v1::ExchangeResponse resp;
  while (received < 100 && stream->Read(&resp)) {
    EXPECT_LE(resp.ByteSizeLong(), 64u << 10);
    received += resp.datagrams_size();
  }
  EXPECT_EQ(received, 100);
}

}  // namespace
}  // namespace quadsock::service
