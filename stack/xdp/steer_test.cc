// Golden-packet tests of the steering program: frames made by stack/net's builders, run through
// the loaded program with BPF_PROG_TEST_RUN, and the verdict and counters checked for each.
// Root, in a private network namespace (for the AF_XDP socket's veth).
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/bpf.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "stack/link/xsk_link.h"
#include "stack/net/address.h"
#include "stack/net/ethernet.h"
#include "stack/net/frame_builder.h"
#include "stack/net/icmp.h"
#include "stack/net/ip.h"
#include "stack/testing/netns.h"
#include "stack/xdp/xdp_program.h"

namespace quadsock::xdp {
namespace {

using net::IpAddress;

const ::testing::Environment* const kNetns =
    ::testing::AddGlobalTestEnvironment(new testing::PrivateNamespaceEnvironment);

IpAddress Ip(const char* text) { return *IpAddress::Parse(text); }

net::LinkAddresses Link(std::optional<net::VlanTag> vlan = std::nullopt) {
  return {*net::MacAddress::Parse("02:00:00:00:00:01"),
          *net::MacAddress::Parse("02:00:00:00:00:02"), vlan};
}

std::vector<uint8_t> Udp(const char* src, const char* dst, uint16_t dport,
                         std::optional<net::VlanTag> vlan = std::nullopt) {
  std::vector<uint8_t> frame(2048);
  const uint8_t payload[] = {'h', 'e', 'l', 'l', 'o'};
  std::optional<size_t> n = net::BuildUdp(
      Link(vlan), {.src = {Ip(src), 40000}, .dst = {Ip(dst), dport}}, payload, frame);
  frame.resize(n.value());
  return frame;
}

std::vector<uint8_t> Arp(const char* sender, const char* target,
                         std::optional<net::VlanTag> vlan = std::nullopt) {
  std::vector<uint8_t> frame(128);
  net::ArpPacket arp;
  arp.op = net::ArpPacket::kRequest;
  arp.sender_mac = Link().src;
  arp.sender_ip = Ip(sender);
  arp.target_ip = Ip(target);
  net::LinkAddresses link = Link(vlan);
  link.dst = net::MacAddress::Broadcast();
  frame.resize(net::BuildArp(link, arp, frame).value());
  return frame;
}

std::vector<uint8_t> Echo(const char* src, const char* dst) {
  std::vector<uint8_t> frame(256);
  IpAddress d = Ip(dst);
  net::IcmpHeader header{.type = d.is_v4() ? net::kIcmpv4EchoRequest : net::kIcmpv6EchoRequest,
                         .rest = net::IcmpHeader::EchoRest(7, 1)};
  const uint8_t body[] = {1, 2, 3, 4, 5, 6, 7, 8};
  frame.resize(net::BuildIcmp(Link(), Ip(src), d, header, body, frame).value());
  return frame;
}

// A neighbour solicitation for `target`, sent to its solicited-node group as RFC 4861 has it.
std::vector<uint8_t> Solicitation(const char* src, const char* target) {
  std::vector<uint8_t> frame(256);
  IpAddress group = net::SolicitedNodeMulticast(Ip(target));
  net::LinkAddresses link = Link();
  link.dst = net::MacAddress::Ipv6Multicast(group);
  net::NdpMessage ns{.target = Ip(target), .link_address = link.src};
  frame.resize(
      net::BuildNdp(link, Ip(src), group, net::kIcmpv6NeighborSolicitation, ns, frame).value());
  return frame;
}

// A neighbour advertisement for `target` with its link-layer option, from `target` to `dst`
// (all nodes, unless given), with the override flag: what a host announcing its MAC sends.
std::vector<uint8_t> Advertisement(const char* target, const char* dst = "ff02::1",
                                   std::optional<net::VlanTag> vlan = std::nullopt) {
  std::vector<uint8_t> frame(256);
  net::LinkAddresses link = Link(vlan);
  link.dst = Ip(dst).IsMulticast() ? net::MacAddress::Ipv6Multicast(Ip(dst)) : link.dst;
  net::NdpMessage na{.target = Ip(target), .link_address = link.src};
  frame.resize(net::BuildNdp(link, Ip(target), Ip(dst), net::kIcmpv6NeighborAdvertisement, na,
                             frame, net::NdpMessage::kFlagOverride)
                   .value());
  return frame;
}

// UDP made into another protocol (TCP): the program reads only the protocol number.
std::vector<uint8_t> Tcp(const char* src, const char* dst) {
  std::vector<uint8_t> frame = Udp(src, dst, 22);
  if (Ip(dst).is_v4()) {
    frame[14 + 9] = 6;  // IPv4 protocol
  } else {
    frame[14 + 6] = 6;  // IPv6 next header
  }
  return frame;
}

// Inserts another VLAN tag (802.1ad) outside the frame's current ones.
std::vector<uint8_t> OuterTag(std::vector<uint8_t> frame, uint16_t tpid = net::kEtherTypeQinQ) {
  const uint8_t tag[] = {static_cast<uint8_t>(tpid >> 8), static_cast<uint8_t>(tpid), 0x00, 0x64};
  frame.insert(frame.begin() + 12, tag, tag + sizeof(tag));
  return frame;
}

// What a frame should come to: its verdict and the one counter that moves.
enum class Expect { kRedirect, kPassNotOwned, kPassOther, kMalformed };

class SteerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<XdpProgram>> s = XdpProgram::Load();
    ASSERT_TRUE(s.ok()) << s.status();
    program_ = *std::move(s);
    // 10.1.0.2 and fd00:1::2 are the stack's own; 10.1.0.3 and fd00:1::3 are shared with the
    // kernel, which keeps all but the stack's ports there.
    ASSERT_TRUE(program_->AddAddress(Ip("10.1.0.2"), /*exclusive=*/true).ok());
    ASSERT_TRUE(program_->AddAddress(Ip("fd00:1::2"), /*exclusive=*/true).ok());
    ASSERT_TRUE(program_->AddAddress(Ip("10.1.0.3"), /*exclusive=*/false).ok());
    ASSERT_TRUE(program_->AddAddress(Ip("fd00:1::3"), /*exclusive=*/false).ok());
    ASSERT_TRUE(program_->AddPort(Ip("10.1.0.3"), 4000).ok());
    ASSERT_TRUE(program_->AddPort(Ip("fd00:1::3"), 4000).ok());
    // 10.1.0.4 (the stack's) and fd00:1::4 (shared) are on VLAN 100.
    ASSERT_TRUE(program_->AddAddress(Ip("10.1.0.4"), /*exclusive=*/true, 100).ok());
    ASSERT_TRUE(program_->AddAddress(Ip("fd00:1::4"), /*exclusive=*/false, 100).ok());
    ASSERT_TRUE(program_->AddPort(Ip("fd00:1::4"), 4000).ok());
  }

  // Runs the program on `frame` (RX queue 0) and returns its verdict.
  uint32_t Run(const std::vector<uint8_t>& frame) {
    LIBBPF_OPTS(bpf_test_run_opts, run, .data_in = frame.data(),
                .data_size_in = static_cast<uint32_t>(frame.size()));
    int error = bpf_prog_test_run_opts(program_->program_fd(), &run);
    EXPECT_EQ(error, 0) << "BPF_PROG_TEST_RUN: " << std::strerror(-error);
    return run.retval;
  }

  XdpProgramCounters Counters() {
    absl::StatusOr<XdpProgramCounters> c = program_->Counters();
    EXPECT_TRUE(c.ok()) << c.status();
    return c.value_or(XdpProgramCounters{});
  }

  // Runs `frame` and checks the verdict and which counter moved (by one, alone, with the
  // redirect breakdown it implies).
  void Check(const std::vector<uint8_t>& frame, Expect expect,
             uint64_t XdpProgramCounters::*kind = nullptr) {
    XdpProgramCounters before = Counters();
    uint32_t verdict = Run(frame);
    XdpProgramCounters want = before;
    switch (expect) {
      case Expect::kRedirect:
        // Queue 0 has no socket here: bpf_redirect_map falls back to XDP_PASS, and the frame
        // counts as the stack's without a socket, not as redirected.
        ++(want.*kind);
        ++want.redirect_no_xsk;
        break;
      case Expect::kPassNotOwned:
        ++want.pass_not_owned;
        break;
      case Expect::kPassOther:
        ++want.pass_other;
        break;
      case Expect::kMalformed:
        ++want.malformed;
        break;
    }
    EXPECT_EQ(verdict, static_cast<uint32_t>(XDP_PASS));
    EXPECT_EQ(Counters(), want) << "before: " << before.ToString();
  }

  std::unique_ptr<XdpProgram> program_;
};

using E = Expect;  // short, for the tables below

TEST_F(SteerTest, UdpToExclusiveAddressAnyPortIsRedirected) {
  for (uint16_t port : {1, 53, 4000, 65535}) {
    SCOPED_TRACE(port);
    Check(Udp("10.1.0.1", "10.1.0.2", port), E::kRedirect, &XdpProgramCounters::redirect_udp);
    Check(Udp("fd00:1::1", "fd00:1::2", port), E::kRedirect, &XdpProgramCounters::redirect_udp);
  }
}

TEST_F(SteerTest, UdpToAddressNotOwnedPasses) {
  Check(Udp("10.1.0.1", "10.1.0.9", 4000), E::kPassNotOwned);
  Check(Udp("fd00:1::1", "fd00:1::9", 4000), E::kPassNotOwned);
  Check(Udp("10.1.0.1", "255.255.255.255", 4000), E::kPassNotOwned);
}

TEST_F(SteerTest, SharedAddressTakesOnlyOwnedPorts) {
  Check(Udp("10.1.0.1", "10.1.0.3", 4000), E::kRedirect, &XdpProgramCounters::redirect_udp);
  Check(Udp("fd00:1::1", "fd00:1::3", 4000), E::kRedirect, &XdpProgramCounters::redirect_udp);
  Check(Udp("10.1.0.1", "10.1.0.3", 4001), E::kPassNotOwned);
  Check(Udp("fd00:1::1", "fd00:1::3", 4001), E::kPassNotOwned);
  // The port entry of one address does not leak to the other.
  ASSERT_TRUE(program_->AddAddress(Ip("10.1.0.4"), false).ok());
  Check(Udp("10.1.0.1", "10.1.0.4", 4000), E::kPassNotOwned);
  // Gone with the last RemovePort.
  ASSERT_TRUE(program_->AddPort(Ip("10.1.0.3"), 4000).ok());
  ASSERT_TRUE(program_->RemovePort(Ip("10.1.0.3"), 4000).ok());
  Check(Udp("10.1.0.1", "10.1.0.3", 4000), E::kRedirect, &XdpProgramCounters::redirect_udp);
  ASSERT_TRUE(program_->RemovePort(Ip("10.1.0.3"), 4000).ok());
  Check(Udp("10.1.0.1", "10.1.0.3", 4000), E::kPassNotOwned);
}

// A later fragment names no port: every fragment to a shared address goes to the kernel, the
// first (which has the UDP header, and an owned port) too, or the kernel and the stack would
// each hold half a datagram; to an exclusive one, all to the stack, which reassembles them.
TEST_F(SteerTest, FragmentsOfSharedAddressesAllPass) {
  const auto fragment = [](std::vector<uint8_t> frame, uint16_t frag_off) {
    frame[14 + 6] = static_cast<uint8_t>(frag_off >> 8);
    frame[14 + 7] = static_cast<uint8_t>(frag_off);
    return frame;
  };
  constexpr uint16_t kFirst = 0x2000, kLater = 0x2000 | 100, kLast = 100;  // MF, offset
  for (uint16_t frag_off : {kFirst, kLater, kLast}) {
    SCOPED_TRACE(frag_off);
    Check(fragment(Udp("10.1.0.1", "10.1.0.3", 4000), frag_off), E::kPassNotOwned);
    Check(fragment(Udp("10.1.0.1", "10.1.0.2", 4000), frag_off), E::kRedirect,
          &XdpProgramCounters::redirect_udp);
  }
  Check(Udp("10.1.0.1", "10.1.0.3", 4000), E::kRedirect, &XdpProgramCounters::redirect_udp);
}

// IPv6 fragments (a Fragment header after the fixed one; ports only in the first): to an
// exclusive address the stack's, by address alone; to a shared one the kernel's.
TEST_F(SteerTest, Ipv6FragmentsGoByAddress) {
  const std::vector<uint8_t> piece(64, 7);
  for (const uint32_t offset : {0u, 1232u}) {
    SCOPED_TRACE(offset);
    for (const char* dst : {"fd00:1::2", "fd00:1::3"}) {
      std::vector<uint8_t> frame(256);
      const net::FragmentFields f{Ip("fd00:1::1"), Ip(dst), net::kIpProtoUdp, 9, offset, true};
      frame.resize(net::BuildIpFragment(Link(), f, piece, frame).value());
      if (std::string(dst) == "fd00:1::2") {
        Check(frame, E::kRedirect, &XdpProgramCounters::redirect_other);
      } else {
        Check(frame, E::kPassOther);
      }
    }
  }
}

TEST_F(SteerTest, WildcardPortCoversEverySharedAddressOfItsFamily) {
  ASSERT_TRUE(program_->AddAddress(Ip("10.1.0.4"), false).ok());
  ASSERT_TRUE(program_->AddPort(IpAddress::AnyV4(), 53).ok());
  Check(Udp("10.1.0.1", "10.1.0.3", 53), E::kRedirect, &XdpProgramCounters::redirect_udp);
  Check(Udp("10.1.0.1", "10.1.0.4", 53), E::kRedirect, &XdpProgramCounters::redirect_udp);
  Check(Udp("fd00:1::1", "fd00:1::3", 53), E::kPassNotOwned);  // 0.0.0.0 is IPv4 only
  Check(Udp("10.1.0.1", "10.1.0.9", 53), E::kPassNotOwned);    // only owned addresses
  ASSERT_TRUE(program_->AddPort(IpAddress::AnyV6(), 53).ok());
  Check(Udp("fd00:1::1", "fd00:1::3", 53), E::kRedirect, &XdpProgramCounters::redirect_udp);
  Check(Udp("fd00:1::1", "fd00:1::9", 53), E::kPassNotOwned);
}

// An address is owned on its VLAN only: the same address on another VLAN is another host's.
TEST_F(SteerTest, AnAddressTakesFramesOfItsVlanOnly) {
  const net::VlanTag vlan100{.tpid = net::kEtherTypeVlan, .tci = 100};
  const net::VlanTag vlan200{.tpid = net::kEtherTypeVlan, .tci = 200};
  const net::VlanTag priority{.tpid = net::kEtherTypeVlan, .tci = 0xa000};  // VLAN id 0
  const net::VlanTag vlan100_priority{.tpid = net::kEtherTypeVlan, .tci = 0xa064};
  const auto udp = &XdpProgramCounters::redirect_udp;
  Check(Udp("10.1.0.1", "10.1.0.4", 9, vlan100), E::kRedirect, udp);
  Check(Udp("10.1.0.1", "10.1.0.4", 9, vlan100_priority), E::kRedirect, udp);
  Check(Udp("10.1.0.1", "10.1.0.4", 9), E::kPassNotOwned);
  Check(Udp("10.1.0.1", "10.1.0.4", 9, vlan200), E::kPassNotOwned);
  Check(Udp("fd00:1::1", "fd00:1::4", 4000, vlan100), E::kRedirect, udp);
  Check(Udp("fd00:1::1", "fd00:1::4", 4000), E::kPassNotOwned);
  Check(Arp("10.1.0.1", "10.1.0.4", vlan100), E::kRedirect, &XdpProgramCounters::redirect_arp);
  Check(Arp("10.1.0.1", "10.1.0.4"), E::kPassNotOwned);
  // Untagged addresses: untagged or priority-tagged frames only.
  Check(Udp("10.1.0.1", "10.1.0.2", 9, priority), E::kRedirect, udp);
  Check(Udp("10.1.0.1", "10.1.0.2", 9, vlan100), E::kPassNotOwned);
  Check(Arp("10.1.0.1", "10.1.0.2", vlan100), E::kPassNotOwned);
  // 802.1ad, alone or outside 802.1Q, and two 802.1Q tags are no address's VLAN.
  Check(OuterTag(Udp("10.1.0.1", "10.1.0.2", 9)), E::kPassOther);
  Check(OuterTag(Udp("10.1.0.1", "10.1.0.4", 9, vlan100)), E::kPassOther);
  Check(OuterTag(Udp("10.1.0.1", "10.1.0.4", 9, vlan100), net::kEtherTypeVlan), E::kPassOther);
  // Moving an address to another VLAN moves what is steered.
  ASSERT_TRUE(program_->AddAddress(Ip("10.1.0.4"), /*exclusive=*/true, 200).ok());
  Check(Udp("10.1.0.1", "10.1.0.4", 9, vlan200), E::kRedirect, udp);
  Check(Udp("10.1.0.1", "10.1.0.4", 9, vlan100), E::kPassNotOwned);
  EXPECT_EQ(program_->AddAddress(Ip("10.1.0.5"), true, 4095).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(SteerTest, ArpForExclusiveTargetIsRedirected) {
  Check(Arp("10.1.0.1", "10.1.0.2"), E::kRedirect, &XdpProgramCounters::redirect_arp);
  Check(Arp("10.1.0.1", "10.1.0.9"), E::kPassNotOwned);
  // The kernel answers for a shared address (and must hear the replies to its own requests).
  Check(Arp("10.1.0.1", "10.1.0.3"), E::kPassNotOwned);
}

TEST_F(SteerTest, SolicitationForExclusiveTargetIsRedirected) {
  Check(Solicitation("fd00:1::1", "fd00:1::2"), E::kRedirect, &XdpProgramCounters::redirect_ns);
  Check(Solicitation("fe80::1", "fd00:1::2"), E::kRedirect, &XdpProgramCounters::redirect_ns);
  Check(Solicitation("fd00:1::1", "fd00:1::9"), E::kPassNotOwned);
  Check(Solicitation("fd00:1::1", "fd00:1::3"), E::kPassNotOwned);
}

// A neighbour's announcement to all nodes reaches the stack when the neighbour is in the stack's
// table (it used to go to the kernel, and a forged advertisement's MAC stayed in the stack's
// table), on the neighbour's VLAN; every other one stays the kernel's (its duplicate address
// detection needs them: they used to be taken from it all), and so does the rest to all nodes.
TEST_F(SteerTest, AdvertisementsToAllNodesAboutOurNeighborsAreRedirected) {
  uint64_t XdpProgramCounters::*ndp = &XdpProgramCounters::redirect_ns;
  Check(Advertisement("fd00:1::1"), E::kPassNotOwned);  // not a neighbour of the stack yet
  ASSERT_TRUE(program_->AddNeighbor(*net::IpAddress::Parse("fd00:1::1"), /*vlan=*/0).ok());
  Check(Advertisement("fd00:1::1"), E::kRedirect, ndp);
  Check(Advertisement("fd00:1::7"), E::kPassNotOwned);  // about someone else: the kernel's
  Check(Advertisement("fd00:1::1", "ff02::1", net::VlanTag{.tci = 100}), E::kPassNotOwned);
  Check(Echo("fd00:1::1", "ff02::1"), E::kPassNotOwned);  // the kernel's
  std::vector<uint8_t> router = Advertisement("fd00:1::1");
  router[14 + 40] = 134;  // a router advertisement
  Check(router, E::kPassNotOwned);
  std::vector<uint8_t> cut = Advertisement("fd00:1::1");
  cut.resize(14 + 40 + 8);  // no target address
  Check(cut, E::kMalformed);
  // To one of our addresses, as before: ICMPv6 to an exclusive address.
  Check(Advertisement("fd00:1::7", "fd00:1::2"), E::kRedirect,
        &XdpProgramCounters::redirect_icmp);
  // On its VLAN only.
  ASSERT_TRUE(program_->AddNeighbor(*net::IpAddress::Parse("fd00:1::1"), /*vlan=*/100).ok());
  Check(Advertisement("fd00:1::1", "ff02::1", net::VlanTag{.tci = 100}), E::kRedirect, ndp);
  Check(Advertisement("fd00:1::1"), E::kPassNotOwned);
  // Gone with the entry.
  ASSERT_TRUE(program_->RemoveNeighbor(*net::IpAddress::Parse("fd00:1::1")).ok());
  Check(Advertisement("fd00:1::1", "ff02::1", net::VlanTag{.tci = 100}), E::kPassNotOwned);
  EXPECT_EQ(program_->RemoveNeighbor(*net::IpAddress::Parse("fd00:1::1")).code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(program_->AddNeighbor(*net::IpAddress::Parse("fd00:1::1"), 4095).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(program_->AddNeighbor(*net::IpAddress::Parse("10.1.0.1")).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(program_->AddNeighbor(*net::IpAddress::Parse("ff02::1")).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(SteerTest, IcmpToExclusiveAddressIsRedirected) {
  Check(Echo("10.1.0.1", "10.1.0.2"), E::kRedirect, &XdpProgramCounters::redirect_icmp);
  Check(Echo("fd00:1::1", "fd00:1::2"), E::kRedirect, &XdpProgramCounters::redirect_icmp);
  Check(Echo("10.1.0.1", "10.1.0.3"), E::kPassOther);  // shared: the kernel answers pings
  Check(Echo("fd00:1::1", "fd00:1::3"), E::kPassOther);
  Check(Echo("10.1.0.1", "10.1.0.9"), E::kPassNotOwned);
}

TEST_F(SteerTest, TcpToSharedAddressPassesAndToExclusiveIsRedirected) {
  Check(Tcp("10.1.0.1", "10.1.0.3"), E::kPassOther);
  Check(Tcp("fd00:1::1", "fd00:1::3"), E::kPassOther);
  Check(Tcp("10.1.0.1", "10.1.0.9"), E::kPassNotOwned);
  Check(Tcp("10.1.0.1", "10.1.0.2"), E::kRedirect, &XdpProgramCounters::redirect_other);
  Check(Tcp("fd00:1::1", "fd00:1::2"), E::kRedirect, &XdpProgramCounters::redirect_other);
}

TEST_F(SteerTest, OtherEthertypesPass) {
  std::vector<uint8_t> frame = Udp("10.1.0.1", "10.1.0.2", 9);
  frame[12] = 0x88;  // LLDP
  frame[13] = 0xcc;
  Check(frame, E::kPassOther);
}

TEST_F(SteerTest, RemovedAddressIsNoLongerSteered) {
  ASSERT_TRUE(program_->RemoveAddress(Ip("10.1.0.2")).ok());
  Check(Udp("10.1.0.1", "10.1.0.2", 9), E::kPassNotOwned);
  Check(Arp("10.1.0.1", "10.1.0.2"), E::kPassNotOwned);
  // Exclusive -> shared: only the owned ports then.
  ASSERT_TRUE(program_->AddAddress(Ip("fd00:1::2"), /*exclusive=*/false).ok());
  Check(Udp("fd00:1::1", "fd00:1::2", 9), E::kPassNotOwned);
}

// Every prefix of every steered frame: the program must not read past the end (the verifier
// sees to that), must pass what it cannot parse and count it, and must decide as for the whole
// frame once the headers it reads are all there.
TEST_F(SteerTest, TruncatedFramesPassAsMalformed) {
  struct Case {
    const char* name;
    std::vector<uint8_t> frame;
    size_t headers;  // bytes the program needs to decide
    uint64_t XdpProgramCounters::*kind;
  };
  net::VlanTag tag{.tpid = net::kEtherTypeVlan, .tci = 100};
  const Case cases[] = {
      {"udp4", Udp("10.1.0.1", "10.1.0.2", 9), 14 + 20 + 8, &XdpProgramCounters::redirect_udp},
      {"udp6", Udp("fd00:1::1", "fd00:1::2", 9), 14 + 40 + 8, &XdpProgramCounters::redirect_udp},
      {"udp4 shared", Udp("10.1.0.1", "10.1.0.3", 4000), 14 + 20 + 8,
       &XdpProgramCounters::redirect_udp},
      {"udp6 shared", Udp("fd00:1::1", "fd00:1::3", 4000), 14 + 40 + 8,
       &XdpProgramCounters::redirect_udp},
      {"udp4 vlan", Udp("10.1.0.1", "10.1.0.4", 9, tag), 14 + 4 + 20 + 8,
       &XdpProgramCounters::redirect_udp},
      {"arp", Arp("10.1.0.1", "10.1.0.2"), 14 + 28, &XdpProgramCounters::redirect_arp},
      {"icmp4", Echo("10.1.0.1", "10.1.0.2"), 14 + 20 + 8, &XdpProgramCounters::redirect_icmp},
      {"icmp6", Echo("fd00:1::1", "fd00:1::2"), 14 + 40 + 8, &XdpProgramCounters::redirect_icmp},
      {"ns", Solicitation("fe80::1", "fd00:1::2"), 14 + 40 + 24, &XdpProgramCounters::redirect_ns},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    ASSERT_GE(c.frame.size(), c.headers);
    // BPF_PROG_TEST_RUN refuses frames shorter than an Ethernet header.
    for (size_t length = 0; length < 14; ++length) {
      std::vector<uint8_t> cut(c.frame.begin(), c.frame.begin() + length);
      LIBBPF_OPTS(bpf_test_run_opts, run, .data_in = cut.data(),
                  .data_size_in = static_cast<uint32_t>(length));
      int error = bpf_prog_test_run_opts(program_->program_fd(), &run);
      if (error == 0) {
        EXPECT_EQ(run.retval, static_cast<uint32_t>(XDP_PASS)) << length;
      }
    }
    for (size_t length = 14; length <= c.frame.size(); ++length) {
      SCOPED_TRACE(length);
      std::vector<uint8_t> cut(c.frame.begin(), c.frame.begin() + length);
      if (length < c.headers) {
        Check(cut, E::kMalformed);
      } else {
        Check(cut, E::kRedirect, c.kind);
      }
      if (HasFailure()) return;  // one length is enough to see what is wrong
    }
  }
}

TEST_F(SteerTest, ImpossibleIpHeadersAreMalformed) {
  std::vector<uint8_t> frame = Udp("10.1.0.1", "10.1.0.2", 9);
  frame[14] = 0x44;  // IHL 4: shorter than the fixed header
  Check(frame, E::kMalformed);
  frame[14] = 0x65;  // version 6 in an IPv4 frame
  Check(frame, E::kMalformed);
  frame[14] = 0x4f;  // IHL 15: 60 bytes of header, past the end of this frame
  Check(frame, E::kMalformed);
  std::vector<uint8_t> frame6 = Udp("fd00:1::1", "fd00:1::2", 9);
  frame6[14] = 0x45;
  Check(frame6, E::kMalformed);
}

// With a real AF_XDP socket in the XSKMAP slot of queue 0, bpf_redirect_map finds it and the
// verdict is XDP_REDIRECT (BPF_PROG_TEST_RUN does not carry the frame there; the attach test
// in xdp_program_test does).
TEST_F(SteerTest, RedirectsToTheQueuesSocket) {
  testing::TestVeth veth("qsx0", "qsx1");
  absl::StatusOr<std::unique_ptr<link::XskPort>> port = link::XskPort::Create(
      {.interface = veth.name(), .frames = 128, .ring_size = 64,
       .bind_mode = link::XskBindMode::kCopy});
  ASSERT_TRUE(port.ok()) << port.status();
  absl::StatusOr<std::unique_ptr<link::XskLink>> xsk = (*port)->OpenQueue(0);
  ASSERT_TRUE(xsk.ok()) << xsk.status();

  ASSERT_TRUE(program_->SetXsk(0, (*xsk)->socket_fd()).ok());
  XdpProgramCounters before = Counters();
  EXPECT_EQ(Run(Udp("10.1.0.1", "10.1.0.2", 9)), static_cast<uint32_t>(XDP_REDIRECT));
  EXPECT_EQ(Run(Arp("10.1.0.1", "10.1.0.2")), static_cast<uint32_t>(XDP_REDIRECT));
  EXPECT_EQ(Run(Udp("10.1.0.1", "10.1.0.9", 9)), static_cast<uint32_t>(XDP_PASS));
  XdpProgramCounters after = Counters();
  EXPECT_EQ(after.redirect - before.redirect, 2u);
  EXPECT_EQ(after.redirect_no_xsk, before.redirect_no_xsk);

  ASSERT_TRUE(program_->ClearXsk(0).ok());
  EXPECT_TRUE(program_->ClearXsk(0).ok());
  EXPECT_EQ(Run(Udp("10.1.0.1", "10.1.0.2", 9)), static_cast<uint32_t>(XDP_PASS));
  // A queue without a socket (as one quadsockd does not serve): the frame is the kernel's, and
  // counted as such, not as redirected.
  EXPECT_EQ(Counters().redirect_no_xsk, before.redirect_no_xsk + 1);
  EXPECT_EQ(Counters().redirect, after.redirect);

}

TEST_F(SteerTest, EveryFrameIsCountedOnce) {
  XdpProgramCounters before = Counters();
  const std::vector<uint8_t> frames[] = {
      Udp("10.1.0.1", "10.1.0.2", 9), Udp("10.1.0.1", "10.1.0.9", 9), Tcp("10.1.0.1", "10.1.0.3"),
      std::vector<uint8_t>(20, 0)};
  for (const auto& f : frames) Run(f);
  EXPECT_EQ(Counters().total() - before.total(), std::size(frames));
}

}  // namespace
}  // namespace quadsock::xdp
