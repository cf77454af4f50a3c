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

}  // namespace
}  // namespace quadsock::service
