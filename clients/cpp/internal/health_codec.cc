#include "clients/cpp/internal/health_codec.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/wire_format_lite.h>

namespace quadsock::client_internal {

using google::protobuf::internal::WireFormatLite;

namespace {
constexpr int kServiceField = 1;  // HealthCheckRequest.service
constexpr int kStatusField = 1;   // HealthCheckResponse.status
}  // namespace

std::string EncodeHealthCheckRequest(absl::string_view service) {
  std::string out;
  if (service.empty()) return out;  // proto3 leaves a default value out
  {
    google::protobuf::io::StringOutputStream stream(&out);
    google::protobuf::io::CodedOutputStream coded(&stream);
    WireFormatLite::WriteString(kServiceField, std::string(service), &coded);
  }
  return out;
}

absl::StatusOr<HealthStatus> DecodeHealthCheckResponse(absl::string_view bytes) {
  google::protobuf::io::CodedInputStream in(reinterpret_cast<const uint8_t*>(bytes.data()),
                                            static_cast<int>(bytes.size()));
  uint64_t status = 0;
  bool well_formed = true;
  while (well_formed) {
    const uint32_t tag = in.ReadTag();
    if (tag == 0) break;  // the end, or a malformed tag (told apart below)
    if (tag == WireFormatLite::MakeTag(kStatusField, WireFormatLite::WIRETYPE_VARINT)) {
      well_formed = in.ReadVarint64(&status);
    } else {
      well_formed = WireFormatLite::SkipField(&in, tag);
    }
  }
  if (!well_formed || in.CurrentPosition() != static_cast<int>(bytes.size()) || status > 3) {
    return absl::InternalError("malformed grpc.health.v1.HealthCheckResponse");
  }
  return static_cast<HealthStatus>(status);
}

}  // namespace quadsock::client_internal
