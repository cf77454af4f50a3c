// The C++ client's data channel over the gRPC stream against a server that packs wrongly: what
// does not add up is never handed out, and the channel ends saying why. (quadsockd's own packing
// is tested against the client in data_channel_test.)
#include <gtest/gtest.h>
#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "clients/cpp/client.h"
#include "clients/cpp/data_channel.h"
#include "quadsock/v1/socket.grpc.pb.h"
#include "stack/channel/packed.h"

namespace quadsock {
namespace {

// Answers StreamChannel's first request (which must ask for packed datagrams) with a good batch
// of two datagrams, then a batch whose descriptors say more payload than it carries.
class BadPacker final : public v1::SocketService::Service {
 public:
  grpc::Status StreamChannel(
      grpc::ServerContext*,
      grpc::ServerReaderWriter<v1::ChannelResponse, v1::ChannelRequest>* stream) override {
    v1::ChannelRequest first;
    if (!stream->Read(&first) || !first.packed()) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "not asked packed");
    }
    v1::ChannelResponse good;
    for (uint32_t socket : {1u, 2u}) {
      const std::string payload = "datagram " + std::to_string(socket);
      channel::ReceivedView v{.socket = socket,
                              .peer = {*net::IpAddress::Parse("10.1.0.1"), 5000},
                              .local = {*net::IpAddress::Parse("10.1.0.2"), 4000},
                              .sequence = 1};
      v.payload = {reinterpret_cast<const uint8_t*>(payload.data()), payload.size()};
      channel::AppendPacked(v, *good.mutable_descriptors(), *good.mutable_payloads());
    }
    stream->Write(good);
    v1::ChannelResponse bad = good;
    bad.mutable_payloads()->pop_back();
    stream->Write(bad);
    v1::ChannelRequest more;
    while (stream->Read(&more)) {
    }
    return grpc::Status::OK;
  }
};

TEST(StreamChannelTest, ABatchThatDoesNotAddUpEndsTheChannelAndIsNotHandedOut) {
  BadPacker service;
  grpc::ServerBuilder builder;
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_NE(server, nullptr);
  std::unique_ptr<Client> client =
      Client::Create(server->InProcessChannel(grpc::ChannelArguments()),
                     {.client_name = "test", .create_session = false})
          .value();
  std::unique_ptr<DataChannel> ch =
      client->AttachChannel({.transport = ChannelTransport::kGrpcStream}).value();
  channel::ReceivedView batch[8];
  size_t got = 0;
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (ch->ended().ok() && absl::Now() < deadline) {
    const size_t n = ch->Receive(std::span(batch + got, 8 - got), absl::Milliseconds(100));
    for (size_t i = got; i < got + n; ++i) {
      EXPECT_EQ(std::string(batch[i].payload.begin(), batch[i].payload.end()),
                "datagram " + std::to_string(batch[i].socket));
      EXPECT_EQ(batch[i].peer.ToString(), "10.1.0.1:5000");
    }
    got += n;
  }
  got += ch->Receive(std::span(batch + got, 8 - got));  // what is left after the end
  EXPECT_EQ(got, 2u) << "only the good batch";
  EXPECT_EQ(ch->ended().code(), absl::StatusCode::kInternal) << ch->ended();
  EXPECT_NE(ch->ended().message().find("payload bytes"), std::string::npos) << ch->ended();
  ch.reset();
  server->Shutdown();
}

}  // namespace
}  // namespace quadsock
