// The server's HTTP/2 keepalive: a client that stops answering (its host lost power, its link
// was cut) loses its streams, and so its session, well within a lease instead of 2 hours. A
// relay between client and server that can be frozen plays the vanished client: it keeps both
// connections open but passes nothing more, so no FIN or RST ever reaches the server.
#include <gtest/gtest.h>

#include "service/testing/freezable_relay.h"
#include "service/testing/service_fixture.h"

namespace quadsock::service {
namespace {

using testing::FreezableRelay;

TEST(KeepaliveForLeaseTest, AThirdOfTheLeaseAtLeastTenSeconds) {
  const Keepalive usual = Keepalive::ForLease(absl::Seconds(30));
  EXPECT_EQ(usual.time, absl::Seconds(10));
  EXPECT_EQ(usual.timeout, absl::Seconds(10));
  const Keepalive brief = Keepalive::ForLease(absl::Seconds(3));
  EXPECT_EQ(brief.time, absl::Seconds(10));
  const Keepalive long_lease = Keepalive::ForLease(absl::Seconds(600));
  EXPECT_EQ(long_lease.time, absl::Seconds(200));
  EXPECT_EQ(long_lease.timeout, absl::Seconds(20));
  // The C++ client library pings every 20 s: the server must take that.
  EXPECT_LT(usual.min_client_interval, absl::Seconds(20));
}

class KeepaliveTest : public ServiceTest {
 protected:
  void Configure(ServerOptions& o) override {
    o.keepalive = Keepalive{.time = absl::Milliseconds(200),
                            .timeout = absl::Milliseconds(300),
                            .min_client_interval = absl::Milliseconds(100)};
  }
};

// A Session stream holds its session for as long as it is open: when its client vanishes, only
// keepalive ends it.
TEST_F(KeepaliveTest, TheStreamOfAClientThatStoppedAnsweringEnds) {
  FreezableRelay relay(server_->listening_on());
  std::unique_ptr<v1::SocketService::Stub> stub = v1::SocketService::NewStub(
      grpc::CreateChannel(relay.target(), grpc::InsecureChannelCredentials()));
  const std::string held = NewSession("vanishing", 1);
  OpenBound(held, "10.1.0.2", 4900);
  TestStream<SessionStream> stream = OpenSession(held, absl::Seconds(30), stub.get());
  v1::SessionEvent hello;
  ASSERT_TRUE(stream->Read(&hello));
  relay.Freeze();
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (!stack_->List().empty() && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(50));
  EXPECT_TRUE(stack_->List().empty()) << "a client that no longer answers still holds its session";
}

// A client's own keepalive, as often as min_client_interval allows, is not taken for abuse
// (gRPC's default takes one ping in 5 minutes, and answers more with GOAWAY "too_many_pings").
TEST_F(KeepaliveTest, ClientPingsAtTheAllowedRateAreTaken) {
  // Through the relay, which counts the pings the server answered.
  FreezableRelay relay(server_->listening_on());
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 150);
  args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  args.SetInt(GRPC_ARG_HTTP2_MIN_SENT_PING_INTERVAL_WITHOUT_DATA_MS, 150);
  args.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);  // every ping the client sends is a keepalive ping
  std::shared_ptr<grpc::Channel> channel = grpc::CreateCustomChannel(
      relay.target(), grpc::InsecureChannelCredentials(), args);
  std::unique_ptr<v1::SocketService::Stub> stub = v1::SocketService::NewStub(channel);
  const std::string held = NewSession("pinging", 1);
  OpenBound(held, "10.1.0.2", 4901);
  TestStream<SessionStream> stream = OpenSession(held, absl::Seconds(60), stub.get());
  v1::SessionEvent hello;
  ASSERT_TRUE(stream->Read(&hello));
  // Five answered pings: more than gRPC's default policy takes (two strikes) before GOAWAY.
  constexpr int kPings = 5;
  const absl::Time deadline = absl::Now() + absl::Seconds(40);
  while (relay.ping_acks() < kPings && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(50));
  }
  ASSERT_GE(relay.ping_acks(), kPings) << "the server stopped answering the client's pings";
  // A GOAWAY leaves the open stream be, but takes the connection from the channel.
  EXPECT_EQ(channel->GetState(false), GRPC_CHANNEL_READY)
      << "the server sent GOAWAY for the client's keepalive pings";
  EXPECT_EQ(stack_->List().size(), 1u);
}

}  // namespace
}  // namespace quadsock::service
