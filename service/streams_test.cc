// The service's streams, Receive and Exchange, over a MemoryLink stack: what bounds their
// memory, what keeps their session alive, and what they refuse. A second stack on the same
// in-memory wire plays the remote host.
#include <gtest/gtest.h>

#include <atomic>
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

class ExchangeLimitTest : public ServiceTest {
 protected:
  void Configure(ServerOptions& o) override { o.max_batch = 4; }
};

TEST_F(ExchangeLimitTest, ExchangeRejectsARequestOverTheBatchLimit) {
  const std::string s = OpenBound(session_, "10.1.0.2", 4800);
  const stack::SocketId peer = PeerSocket(5800);
  ClientContext ctx;
  Auth(ctx, session_);
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  auto stream = sockets_->Exchange(&ctx);
  v1::ExchangeRequest req;
  req.set_socket(s);
  for (int i = 0; i < 5; ++i) {
    v1::Datagram* d = req.add_datagrams();
    d->set_payload("over");
    *d->mutable_peer() = Ep("10.1.0.1", 5800);
  }
  ASSERT_TRUE(stream->Write(req));
  v1::ExchangeResponse resp;
  ASSERT_TRUE(stream->Read(&resp));
  EXPECT_EQ(resp.send_result().code(), static_cast<int>(StatusCode::INVALID_ARGUMENT));
  EXPECT_EQ(resp.send_result().queued(), 0u);
  EXPECT_NE(resp.send_result().message().find("at most 4"), std::string::npos)
      << resp.send_result().message();
  EXPECT_FALSE(PeerReceive(*peer_, peer, absl::Milliseconds(200)).has_value())
      << "nothing of a rejected request is sent";
  ctx.TryCancel();
  stream->Finish();
}

// A client that writes requests but never reads: each failed send leaves a SendResult to
// deliver. The server must stop taking requests while they pile up, not keep them all.
TEST_F(ServiceTest, ExchangeStopsReadingWhileItsResultsAreUnread) {
  const std::string s = OpenBound(session_, "10.1.0.2", 4810);  // unconnected: sends need a peer
  const stack::SocketId peer = PeerSocket(5810);
  // Without BDP probing the client's receive window stays at 64 KiB, so the server's Writes
  // block after a known amount of unread responses.
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  std::unique_ptr<v1::SocketService::Stub> stub = UnixStub(args);
  ClientContext ctx;
  Auth(ctx, session_);
  auto stream = stub->Exchange(&ctx);
  constexpr int kFailing = 20000;  // each one's result is ~70 bytes: far over the window
  std::thread writer([&] {
    for (int i = 0; i < kFailing; ++i) {
      v1::ExchangeRequest req;
      if (i == 0) req.set_socket(s);
      req.add_datagrams()->set_payload("no destination");  // FAILED_PRECONDITION
      if (!stream->Write(req)) return;
    }
    v1::ExchangeRequest last;
    v1::Datagram* d = last.add_datagrams();
    d->set_payload("last");
    *d->mutable_peer() = Ep("10.1.0.1", 5810);
    stream->Write(last);  // may complete into gRPC's buffers: only the send shows the server
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
  ctx.TryCancel();  // unblocks the writer if the server still does not read
  writer.join();
  ctx.TryCancel();
  stream->Finish();
}

// A stream outlives a 1 s lease: its session, and so its socket, stay while it is open.
TEST_F(ServiceTest, OpenStreamsRenewTheirSessionsLease) {
  const std::string brief = NewSession("brief", 1);
  const std::string r = OpenBound(brief, "10.1.0.2", 4820);
  const std::string x = OpenBound(brief, "10.1.0.2", 4821);
  const stack::SocketId peer = PeerSocket(5820);
  ClientContext rctx;
  Auth(rctx, brief);
  v1::ReceiveRequest rreq;
  rreq.set_socket(r);
  std::unique_ptr<grpc::ClientReader<v1::Datagram>> receive = sockets_->Receive(&rctx, rreq);
  ClientContext xctx;
  Auth(xctx, brief);
  auto exchange = sockets_->Exchange(&xctx);
  v1::ExchangeRequest first;
  first.set_socket(x);
  ASSERT_TRUE(exchange->Write(first));
  absl::SleepFor(absl::Milliseconds(2500));  // the reaper looks every second
  EXPECT_EQ(stack_->List().size(), 2u) << "the session lapsed under its open streams";
  PeerSend(peer, "to receive", 4820);
  PeerSend(peer, "to exchange", 4821);
  v1::Datagram d;
  ASSERT_TRUE(receive->Read(&d));
  EXPECT_EQ(d.payload(), "to receive");
  v1::ExchangeResponse resp;
  ASSERT_TRUE(exchange->Read(&resp));
  ASSERT_EQ(resp.datagrams_size(), 1);
  EXPECT_EQ(resp.datagrams(0).payload(), "to exchange");
  rctx.TryCancel();
  receive->Finish();
  xctx.TryCancel();
  exchange->Finish();
}

// Exchange names its socket in the first request, but the session is in the call's metadata:
// a caller without one is refused at once, before it sends anything.
TEST_F(ServiceTest, ExchangeChecksTheSessionBeforeReading) {
  ClientContext ctx;
  Auth(ctx, "not-a-session");
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(3));
  auto stream = sockets_->Exchange(&ctx);
  v1::ExchangeResponse resp;
  EXPECT_FALSE(stream->Read(&resp));
  EXPECT_EQ(stream->Finish().error_code(), StatusCode::UNAUTHENTICATED);
}

class StreamLimitTest : public ServiceTest {
 protected:
  void Configure(ServerOptions& o) override { o.sessions.max_streams_per_session = 2; }
};

TEST_F(StreamLimitTest, ASessionHasAtMostItsNumberOfStreams) {
  const stack::SocketId peer = PeerSocket(5830);
  struct Open {
    std::unique_ptr<ClientContext> ctx = std::make_unique<ClientContext>();
    std::unique_ptr<grpc::ClientReader<v1::Datagram>> reader;
  };
  std::vector<Open> streams(2);
  for (int i = 0; i < 2; ++i) {
    const std::string s = OpenBound(session_, "10.1.0.2", 4830 + i);
    Auth(*streams[i].ctx, session_);
    v1::ReceiveRequest req;
    req.set_socket(s);
    streams[i].reader = sockets_->Receive(streams[i].ctx.get(), req);
    PeerSend(peer, "up", 4830 + i);  // read back: the stream is running on the server
    v1::Datagram d;
    ASSERT_TRUE(streams[i].reader->Read(&d));
  }
  const std::string third = OpenBound(session_, "10.1.0.2", 4832);
  ClientContext ctx;
  Auth(ctx, session_);
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(3));
  auto exchange = sockets_->Exchange(&ctx);
  v1::ExchangeRequest first;
  first.set_socket(third);
  exchange->Write(first);
  v1::ExchangeResponse resp;
  EXPECT_FALSE(exchange->Read(&resp));
  const grpc::Status st = exchange->Finish();
  EXPECT_EQ(st.error_code(), StatusCode::RESOURCE_EXHAUSTED) << st.error_message();
  // Another session has streams of its own.
  const std::string other = NewSession("other");
  const std::string theirs = OpenBound(other, "10.1.0.2", 4833);
  ClientContext octx;
  Auth(octx, other);
  v1::ReceiveRequest oreq;
  oreq.set_socket(theirs);
  auto oreader = sockets_->Receive(&octx, oreq);
  PeerSend(peer, "up", 4833);
  v1::Datagram d;
  EXPECT_TRUE(oreader->Read(&d));
  octx.TryCancel();
  oreader->Finish();
  // A stream that ends makes room.
  streams[0].ctx->TryCancel();
  streams[0].reader->Finish();
  absl::SleepFor(absl::Milliseconds(300));  // the server's handler returns (100 ms slices)
  ClientContext again;
  Auth(again, session_);
  v1::ReceiveRequest req;
  req.set_socket(third);
  auto reader = sockets_->Receive(&again, req);
  PeerSend(peer, "room", 4832);
  EXPECT_TRUE(reader->Read(&d));
  again.TryCancel();
  reader->Finish();
  streams[1].ctx->TryCancel();
  streams[1].reader->Finish();
}

// A later request that names another socket is refused, not sent from the stream's socket.
TEST_F(ServiceTest, ExchangeRefusesARequestForAnotherSocket) {
  const std::string mine = OpenBound(session_, "10.1.0.2", 4840);
  const std::string other = OpenBound(session_, "10.1.0.2", 4841);
  const stack::SocketId peer = PeerSocket(5840);
  ClientContext ctx;
  Auth(ctx, session_);
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  auto stream = sockets_->Exchange(&ctx);
  v1::ExchangeRequest req;
  req.set_socket(mine);
  ASSERT_TRUE(stream->Write(req));
  req.set_socket(other);
  v1::Datagram* d = req.add_datagrams();
  d->set_payload("from the wrong socket");
  *d->mutable_peer() = Ep("10.1.0.1", 5840);
  ASSERT_TRUE(stream->Write(req));
  req.set_socket(mine);  // the stream's own socket, named again: fine
  req.mutable_datagrams(0)->set_payload("from mine");
  ASSERT_TRUE(stream->Write(req));
  v1::ExchangeResponse resp;
  ASSERT_TRUE(stream->Read(&resp));
  EXPECT_EQ(resp.send_result().code(), static_cast<int>(StatusCode::INVALID_ARGUMENT));
  EXPECT_EQ(resp.send_result().queued(), 0u);
  std::optional<stack::ReceivedDatagram> got = PeerReceive(*peer_, peer, absl::Seconds(3));
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->payload, "from mine");
  EXPECT_EQ(got->source.port, 4840);
  ctx.TryCancel();
  stream->Finish();
}

// The stack wakes one waiter per socket: a second stream reading the same socket is refused.
TEST_F(ServiceTest, ASocketHasOneReadingStreamAtATime) {
  const std::string s = OpenBound(session_, "10.1.0.2", 4850);
  const stack::SocketId peer = PeerSocket(5850);
  auto first_ctx = std::make_unique<ClientContext>();
  Auth(*first_ctx, session_);
  v1::ReceiveRequest req;
  req.set_socket(s);
  auto first = sockets_->Receive(first_ctx.get(), req);
  PeerSend(peer, "up", 4850);
  v1::Datagram d;
  ASSERT_TRUE(first->Read(&d));  // the first stream is running on the server
  {
    ClientContext ctx;
    Auth(ctx, session_);
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(3));
    auto second = sockets_->Receive(&ctx, req);
    EXPECT_FALSE(second->Read(&d));
    const grpc::Status st = second->Finish();
    EXPECT_EQ(st.error_code(), StatusCode::FAILED_PRECONDITION) << st.error_message();
  }
  {
    ClientContext ctx;
    Auth(ctx, session_);
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(3));
    auto exchange = sockets_->Exchange(&ctx);
    v1::ExchangeRequest x;
    x.set_socket(s);
    exchange->Write(x);
    v1::ExchangeResponse resp;
    EXPECT_FALSE(exchange->Read(&resp));
    EXPECT_EQ(exchange->Finish().error_code(), StatusCode::FAILED_PRECONDITION);
  }
  // One after the other is fine, even while the server is still ending the first stream (it
  // notices the cancel at its next wait slice): a client's next receive must not fail on it.
  first_ctx->TryCancel();
  first->Finish();
  ClientContext again_ctx;
  Auth(again_ctx, session_);
  auto again = sockets_->Receive(&again_ctx, req);
  PeerSend(peer, "again", 4850);
  ASSERT_TRUE(again->Read(&d));
  EXPECT_EQ(d.payload(), "again");
  again_ctx.TryCancel();
  again->Finish();
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
  const absl::Time deadline = absl::Now() + absl::Seconds(5);
  while (Get(s).counters().queued() < 100 && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  ASSERT_EQ(Get(s).counters().queued(), 100u);
  ClientContext ctx;
  Auth(ctx, session_);
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  auto stream = sockets_->Exchange(&ctx);
  v1::ExchangeRequest req;
  req.set_socket(s);
  ASSERT_TRUE(stream->Write(req));
  int received = 0;
  v1::ExchangeResponse resp;
  while (received < 100 && stream->Read(&resp)) {
    EXPECT_LE(resp.ByteSizeLong(), 64u << 10);
    received += resp.datagrams_size();
  }
  EXPECT_EQ(received, 100);
  ctx.TryCancel();
  stream->Finish();
}

}  // namespace
}  // namespace quadsock::service
