// What the stack refuses on the wire, over MemoryLink: packets from a source no host sends from
// (martians), IPv6 extension headers that RFC 8200 says to discard, source-routed IPv4, frames
// past the MTU, and protocols the stack does not speak. Each is dropped and counted, and
// answered only where an RFC says so, never with an ICMP error about an ICMP error.
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

// `frame` (an IP one) relabelled as carrying `protocol`, the IPv4 header checksum mended, and,
// when given, the IPv4 flags and fragment offset word set. Nothing past the IP header is
// looked at for a protocol the stack does not speak.
std::vector<uint8_t> AsProtocol(std::vector<uint8_t> frame, uint8_t protocol,
                                uint16_t v4_fragment = 0x4000) {
  if (net::LoadBe16(&frame[12]) == net::kEtherTypeIpv6) {
    frame[kIp + 6] = protocol;
    return frame;
  }
  frame[kIp + 9] = protocol;
  net::StoreBe16(&frame[kIp + 6], v4_fragment);
  net::StoreBe16(&frame[kIp + 10], 0);
  net::StoreBe16(&frame[kIp + 10],
                 net::Ipv4HeaderChecksum({&frame[kIp], net::Ipv4Header::kMinSize}));
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

// A protocol the stack does not speak (TCP too: it has none) is answered as a host without it
// answers (RFC 1122 3.2.2.1, RFC 8200 4): ICMPv4 protocol unreachable; ICMPv6 Parameter Problem
// code 1 pointing at the Next Header field that named it. Quoting the packet, counted.
TEST_F(WireConformanceTest, UnknownProtocolsAreAnsweredWithProtocolUnreachable) {
  const std::vector<uint8_t> v4 = Udp("10.1.0.1:5000", "10.1.0.2:80", "segment");
  const std::vector<uint8_t> v6 = Udp("[fd00:1::1]:5000", "[fd00:1::2]:80", "segment");
  const std::vector<uint8_t> in[] = {
      AsProtocol(v4, net::kIpProtoTcp),
      AsProtocol(v4, 253),
      AsProtocol(v6, net::kIpProtoTcp),
      // Behind destination options (PadN): the pointer is that header's Next Header.
      WithExtensionHeaders(v6, net::kIpProtoDestOptions, "fd000104" "00000000"),
      AsProtocol(v6, net::kIpProtoIcmp),  // ICMPv4 means nothing over IPv6
  };
  for (const std::vector<uint8_t>& frame : in) ASSERT_TRUE(wire_->Inject(frame));
  Drain();
  std::vector<std::vector<uint8_t>> keep;
  std::vector<net::ParsedFrame> out = Sent(keep);
  ASSERT_EQ(out.size(), std::size(in));
  const struct {
    uint8_t type;
    uint8_t code;
    uint32_t rest;
  } want[] = {{net::kIcmpv4DestUnreachable, net::kIcmpv4CodeProtocolUnreachable, 0},
              {net::kIcmpv4DestUnreachable, net::kIcmpv4CodeProtocolUnreachable, 0},
              {net::kIcmpv6ParameterProblem, net::kIcmpv6CodeUnrecognizedNextHeader, 6},
              {net::kIcmpv6ParameterProblem, net::kIcmpv6CodeUnrecognizedNextHeader, 40},
              {net::kIcmpv6ParameterProblem, net::kIcmpv6CodeUnrecognizedNextHeader, 6}};
  for (size_t i = 0; i < out.size(); ++i) {
    SCOPED_TRACE(i);
    const bool v6 = i >= 2;
    EXPECT_EQ(out[i].l4, v6 ? net::L4::kIcmpv6 : net::L4::kIcmpv4);
    EXPECT_EQ(out[i].icmp.type, want[i].type);
    EXPECT_EQ(out[i].icmp.code, want[i].code);
    EXPECT_EQ(out[i].icmp.rest, want[i].rest);
    EXPECT_EQ(out[i].src, Ip(v6 ? "fd00:1::2" : "10.1.0.2"));
    EXPECT_EQ(out[i].dst, Ip(v6 ? "fd00:1::1" : "10.1.0.1"));
    EXPECT_EQ(out[i].eth.dst, kMacPeer);
    EXPECT_EQ(Str(out[i].payload(keep[i])), Str(std::span(in[i]).subspan(kIp)));
  }
  StackCounters c = stack_->Counters();
  EXPECT_EQ(c.ip_unknown_protocol, std::size(in));
  EXPECT_EQ(c.icmp_errors_sent, std::size(in));
  EXPECT_EQ(c.unhandled, 0u);

  // Never to a martian source, nor about a fragment.
  ASSERT_TRUE(wire_->Inject(AsProtocol(Udp("10.1.0.255:5000", "10.1.0.2:80", "x"), 253)));
  ASSERT_TRUE(wire_->Inject(AsProtocol(Udp("[::1]:5000", "[fd00:1::2]:80", "x"), 253)));
  ASSERT_TRUE(wire_->Inject(AsProtocol(v4, 253, 0x0001)));
  ASSERT_TRUE(wire_->Inject(AsProtocol(v4, 253, 0x2000)));
  Drain();
  EXPECT_TRUE(Sent(keep).empty());
  c = stack_->Counters();
  EXPECT_EQ(c.martian_source, 2u);
  EXPECT_EQ(c.fragments, 2u);
  EXPECT_EQ(c.ip_unknown_protocol, std::size(in));

  // Under the ICMP error rate limit (burst 50; the test's clock stands still).
  for (int i = 0; i < 120; ++i) ASSERT_TRUE(wire_->Inject(in[i % 2 == 0 ? 0 : 2]));
  Drain();
  c = stack_->Counters();
  EXPECT_EQ(c.ip_unknown_protocol, std::size(in) + 120);
  EXPECT_EQ(c.icmp_errors_sent + c.icmp_errors_rate_limited, std::size(in) + 120);
  EXPECT_GT(c.icmp_errors_rate_limited, 0u);
}

// No ICMP error about an ICMP error, nor about a later fragment (RFC 1122 3.2.2, RFC 4443 2.4
// (e.1)), even where an extension header would have been answered with a Parameter Problem.
TEST_F(WireConformanceTest, NoIcmpErrorAboutAnIcmpErrorOrALaterFragment) {
  auto icmpv6 = [&](uint8_t type) {
    std::vector<uint8_t> quoted = Udp("[fd00:1::2]:4000", "[fd00:1::1]:53", "quoted");
    quoted.erase(quoted.begin(), quoted.begin() + kIp);
    std::vector<uint8_t> buf(2048);
    buf.resize(net::BuildIcmp({kMacPeer, kMacB, std::nullopt}, Ip("fd00:1::1"), Ip("fd00:1::2"),
                              {.type = type}, quoted, buf)
                   .value());
    return buf;
  };
  // Destination options with an option of type 10 (discard, answer: RFC 8200 4.2) after Pad1.
  const std::string answer_me = "009e020000" "00";
  const std::vector<uint8_t> in[] = {
      WithExtensionHeaders(icmpv6(net::kIcmpv6DestUnreachable), net::kIpProtoDestOptions,
                           "3a00" + answer_me),
      WithExtensionHeaders(icmpv6(net::kIcmpv6ParameterProblem), net::kIpProtoDestOptions,
                           "3a00" + answer_me),
      // Hop-by-hop after destination options, then the error.
      WithExtensionHeaders(icmpv6(net::kIcmpv6TimeExceeded), net::kIpProtoDestOptions,
                           "00000104" "00000000" "3a000104" "00000000"),
      // A later fragment (offset 2), after the option.
      WithExtensionHeaders(Udp("[fd00:1::1]:5000", "[fd00:1::2]:4000", "x"),
                           net::kIpProtoDestOptions, "2c00" + answer_me + "11000010" "12345678"),
      // The control: an echo request behind the same option is answered.
      WithExtensionHeaders(icmpv6(net::kIcmpv6EchoRequest), net::kIpProtoDestOptions,
                           "3a00" + answer_me),
  };
  for (const std::vector<uint8_t>& frame : in) ASSERT_TRUE(wire_->Inject(frame));
  // An ICMPv4 error to us about a datagram to a closed port of ours: counted, never answered.
  std::vector<uint8_t> quoted = Udp("10.1.0.2:4000", "10.1.0.1:53", "quoted");
  quoted.erase(quoted.begin(), quoted.begin() + kIp);
  std::vector<uint8_t> error(2048);
  error.resize(net::BuildIcmp({kMacPeer, kMacB, std::nullopt}, Ip("10.1.0.1"), Ip("10.1.0.2"),
                              {.type = net::kIcmpv4DestUnreachable,
                               .code = net::kIcmpv4CodePortUnreachable},
                              quoted, error)
                   .value());
  ASSERT_TRUE(wire_->Inject(error));
  Drain();
  std::vector<std::vector<uint8_t>> keep;
  std::vector<net::ParsedFrame> out = Sent(keep);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].icmp.type, net::kIcmpv6ParameterProblem);
  EXPECT_EQ(out[0].icmp.code, net::kIcmpv6CodeUnrecognizedOption);
  EXPECT_EQ(out[0].icmp.rest, 40u + 3);
  EXPECT_EQ(Str(out[0].payload(keep[0])), Str(std::span(in[4]).subspan(kIp)));
  const StackCounters c = stack_->Counters();
  EXPECT_EQ(ParseErrors(net::ParseError::kIpv6UnrecognizedOption), 4u);
  EXPECT_EQ(ParseErrors(net::ParseError::kIpv6HopByHopNotFirst), 1u);
  EXPECT_EQ(c.icmp_errors_unmatched, 1u);
  EXPECT_EQ(c.icmp_errors_sent, 1u);
  EXPECT_EQ(c.icmp_errors_rate_limited, 0u);
}

}  // namespace
}  // namespace quadsock::stack
