// ICMP in the stack (ICMPv4 and ICMPv6 but NDP): echo replies, port unreachable for a datagram
// no socket takes, protocol unreachable (ICMPv6: Parameter Problem) for a protocol the stack
// does not speak, and Parameter Problem for an IPv6 packet refused for an extension header
// (all rate-limited as the kernel's icmp_global_allow, and never about an ICMP error: RFC 1122
// 3.2.2), and ICMP errors that quote a datagram one of our sockets sent, handed to that socket
// (stack/icmp_error.h says what it makes of them). Runs on the poll threads; the rate limit is
// shared by all of them. Internal to the stack.
//
//   IcmpProtocol icmp(local, table, {.per_second = 1000, .burst = 50}, now);
//   icmp.SendEchoReply(engine, frame, bytes);
//   icmp.SendPortUnreachable(engine, frame, bytes, now);   // counted when rate-limited
//   icmp.SendParameterProblem(engine, frame, bytes, now);  // the same limit
//   icmp.SendProtocolUnreachable(engine, frame, bytes, now);  // and again
#ifndef QUADSOCK_STACK_INTERNAL_ICMP_PROTOCOL_H_
#define QUADSOCK_STACK_INTERNAL_ICMP_PROTOCOL_H_

#include <cstdint>
#include <mutex>
#include <span>

#include "absl/base/thread_annotations.h"
#include "absl/time/time.h"
#include "stack/demux/socket_table.h"
#include "stack/internal/local_addresses.h"
#include "stack/internal/path_mtu.h"
#include "stack/internal/reassembly.h"
#include "stack/net/frame.h"

namespace quadsock::stack {

class PollEngine;

// A token bucket: `per_second` tokens a second, at most `burst` saved up.
class IcmpRateLimiter {
 public:
  struct Rate {
    uint32_t per_second = 1000;
    uint32_t burst = 50;
  };
  IcmpRateLimiter(Rate rate, absl::Time start)
      : rate_(rate), tokens_(rate.burst), refill_(start) {}
  // Whether an error may go out at `now` (and takes its token).
  bool Take(absl::Time now);

 private:
  const Rate rate_;
  std::mutex mu_;
  double tokens_ ABSL_GUARDED_BY(mu_);
  absl::Time refill_ ABSL_GUARDED_BY(mu_);
};

class IcmpProtocol {
 public:
  // `local`, `table` and `path_mtu` outlive this.
  IcmpProtocol(const LocalAddresses& local, const demux::SocketTable& table,
               PathMtuCache& path_mtu, IcmpRateLimiter::Rate rate, absl::Time start)
      : local_(local), table_(table), path_mtu_(path_mtu), limiter_(rate, start) {}

  // An echo request to one of our addresses: answered, unless its source may not be.
  void SendEchoReply(PollEngine& engine, const net::ParsedFrame& f,
                     std::span<const uint8_t> bytes);
  // A datagram to a port with no socket: port unreachable, quoting it (RFC 1122 3.2.2 limits).
  void SendPortUnreachable(PollEngine& engine, const net::ParsedFrame& f,
                           std::span<const uint8_t> bytes, absl::Time now);
  // A packet to us of a protocol the stack does not speak (TCP included): ICMPv4 protocol
  // unreachable, or ICMPv6 Parameter Problem "unrecognized Next Header" pointing at the field
  // that named it (RFC 1122 3.2.2.1, RFC 8200 4), under the same rate limit.
  void SendProtocolUnreachable(PollEngine& engine, const net::ParsedFrame& f,
                               std::span<const uint8_t> bytes, absl::Time now);
  // An IPv6 packet refused for an extension header whose rules ask for it (f.ipv6.problem):
  // an ICMPv6 Parameter Problem (RFC 8200 4.2-4.5), under the same rate limit.
  void SendParameterProblem(PollEngine& engine, const net::ParsedFrame& f,
                            std::span<const uint8_t> bytes, absl::Time now);
  // A datagram reassembly gave up on after its first fragment came: ICMP time exceeded,
  // "fragment reassembly time exceeded" (RFC 792, RFC 8200 4.5), quoting that fragment, under
  // the same rate limit.
  void SendReassemblyTimeExceeded(PollEngine& engine, const Reassembly::Expired& e,
                                  absl::Time now);
  // An ICMP error about a datagram: to the socket that sent it, if any. A "fragmentation
  // needed" or "packet too big" about one also lowers its destination's path MTU (RFC 1191,
  // RFC 8201), within PathMtuCache::Validate's bounds.
  void HandleError(PollEngine& engine, demux::LookupContext& ctx, const net::ParsedFrame& f);

 private:
  // Sends the error `h` quoting `packet` (the offending IP packet, cut to the minimum MTU) from
  // `dst` back to `src`, the packet's addresses, unless RFC 1122 3.2.2 forbids it (a
  // broadcast, multicast or martian party, a packet that is an ICMP error or a later fragment:
  // net::IcmpErrorAllowedAbout) or the rate limit says no.
  void SendError(PollEngine& engine, const net::EthernetHeader& eth, const net::IpAddress& src,
                 const net::IpAddress& dst, const net::IcmpHeader& h,
                 std::span<const uint8_t> packet, absl::Time now);

  const LocalAddresses& local_;
  const demux::SocketTable& table_;
  PathMtuCache& path_mtu_;
  IcmpRateLimiter limiter_;
};

}  // namespace quadsock::stack

#endif  // QUADSOCK_STACK_INTERNAL_ICMP_PROTOCOL_H_
