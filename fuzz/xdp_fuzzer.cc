// Fuzz target: the XDP steering program (stack/xdp/steer.bpf.c), loaded into the kernel and run
// on each input frame with BPF_PROG_TEST_RUN (root), its verdict checked against the stack's
// own parser (stack/net/frame.h). The addresses are steer_test's: 10.1.0.2 and fd00:1::2 the
// stack's alone, 10.1.0.3 and fd00:1::3 shared with the kernel (UDP port 4000 the stack's),
// 10.1.0.4 (the stack's) and fd00:1::4 (shared, port 4000) on VLAN 100. RX queue 0 has no
// AF_XDP socket, so a frame the program takes counts as redirect_no_xsk and passes. Checked:
//   - exactly one verdict counter moves, by one;
//   - nothing is stolen: a frame the program takes for the stack is, as the stack parses it,
//     to one of its addresses on that address's VLAN (any of its frames when the address is the
//     stack's alone; UDP to an owned port, not a fragment, when shared), or an ARP request or
//     neighbour solicitation for one of them; a frame the stack's parser refuses may be taken
//     only when the destination the program reads (IPv4, IPv6, ARP target at their places after
//     at most one tag) is one of those addresses, or it is ICMPv6 to a multicast group (NDP);
//   - nothing is missed: UDP, ICMP and ARP that the stack's parser takes whole, to an address
//     of the stack's alone on its VLAN (or UDP to port 4000 at a shared one, over IPv6 with no
//     extension header: the program walks none), and solicitations for those, are the stack's.
// Before the run, the frame's IPv4 header checksum and its UDP or ICMP checksum (right after an
// IPv4 or IPv6 header, behind at most one tag) are made right (an IPv4 UDP one zero): else
// nearly every mutation would fail the stack's parser for its checksum and go unjudged.
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/bpf.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "fuzz/check.h"
#include "stack/net/address.h"
#include "stack/net/checksum.h"
#include "stack/net/ethernet.h"
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

uint16_t Be16(const std::vector<uint8_t>& f, size_t at) {
  return static_cast<uint16_t>(f[at] << 8 | f[at + 1]);
}
void PutBe16(std::vector<uint8_t>& f, size_t at, uint16_t v) {
  f[at] = static_cast<uint8_t>(v >> 8);
  f[at + 1] = static_cast<uint8_t>(v);
}

// Where the IP header (or ARP packet) starts behind at most one 802.1Q tag, and its ethertype.
std::pair<size_t, uint16_t> Layer3(const std::vector<uint8_t>& f) {
  uint16_t type = Be16(f, 12);
  if (type == net::kEtherTypeVlan && f.size() >= 18) return {18, Be16(f, 16)};
  return {14, type};
}

// The checksums made right (the file's comment), where the headers are where they say.
void Repair(std::vector<uint8_t>& f) {
  const auto [l3, type] = Layer3(f);
  const std::span<uint8_t> all(f);
  if (type == net::kEtherTypeIpv4 && f.size() >= l3 + 20) {
    const size_t ihl = size_t{f[l3] & 0x0fu} * 4;
    const size_t total = Be16(f, l3 + 2);
    if (ihl < 20 || l3 + ihl > f.size()) return;
    PutBe16(f, l3 + 10, 0);
    PutBe16(f, l3 + 10, net::Ipv4HeaderChecksum(all.subspan(l3, ihl)));
    if ((Be16(f, l3 + 6) & 0x3fff) != 0 || total < ihl) return;  // a fragment
    const size_t l4 = l3 + ihl;
    const size_t l4_length = std::min(total, f.size() - l3) - ihl;
    if (f[l3 + 9] == 17 && l4_length >= 8) PutBe16(f, l4 + 6, 0);  // no checksum
    if (f[l3 + 9] == 1 && l4_length >= 4) {
      PutBe16(f, l4 + 2, 0);
      PutBe16(f, l4 + 2, net::ChecksumFinish(net::ChecksumAdd(0, all.subspan(l4, l4_length))));
    }
  } else if (type == net::kEtherTypeIpv6 && f.size() >= l3 + 40) {
    const size_t l4 = l3 + 40;
    const size_t l4_length = std::min<size_t>(Be16(f, l3 + 4), f.size() - l4);
    const IpAddress src = IpAddress::V6Bytes(&f[l3 + 8]);
    const IpAddress dst = IpAddress::V6Bytes(&f[l3 + 24]);
    const uint8_t next = f[l3 + 6];
    size_t length = l4_length;
    size_t at = 0;
    if (next == 17 && l4_length >= 8 && Be16(f, l4 + 4) >= 8 && Be16(f, l4 + 4) <= l4_length) {
      length = Be16(f, l4 + 4);
      at = 6;
    } else if (next == 58 && l4_length >= 4) {
      at = 2;
    } else {
      return;
    }
    PutBe16(f, l4 + at, 0);
    uint16_t c = net::ChecksumFinish(net::ChecksumAdd(
        net::PseudoHeaderSum(src, dst, next, static_cast<uint32_t>(length)),
        all.subspan(l4, length)));
    if (c == 0 && next == 17) c = 0xffff;
    PutBe16(f, l4 + at, c);
  }
}

// The destination the program reads of a frame the stack's parser refused: owned, or ICMPv6 to
// a multicast group (a solicitation's target is further in).
bool MayBeTakenUnparsed(const std::vector<uint8_t>& f) {
  const auto [l3, type] = Layer3(f);
  const int vlan = l3 == 18 ? (Be16(f, 14) & 0x0fff) : 0;
  std::optional<IpAddress> dst;
  if (type == net::kEtherTypeIpv4 && f.size() >= l3 + 20) dst = IpAddress::V4Bytes(&f[l3 + 16]);
  if (type == net::kEtherTypeArp && f.size() >= l3 + 28) dst = IpAddress::V4Bytes(&f[l3 + 24]);
  if (type == net::kEtherTypeIpv6 && f.size() >= l3 + 40) {
    dst = IpAddress::V6Bytes(&f[l3 + 24]);
    if (f[l3 + 6] == 58 && dst->IsMulticast()) return true;
  }
  return dst.has_value() && Find(*dst, vlan) != nullptr;
}

xdp::XdpProgramCounters Counters() {
  absl::StatusOr<xdp::XdpProgramCounters> c = Program().Counters();
  FUZZ_CHECK(c.ok(), "the program's counters could not be read");
  return *c;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* input, size_t size) {
  // BPF_PROG_TEST_RUN takes an Ethernet header at least, and a frame that fits a page.
  if (size < 14 || size > 3000) return 0;
  std::vector<uint8_t> bytes(input, input + size);
  Repair(bytes);
  const uint8_t* data = bytes.data();
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
  if (net::ParseFrame(frame, p) != net::ParseError::kOk) {
    // The stack drops it, counted; the program may have taken it only for its destination.
    FUZZ_CHECK(!taken || MayBeTakenUnparsed(bytes),
               "the program took a frame to nobody of the stack's that its parser refuses");
    return 0;
  }
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
  // A solicitation for one of the stack's addresses: to the target's solicited-node group or
  // the target itself it must be taken (RFC 4861 7.2.2); the program may also take one to
  // another solicited-node group (it does not match group and target: a host that joined that
  // group would ignore a solicitation for another's address anyway).
  const bool solicitation_for_ours =
      p.l4 == net::L4::kIcmpv6 && p.icmp.type == net::kIcmpv6NeighborSolicitation &&
      Find(p.ndp.target, vlan) != nullptr && Find(p.ndp.target, vlan)->exclusive;
  const bool solicitation_must = solicitation_for_ours &&
                                 (p.dst == net::SolicitedNodeMulticast(p.ndp.target) ||
                                  p.dst == p.ndp.target);
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
    const bool must = solicitation_must ||
                      (whole && to != nullptr &&
                       (to->exclusive || (udp_to_owned_port && port_readable)));
    if (must) {
      std::fprintf(stderr, "left to the kernel: to %s (vlan %d), protocol %d\n",
                   p.dst.ToString().c_str(), vlan, p.protocol);
      FUZZ_CHECK(false, "the program left one of the stack's frames to the kernel");
    }
  }
  return 0;
}
