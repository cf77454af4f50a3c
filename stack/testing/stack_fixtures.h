// Fixtures of the stack's tests over MemoryLink: two stacks on one wire (TwoStacksTest), or a
// stack whose far end the test holds, frame by frame (StackWireTest), with a clock the test
// moves and a few short helpers.
//
//   TEST_F(TwoStacksTest, Something) { a_->Send(...); Pump(); b_->Receive(...); }
#ifndef QUADSOCK_STACK_TESTING_STACK_FIXTURES_H_
#define QUADSOCK_STACK_TESTING_STACK_FIXTURES_H_

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "stack/link/memory_link.h"
#include "stack/net/frame.h"
#include "stack/net/frame_builder.h"
#include "stack/stack.h"
#include "stack/testing/stack_pair.h"

namespace quadsock::stack::testing_fixtures {

using net::Endpoint;
using net::IpAddress;

inline std::span<const uint8_t> Bytes(const std::string& s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}
inline std::string Str(std::span<const uint8_t> b) { return std::string(b.begin(), b.end()); }
inline Endpoint Ep(const char* text) { return *Endpoint::Parse(text); }
inline IpAddress Ip(const char* text) { return *IpAddress::Parse(text); }

inline const net::MacAddress kMacA = *net::MacAddress::Parse("02:00:00:00:00:0a");
inline const net::MacAddress kMacB = *net::MacAddress::Parse("02:00:00:00:00:0b");
inline const net::MacAddress kMacPeer = *net::MacAddress::Parse("02:00:00:00:00:99");

// A clock the test moves: `now` is the monotonic clock (StackOptions::clock), `now +
// wall_step` the wall clock (StackOptions::wall_clock), which a test may step alone.
struct FakeClock {
  absl::Time now = absl::FromUnixSeconds(1'000'000);
  absl::Duration wall_step = absl::ZeroDuration();
  std::function<absl::Time()> fn() {
    return [this] { return now; };
  }
  std::function<absl::Time()> wall_fn() {
    return [this] { return now + wall_step; };
  }
};

inline StackOptions Options(FakeClock& clock, const char* v4, const char* v6) {
  StackOptions o;
  o.addresses = {*net::IpPrefix::Parse(v4), *net::IpPrefix::Parse(v6)};
  o.clock = clock.fn();
  o.wall_clock = clock.wall_fn();
  return o;
}

// Two stacks, A and B, on one in-memory wire (a StackPair), polled by the test.
class TwoStacksTest : public ::testing::Test {
 protected:
  void SetUp() override {
    StackPair pair =
        StackPair::Create(
            {.link = {.name = "a", .mac = kMacA},
             .options = Options(clock_, "10.1.0.1/24", "fd00:1::1/64")},
            {.link = {.name = "b", .mac = kMacB},
             .options = Options(clock_, "10.1.0.2/24", "fd00:1::2/64")})
            .value();
    a_ = std::move(pair.a);
    b_ = std::move(pair.b);
  }
  void TearDown() override {
    EXPECT_EQ(a_->CheckFrameAccounting(), absl::OkStatus());
    EXPECT_EQ(b_->CheckFrameAccounting(), absl::OkStatus());
  }
  // Runs both stacks until neither has anything to do.
  void Pump() {
    for (int i = 0; i < 20; ++i) {
      if (a_->PollOnce() + b_->PollOnce() == 0 && i > 2) return;
    }
  }

  FakeClock clock_;
  std::unique_ptr<Stack> a_, b_;
};

// A stack whose far end the test holds: exact frames in, exact frames out.
class StackWireTest : public ::testing::Test {
 protected:
  void SetUp() override { MakeStack(/*vlan=*/0); }
  void TearDown() override { EXPECT_EQ(stack_->CheckFrameAccounting(), absl::OkStatus()); }

  void MakeStack(uint16_t vlan, size_t max_receive_bytes = StackOptions().max_receive_bytes,
                 std::vector<IpAddress> gateways = {}) {
    link::MemoryLink::Pair p = link::MemoryLink::CreateWithTestEnd({.name = "s", .mac = kMacB});
    wire_ = std::move(p.test_end);
    std::vector<std::unique_ptr<link::Link>> links;
    links.push_back(std::move(p.link));
    StackOptions o = Options(clock_, "10.1.0.2/24", "fd00:1::2/64");
    o.vlan = vlan;
    o.max_receive_bytes = max_receive_bytes;
    o.gateways = std::move(gateways);
    stack_ = Stack::Create(std::move(o), std::move(links)).value();
  }

  std::vector<uint8_t> Udp(const char* src, const char* dst, const std::string& payload,
                           std::optional<net::VlanTag> tag = std::nullopt) {
    std::vector<uint8_t> buf(2048);
    std::optional<size_t> n = net::BuildUdp({kMacPeer, kMacB, tag}, {Ep(src), Ep(dst)},
                                            Bytes(payload), buf);
    buf.resize(n.value());
    return buf;
  }
  std::vector<net::ParsedFrame> Sent(std::vector<std::vector<uint8_t>>& keep) {
    keep = wire_->TakeSent();
    std::vector<net::ParsedFrame> out(keep.size());
    for (size_t i = 0; i < keep.size(); ++i) {
      EXPECT_EQ(net::ParseFrame(keep[i], out[i]), net::ParseError::kOk);
    }
    return out;
  }

  FakeClock clock_;
  std::unique_ptr<link::MemoryLink::TestEnd> wire_;
  std::unique_ptr<Stack> stack_;
};

}  // namespace quadsock::stack::testing_fixtures

#endif  // QUADSOCK_STACK_TESTING_STACK_FIXTURES_H_
