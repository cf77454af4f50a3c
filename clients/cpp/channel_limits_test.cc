// A data channel's limits as a client meets them through the API: ring sizes that are no power
// of two or past the server's maximum, a channel past --max_channel_mib, both transports; and a
// TX descriptor naming a socket index that only another session's channel has.
#include <gtest/gtest.h>

#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "clients/cpp/client.h"
#include "clients/cpp/data_channel.h"
#include "service/server.h"
#include "service/testing/two_stacks.h"

namespace quadsock {
namespace {

using absl::StatusCode;

constexpr size_t kMaxChannelBytes = size_t{4} << 20;  // as --max_channel_mib=4

// What the server said to a channel asked for: on shared memory AttachChannel's answer; on the
// gRPC stream a refusal comes as the stream's end (the call is opened corked with its first
// request), which the application sees once it calls in.
absl::Status Attach(Client& client, const AttachOptions& o) {
  absl::StatusOr<std::unique_ptr<DataChannel>> c = client.AttachChannel(o);
  if (!c.ok() || o.transport != ChannelTransport::kGrpcStream) return c.status();
  channel::ReceivedView v[4];
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  while ((*c)->ended().ok() && absl::Now() < deadline) (void)(*c)->Receive(v, absl::Milliseconds(50));
  return (*c)->ended().ok() ? absl::OkStatus() : (*c)->ended();
}

class ChannelLimitsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    service::ServerOptions o;
    o.channels.max_slots = 4096;
    o.channels.max_bytes_per_session = kMaxChannelBytes;
    auto t = service::testing::TwoStacks::Start(o, {.known_neighbors = true});
    ASSERT_TRUE(t.ok()) << t.status();
    t_ = std::move(*t);
    client_ = Client::Create(t_->server->InProcessChannel(), {.client_name = "limits"}).value();
  }
  void TearDown() override {
    client_.reset();
    if (t_ != nullptr) {
      EXPECT_EQ(t_->Stop(), absl::OkStatus());
    }
  }

  std::unique_ptr<service::testing::TwoStacks> t_;
  std::unique_ptr<Client> client_;
};

TEST_F(ChannelLimitsTest, RingSizesThatAreNoPowerOfTwoOrPastTheMaximumAreRefusedOnBothTransports) {
  for (ChannelTransport transport : {ChannelTransport::kSharedMemory, ChannelTransport::kGrpcStream}) {
    SCOPED_TRACE(transport == ChannelTransport::kSharedMemory ? "shared memory" : "gRPC stream");
    for (uint32_t slots : {1000u, 3u, 8192u, 1u << 31}) {
      const absl::Status s = Attach(*client_, {.ring_slots = slots, .transport = transport});
      EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << slots << " slots: " << s;
      EXPECT_TRUE(absl::StrContains(s.message(), "power of two of at most 4096")) << s;
    }
    // A channel past --max_channel_mib: its size and the flag named, nothing attached.
    const absl::Status big = Attach(*client_, {.ring_slots = 4096, .transport = transport});
    EXPECT_EQ(big.code(), StatusCode::kResourceExhausted) << big;
    EXPECT_TRUE(absl::StrContains(big.message(), "--max_channel_mib")) << big;
    // The refusals held nothing: one that fits is attached, and ends with its scope.
    absl::StatusOr<std::unique_ptr<DataChannel>> fits =
        client_->AttachChannel({.ring_slots = 64, .transport = transport});
    ASSERT_TRUE(fits.ok()) << fits.status();
    EXPECT_EQ((*fits)->transport(), transport);
    channel::ReceivedView v[4];
    EXPECT_EQ((*fits)->Receive(v, absl::Milliseconds(50)), 0u);
    EXPECT_EQ((*fits)->ended(), absl::OkStatus());
  }
}

// Each session numbers its sockets from 1: index 2 is the first session's second socket, and
// nothing in the second session's channel. A datagram queued there from index 2 is refused and
// counted; it never leaves from the other session's port.
TEST_F(ChannelLimitsTest, ATxDescriptorNamingAnotherSessionsSocketIndexSendsNothing) {
  std::unique_ptr<Client> other =
      Client::Create(t_->server->InProcessChannel(), {.client_name = "other"}).value();
  RemoteSocket first = client_->Open(v1::FAMILY_IPV4).value();
  RemoteSocket second = client_->Open(v1::FAMILY_IPV4).value();
  ASSERT_TRUE(second.Bind({"10.1.0.2", 4000}).ok());
  ASSERT_EQ(second.index(), 2u);
  RemoteSocket mine = other->Open(v1::FAMILY_IPV4).value();
  ASSERT_TRUE(mine.Bind({"10.1.0.2", 4100}).ok());
  ASSERT_EQ(mine.index(), 1u);
  std::unique_ptr<DataChannel> theirs = client_->AttachChannel().value();
  std::unique_ptr<DataChannel> ch = other->AttachChannel().value();
  const stack::SocketId peer = t_->PeerSocket(5000).value();
  const uint64_t refused_before = client_->Counters()->stack().tx_channel_no_socket();
  const net::Endpoint to = *net::Endpoint::Parse("10.1.0.1:5000");
  const std::string stolen = "from another session's index";
  const std::string own = "from my own";
  ASSERT_TRUE(ch->Send(2, {reinterpret_cast<const uint8_t*>(stolen.data()), stolen.size()}, to));
  ASSERT_TRUE(ch->Send(1, {reinterpret_cast<const uint8_t*>(own.data()), own.size()}, to));
  // The second went out after the first was dealt with (one ring, in order): when it arrives,
  // the first has had its chance.
  std::optional<stack::ReceivedDatagram> d;
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  while (!(d = t_->peer->Receive(peer).value()).has_value() && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->payload, own);
  EXPECT_EQ(d->source.port, 4100);
  EXPECT_FALSE(t_->peer->Receive(peer).value().has_value());
  EXPECT_EQ(client_->Counters()->stack().tx_channel_no_socket(), refused_before + 1);
  EXPECT_EQ(second.Get()->counters().tx_datagrams(), 0u);
}

}  // namespace
}  // namespace quadsock
