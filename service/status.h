// absl::Status <-> grpc::Status, code for code: the gRPC layer never collapses errors. Both
// enumerations are google.rpc.Code, so the mapping is the identity on the numbers.
//
//   return ToGrpc(stack.Bind(id, local).status());
#ifndef QUADSOCK_SERVICE_STATUS_H_
#define QUADSOCK_SERVICE_STATUS_H_

#include <grpcpp/support/status.h>

#include <string>

#include "absl/status/status.h"

namespace quadsock::service {

inline grpc::Status ToGrpc(const absl::Status& s) {
  if (s.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()), std::string(s.message()));
}

inline absl::Status FromGrpc(const grpc::Status& s) {
  if (s.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
}

}  // namespace quadsock::service

#endif  // QUADSOCK_SERVICE_STATUS_H_
