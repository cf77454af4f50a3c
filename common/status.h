// One status, three spellings: absl::Status (the stack and the C++ client), grpc::Status (a
// call's outcome) and the `int32 code` + `string message` pair some responses carry inside
// (SendResult, StreamEnd, SocketOpResult). All three use google.rpc.Code, so each conversion
// is the identity on the numbers: errors are never collapsed into one code.
//
//   return ToGrpc(stack.Bind(id, local).status());
//   if (absl::Status s = FromGrpc(stub->Open(&ctx, req, &resp)); !s.ok()) return s;
//   SetStatus(refused, response.mutable_end());
//   absl::Status why = StatusOf(response.end());
#ifndef QUADSOCK_COMMON_STATUS_H_
#define QUADSOCK_COMMON_STATUS_H_

#include <grpcpp/support/status.h>

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/cord.h"

namespace quadsock {

inline grpc::Status ToGrpc(const absl::Status& s) {
  if (s.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()), std::string(s.message()));
}

// The payload of an absl::Status from FromGrpc that keeps the call's details
// (grpc-status-details-bin: a google.rpc.Status, quadsock.v1.ErrorStatus).
inline constexpr char kGrpcDetailsPayload[] = "type.googleapis.com/google.rpc.Status";

inline absl::Status FromGrpc(const grpc::Status& s) {
  if (s.ok()) return absl::OkStatus();
  absl::Status out(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
  if (!s.error_details().empty()) out.SetPayload(kGrpcDetailsPayload, absl::Cord(s.error_details()));
  return out;
}

// The status a message carries in its `code` and `message` fields (code 0: OK).
template <typename Message>
absl::Status StatusOf(const Message& m) {
  return absl::Status(static_cast<absl::StatusCode>(m.code()), m.message());
}

// Writes `s` into a message's `code` and `message` fields.
template <typename Message>
void SetStatus(const absl::Status& s, Message* m) {
  m->set_code(static_cast<int32_t>(s.code()));
  m->set_message(std::string(s.message()));
}

}  // namespace quadsock

#endif  // QUADSOCK_COMMON_STATUS_H_
