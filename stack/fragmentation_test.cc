// Datagrams bigger than a frame, through whole stacks over MemoryLink: a stack fragments what is
// over the path MTU and another reassembles it; fragments from the wire in any order make the
// datagram; an incomplete one is answered with ICMP time exceeded; ICMP "fragmentation needed"
// and "packet too big" lower a destination's path MTU, within bounds; DF follows the socket's
// pmtu_discovery.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "stack/net/frame.h"
#include "stack/net/frame_builder.h"
#include "stack/net/ip.h"
#include "stack/testing/stack_fixtures.h"

namespace quadsock::stack {
namespace {

using namespace testing_fixtures;

std::string Pattern(size_t n) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>('a' + (i * 31 + i / 251) % 26);
  return s;
}

class FragmentsBetweenStacksTest : public TwoStacksTest {
 protected:
  void Exchange(net::Family family, const char* b_endpoint, std::vector<size_t> sizes) {
    SocketId server = b_->Open(family).value();
    ASSERT_TRUE(b_->Bind(server, Ep(b_endpoint)).ok());
    SocketId client = a_->Open(family).value();
    for (size_t n : sizes) {
      const std::string payload = Pattern(n);
      ASSERT_EQ(a_->Send(client, Bytes(payload), Ep(b_endpoint)), absl::OkStatus()) << n;
      Pump();
      std::optional<ReceivedDatagram> d = b_->Receive(server).value();
      ASSERT_TRUE(d.has_value()) << n << " bytes did not arrive";
      EXPECT_EQ(d->payload.size(), n);
      EXPECT_TRUE(d->payload == payload) << n;
      // And back: B fragments too.
      ASSERT_EQ(b_->Send(server, Bytes(payload), d->source), absl::OkStatus());
      Pump();
      std::optional<ReceivedDatagram> back = a_->Receive(client).value();
      ASSERT_TRUE(back.has_value()) << n << " bytes did not come back";
      EXPECT_TRUE(back->payload == payload) << n;
    }
    EXPECT_EQ(a_->Get(client).value().counters.tx_dropped, 0u);
  }
};

TEST_F(FragmentsBetweenStacksTest, Ipv4DatagramsUpToTheLargestGoInFragmentsAndComeBackWhole) {
  // 1,472 fits a 1,500 MTU; one byte more does not.
  Exchange(net::Family::kV4, "10.1.0.2:4000", {1472, 1473, 2000, 8000, 65507});
  const StackCounters a = a_->Counters(), b = b_->Counters();
  EXPECT_EQ(a.tx_fragmented, 4u);
  EXPECT_EQ(b.reassembled, 4u);
  EXPECT_EQ(b.fragments, a.tx_fragments);
  // 65,515 bytes of UDP in 1,480-byte pieces: 45 fragments.
  EXPECT_EQ(a.tx_fragments, 2u + 2u + 6u + 45u);
  EXPECT_EQ(b.reassembly_overlap + b.reassembly_malformed + b.reassembly_evicted, 0u);
  const SocketStatus largest = a_->Get(a_->List().back()).value();
  EXPECT_EQ(largest.counters.tx_datagrams, 5u);
}

TEST_F(FragmentsBetweenStacksTest, Ipv6DatagramsUpToTheLargestGoInFragmentsAndComeBackWhole) {
  Exchange(net::Family::kV6, "[fd00:1::2]:4000", {1452, 1453, 8000, 65527});
  EXPECT_EQ(a_->Counters().tx_fragmented, 3u);
  EXPECT_EQ(b_->Counters().reassembled, 3u);
}

TEST_F(FragmentsBetweenStacksTest, OverTheLargestDatagramIsRefusedSaySo) {
  SocketId s = a_->Open(net::Family::kV4).value();
  absl::Status st = a_->Send(s, Bytes(std::string(65508, 'x')), Ep("10.1.0.2:4000"));
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("largest UDP datagram over IPv4: 65507"), std::string::npos) << st;
  SocketId s6 = a_->Open(net::Family::kV6).value();
  st = a_->Send(s6, Bytes(std::string(65528, 'x')), Ep("[fd00:1::2]:4000"));
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
}

class FragmentWireTest : public StackWireTest {
 protected:
  void SetUp() override {
    StackWireTest::SetUp();
    ASSERT_TRUE(stack_->SetNeighbor(Ip("10.1.0.1"), kMacPeer).ok());
    ASSERT_TRUE(stack_->SetNeighbor(Ip("fd00:1::1"), kMacPeer).ok());
  }

  // The frames of `payload` from `src` to `dst` in fragments of `piece` bytes of datagram.
  std::vector<std::vector<uint8_t>> Fragments(const char* src, const char* dst,
                                              const std::string& payload, size_t piece,
                                              uint32_t id = 77) {
    std::vector<uint8_t> whole(8 + payload.size());
    EXPECT_TRUE(net::BuildUdpSegment({Ep(src), Ep(dst)}, Bytes(payload), whole).has_value());
    std::vector<std::vector<uint8_t>> frames;
    for (size_t off = 0; off < whole.size(); off += piece) {
      const size_t n = std::min(piece, whole.size() - off);
      std::vector<uint8_t> f(1600);
      const net::FragmentFields fields{Ep(src).address, Ep(dst).address, net::kIpProtoUdp, id,
                                       static_cast<uint32_t>(off), off + n < whole.size()};
      f.resize(net::BuildIpFragment({kMacPeer, kMacB}, fields,
                                    std::span<const uint8_t>(whole).subspan(off, n), f)
                   .value());
      frames.push_back(std::move(f));
    }
    return frames;
  }

  // Every frame the stack sent, parsed.
  std::vector<net::ParsedFrame> TakeSent() { return Sent(keep_); }
  std::vector<std::vector<uint8_t>> keep_;
};

TEST_F(FragmentWireTest, FragmentsInAnyOrderMakeTheDatagramForItsSocket) {
  SocketId s = stack_->Open(net::Family::kV4).value();
  ASSERT_TRUE(stack_->Bind(s, Ep("0.0.0.0:4000")).ok());
  const std::string payload = Pattern(5000);
  std::vector<std::vector<uint8_t>> frames = Fragments("10.1.0.1:5000", "10.1.0.2:4000", payload, 1480);
  ASSERT_EQ(frames.size(), 4u);
  for (int i : {2, 0, 3, 0, 1}) ASSERT_TRUE(wire_->Inject(frames[i]));  // with a duplicate
  stack_->PollOnce();
  std::optional<ReceivedDatagram> d = stack_->Receive(s).value();
  ASSERT_TRUE(d.has_value());
  EXPECT_TRUE(d->payload == payload);
  EXPECT_EQ(d->source, Ep("10.1.0.1:5000"));
  const StackCounters c = stack_->Counters();
  EXPECT_EQ(c.fragments, 5u);
  EXPECT_EQ(c.reassembled, 1u);
  EXPECT_EQ(c.reassembly_duplicate, 1u);
  EXPECT_EQ(c.udp_delivered, 1u);
}

TEST_F(FragmentWireTest, ACorruptedFragmentFailsTheWholeDatagramsChecksum) {
  SocketId s = stack_->Open(net::Family::kV6).value();
  ASSERT_TRUE(stack_->Bind(s, Ep("[::]:4000")).ok());
  std::vector<std::vector<uint8_t>> frames =
      Fragments("[fd00:1::1]:5000", "[fd00:1::2]:4000", Pattern(3000), 1232);
  frames[1].back() ^= 1;
  for (const auto& f : frames) ASSERT_TRUE(wire_->Inject(f));
  stack_->PollOnce();
  EXPECT_FALSE(stack_->Receive(s).value().has_value());
  const StackCounters c = stack_->Counters();
  EXPECT_EQ(c.reassembled, 1u);
  EXPECT_EQ(c.parse_errors[static_cast<int>(net::ParseError::kBadUdpChecksum)], 1u);
  EXPECT_EQ(c.udp_delivered, 0u);
}

TEST_F(FragmentWireTest, FragmentsOfOtherProtocolsAreCountedAndDropped) {
  std::vector<uint8_t> f(200);
  const net::FragmentFields fields{Ip("10.1.0.1"), Ip("10.1.0.2"), net::kIpProtoIcmp, 5, 0, true};
  const std::vector<uint8_t> piece(64, 1);
  f.resize(net::BuildIpFragment({kMacPeer, kMacB}, fields, piece, f).value());
  ASSERT_TRUE(wire_->Inject(f));
  stack_->PollOnce();
  EXPECT_EQ(stack_->Counters().fragments_not_udp, 1u);
}

TEST_F(FragmentWireTest, AnIncompleteDatagramTimesOutWithIcmpTimeExceededQuotingItsFirst) {
  for (const char* src : {"10.1.0.1:5000", "[fd00:1::1]:5000"}) {
    const bool v6 = src[0] == '[';
    std::vector<std::vector<uint8_t>> frames =
        Fragments(src, v6 ? "[fd00:1::2]:4000" : "10.1.0.2:4000", Pattern(3000), 1232);
    ASSERT_TRUE(wire_->Inject(frames[0]));
    stack_->PollOnce();
    clock_.now += v6 ? absl::Seconds(59) : absl::Seconds(29);
    stack_->PollOnce();
    EXPECT_TRUE(TakeSent().empty());
    clock_.now += absl::Seconds(1);
    stack_->PollOnce();
    std::vector<net::ParsedFrame> sent = TakeSent();
    ASSERT_EQ(sent.size(), 1u) << src;
    EXPECT_EQ(sent[0].icmp.type, v6 ? net::kIcmpv6TimeExceeded : net::kIcmpv4TimeExceeded);
    EXPECT_EQ(sent[0].icmp.code, 1);
    EXPECT_EQ(sent[0].dst, Ep(src).address);
    EXPECT_EQ(sent[0].eth.dst, kMacPeer);
    // The quote starts with the first fragment's IP header.
    const std::span<const uint8_t> quote = sent[0].payload(keep_[0]);
    ASSERT_GE(quote.size(), 48u);
    EXPECT_EQ(std::memcmp(quote.data(), frames[0].data() + 14, 48), 0);
  }
  EXPECT_EQ(stack_->Counters().reassembly_timed_out, 2u);
  // Without the first fragment, nothing is said.
  std::vector<std::vector<uint8_t>> frames =
      Fragments("10.1.0.1:5001", "10.1.0.2:4000", Pattern(3000), 1232);
  ASSERT_TRUE(wire_->Inject(frames[1]));
  stack_->PollOnce();
  clock_.now += absl::Seconds(31);
  stack_->PollOnce();
  EXPECT_TRUE(TakeSent().empty());
  EXPECT_EQ(stack_->Counters().reassembly_timed_out, 3u);
}

TEST_F(FragmentWireTest, SentFragmentsCarryOneIdentificationOffsetsAndNoDf) {
  SocketId s = stack_->Open(net::Family::kV4).value();
  ASSERT_TRUE(stack_->Bind(s, Ep("10.1.0.2:4000")).ok());
  ASSERT_EQ(stack_->Send(s, Bytes(Pattern(3000)), Ep("10.1.0.1:5000")), absl::OkStatus());
  ASSERT_EQ(stack_->Send(s, Bytes("small"), Ep("10.1.0.1:5000")), absl::OkStatus());
  stack_->PollOnce();
  std::vector<net::ParsedFrame> sent = TakeSent();
  ASSERT_EQ(sent.size(), 4u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_TRUE(sent[i].fragment);
    EXPECT_FALSE(sent[i].ipv4.dont_fragment);
    EXPECT_EQ(sent[i].ipv4.id, sent[0].ipv4.id);
    EXPECT_EQ(sent[i].ipv4.fragment_offset, i * 1480 / 8);
    EXPECT_EQ(sent[i].ipv4.more_fragments, i < 2);
    EXPECT_LE(keep_[i].size(), 1514u);
  }
  // A datagram that fits leaves whole, with DF (pmtu_discovery's default, "want").
  EXPECT_FALSE(sent[3].fragment);
  EXPECT_TRUE(sent[3].ipv4.dont_fragment);

  SocketId v6 = stack_->Open(net::Family::kV6).value();
  ASSERT_EQ(stack_->Send(v6, Bytes(Pattern(3000)), Ep("[fd00:1::1]:5000")), absl::OkStatus());
  stack_->PollOnce();
  sent = TakeSent();
  ASSERT_EQ(sent.size(), 3u);  // 1,448-byte pieces
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_TRUE(sent[i].ipv6.fragment);
    EXPECT_EQ(sent[i].ipv6.fragment_id, sent[0].ipv6.fragment_id);
    EXPECT_EQ(sent[i].ipv6.fragment_offset, i * 1448 / 8);
    EXPECT_EQ(sent[i].ipv6.more_fragments, i < 2);
    EXPECT_LE(keep_[i].size(), 1514u);
  }
}

TEST_F(FragmentWireTest, DontFragmentFollowsPmtuDiscovery) {
  OpenOptions dont;
  dont.pmtu_discovery = demux::PmtuDiscovery::kDont;
  SocketId s = stack_->Open(net::Family::kV4, dont).value();
  ASSERT_EQ(stack_->Send(s, Bytes("x"), Ep("10.1.0.1:5000")), absl::OkStatus());
  OpenOptions do_;
  do_.pmtu_discovery = demux::PmtuDiscovery::kDo;
  SocketId d = stack_->Open(net::Family::kV4, do_).value();
  ASSERT_EQ(stack_->Send(d, Bytes("x"), Ep("10.1.0.1:5000")), absl::OkStatus());
  stack_->PollOnce();
  std::vector<net::ParsedFrame> sent = TakeSent();
  ASSERT_EQ(sent.size(), 2u);
  EXPECT_FALSE(sent[0].ipv4.dont_fragment);
  EXPECT_TRUE(sent[1].ipv4.dont_fragment);
  // "do" refuses what does not fit, saying so.
  absl::Status st = stack_->Send(d, Bytes(Pattern(1473)), Ep("10.1.0.1:5000"));
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("EMSGSIZE"), std::string::npos) << st;
  EXPECT_NE(st.message().find("path MTU of 1500"), std::string::npos) << st;
}

// ICMP "fragmentation needed" (IPv4) or "packet too big" (IPv6) with `mtu`, quoting `sent` (a
// frame the stack sent), from the peer.
std::vector<uint8_t> PmtuReport(const std::vector<uint8_t>& sent, uint32_t mtu) {
  net::ParsedFrame f;
  EXPECT_EQ(net::ParseFrame(sent, f), net::ParseError::kOk);
  const bool v6 = f.l3 == net::L3::kIpv6;
  net::IcmpHeader h;
  h.type = v6 ? net::kIcmpv6PacketTooBig : net::kIcmpv4DestUnreachable;
  h.code = v6 ? 0 : net::kIcmpv4CodeFragmentationNeeded;
  h.rest = mtu;
  const std::span<const uint8_t> quote =
      std::span<const uint8_t>(sent).subspan(14, std::min<size_t>(sent.size() - 14, 548));
  std::vector<uint8_t> out(1600);
  out.resize(net::BuildIcmp({kMacPeer, kMacB}, f.dst, f.src, h, quote, out).value());
  return out;
}

TEST_F(FragmentWireTest, PathMtuReportsLowerItForTheDestinationWithinBounds) {
  for (const char* peer : {"10.1.0.1:5000", "[fd00:1::1]:5000"}) {
    const bool v6 = peer[0] == '[';
    SocketId s = stack_->Open(v6 ? net::Family::kV6 : net::Family::kV4).value();
    ASSERT_TRUE(stack_->Connect(s, Ep(peer)).ok());
    EXPECT_EQ(stack_->Get(s).value().path_mtu, 1500u);
    ASSERT_EQ(stack_->Send(s, Bytes(Pattern(1400))), absl::OkStatus());
    stack_->PollOnce();
    std::vector<std::vector<uint8_t>> sent = wire_->TakeSent();
    ASSERT_EQ(sent.size(), 1u);
    // Absurd values are ignored: below the minimum, or not below the link's MTU.
    for (uint32_t absurd : {v6 ? 1279u : 67u, 1500u, 9000u}) {
      ASSERT_TRUE(wire_->Inject(PmtuReport(sent[0], absurd)));
      stack_->PollOnce();
      EXPECT_EQ(stack_->Get(s).value().path_mtu, 1500u) << absurd;
    }
    // A believable one lowers it, and the next datagram is cut to fit.
    const uint32_t mtu = v6 ? 1280 : 1400;
    ASSERT_TRUE(wire_->Inject(PmtuReport(sent[0], mtu)));
    stack_->PollOnce();
    EXPECT_EQ(stack_->Get(s).value().path_mtu, mtu);
    // As in Linux (udp_err, __udp6_lib_err), the connected socket hears of it once: EMSGSIZE.
    absl::Status heard = stack_->Send(s, Bytes(Pattern(1400)));
    EXPECT_EQ(heard.code(), absl::StatusCode::kAborted);
    EXPECT_NE(heard.message().find("EMSGSIZE"), std::string::npos) << heard;
    ASSERT_EQ(stack_->Send(s, Bytes(Pattern(1400))), absl::OkStatus());
    stack_->PollOnce();
    std::vector<net::ParsedFrame> frames = TakeSent();
    ASSERT_EQ(frames.size(), 2u);
    for (const std::vector<uint8_t>& f : keep_) EXPECT_LE(f.size() - 14, mtu);
    // Ten minutes later it is forgotten.
    clock_.now += absl::Minutes(10);
    stack_->PollOnce();
    EXPECT_EQ(stack_->Get(s).value().path_mtu, 1500u);
  }
  const StackCounters c = stack_->Counters();
  EXPECT_EQ(c.path_mtu_reports, 2u);
  EXPECT_EQ(c.path_mtu_reports_ignored, 6u);
  // IPv4 reports between 68 and 552 count as 552 (Linux's min_pmtu).
  SocketId s = stack_->Open(net::Family::kV4).value();
  ASSERT_TRUE(stack_->Connect(s, Ep("10.1.0.1:6000")).ok());
  ASSERT_EQ(stack_->Send(s, Bytes("x")), absl::OkStatus());
  stack_->PollOnce();
  std::vector<std::vector<uint8_t>> sent = wire_->TakeSent();
  ASSERT_TRUE(wire_->Inject(PmtuReport(sent[0], 100)));
  stack_->PollOnce();
  EXPECT_EQ(stack_->Get(s).value().path_mtu, 552u);
}

TEST_F(FragmentWireTest, AReportQuotingNoSocketOfOursChangesNothing) {
  SocketId s = stack_->Open(net::Family::kV4).value();
  ASSERT_TRUE(stack_->Connect(s, Ep("10.1.0.1:5000")).ok());
  // A datagram we never sent: another port.
  std::vector<uint8_t> forged = Udp("10.1.0.2:1", "10.1.0.1:5000", "x");
  ASSERT_TRUE(wire_->Inject(PmtuReport(forged, 1300)));
  stack_->PollOnce();
  EXPECT_EQ(stack_->Get(s).value().path_mtu, 1500u);
  EXPECT_EQ(stack_->Counters().path_mtu_reports, 0u);
}

}  // namespace
}  // namespace quadsock::stack
