// Reassembly on its own: fragments in every order, each way a fragment set can go wrong (each
// counted under its name), the timeouts, and the memory limits under floods.
#include "stack/internal/reassembly.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "stack/net/ip.h"

namespace quadsock::stack {
namespace {

const absl::Time kT0 = absl::FromUnixSeconds(1000);


// A datagram's upper-layer bytes (the first 8 a UDP header, as far as reassembly cares).
std::vector<uint8_t> Datagram(size_t n, uint8_t seed = 1) {
  std::vector<uint8_t> d(n);
  for (size_t i = 0; i < n; ++i) d[i] = static_cast<uint8_t>(seed + i * 7);
  return d;
}

class ReassemblyTest : public ::testing::Test {
 protected:
  Reassembly& Make(Reassembly::Limits limits = {}) {
    r_ = std::make_unique<Reassembly>(limits, [this](EngineCounter c, uint64_t n) {
      counts_[c] += n;
    });
    return *r_;
  }

  // The fragment of `datagram` [begin, end) with a fake IP header before it.
  Reassembly::Fragment Piece(const std::vector<uint8_t>& datagram, uint32_t begin, uint32_t end,
                             uint32_t id = 7, const char* src = "10.0.0.1",
                             const char* dst = "10.0.0.2") {
    const bool v6 = std::string(src).find(':') != std::string::npos;
    const size_t header = v6 ? net::Ipv6Header::kSize + 8 : net::Ipv4Header::kMinSize;
    auto& packet = packets_.emplace_back(header, 0x45);
    packet.insert(packet.end(), datagram.begin() + begin, datagram.begin() + end);
    Reassembly::Fragment f;
    f.src = *net::IpAddress::Parse(src);
    f.dst = *net::IpAddress::Parse(dst);
    f.protocol = net::kIpProtoUdp;
    f.id = id;
    f.offset = begin;
    f.more = end < datagram.size();
    f.packet = packet;
    f.payload = std::span<const uint8_t>(packet).subspan(header);
    return f;
  }

  uint64_t count(EngineCounter c) { return counts_[c]; }

  std::unique_ptr<Reassembly> r_;
  std::map<EngineCounter, uint64_t> counts_;
  std::vector<std::vector<uint8_t>> packets_;
  std::vector<uint8_t> out_;
};

TEST_F(ReassemblyTest, InOrderOutOfOrderAndDuplicatedFragmentsMakeTheDatagram) {
  Reassembly& r = Make();
  const std::vector<uint8_t> d = Datagram(3000);
  EXPECT_FALSE(r.Add(Piece(d, 0, 1480), kT0, out_));
  EXPECT_FALSE(r.Add(Piece(d, 1480, 2960), kT0, out_));
  EXPECT_GT(r.bytes_held(), 2960u);
  EXPECT_TRUE(r.Add(Piece(d, 2960, 3000), kT0, out_));
  EXPECT_EQ(out_, d);
  EXPECT_EQ(r.bytes_held(), 0u);
  EXPECT_EQ(r.datagrams_held(), 0u);

  // Last first, a duplicate in the middle, the first last.
  const std::vector<uint8_t> e = Datagram(4000, 9);
  EXPECT_FALSE(r.Add(Piece(e, 3200, 4000, 8), kT0, out_));
  EXPECT_FALSE(r.Add(Piece(e, 1600, 3200, 8), kT0, out_));
  EXPECT_FALSE(r.Add(Piece(e, 1600, 3200, 8), kT0, out_));
  EXPECT_TRUE(r.Add(Piece(e, 0, 1600, 8), kT0, out_));
  EXPECT_EQ(out_, e);
  EXPECT_EQ(count(EngineCounter::reassembled), 2u);
  EXPECT_EQ(count(EngineCounter::reassembly_duplicate), 1u);
  EXPECT_EQ(r.bytes_held(), 0u);
}

TEST_F(ReassemblyTest, KeyIsSourceDestinationProtocolAndIdentification) {
  Reassembly& r = Make();
  const std::vector<uint8_t> a = Datagram(2000, 1), b = Datagram(2000, 2);
  EXPECT_FALSE(r.Add(Piece(a, 0, 1000, 5, "10.0.0.1"), kT0, out_));
  EXPECT_FALSE(r.Add(Piece(b, 0, 1000, 5, "10.0.0.3"), kT0, out_));  // another source
  Reassembly::Fragment other_protocol = Piece(b, 1000, 2000, 5, "10.0.0.1");
  other_protocol.protocol = net::kIpProtoIcmp;
  EXPECT_FALSE(r.Add(other_protocol, kT0, out_));
  EXPECT_FALSE(r.Add(Piece(b, 1000, 2000, 6, "10.0.0.1"), kT0, out_));  // another id
  EXPECT_EQ(r.datagrams_held(), 4u);
  EXPECT_TRUE(r.Add(Piece(b, 1000, 2000, 5, "10.0.0.3"), kT0, out_));
  EXPECT_EQ(out_, b);
  EXPECT_TRUE(r.Add(Piece(a, 1000, 2000, 5, "10.0.0.1"), kT0, out_));
  EXPECT_EQ(out_, a);
}

TEST_F(ReassemblyTest, OverlapDropsTheDatagram) {
  Reassembly& r = Make();
  const std::vector<uint8_t> d = Datagram(3000);
  EXPECT_FALSE(r.Add(Piece(d, 0, 1480), kT0, out_));
  EXPECT_FALSE(r.Add(Piece(d, 1472, 2960), kT0, out_));  // 8 bytes over the first
  EXPECT_EQ(count(EngineCounter::reassembly_overlap), 1u);
  EXPECT_EQ(r.bytes_held(), 0u);
  // The rest of it, even a clean retry of the overlapped part, cannot make it whole again (its
  // first fragment is gone): a new datagram that times out, unanswered.
  EXPECT_FALSE(r.Add(Piece(d, 1480, 2960), kT0, out_));
  EXPECT_FALSE(r.Add(Piece(d, 2960, 3000), kT0, out_));
  EXPECT_EQ(count(EngineCounter::reassembled), 0u);
  int expired = 0;
  r.Expire(kT0 + absl::Seconds(30), [&](const Reassembly::Expired&) { ++expired; });
  EXPECT_EQ(expired, 0);
  EXPECT_EQ(count(EngineCounter::reassembly_timed_out), 1u);
  EXPECT_EQ(r.bytes_held(), 0u);
}

TEST_F(ReassemblyTest, ADatagramFarBehindItsSourceIsStaleAndItsIdentificationFree) {
  Reassembly& r = Make({.budget_bytes = 64 << 20, .source_bytes = 16 << 20});
  const std::vector<uint8_t> old = Datagram(3000, 1), fresh = Datagram(3000, 2);
  EXPECT_FALSE(r.Add(Piece(old, 1480, 2960, 9), kT0, out_));  // its first fragment was lost
  // 65 fragments of other datagrams from the same source: the identification may come round.
  for (uint32_t id = 100; id < 165; ++id) r.Add(Piece(old, 0, 1480, id), kT0, out_);
  // The next datagram with id 9 is whole, not mixed with the stale one's bytes.
  EXPECT_FALSE(r.Add(Piece(fresh, 0, 1480, 9), kT0, out_));
  EXPECT_EQ(count(EngineCounter::reassembly_stale), 1u);
  EXPECT_FALSE(r.Add(Piece(fresh, 1480, 2960, 9), kT0, out_));
  EXPECT_TRUE(r.Add(Piece(fresh, 2960, 3000, 9), kT0, out_));
  EXPECT_EQ(out_, fresh);
  // 64 behind is not yet stale.
  EXPECT_FALSE(r.Add(Piece(old, 0, 1480, 10), kT0, out_));
  for (uint32_t id = 200; id < 263; ++id) r.Add(Piece(old, 0, 1480, id), kT0, out_);
  EXPECT_FALSE(r.Add(Piece(old, 1480, 2960, 10), kT0, out_));
  EXPECT_TRUE(r.Add(Piece(old, 2960, 3000, 10), kT0, out_));
  // Meanwhile the 65 others of the first round, over 64 behind, were swept as new ones came.
  EXPECT_EQ(count(EngineCounter::reassembly_stale), 1u + 65u);
}

TEST_F(ReassemblyTest, TinyFirstFragmentsBadLengthsAndOversizedTotalsAreRefused) {
  Reassembly& r = Make();
  const std::vector<uint8_t> d = Datagram(65536);
  EXPECT_FALSE(r.Add(Piece(d, 0, 7), kT0, out_));  // not the whole UDP header
  EXPECT_EQ(count(EngineCounter::reassembly_tiny), 1u);
  EXPECT_FALSE(r.Add(Piece(d, 0, 1001), kT0, out_));  // not the last, and not a multiple of 8
  EXPECT_EQ(count(EngineCounter::reassembly_malformed), 1u);
  // An IPv4 packet holds 65,535 bytes with its 20-byte header: 65,515 of datagram.
  EXPECT_FALSE(r.Add(Piece(d, 65512, 65528), kT0, out_));
  EXPECT_EQ(count(EngineCounter::reassembly_too_big), 1u);
  const std::vector<uint8_t> largest_v4 = Datagram(65515);
  EXPECT_FALSE(r.Add(Piece(largest_v4, 65512, 65515), kT0, out_));
  EXPECT_EQ(count(EngineCounter::reassembly_too_big), 1u);
  EXPECT_EQ(r.datagrams_held(), 1u);
  // IPv6 counts its payload length, of which the Fragment header is not part once reassembled.
  EXPECT_FALSE(r.Add(Piece(d, 65528, 65536, 1, "fd00::1", "fd00::2"), kT0, out_));
  EXPECT_EQ(count(EngineCounter::reassembly_too_big), 2u);
  const std::vector<uint8_t> largest_v6 = Datagram(65535);
  EXPECT_FALSE(r.Add(Piece(largest_v6, 65528, 65535, 1, "fd00::1", "fd00::2"), kT0, out_));
  EXPECT_EQ(count(EngineCounter::reassembly_too_big), 2u);
  EXPECT_EQ(r.datagrams_held(), 2u);

  // A second "last" fragment that ends elsewhere, or a fragment past the end: the datagram goes.
  const std::vector<uint8_t> e = Datagram(3000);
  EXPECT_FALSE(r.Add(Piece(e, 2960, 3000, 9), kT0, out_));
  std::vector<uint8_t> longer = Datagram(3008);
  EXPECT_FALSE(r.Add(Piece(longer, 2960, 3008, 9), kT0, out_));
  EXPECT_EQ(count(EngineCounter::reassembly_malformed), 2u);
  EXPECT_FALSE(r.Add(Piece(e, 0, 1480, 9), kT0, out_));
  EXPECT_FALSE(r.Add(Piece(e, 1480, 2960, 9), kT0, out_));  // a new datagram: never completes
  EXPECT_EQ(count(EngineCounter::reassembled), 0u);
}

TEST_F(ReassemblyTest, TimeoutsAreThirtySecondsForIpv4AndSixtyForIpv6WithTheFirstQuoted) {
  Reassembly& r = Make();
  const std::vector<uint8_t> d = Datagram(3000);
  EXPECT_FALSE(r.Add(Piece(d, 0, 1480, 1), kT0, out_));
  EXPECT_FALSE(r.Add(Piece(d, 0, 1480, 2, "fd00::1", "fd00::2"), kT0, out_));
  EXPECT_FALSE(r.Add(Piece(d, 1480, 2960, 3), kT0, out_));  // no first fragment
  std::vector<std::string> expired;
  auto note = [&](const Reassembly::Expired& e) {
    expired.push_back(e.src.ToString() + " " + std::to_string(e.quote.size()));
  };
  r.Expire(kT0 + absl::Seconds(29), note);
  EXPECT_EQ(r.datagrams_held(), 3u);
  r.Expire(kT0 + absl::Seconds(30), note);
  // The first fragment's packet, cut to what an ICMPv4 error may quote (548 bytes).
  EXPECT_EQ(expired, std::vector<std::string>{"10.0.0.1 548"});
  EXPECT_EQ(count(EngineCounter::reassembly_timed_out), 2u);
  r.Expire(kT0 + absl::Seconds(59), note);
  EXPECT_EQ(r.datagrams_held(), 1u);
  r.Expire(kT0 + absl::Seconds(60), note);
  EXPECT_EQ(expired.size(), 2u);
  EXPECT_EQ(expired[1], "fd00::1 1232");
  EXPECT_EQ(r.bytes_held(), 0u);
}

TEST_F(ReassemblyTest, AFloodFromManySourcesStaysInTheBudgetAndEvictsTheOldest) {
  Reassembly& r = Make({.budget_bytes = 256 << 10});
  const std::vector<uint8_t> d = Datagram(3000);
  for (int i = 0; i < 5000; ++i) {
    const std::string src = "10.1." + std::to_string(i / 250) + "." + std::to_string(i % 250 + 1);
    r.Add(Piece(d, 0, 1480, 1, src.c_str()), kT0 + absl::Milliseconds(i), out_);
    ASSERT_LE(r.bytes_held(), size_t{256} << 10);
  }
  EXPECT_GT(count(EngineCounter::reassembly_evicted), 4000u);
  // A datagram from elsewhere still goes through, in the middle of it.
  EXPECT_FALSE(r.Add(Piece(d, 0, 1480, 1, "10.2.0.1"), kT0 + absl::Seconds(5), out_));
  EXPECT_TRUE(r.Add(Piece(d, 1480, 3000, 1, "10.2.0.1"), kT0 + absl::Seconds(5), out_));
  EXPECT_EQ(out_, d);
}

TEST_F(ReassemblyTest, OneSourceHoldsAtMostItsShareAndOthersGoOn) {
  Reassembly& r = Make({.budget_bytes = 1 << 20, .source_bytes = 100 << 10});
  const std::vector<uint8_t> d = Datagram(3000);
  for (uint32_t id = 0; id < 1000; ++id) r.Add(Piece(d, 0, 1480, id, "fd00::1"), kT0, out_);
  EXPECT_GT(count(EngineCounter::reassembly_source_full), 900u);
  EXPECT_LE(r.bytes_held(), size_t{100} << 10);
  // The same /64 is the same source; another /64 is not.
  const uint64_t refused = count(EngineCounter::reassembly_source_full);
  EXPECT_FALSE(r.Add(Piece(d, 0, 1480, 5000, "fd00::99"), kT0, out_));
  EXPECT_EQ(count(EngineCounter::reassembly_source_full), refused + 1);
  const size_t held = r.datagrams_held();
  EXPECT_FALSE(r.Add(Piece(d, 0, 1480, 1, "fd00:0:0:1::1"), kT0, out_));
  EXPECT_EQ(r.datagrams_held(), held + 1);
  EXPECT_TRUE(r.Add(Piece(d, 1480, 3000, 1, "fd00:0:0:1::1"), kT0, out_));
  EXPECT_EQ(out_, d);
  EXPECT_EQ(count(EngineCounter::reassembly_evicted), 0u);
}

TEST_F(ReassemblyTest, TooManyFragmentsForOneDatagramAreMalformed) {
  Reassembly& r = Make();
  const std::vector<uint8_t> d = Datagram(8 * (Reassembly::kMaxFragments + 2));
  for (uint32_t i = 1; i <= Reassembly::kMaxFragments; ++i) {
    ASSERT_FALSE(r.Add(Piece(d, 8 * i, 8 * i + 8), kT0, out_));
  }
  EXPECT_EQ(count(EngineCounter::reassembly_malformed), 0u);
  EXPECT_FALSE(r.Add(Piece(d, 0, 8), kT0, out_));
  EXPECT_EQ(count(EngineCounter::reassembly_malformed), 1u);
  EXPECT_EQ(r.bytes_held(), 0u);
}

}  // namespace
}  // namespace quadsock::stack
