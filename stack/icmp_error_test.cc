// ICMP errors for our datagrams: what each means (icmp_error.h), and how they reach the socket
// that sent the datagram: a connected socket's next Send reports a hard one, once.
#include "stack/icmp_error.h"

#include <gtest/gtest.h>

#include <cerrno>

#include "absl/strings/match.h"
#include "stack/net/icmp.h"
#include "stack/internal/udp_socket.h"
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
using testing_fixtures::TwoStacksTest;

TEST(IcmpErrorTest, MeaningsFollowLinux) {
  const IcmpError port_v4{false, net::kIcmpv4DestUnreachable, net::kIcmpv4CodePortUnreachable};
  EXPECT_EQ(port_v4.Errno(), ECONNREFUSED);
  EXPECT_TRUE(port_v4.Hard());
  EXPECT_EQ(port_v4.ToString(), "ECONNREFUSED (ICMP port unreachable)");
  const IcmpError port_v6{true, net::kIcmpv6DestUnreachable, net::kIcmpv6CodePortUnreachable};
  EXPECT_EQ(port_v6.Errno(), ECONNREFUSED);
  EXPECT_TRUE(port_v6.Hard());
  EXPECT_EQ(port_v6.ToString(), "ECONNREFUSED (ICMPv6 port unreachable)");

  // Soft: a route may mend them.
  EXPECT_FALSE((IcmpError{false, net::kIcmpv4DestUnreachable, 1}.Hard()));  // host unreachable
  EXPECT_EQ((IcmpError{false, net::kIcmpv4DestUnreachable, 1}.Errno()), EHOSTUNREACH);
  EXPECT_FALSE((IcmpError{false, net::kIcmpv4DestUnreachable, 0}.Hard()));  // network
  EXPECT_FALSE((IcmpError{false, net::kIcmpv4TimeExceeded, 0}.Hard()));
  EXPECT_FALSE((IcmpError{true, net::kIcmpv6DestUnreachable, 0}.Hard()));   // no route
  EXPECT_FALSE((IcmpError{true, net::kIcmpv6DestUnreachable, 3}.Hard()));   // address
  EXPECT_FALSE((IcmpError{true, net::kIcmpv6TimeExceeded, 0}.Hard()));
  EXPECT_FALSE((IcmpError{false, net::kIcmpv4DestUnreachable, 200}.Hard()));  // unknown code

  // Hard.
  EXPECT_EQ((IcmpError{false, net::kIcmpv4DestUnreachable, net::kIcmpv4CodeProtocolUnreachable}
                 .Errno()),
            ENOPROTOOPT);
  EXPECT_EQ((IcmpError{false, net::kIcmpv4DestUnreachable, 13}.Errno()), EHOSTUNREACH);
  EXPECT_TRUE((IcmpError{false, net::kIcmpv4DestUnreachable, 13}.Hard()));  // prohibited
  const IcmpError too_big_v4{false, net::kIcmpv4DestUnreachable,
                             net::kIcmpv4CodeFragmentationNeeded};
  EXPECT_EQ(too_big_v4.Errno(), EMSGSIZE);
  EXPECT_TRUE(too_big_v4.Hard());
  EXPECT_EQ((IcmpError{true, net::kIcmpv6PacketTooBig, 0}.Errno()), EMSGSIZE);
  EXPECT_TRUE((IcmpError{true, net::kIcmpv6PacketTooBig, 0}.Hard()));
  EXPECT_EQ((IcmpError{true, net::kIcmpv6DestUnreachable, net::kIcmpv6CodeAdminProhibited}
                 .Errno()),
            EACCES);
  EXPECT_EQ((IcmpError{false, net::kIcmpv4ParameterProblem, 0}.Errno()), EPROTO);
  EXPECT_TRUE((IcmpError{true, net::kIcmpv6ParameterProblem, 0}.Hard()));
  EXPECT_TRUE((IcmpError{true, net::kIcmpv6DestUnreachable, 99}.Hard()));  // as Linux: EPROTO
}

TEST(IcmpErrorTest, PacksIntoOneNonZeroWord) {
  EXPECT_EQ(IcmpError::Unpack(0), std::nullopt);
  for (bool v6 : {false, true}) {
    for (int type : {0, 1, 3, 255}) {
      for (int code : {0, 4, 255}) {
        const IcmpError e{v6, static_cast<uint8_t>(type), static_cast<uint8_t>(code)};
        ASSERT_NE(e.Pack(), 0u);
        const std::optional<IcmpError> back = IcmpError::Unpack(e.Pack());
        ASSERT_TRUE(back.has_value());
        EXPECT_EQ((std::tuple(back->v6, back->type, back->code)), (std::tuple(v6, type, code)));
      }
    }
  }
}

// The peer stack answers a closed port with port unreachable (RFC 1122), as a kernel would.
TEST_F(TwoStacksTest, ConnectedSocketHearsOfAClosedPortOnItsNextSend) {
  for (const char* peer : {"10.1.0.2:9", "[fd00:1::2]:9"}) {
    SCOPED_TRACE(peer);
    const net::Endpoint to = Ep(peer);
    SocketId s = a_->Open(to.address.family()).value();
    ASSERT_TRUE(a_->Connect(s, to).ok());
    const uint64_t answered = b_->Counters().icmp_errors_sent;
    ASSERT_EQ(a_->Send(s, Bytes("knock")), absl::OkStatus());
    Pump();
    EXPECT_EQ(b_->Counters().icmp_errors_sent, answered + 1);
    SocketStatus st = a_->Get(s).value();
    EXPECT_EQ(st.counters.icmp_errors, 1u);
    ASSERT_TRUE(st.pending_error.has_value());
    EXPECT_EQ(st.pending_error->Errno(), ECONNREFUSED);

    absl::Status refused = a_->Send(s, Bytes("again"));
    EXPECT_EQ(refused.code(), absl::StatusCode::kAborted);
    EXPECT_TRUE(absl::StrContains(refused.message(), "ECONNREFUSED")) << refused;
    EXPECT_TRUE(absl::StrContains(refused.message(), to.ToString())) << refused;
    // Reported once, and that datagram was not sent.
    EXPECT_EQ(a_->Get(s).value().pending_error, std::nullopt);
    EXPECT_EQ(a_->Send(s, Bytes("and again")), absl::OkStatus());
    Pump();
    EXPECT_EQ(a_->Get(s).value().counters.tx_datagrams, 2u);
    ASSERT_TRUE(a_->Close(s).ok());
  }
  // "and again" went, and was answered with port unreachable too: two errors per family.
  EXPECT_EQ(a_->Counters().icmp_errors_received, 4u);
  EXPECT_EQ(a_->Counters().icmp_errors_unmatched, 0u);
}

TEST_F(TwoStacksTest, UnconnectedSocketOnlyCountsErrors) {
  SocketId s = a_->Open(net::Family::kV4).value();
  ASSERT_EQ(a_->Send(s, Bytes("knock"), Ep("10.1.0.2:9")), absl::OkStatus());
  Pump();
  SocketStatus st = a_->Get(s).value();
  EXPECT_EQ(st.counters.icmp_errors, 1u);
  EXPECT_EQ(st.pending_error, std::nullopt);
  EXPECT_EQ(a_->Send(s, Bytes("again"), Ep("10.1.0.2:9")), absl::OkStatus());
  // Nor does a later connect inherit it, even to that peer.
  Pump();
  ASSERT_TRUE(a_->Connect(s, Ep("10.1.0.2:9")).ok());
  EXPECT_EQ(a_->Get(s).value().pending_error, std::nullopt);
  EXPECT_EQ(a_->Send(s, Bytes("connected now")), absl::OkStatus());
}

TEST_F(TwoStacksTest, DualStackSocketHearsOfAnIpv4ClosedPort) {
  SocketId s = a_->Open(net::Family::kV6).value();
  ASSERT_TRUE(a_->Connect(s, Ep("[::ffff:10.1.0.2]:9")).ok());
  ASSERT_EQ(a_->Send(s, Bytes("knock")), absl::OkStatus());
  Pump();
  EXPECT_EQ(a_->Send(s, Bytes("again")).code(), absl::StatusCode::kAborted);
}

// The kept error is tagged with the peer it was about: the poll thread may report it just after
// a Connect to another peer forgot the last one, and it must not fail the new peer's sends.
TEST(UdpSocketErrorTest, AnErrorIsHeardOnlyForItsPeer) {
  const IcmpError refused{false, net::kIcmpv4DestUnreachable, net::kIcmpv4CodePortUnreachable};
  const net::Endpoint p = Ep("10.1.0.2:9");
  const net::Endpoint q = Ep("10.1.0.2:10");
  UdpSocket s(net::Family::kV6, 8);
  s.ReportIcmpError(refused, p);
  EXPECT_EQ(s.PendingError(q), std::nullopt);
  EXPECT_TRUE(s.PendingError(Ep("[::ffff:10.1.0.2]:9")).has_value());  // one peer, two forms
  EXPECT_EQ(s.TakeError(q), std::nullopt);  // and dropped: it was stale
  EXPECT_EQ(s.PendingError(p), std::nullopt);

  s.ForgetError();  // a Connect to q, then the poll thread's late report about p
  s.ReportIcmpError(refused, p);
  EXPECT_EQ(s.TakeError(q), std::nullopt);
  // Soft errors are counted, never kept.
  s.ReportIcmpError(IcmpError{false, net::kIcmpv4DestUnreachable, 1}, q);
  EXPECT_EQ(s.PendingError(q), std::nullopt);
  EXPECT_EQ(s.counters().icmp_errors, 3u);
  s.ReportIcmpError(refused, q);
  ASSERT_TRUE(s.TakeError(q).has_value());
  EXPECT_EQ(s.TakeError(q), std::nullopt);  // once
}

// ICMP errors made by the test: as a router or host would send them.
class IcmpErrorWireTest : public StackWireTest {
 protected:
  // Off-link peers (192.0.2.7, 2001:db8::7) are reached through the peer as a router.
  void SetUp() override {
    MakeStack(0, StackOptions().max_receive_bytes, {Ip("10.1.0.1"), Ip("fd00:1::1")});
  }
  // An ICMP error from `from` to `to` (by default the quoted source), quoting a UDP datagram
  // `src` -> `dst` (or another `protocol` with the same first 8 bytes).
  std::vector<uint8_t> Error(const char* from, uint8_t type, uint8_t code, const char* src,
                             const char* dst, uint8_t protocol = net::kIpProtoUdp,
                             const char* to = nullptr) {
    std::vector<uint8_t> quoted = Udp(src, dst, "payload");  // from the peer's MAC: no matter
    quoted.erase(quoted.begin(), quoted.begin() + 14);  // the IP packet, not the frame
    if (protocol != net::kIpProtoUdp) quoted[Ep(src).address.is_v4() ? 9 : 6] = protocol;
    net::IcmpHeader h;
    h.type = type;
    h.code = code;
    std::vector<uint8_t> buf(2048);
    std::optional<size_t> n =
        net::BuildIcmp({kMacPeer, kMacB, std::nullopt}, Ip(from),
                       to != nullptr ? Ip(to) : Ep(src).address, h, quoted, buf);
    buf.resize(n.value());
    return buf;
  }
  void Deliver(const std::vector<uint8_t>& frame) {
    ASSERT_TRUE(wire_->Inject(frame));
    stack_->PollOnce();
  }
  SocketId Connected(const char* local, const char* peer) {
    SocketId s = stack_->Open(Ep(local).address.family()).value();
    EXPECT_TRUE(stack_->Bind(s, Ep(local)).ok());
    EXPECT_TRUE(stack_->Connect(s, Ep(peer)).ok());
    return s;
  }
};

TEST_F(IcmpErrorWireTest, ARoutersHardErrorReachesTheConnectedSocket) {
  SocketId s = Connected("10.1.0.2:4000", "192.0.2.7:53");
  // A router (not the peer) says the datagram was too big for its next hop.
  Deliver(Error("10.1.0.1", net::kIcmpv4DestUnreachable, net::kIcmpv4CodeFragmentationNeeded,
                "10.1.0.2:4000", "192.0.2.7:53"));
  absl::Status s_err = stack_->Send(s, Bytes("x"));
  EXPECT_EQ(s_err.code(), absl::StatusCode::kAborted);
  EXPECT_TRUE(absl::StrContains(s_err.message(), "EMSGSIZE (ICMP fragmentation needed)"))
      << s_err;
  EXPECT_EQ(stack_->Counters().icmp_errors_received, 1u);
}

TEST_F(IcmpErrorWireTest, SoftErrorsAreCountedNotReported) {
  SocketId s = Connected("[fd00:1::2]:4000", "[2001:db8::7]:53");
  Deliver(Error("fd00:1::1", net::kIcmpv6DestUnreachable, 3, "[fd00:1::2]:4000",
                "[2001:db8::7]:53"));  // address unreachable
  Deliver(Error("fd00:1::1", net::kIcmpv6TimeExceeded, 0, "[fd00:1::2]:4000",
                "[2001:db8::7]:53"));
  EXPECT_EQ(stack_->Get(s).value().counters.icmp_errors, 2u);
  EXPECT_EQ(stack_->Get(s).value().pending_error, std::nullopt);
  EXPECT_EQ(stack_->Send(s, Bytes("x")), absl::OkStatus());
}

TEST_F(IcmpErrorWireTest, AnErrorAboutAnEarlierPeerIsForgotten) {
  SocketId s = Connected("10.1.0.2:4000", "10.1.0.1:53");
  Deliver(Error("10.1.0.1", net::kIcmpv4DestUnreachable, net::kIcmpv4CodePortUnreachable,
                "10.1.0.2:4000", "10.1.0.1:53"));
  ASSERT_TRUE(stack_->Get(s).value().pending_error.has_value());
  ASSERT_TRUE(stack_->Connect(s, Ep("10.1.0.1:54")).ok());
  EXPECT_EQ(stack_->Get(s).value().pending_error, std::nullopt);
  // And one about the old peer that comes late finds no socket: the flow is gone.
  Deliver(Error("10.1.0.1", net::kIcmpv4DestUnreachable, net::kIcmpv4CodePortUnreachable,
                "10.1.0.2:4000", "10.1.0.1:53"));
  EXPECT_EQ(stack_->Get(s).value().pending_error, std::nullopt);
  EXPECT_EQ(stack_->Counters().icmp_errors_unmatched, 1u);
  EXPECT_EQ(stack_->Send(s, Bytes("x")), absl::OkStatus());
}

TEST_F(IcmpErrorWireTest, ErrorsAboutNoDatagramOfOursAreUnmatched) {
  SocketId s = Connected("10.1.0.2:4000", "10.1.0.1:53");
  const uint8_t unreachable = net::kIcmpv4DestUnreachable;
  const uint8_t port = net::kIcmpv4CodePortUnreachable;
  // From an address that is not ours (sent to us all the same; a socket on the wildcard address
  // would take the turned-around flow), from a port of no socket, to another peer, and a quoted
  // TCP segment with our socket's ports.
  SocketId wildcard = stack_->Open(net::Family::kV4).value();
  ASSERT_TRUE(stack_->Bind(wildcard, Ep("0.0.0.0:4002")).ok());
  Deliver(Error("10.1.0.1", unreachable, port, "10.1.0.9:4002", "10.1.0.1:53",
                net::kIpProtoUdp, "10.1.0.2"));
  Deliver(Error("10.1.0.1", unreachable, port, "10.1.0.2:4001", "10.1.0.1:53"));
  Deliver(Error("10.1.0.1", unreachable, port, "10.1.0.2:4000", "10.1.0.3:53"));
  Deliver(Error("10.1.0.1", unreachable, port, "10.1.0.2:4000", "10.1.0.1:53", 6));
  EXPECT_EQ(stack_->Counters().icmp_errors_unmatched, 4u);
  EXPECT_EQ(stack_->Counters().icmp_errors_received, 0u);
  EXPECT_EQ(stack_->Get(s).value().counters.icmp_errors, 0u);
  EXPECT_EQ(stack_->Get(wildcard).value().counters.icmp_errors, 0u);
  EXPECT_EQ(stack_->Send(s, Bytes("x")), absl::OkStatus());
}

TEST_F(IcmpErrorWireTest, AQuoteTooShortIsAParseError) {
  std::vector<uint8_t> frame = Error("10.1.0.1", net::kIcmpv4DestUnreachable,
                                     net::kIcmpv4CodePortUnreachable, "10.1.0.2:4000",
                                     "10.1.0.1:53");
  // Cut the quote to its IP header and 4 bytes: rebuild with that body.
  net::ParsedFrame f;
  ASSERT_EQ(net::ParseFrame(frame, f), net::ParseError::kOk);
  std::vector<uint8_t> quote(frame.begin() + f.payload_offset,
                             frame.begin() + f.payload_offset + 24);
  std::vector<uint8_t> buf(2048);
  buf.resize(net::BuildIcmp({kMacPeer, kMacB, std::nullopt}, Ip("10.1.0.1"), Ip("10.1.0.2"),
                            f.icmp, quote, buf)
                 .value());
  Deliver(buf);
  EXPECT_EQ(stack_->Counters().parse_errors[static_cast<int>(net::ParseError::kBadIcmpQuote)],
            1u);
}

}  // namespace
}  // namespace quadsock::stack
