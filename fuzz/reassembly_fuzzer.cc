// Fuzz target: IP reassembly (stack/internal/reassembly.h) fed a sequence of fragments decoded
// from the input, 8 bytes each: source (one of four, two IPv4 and two in one IPv6 /64),
// identification, offset, length, more-fragments, and how far the clock moves. Every byte of a
// fragment is a function of (source, identification, position), so a datagram that completes
// must hold exactly those bytes: reassembly never mixes datagrams, nor invents or loses a byte.
// After every fragment the memory held stays within the budget; at the end, expiring all of it
// leaves nothing held.
#include <cstdint>
#include <span>
#include <vector>

#include "fuzz/check.h"
#include "stack/internal/reassembly.h"
#include "stack/net/ip.h"

namespace {

using namespace quadsock;

uint8_t ByteAt(int source, uint32_t id, size_t position) {
  return static_cast<uint8_t>(source * 131 + id * 31 + position * 7 + position / 256);
}

constexpr size_t kBudget = 16 << 10;  // small, so that a few fragments reach every limit
constexpr size_t kSourceShare = 6 << 10;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const net::IpAddress kSources[4] = {
      *net::IpAddress::Parse("10.0.0.1"), *net::IpAddress::Parse("10.0.0.2"),
      *net::IpAddress::Parse("fd00::1"), *net::IpAddress::Parse("fd00::2")};
  static const net::IpAddress kV4 = *net::IpAddress::Parse("10.0.0.9");
  static const net::IpAddress kV6 = *net::IpAddress::Parse("fd00::9");
  stack::Reassembly r({.budget_bytes = kBudget, .source_bytes = kSourceShare},
                      [](stack::EngineCounter, uint64_t) {});
  absl::Time now = absl::FromUnixSeconds(1000);
  std::vector<uint8_t> packet;
  std::vector<uint8_t> out;
  for (size_t at = 0; at + 8 <= size; at += 8) {
    const uint8_t* op = data + at;
    const int source = op[0] & 3;
    const uint32_t id = op[1] & 7;
    const uint32_t offset = (uint32_t{op[2]} << 8 | op[3]) * 8;  // up to 524,280
    const uint32_t length = (uint32_t{op[4]} << 8 | op[5]) % 1500;
    const bool more = op[6] & 1;
    now += absl::Milliseconds(op[7] * 200);  // up to 51 s a step: the timeouts come
    const bool v6 = source >= 2;
    const size_t header = v6 ? net::Ipv6Header::kSize + 8 : net::Ipv4Header::kMinSize;
    packet.assign(header, 0x45);
    for (uint32_t i = 0; i < length; ++i) packet.push_back(ByteAt(source, id, offset + i));
    stack::Reassembly::Fragment f;
    f.src = kSources[source];
    f.dst = v6 ? kV6 : kV4;
    f.protocol = 17;
    f.id = id;
    f.offset = offset;
    f.more = more;
    f.packet = packet;
    f.payload = std::span<const uint8_t>(packet).subspan(header);
    r.Expire(now, [](const stack::Reassembly::Expired& e) {
      FUZZ_CHECK(e.quote.size() <= 1232, "an expired datagram's quote is over the ICMP limit");
    });
    if (r.Add(f, now, out)) {
      for (size_t p = 0; p < out.size(); ++p) {
        FUZZ_CHECK(out[p] == ByteAt(source, id, p), "a reassembled datagram holds a wrong byte");
      }
      FUZZ_CHECK(out.size() <= 65535, "a reassembled datagram is over 65,535 bytes");
    }
    FUZZ_CHECK(r.bytes_held() <= kBudget, "reassembly holds more than its budget");
  }
  r.Expire(now + absl::Seconds(61), [](const stack::Reassembly::Expired&) {});
  FUZZ_CHECK(r.bytes_held() == 0 && r.datagrams_held() == 0, "something outlived every timeout");
  return 0;
}
