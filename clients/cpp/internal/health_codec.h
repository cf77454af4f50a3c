// grpc.health.v1's two messages in their wire form, for the C++ client's Health call (Debian
// ships no C++ stubs for the protocol, and generated ones would clash with libgrpc++'s own).
// HealthCheckRequest is `string service = 1`, HealthCheckResponse is `ServingStatus status = 1`.
// Not API.
//
//   const std::string request = EncodeHealthCheckRequest("quadsock.v1.SocketService");
//   absl::StatusOr<HealthStatus> status = DecodeHealthCheckResponse(response_bytes);
#ifndef QUADSOCK_CLIENTS_CPP_INTERNAL_HEALTH_CODEC_H_
#define QUADSOCK_CLIENTS_CPP_INTERNAL_HEALTH_CODEC_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "clients/cpp/client.h"

namespace quadsock::client_internal {

inline constexpr char kHealthCheckMethod[] = "/grpc.health.v1.Health/Check";

std::string EncodeHealthCheckRequest(absl::string_view service);
// INTERNAL for bytes that are not a HealthCheckResponse or name an unknown status.
absl::StatusOr<HealthStatus> DecodeHealthCheckResponse(absl::string_view bytes);

}  // namespace quadsock::client_internal

#endif  // QUADSOCK_CLIENTS_CPP_INTERNAL_HEALTH_CODEC_H_
