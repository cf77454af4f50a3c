#include "common/status.h"

#include <gtest/gtest.h>

#include "quadsock/v1/socket.pb.h"

namespace quadsock {
namespace {

TEST(StatusTest, GrpcRoundTripKeepsCodeAndMessage) {
  const absl::Status taken = absl::AlreadyExistsError("port 4000 is taken");
  const grpc::Status g = ToGrpc(taken);
  EXPECT_EQ(g.error_code(), grpc::StatusCode::ALREADY_EXISTS);
  EXPECT_EQ(g.error_message(), "port 4000 is taken");
  EXPECT_EQ(FromGrpc(g), taken);
  EXPECT_TRUE(ToGrpc(absl::OkStatus()).ok());
  EXPECT_TRUE(FromGrpc(grpc::Status::OK).ok());
}

TEST(StatusTest, EveryMessageThatCarriesOneRoundTrips) {
  const absl::Status gone = absl::NotFoundError("the socket was closed");
  v1::StreamEnd end;
  SetStatus(gone, &end);
  EXPECT_EQ(end.code(), 5);
  EXPECT_EQ(StatusOf(end), gone);
  v1::SendResult sent;
  SetStatus(absl::InvalidArgumentError("datagram 2: no peer"), &sent);
  EXPECT_EQ(StatusOf(sent).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(StatusOf(sent).message(), "datagram 2: no peer");
  v1::SocketOpResult op;
  EXPECT_TRUE(StatusOf(op).ok());
  SetStatus(absl::OkStatus(), &op);
  EXPECT_EQ(op.code(), 0);
  EXPECT_EQ(op.message(), "");
}

}  // namespace
}  // namespace quadsock
