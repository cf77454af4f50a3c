// What the stack refuses on the wire, over MemoryLink: packets from a source no host sends from
// (martians), IPv6 extension headers that RFC 8200 says to discard, source-routed IPv4, and
// frames past the MTU. Each is dropped and counted, and answered only where an RFC says so.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "stack/net/checksum.h"
#include "stack/net/frame.h"
#include "stack/net/frame_builder.h"
#include "stack/stack.h"
#include "stack/testing/stack_fixtures.h"

namespace quadsock::stack {
namespace {

using testing_fixtures::Bytes;
using testing_fixtures::Ep;
using testing_fixtures::Ip;
using testing_fixtures::kMacB;
using testing_fixtures::kMacPeer;
using testing_fixtures::StackWireTest;
using testing_fixtures::Str;

constexpr size_t kIp = net::EthernetHeader::kSize;

std::vector<uint8_t> Hex(const std::string& hex) {
  std::vector<uint8_t> out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    out.push_back(static_cast<uint8_t>(std::stoul(hex.substr(i, 2), nullptr, 16)));
  }
  return out;
}

// An IPv6 frame with `headers` (whole extension headers, hex, the last one's Next Header 17)
// put between the fixed header (whose Next Header becomes `first`) and the UDP datagram. The
// UDP checksum holds: the pseudo-header counts the UDP length only.
std::vector<uint8_t> WithExtensionHeaders(std::vector<uint8_t> frame, uint8_t first,
                                          const std::string& headers) {
  const std::vector<uint8_t> h = Hex(headers);
  frame.insert(frame.begin() + kIp + net::Ipv6Header::kSize, h.begin(), h.end());
  frame[kIp + 6] = first;
  net::StoreBe16(&frame[kIp + 4], static_cast<uint16_t>(net::LoadBe16(&frame[kIp + 4]) + h.size()));
  return frame;
}

// An IPv4 frame with `options` (hex, a multiple of four bytes) in its header.
std::vector<uint8_t> WithIpv4Options(std::vector<uint8_t> frame, const std::string& options) {
  const std::vector<uint8_t> o = Hex(options);
  frame.insert(frame.begin() + kIp + net::Ipv4Header::kMinSize, o.begin(), o.end());
  const size_t header = net::Ipv4Header::kMinSize + o.size();
  frame[kIp] = static_cast<uint8_t>(0x40 | header / 4);
  net::StoreBe16(&frame[kIp + 2], static_cast<uint16_t>(net::LoadBe16(&frame[kIp + 2]) + o.size()));
  net::StoreBe16(&frame[kIp + 10], 0);
  net::StoreBe16(&frame[kIp + 10], net::Ipv4HeaderChecksum({&frame[kIp], header}));
  return frame;
}

class WireConformanceTest : public StackWireTest {
 protected:
  void Drain() {
    while (stack_->PollOnce() > 0) {
    }
  }
  uint64_t ParseErrors(net::ParseError e) {
    return stack_->Counters().parse_errors[static_cast<int>(e)];
  }
  std::vector<uint8_t> Echo(const char* src, const char* dst) {
    std::vector<uint8_t> buf(256);
    const bool v6 = Ip(src).is_v6();
    net::IcmpHeader echo{.type = v6 ? net::kIcmpv6EchoRequest : net::kIcmpv4EchoRequest,
                         .rest = net::IcmpHeader::EchoRest(9, 3)};
    std::optional<size_t> n =
        net::BuildIcmp({kMacPeer, kMacB, std::nullopt}, Ip(src), Ip(dst), echo, Bytes("ping"), buf);
    buf.resize(n.value());
    return buf;
  }
};

// From each martian source: a datagram to a bound port, one to a closed port, and an echo
// request. None reaches a socket, none is answered (RFC 1122 3.2.2), each is counted.
TEST_F(WireConformanceTest, MartianSourcesAreDroppedUnanswered) {
  SocketId v4 = stack_->Open(net::Family::kV4).value();
  ASSERT_TRUE(stack_->Bind(v4, Ep("0.0.0.0:4000")).ok());
  SocketId dual = stack_->Open(net::Family::kV6).value();
  ASSERT_TRUE(stack_->Bind(dual, Ep("[::]:4001")).ok());
  SocketId v6only = stack_->Open(net::Family::kV6, {.v6only = true}).value();
  ASSERT_TRUE(stack_->Bind(v6only, Ep("[::]:4002")).ok());
  const char* v4_martians[] = {"10.1.0.2",  "255.255.255.255", "10.1.0.255", "10.1.0.0",
                               "224.0.0.1", "127.0.0.1",       "0.0.0.0",    "240.0.0.1"};
  const char* v6_martians[] = {"fd00:1::2", "ff02::1", "::1", "::", "::ffff:10.1.0.1"};
  uint64_t sent = 0;
  for (const char* src : v4_martians) {
    SCOPED_TRACE(src);
    const std::string from = std::string(src) + ":5000";
    for (const char* to : {"10.1.0.2:4000", "10.1.0.2:4001", "10.1.0.2:7"}) {
      ASSERT_TRUE(wire_->Inject(Udp(from.c_str(), to, "martian")));
    }
    ASSERT_TRUE(wire_->Inject(Echo(src, "10.1.0.2")));
    sent += 4;
  }
  for (const char* src : v6_martians) {
    SCOPED_TRACE(src);
    const std::string from = "[" + std::string(src) + "]:5000";
    for (const char* to : {"[fd00:1::2]:4001", "[fd00:1::2]:4002", "[fd00:1::2]:7"}) {
      ASSERT_TRUE(wire_->Inject(Udp(from.c_str(), to, "martian")));
    }
    ASSERT_TRUE(wire_->Inject(Echo(src, "fd00:1::2")));
    sent += 4;
  }
  Drain();
  std::vector<std::vector<uint8_t>> keep;
  EXPECT_TRUE(Sent(keep).empty());
  for (SocketId s : {v4, dual, v6only}) EXPECT_FALSE(stack_->Receive(s).value().has_value());
  const StackCounters c = stack_->Counters();
  EXPECT_EQ(c.martian_source, sent);
  EXPECT_EQ(c.udp_delivered, 0u);
  EXPECT_EQ(c.udp_no_socket, 0u);
  EXPECT_EQ(c.icmp_echo_replies + c.icmp_errors_sent, 0u);

  // A host of the network is still heard and answered: the test sees what it expects to miss.
  ASSERT_TRUE(wire_->Inject(Udp("10.1.0.1:5000", "10.1.0.2:4000", "host")));
  ASSERT_TRUE(wire_->Inject(Udp("[fd00:1::1]:5000", "[fd00:1::2]:4002", "host")));
  ASSERT_TRUE(wire_->Inject(Echo("10.1.0.1", "10.1.0.2")));
  Drain();
  EXPECT_EQ(stack_->Receive(v4).value()->payload, "host");
  EXPECT_EQ(stack_->Receive(v6only).value()->payload, "host");
  EXPECT_EQ(Sent(keep).size(), 1u);
}

// RFC 8200 4.2: unrecognised options whose type says discard are; types 10 and 11 (to a unicast
// destination) are answered with Parameter Problem code 2 pointing at the option's type.
TEST_F(WireConformanceTest, HopByHopOptionsThatSayDiscardAreDiscarded) {
  SocketId s = stack_->Open(net::Family::kV6).value();
  ASSERT_TRUE(stack_->Bind(s, Ep("[::]:4000")).ok());
  const std::vector<uint8_t> plain = Udp("[fd00:1::1]:5000", "[fd00:1::2]:4000", "payload");
  // Next Header UDP, length 0, Pad1, the option (type, 2 bytes of data), Pad1.
  auto with_option = [&](const char* type) {
    return WithExtensionHeaders(plain, net::kIpProtoHopByHop,
                                std::string("110000") + type + "02000000");
  };
  ASSERT_TRUE(wire_->Inject(with_option("1e")));  // 00: skipped
  Drain();
  EXPECT_EQ(stack_->Receive(s).value()->payload, "payload");
  for (const char* type : {"5e", "9e", "de"}) ASSERT_TRUE(wire_->Inject(with_option(type)));
  Drain();
  EXPECT_FALSE(stack_->Receive(s).value().has_value());
  EXPECT_EQ(ParseErrors(net::ParseError::kIpv6UnrecognizedOption), 3u);
  std::vector<std::vector<uint8_t>> keep;
  std::vector<net::ParsedFrame> out = Sent(keep);
  ASSERT_EQ(out.size(), 2u);  // for 10 and 11, not 01
  for (const net::ParsedFrame& f : out) {
    EXPECT_EQ(f.l4, net::L4::kIcmpv6);
    EXPECT_EQ(f.icmp.type, net::kIcmpv6ParameterProblem);
    EXPECT_EQ(f.icmp.code, net::kIcmpv6CodeUnrecognizedOption);
    EXPECT_EQ(f.icmp.rest, 40u + 3);
    EXPECT_EQ(f.src, Ip("fd00:1::2"));
    EXPECT_EQ(f.dst, Ip("fd00:1::1"));
    EXPECT_EQ(f.eth.dst, kMacPeer);
  }
  EXPECT_EQ(stack_->Counters().icmp_errors_sent, 2u);
}

// A routing header with segments left is not delivered here (we route nothing; type 0 is
// deprecated, RFC 5095): Parameter Problem code 0 at the routing type. Hop-by-hop after another
// header: code 1 at the Next Header field that named it. Neither reaches the socket.
TEST_F(WireConformanceTest, RoutingHeadersAndLateHopByHopAreRefused) {
  SocketId s = stack_->Open(net::Family::kV6).value();
  ASSERT_TRUE(stack_->Bind(s, Ep("[::]:4000")).ok());
  const std::vector<uint8_t> plain = Udp("[fd00:1::1]:5000", "[fd00:1::2]:4000", "payload");
  const std::vector<uint8_t> bad[] = {
      // Routing type 0, segments left 1, with one address (24 bytes); then type 4, 2 left.
      WithExtensionHeaders(plain, net::kIpProtoRouting,
                           "11020001" "00000000" "fd000000000000000000000000000009"),
      WithExtensionHeaders(plain, net::kIpProtoRouting, "11000402" "00000000"),
      // Destination options, then hop-by-hop.
      WithExtensionHeaders(plain, net::kIpProtoDestOptions,
                           "00000104" "00000000" "11000104" "00000000"),
  };
  for (const std::vector<uint8_t>& frame : bad) ASSERT_TRUE(wire_->Inject(frame));
  Drain();
  EXPECT_FALSE(stack_->Receive(s).value().has_value());
  EXPECT_EQ(ParseErrors(net::ParseError::kIpv6RoutingHeader), 2u);
  EXPECT_EQ(ParseErrors(net::ParseError::kIpv6HopByHopNotFirst), 1u);
  std::vector<std::vector<uint8_t>> keep;
  std::vector<net::ParsedFrame> out = Sent(keep);
  ASSERT_EQ(out.size(), 3u);
  const struct {
    uint8_t code;
    uint32_t pointer;
  } want[] = {{0, 42}, {0, 42}, {1, 40}};
  for (size_t i = 0; i < out.size(); ++i) {
    EXPECT_EQ(out[i].icmp.type, net::kIcmpv6ParameterProblem);
    EXPECT_EQ(out[i].icmp.code, want[i].code);
    EXPECT_EQ(out[i].icmp.rest, want[i].pointer);
    // The whole offending packet is quoted (it fits in the minimum MTU).
    EXPECT_EQ(Str(out[i].payload(keep[i])), Str(std::span(bad[i]).subspan(kIp)));
  }
  // With no segments left the routing header is ignored.
  ASSERT_TRUE(wire_->Inject(WithExtensionHeaders(plain, net::kIpProtoRouting,
                                                 "11000400" "00000000")));
  Drain();
  EXPECT_EQ(stack_->Receive(s).value()->payload, "payload");
}

// Parameter Problems share the ICMP error rate limit. (The port has a socket: no other ICMP
// error is due.)
TEST_F(WireConformanceTest, ParameterProblemsAreRateLimited) {
  SocketId s = stack_->Open(net::Family::kV6).value();
  ASSERT_TRUE(stack_->Bind(s, Ep("[::]:4000")).ok());
  const std::vector<uint8_t> bad = WithExtensionHeaders(
      Udp("[fd00:1::1]:5000", "[fd00:1::2]:4000", "x"), net::kIpProtoRouting, "1100000100000000");
  for (int i = 0; i < 120; ++i) ASSERT_TRUE(wire_->Inject(bad));
  Drain();
  const StackCounters c = stack_->Counters();
  EXPECT_EQ(c.icmp_errors_sent + c.icmp_errors_rate_limited, 120u);
  EXPECT_GT(c.icmp_errors_rate_limited, 0u);
  EXPECT_LT(c.icmp_errors_sent, 120u);
  EXPECT_EQ(ParseErrors(net::ParseError::kIpv6RoutingHeader), 120u);
  EXPECT_FALSE(stack_->Receive(s).value().has_value());
}

// Past a Fragment header that is not the first fragment, the bytes are data: the packet is a
// fragment (dropped as every fragment is: no reassembly), not a malformed header chain.
TEST_F(WireConformanceTest, ALaterFragmentIsAFragment) {
  const std::vector<uint8_t> plain = Udp("[fd00:1::1]:5000", "[fd00:1::2]:4000", "payload");
  // Fragment offset 2 (16 bytes), Next Header "destination options"; what follows (the UDP
  // header) would read as a header far longer than the packet.
  std::vector<uint8_t> frame =
      WithExtensionHeaders(plain, net::kIpProtoFragment, "3c000010" "12345678");
  frame[kIp + 48 + 1] = 0xff;  // the "length" the UDP source port's low byte would give
  ASSERT_TRUE(wire_->Inject(frame));
  Drain();
  EXPECT_EQ(stack_->Counters().fragments, 1u);
  EXPECT_EQ(ParseErrors(net::ParseError::kTruncatedIpv6ExtensionHeader), 0u);
}

TEST_F(WireConformanceTest, SourceRoutedAndBadOptionsAreDropped) {
  SocketId s = stack_->Open(net::Family::kV4).value();
  ASSERT_TRUE(stack_->Bind(s, Ep("10.1.0.2:4000")).ok());
  const std::vector<uint8_t> plain = Udp("10.1.0.1:5000", "10.1.0.2:4000", "payload");
  // LSRR and SSRR naming a further hop (pointer 4 of length 7), after a no-op.
  ASSERT_TRUE(wire_->Inject(WithIpv4Options(plain, "01830704" "0a010009")));
  ASSERT_TRUE(wire_->Inject(WithIpv4Options(plain, "01890704" "0a010009")));
  // A record route option claiming more bytes than the header has; one claiming 1.
  ASSERT_TRUE(wire_->Inject(WithIpv4Options(plain, "070c0400" "00000000")));
  ASSERT_TRUE(wire_->Inject(WithIpv4Options(plain, "07010000")));
  // To a closed port too: no port unreachable.
  ASSERT_TRUE(wire_->Inject(
      WithIpv4Options(Udp("10.1.0.1:5000", "10.1.0.2:7", "x"), "01830704" "0a010009")));
  Drain();
  EXPECT_FALSE(stack_->Receive(s).value().has_value());
  EXPECT_EQ(ParseErrors(net::ParseError::kIpv4SourceRoute), 3u);
  EXPECT_EQ(ParseErrors(net::ParseError::kBadIpv4Option), 2u);
  std::vector<std::vector<uint8_t>> keep;
  EXPECT_TRUE(Sent(keep).empty());
  // A source route at its end (pointer 8, past the length) is delivered: we are its last hop.
  ASSERT_TRUE(wire_->Inject(WithIpv4Options(plain, "01830708" "0a010002")));
  Drain();
  EXPECT_EQ(stack_->Receive(s).value()->payload, "payload");
}

// A frame longer than the MTU (1500 here) allows is dropped and counted, not delivered.
TEST_F(WireConformanceTest, FramesPastTheMtuAreDropped) {
  SocketId s = stack_->Open(net::Family::kV6).value();
  ASSERT_TRUE(stack_->Bind(s, Ep("[::]:4000")).ok());
  const std::string fits(1500 - 28, 'a'), over(1500 - 28 + 1, 'b');
  const std::string fits6(1500 - 48, 'c'), over6(1500 - 48 + 1, 'd');
  ASSERT_TRUE(wire_->Inject(Udp("10.1.0.1:5000", "10.1.0.2:4000", over)));
  ASSERT_TRUE(wire_->Inject(Udp("[fd00:1::1]:5000", "[fd00:1::2]:4000", over6)));
  ASSERT_TRUE(wire_->Inject(Udp("10.1.0.1:5000", "10.1.0.2:4000", fits)));
  ASSERT_TRUE(wire_->Inject(Udp("[fd00:1::1]:5000", "[fd00:1::2]:4000", fits6)));
  Drain();
  EXPECT_EQ(stack_->Counters().rx_too_long, 2u);
  EXPECT_EQ(stack_->Receive(s).value()->payload, fits);
  EXPECT_EQ(stack_->Receive(s).value()->payload, fits6);
  EXPECT_FALSE(stack_->Receive(s).value().has_value());
  // An 802.1Q tag (a priority tag here) adds its 4 bytes to what fits, not to the IP packet.
  const net::VlanTag priority{.tpid = net::kEtherTypeVlan, .tci = 5 << 13};
  ASSERT_TRUE(wire_->Inject(Udp("10.1.0.1:5000", "10.1.0.2:4000", fits, priority)));
  ASSERT_TRUE(wire_->Inject(Udp("10.1.0.1:5000", "10.1.0.2:4000", over, priority)));
  Drain();
  EXPECT_EQ(stack_->Counters().rx_too_long, 3u);
  EXPECT_EQ(stack_->Receive(s).value()->payload, fits);
  EXPECT_FALSE(stack_->Receive(s).value().has_value());
}

}  // namespace
}  // namespace quadsock::stack
