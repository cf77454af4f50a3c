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

}  // namespace
}  // namespace quadsock::service
