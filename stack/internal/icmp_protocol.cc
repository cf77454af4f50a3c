#include "stack/internal/icmp_protocol.h"

#include <algorithm>

#include "stack/icmp_error.h"
#include "stack/internal/poll_engine.h"
#include "stack/internal/udp_protocol.h"
#include "stack/net/frame_builder.h"
#include "stack/net/icmp.h"
#include "stack/net/ip.h"

namespace quadsock::stack {
namespace {

// Whether a frame's sender may be answered (an echo reply, an ICMP error): not from a broadcast
// or multicast address, MAC or IP, nor from an unspecified or loopback one, which no host sends
// from (RFC 1122 3.2.1.3, 3.2.2). An answer to such a source would go to many hosts at once: a
// reflector. (The poll engine already dropped IP sources of these kinds as martians: this is
// the last guard before a frame goes out.)
bool IsAnswerableSource(const net::MacAddress& mac, const net::IpAddress& ip) {
  static const net::IpAddress kLimitedBroadcast = net::IpAddress::V4(0xffffffff);
  return !mac.IsMulticast() && !ip.IsMulticast() && !ip.IsUnspecified() && !ip.IsLoopback() &&
         ip != kLimitedBroadcast;
}

// The IP packet `f` carries, from its IP header to the end of its payload (no padding).
std::span<const uint8_t> IpPacket(const net::ParsedFrame& f, std::span<const uint8_t> bytes) {
  return bytes.subspan(f.l3_offset, f.l4_offset + f.l4_length - f.l3_offset);
}

}  // namespace

bool IcmpRateLimiter::Take(absl::Time now) {
  std::lock_guard<std::mutex> lock(mu_);
  tokens_ = std::min<double>(
      rate_.burst, tokens_ + absl::ToDoubleSeconds(now - refill_) * rate_.per_second);
  refill_ = now;
  if (tokens_ < 1) return false;
  tokens_ -= 1;
  return true;
}

void IcmpProtocol::SendEchoReply(PollEngine& engine, const net::ParsedFrame& f,
                                 std::span<const uint8_t> bytes) {
  if (!IsAnswerableSource(f.eth.src, f.src)) {
    engine.Bump(EngineCounter::unhandled);
    return;
  }
  // As long as the request (whose frame may have a VLAN tag, which NewTxFrame allows for).
  std::optional<link::FrameBuffer> out =
      engine.NewTxFrame(bytes.size() - net::EthernetHeader::kSize);
  if (!out.has_value()) return;
  net::IcmpHeader reply = f.icmp;
  reply.type = f.l3 == net::L3::kIpv4 ? net::kIcmpv4EchoReply : net::kIcmpv6EchoReply;
  engine.QueueTx(*out, net::BuildIcmp(engine.LinkTo(f.eth.src), f.dst, f.src, reply,
                                      f.payload(bytes), {out->data, out->capacity}));
  engine.Bump(EngineCounter::icmp_echo_replies);
}

void IcmpProtocol::SendPortUnreachable(PollEngine& engine, const net::ParsedFrame& f,
                                       std::span<const uint8_t> bytes, absl::Time now) {
  const bool v4 = f.l3 == net::L3::kIpv4;
  net::IcmpHeader h;
  h.type = v4 ? net::kIcmpv4DestUnreachable : net::kIcmpv6DestUnreachable;
  h.code = v4 ? net::kIcmpv4CodePortUnreachable : net::kIcmpv6CodePortUnreachable;
  SendError(engine, f.eth, f.src, f.dst, h, IpPacket(f, bytes), now);
}

void IcmpProtocol::SendProtocolUnreachable(PollEngine& engine, const net::ParsedFrame& f,
                                           std::span<const uint8_t> bytes, absl::Time now) {
  // ICMPv6 has no protocol unreachable: RFC 8200 4 answers an unrecognised Next Header with a
  // Parameter Problem pointing at the field that named it.
  const net::IcmpHeader h =
      f.l3 == net::L3::kIpv4
          ? net::IcmpHeader{.type = net::kIcmpv4DestUnreachable,
                            .code = net::kIcmpv4CodeProtocolUnreachable}
          : net::IcmpHeader{.type = net::kIcmpv6ParameterProblem,
                            .code = net::kIcmpv6CodeUnrecognizedNextHeader,
                            .rest = f.ipv6.upper_naming};
  SendError(engine, f.eth, f.src, f.dst, h, IpPacket(f, bytes), now);
}

void IcmpProtocol::SendParameterProblem(PollEngine& engine, const net::ParsedFrame& f,
                                        std::span<const uint8_t> bytes, absl::Time now) {
  const net::Ipv6Header& ip = f.ipv6;
  const net::IcmpHeader h{.type = net::kIcmpv6ParameterProblem,
                          .code = ip.problem.code,
                          .rest = ip.problem.pointer};
  SendError(engine, f.eth, ip.src, ip.dst, h,
            bytes.subspan(f.l3_offset, net::Ipv6Header::kSize + ip.payload_length), now);
}

void IcmpProtocol::SendReassemblyTimeExceeded(PollEngine& engine, const Reassembly::Expired& e,
                                              absl::Time now) {
  const bool v4 = e.src.is_v4();
  const net::IcmpHeader h{.type = v4 ? net::kIcmpv4TimeExceeded : net::kIcmpv6TimeExceeded,
                          .code = 1};
  net::EthernetHeader eth;  // the first fragment came from e.src_mac to us
  eth.src = e.src_mac;
  eth.dst = engine.info().mac;
  SendError(engine, eth, e.src, e.dst, h, e.quote, now);
}

void IcmpProtocol::SendError(PollEngine& engine, const net::EthernetHeader& eth,
                             const net::IpAddress& src, const net::IpAddress& dst,
                             const net::IcmpHeader& h, std::span<const uint8_t> packet,
                             absl::Time now) {
  // Never about a datagram sent to a broadcast or multicast address (RFC 1122 3.2.2, RFC 4443
  // 2.4 (e)).
  if (eth.dst.IsMulticast() || dst.IsMulticast() || !IsAnswerableSource(eth.src, src)) {
    return;
  }
  // Never about an ICMP error, nor a later fragment (RFC 1122 3.2.2, RFC 4443 2.4 (e.1)): two
  // stacks would answer each other's errors for ever.
  if (!net::IcmpErrorAllowedAbout(packet)) return;
  if (!limiter_.Take(now)) {
    engine.Bump(EngineCounter::icmp_errors_rate_limited);
    return;
  }
  // Quote the offending IP packet, as much as fits in the minimum MTU.
  const size_t quote = std::min(packet.size(), net::IcmpQuoteLimit(src.family()));
  std::optional<link::FrameBuffer> out =
      engine.NewTxFrame(net::Ipv6Header::kSize + net::IcmpHeader::kSize + quote);
  if (!out.has_value()) return;
  engine.QueueTx(*out, net::BuildIcmp(engine.LinkTo(eth.src), dst, src, h, packet.first(quote),
                                      {out->data, out->capacity}));
  engine.Bump(EngineCounter::icmp_errors_sent);
}

void IcmpProtocol::HandleError(PollEngine& engine, demux::LookupContext& ctx,
                               const net::ParsedFrame& f) {
  // The datagram it quotes must be one we could have sent: UDP, from one of our addresses (of
  // the message's own IP version: ParseFrame took no other quote). Then the socket it came from
  // is the one that would receive the answer: the lookup of the quoted flow turned around (as
  // the kernel's __udp4_lib_err), which for a connected socket is its own 4-tuple in hash4.
  const net::IcmpQuote& q = f.quote;
  if (q.protocol != net::kIpProtoUdp || !local_.Contains(q.src)) {
    engine.Bump(EngineCounter::icmp_errors_unmatched);
    return;
  }
  const demux::FlowKey flow{q.dst, q.dst_port, q.src, q.src_port, engine.info().ifindex};
  const std::optional<demux::LookupResult> r = table_.Lookup(ctx, flow);
  if (!r.has_value()) {
    engine.Bump(EngineCounter::icmp_errors_unmatched);
    return;
  }
  const bool v6 = f.l4 == net::L4::kIcmpv6;
  if (v6 ? f.icmp.type == net::kIcmpv6PacketTooBig
         : f.icmp.type == net::kIcmpv4DestUnreachable &&
               f.icmp.code == net::kIcmpv4CodeFragmentationNeeded) {
    // The next-hop MTU: ICMPv6's 32-bit field; ICMPv4's low 16 bits (RFC 1191 4).
    const size_t reported = v6 ? f.icmp.rest : (f.icmp.rest & 0xffff);
    const size_t mtu = PathMtuCache::Validate(q.dst, reported, engine.info().mtu);
    if (mtu == 0) {
      engine.Bump(EngineCounter::path_mtu_reports_ignored);
    } else {
      path_mtu_.Lower(q.dst, mtu, engine.turn_time());
      engine.Bump(EngineCounter::path_mtu_reports);
    }
  }
  UdpProtocol::SocketOf(*r).ReportIcmpError(
      IcmpError{f.l4 == net::L4::kIcmpv6, f.icmp.type, f.icmp.code}, {q.dst, q.dst_port});
  engine.Bump(EngineCounter::icmp_errors_received);
}

}  // namespace quadsock::stack
