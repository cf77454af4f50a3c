// Fuzz target: the XDP steering program (stack/xdp/steer.bpf.c), loaded into the kernel and run
// on each input frame with BPF_PROG_TEST_RUN (root), its verdict checked against the stack's
// own parser (stack/net/frame.h). The addresses are steer_test's: 10.1.0.2 and fd00:1::2 the
// stack's alone, 10.1.0.3 and fd00:1::3 shared with the kernel (UDP port 4000 the stack's),
// 10.1.0.4 (the stack's) and fd00:1::4 (shared, port 4000) on VLAN 100. RX queue 0 has no
// AF_XDP socket, so a frame the program takes counts as redirect_no_xsk and passes. Checked:
//   - exactly one verdict counter moves, by one;
//   - nothing is stolen: a frame the program takes for the stack is, as the stack parses it,
//     to one of its addresses on that address's VLAN (any of its frames when the address is the
//     stack's alone; UDP to an owned port, not a fragment, when shared), an ARP request or
//     neighbour solicitation for one of them, or a frame the stack's parser refuses (it drops
//     those, counted; the kernel would have too);
//   - nothing is missed: UDP, ICMP and ARP that the stack's parser takes whole, to an address
//     of the stack's alone on its VLAN (or UDP to port 4000 at a shared one, over IPv6 with no
//     extension header: the program walks none), are the stack's.
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/bpf.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <span>

#include "fuzz/check.h"
#include "stack/net/address.h"
#include "stack/net/frame.h"
#include "stack/xdp/xdp_program.h"

namespace {

using namespace quadsock;  // NOLINT: a fuzz target's few names
using net::IpAddress;

IpAddress Ip(const char* text) { return *IpAddress::Parse(text); }

struct Owned {
  IpAddress address;
  bool exclusive;
  int vlan;  // 0: untagged (or priority-tagged)
};

const Owned kOwned[] = {
    {Ip("10.1.0.2"), true, 0},  {Ip("fd00:1::2"), true, 0},  {Ip("10.1.0.3"), false, 0},
    {Ip("fd00:1::3"), false, 0}, {Ip("10.1.0.4"), true, 100}, {Ip("fd00:1::4"), false, 100}};
constexpr uint16_t kOwnedPort = 4000;

xdp::XdpProgram& Program() {
  static xdp::XdpProgram* p = [] {
    absl::StatusOr<std::unique_ptr<xdp::XdpProgram>> s =
        xdp::XdpProgram::Load({.log = [](absl::string_view) {}});
    if (!s.ok()) std::fprintf(stderr, "%s\n", s.status().ToString().c_str());
    FUZZ_CHECK(s.ok(), "the XDP program did not load (root is needed)");
    for (const Owned& o : kOwned) {
      FUZZ_CHECK(
          (*s)->AddAddress(o.address, o.exclusive, static_cast<uint16_t>(o.vlan)).ok(),
          "an address was not added");
      if (!o.exclusive) FUZZ_CHECK((*s)->AddPort(o.address, kOwnedPort).ok(), "no port");
    }
    return s->release();
  }();
  return *p;
}

const Owned* Find(const IpAddress& a, int vlan) {
  for (const Owned& o : kOwned) {
    if (o.address == a && o.vlan == vlan) return &o;
  }
  return nullptr;
}

xdp::XdpProgramCounters Counters() {
  absl::StatusOr<xdp::XdpProgramCounters> c = Program().Counters();
  FUZZ_CHECK(c.ok(), "the program's counters could not be read");
  return *c;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // BPF_PROG_TEST_RUN takes an Ethernet header at least, and a frame that fits a page.
  if (size < 14 || size > 3000) return 0;
  xdp::XdpProgram& program = Program();
  const xdp::XdpProgramCounters before = Counters();
  LIBBPF_OPTS(bpf_test_run_opts, run, .data_in = data, .data_size_in = static_cast<uint32_t>(size));
  const int error = bpf_prog_test_run_opts(program.program_fd(), &run);
  FUZZ_CHECK(error == 0, "BPF_PROG_TEST_RUN failed");
  FUZZ_CHECK(run.retval == XDP_PASS, "a verdict other than XDP_PASS with no AF_XDP socket");
  const xdp::XdpProgramCounters after = Counters();
  FUZZ_CHECK(after.total() == before.total() + 1, "not exactly one verdict counted");
  FUZZ_CHECK(after.redirect == before.redirect, "redirected with no AF_XDP socket on the queue");
  const bool taken = after.redirect_no_xsk != before.redirect_no_xsk;

  net::ParsedFrame p;
  const std::span<const uint8_t> frame(data, size);
  if (net::ParseFrame(frame, p) != net::ParseError::kOk) return 0;  // the stack drops it
  const int vlan = p.eth.vlan_id();
  if (p.l3 == net::L3::kArp) {
    const bool ours = Find(p.arp.target_ip, vlan) != nullptr &&
                      Find(p.arp.target_ip, vlan)->exclusive;
    if (taken && !ours) {
      FUZZ_CHECK(false, "an ARP packet for an address not the stack's alone was taken");
    }
    if (!taken && ours && p.arp.op == net::ArpPacket::kRequest) {
      FUZZ_CHECK(false, "an ARP request for the stack's address was left to the kernel");
    }
    return 0;
  }
  if (p.l3 != net::L3::kIpv4 && p.l3 != net::L3::kIpv6) {
    FUZZ_CHECK(!taken, "a frame of another protocol was taken");
    return 0;
  }
  const Owned* to = Find(p.dst, vlan);
  const bool udp_to_owned_port = p.l4 == net::L4::kUdp && !p.fragment &&
                                 p.udp.dst_port == kOwnedPort;
  const bool solicitation_for_ours =
      p.l4 == net::L4::kIcmpv6 && p.icmp.type == net::kIcmpv6NeighborSolicitation &&
      Find(p.ndp.target, vlan) != nullptr && Find(p.ndp.target, vlan)->exclusive;
  if (taken) {
    const bool ours = solicitation_for_ours ||
                      (to != nullptr && (to->exclusive || udp_to_owned_port));
    if (!ours) {
      std::fprintf(stderr, "taken: to %s (vlan %d), protocol %d, fragment %d\n",
                   p.dst.ToString().c_str(), vlan, p.protocol, p.fragment);
      FUZZ_CHECK(false, "the program took a frame that is not the stack's");
    }
  } else {
    const bool whole = !p.fragment && (p.l4 == net::L4::kUdp || p.l4 == net::L4::kIcmpv4 ||
                                       p.l4 == net::L4::kIcmpv6);
    // At a shared IPv6 address the program reads the UDP port only right after the fixed
    // header (steer.bpf.c walks no extension headers): past those it is the kernel's.
    const bool port_readable = p.l3 != net::L3::kIpv6 || p.l4_offset == p.l3_offset + 40;
    const bool must = whole && to != nullptr &&
                      (to->exclusive || (udp_to_owned_port && port_readable));
    if (must) {
      std::fprintf(stderr, "left to the kernel: to %s (vlan %d), protocol %d\n",
                   p.dst.ToString().c_str(), vlan, p.protocol);
      FUZZ_CHECK(false, "the program left one of the stack's frames to the kernel");
    }
  }
  return 0;
}
