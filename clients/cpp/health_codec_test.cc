// The hand-made grpc.health.v1 codec against the protocol's wire form.
#include "clients/cpp/internal/health_codec.h"

#include <gtest/gtest.h>

#include <string>

namespace quadsock::client_internal {
namespace {

TEST(HealthCodecTest, RequestIsTheServiceAsFieldOne) {
  EXPECT_EQ(EncodeHealthCheckRequest(""), "");
  EXPECT_EQ(EncodeHealthCheckRequest("a.B"), std::string("\x0a\x03" "a.B", 5));
  // A name of 200 bytes takes a two-byte length (200 = 0xc8 0x01).
  const std::string long_name(200, 'x');
  EXPECT_EQ(EncodeHealthCheckRequest(long_name), std::string("\x0a\xc8\x01", 3) + long_name);
}

TEST(HealthCodecTest, ResponseStatusAndUnknownFields) {
  EXPECT_EQ(DecodeHealthCheckResponse("").value(), HealthStatus::kUnknown);
  EXPECT_EQ(DecodeHealthCheckResponse(std::string("\x08\x01", 2)).value(), HealthStatus::kServing);
  EXPECT_EQ(DecodeHealthCheckResponse(std::string("\x08\x02", 2)).value(),
            HealthStatus::kNotServing);
  // An unknown varint field and an unknown length-delimited one are skipped.
  EXPECT_EQ(DecodeHealthCheckResponse(std::string("\x10\x07\x1a\x02zz\x08\x03", 8)).value(),
            HealthStatus::kServiceUnknown);
}

TEST(HealthCodecTest, MalformedResponsesAreInternal) {
  for (const std::string& bad : {std::string("\x08", 1),            // the value is missing
                                 std::string("\x08\x04", 2),        // no such status
                                 std::string("\x1a\x05zz", 4),      // shorter than its length
                                 std::string("\x00\x01", 2)}) {     // field 0
    EXPECT_EQ(DecodeHealthCheckResponse(bad).status().code(), absl::StatusCode::kInternal)
        << testing::PrintToString(bad);
  }
}

}  // namespace
}  // namespace quadsock::client_internal
