// Packed datagrams (the gRPC stream's form of the channel): what goes in comes out, and a
// batch whose parts do not agree is refused before anything is read from it.
#include "stack/channel/packed.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

namespace quadsock::channel {
namespace {

net::Endpoint Ep(const char* address, uint16_t port) {
  return {net::IpAddress::Parse(address).value(), port};
}

std::span<const uint8_t> Bytes(std::string_view s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

TEST(PackedTest, DatagramsComeOutAsTheyWentIn) {
  const std::vector<std::string> payloads = {"first", "", std::string(1500, 'x')};
  std::vector<ReceivedView> in(3);
  in[0] = {.socket = 1, .peer = Ep("10.9.1.1", 10000), .local = Ep("10.9.0.2", 4000),
           .arrival = absl::FromUnixNanos(1234567890123), .sequence = 7};
  in[1] = {.socket = 70000, .peer = Ep("2001:db8::1", 53), .local = Ep("2001:db8::2", 5353),
           .arrival = absl::FromUnixNanos(5), .sequence = 1};
  in[2] = {.socket = 2, .peer = Ep("::ffff:10.0.0.1", 1), .local = Ep("::", 65535),
           .arrival = absl::UnixEpoch(), .sequence = ~uint64_t{0}};
  std::string descriptors, packed;
  for (size_t i = 0; i < in.size(); ++i) {
    in[i].payload = Bytes(payloads[i]);
    AppendPacked(in[i], descriptors, packed);
  }
  ASSERT_EQ(CheckPacked(descriptors, packed), absl::OkStatus());
  ASSERT_EQ(PackedCount(descriptors), 3u);
  size_t offset = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    const ReceivedView v = UnpackAt(descriptors, packed, i, offset);
    offset += v.payload.size();
    EXPECT_EQ(v.socket, in[i].socket);
    EXPECT_EQ(v.peer, in[i].peer) << v.peer.address.ToString();
    EXPECT_EQ(v.local, in[i].local);
    EXPECT_EQ(v.peer.address.is_v4(), in[i].peer.address.is_v4());
    EXPECT_EQ(v.arrival, in[i].arrival);
    EXPECT_EQ(v.sequence, in[i].sequence);
    EXPECT_EQ(std::string(v.payload.begin(), v.payload.end()), payloads[i]);
  }
  EXPECT_EQ(offset, packed.size());
}

TEST(PackedTest, AnEmptyBatchIsABatch) {
  EXPECT_EQ(CheckPacked("", ""), absl::OkStatus());
  EXPECT_EQ(PackedCount(""), 0u);
}

TEST(PackedTest, PartsThatDisagreeAreRefused) {
  ReceivedView v{.socket = 1, .peer = Ep("10.9.1.1", 1), .local = Ep("10.9.0.2", 2)};
  const std::string payload = "payload";
  v.payload = Bytes(payload);
  std::string descriptors, payloads;
  AppendPacked(v, descriptors, payloads);
  // A descriptor cut short.
  EXPECT_EQ(CheckPacked(std::string_view(descriptors).substr(0, 63), payloads).code(),
            absl::StatusCode::kInvalidArgument);
  // Payload bytes missing, or more than the descriptors say.
  EXPECT_EQ(CheckPacked(descriptors, std::string_view(payloads).substr(1)).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CheckPacked(descriptors, payloads + "!").code(), absl::StatusCode::kInvalidArgument);
  // A length near 4 GiB does not wrap the sum.
  std::string huge = descriptors + descriptors;
  for (size_t at : {size_t{4}, size_t{64 + 4}}) {
    const uint32_t length = 0xffffffffu;
    std::memcpy(huge.data() + at, &length, sizeof(length));
  }
  EXPECT_EQ(CheckPacked(huge, std::string(14, 'x')).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace quadsock::channel
