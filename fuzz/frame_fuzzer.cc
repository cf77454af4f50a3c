// Fuzz target: a whole frame from the wire (stack/net/frame.h), as the poll engine reads it.
// ParseFrame must never read past the frame and its lengths must stay inside it; the fast path
// (ParsePlainUdpFrame) must agree with ParseFrame on every frame it accepts; a UDP datagram
// ParseFrame accepts is accepted again by ParseUdpDatagram; a fragment's share, as reassembly
// takes it, lies inside the frame; and a datagram rebuilt from the parsed fields parses to the
// same fields. A broken check aborts (libFuzzer keeps the input as a crash).
#include <cstdint>
#include <span>
#include <vector>

#include "fuzz/check.h"
#include "stack/internal/reassembly.h"
#include "stack/net/frame.h"
#include "stack/net/frame_builder.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace quadsock;
  const std::span<const uint8_t> frame(data, size);
  net::ParsedFrame p;
  const net::ParseError e = net::ParseFrame(frame, p);
  net::UdpFrameView v;
  const bool fast = net::ParsePlainUdpFrame(frame, v);
  if (fast) {
    FUZZ_CHECK(e == net::ParseError::kOk && p.l4 == net::L4::kUdp && !p.fragment &&
              p.eth.vlan_count == 0,
          "the fast path accepted what ParseFrame did not take as plain UDP");
    FUZZ_CHECK(v.src == p.src && v.dst == p.dst && v.src_port == p.udp.src_port &&
              v.dst_port == p.udp.dst_port && v.payload_offset == p.payload_offset &&
              v.payload_length == p.payload_length && v.dst_mac == p.eth.dst,
          "the fast path's fields differ from ParseFrame's");
  }
  if (e != net::ParseError::kOk) return 0;
  if (p.l3 != net::L3::kIpv4 && p.l3 != net::L3::kIpv6) return 0;
  FUZZ_CHECK(p.l4_offset + p.l4_length <= size, "the upper layer runs past the frame");
  FUZZ_CHECK(p.payload_offset + p.payload_length <= size || p.l4 == net::L4::kNone ||
            p.l4 == net::L4::kOther,
        "the payload runs past the frame");
  if (p.fragment) {
    const stack::Reassembly::Fragment f = stack::Reassembly::FragmentOf(p, frame);
    FUZZ_CHECK(f.payload.data() >= data && f.payload.data() + f.payload.size() <= data + size,
          "a fragment's share is outside the frame");
    FUZZ_CHECK(f.packet.data() >= data && f.packet.data() + f.packet.size() <= data + size &&
              f.packet.size() >= f.payload.size(),
          "a fragment's packet is outside the frame");
    return 0;
  }
  if (p.l4 != net::L4::kUdp) return 0;
  net::UdpHeader again;
  FUZZ_CHECK(net::ParseUdpDatagram(p.src, p.dst, frame.subspan(p.l4_offset, p.l4_length), again) ==
            net::ParseError::kOk,
        "ParseUdpDatagram refuses what ParseFrame accepted");
  // Rebuilt from its fields, the datagram parses to the same fields.
  std::vector<uint8_t> out(size + 64);
  const std::optional<size_t> n =
      net::BuildUdp({p.eth.src, p.eth.dst, std::nullopt},
                    {{p.src, p.udp.src_port}, {p.dst, p.udp.dst_port}}, p.payload(frame), out);
  FUZZ_CHECK(n.has_value(), "a parsed datagram cannot be rebuilt");
  net::ParsedFrame q;
  FUZZ_CHECK(net::ParseFrame(std::span<const uint8_t>(out).first(*n), q) == net::ParseError::kOk &&
            q.l4 == net::L4::kUdp && q.src == p.src && q.dst == p.dst &&
            q.udp.src_port == p.udp.src_port && q.udp.dst_port == p.udp.dst_port &&
            q.payload_length == p.payload_length,
        "a rebuilt datagram parses differently");
  return 0;
}
