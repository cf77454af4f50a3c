// Neighbour resolution on the wire, over MemoryLink: what ARP and NDP messages from the far end
// may change (RFC 4861 7.2.3 and 7.2.5, on-link senders only), and what one session sending to
// thousands of made-up neighbours may not take from the others. The same frames from a kernel
// peer over AF_XDP are in tests/neighbor_e2e_test.py.
#include <gtest/gtest.h>

#include <optional>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "stack/net/frame.h"
#include "stack/net/frame_builder.h"
#include "stack/stack.h"
#include "stack/testing/stack_fixtures.h"

namespace quadsock::stack {
namespace {

using net::IpAddress;
using testing_fixtures::Bytes;
using testing_fixtures::Ep;
using testing_fixtures::Ip;
using testing_fixtures::kMacB;
using testing_fixtures::kMacPeer;
using testing_fixtures::StackWireTest;

const net::MacAddress kForged = *net::MacAddress::Parse("02:00:00:00:00:66");
constexpr uint32_t kS = net::NdpMessage::kFlagSolicited;
constexpr uint32_t kO = net::NdpMessage::kFlagOverride;

class NeighborWireTest : public StackWireTest {
 protected:
  // A neighbour advertisement from the peer's MAC for `target`, with `flags` (S, O) and a
  // target link-layer option `mac`, to `dst` (ours, or all nodes).
  void Advertise(const char* target, std::optional<net::MacAddress> mac, uint32_t flags,
                 const char* dst = "fd00:1::2") {
    const IpAddress to = Ip(dst);
    const net::MacAddress to_mac = to.IsMulticast() ? net::MacAddress::Ipv6Multicast(to) : kMacB;
    net::NdpMessage m{.target = Ip(target), .link_address = mac};
    Inject(net::BuildNdp({kMacPeer, to_mac, std::nullopt}, Ip(target), to,
                         net::kIcmpv6NeighborAdvertisement, m, buf_, flags));
  }
  // A solicitation from `src` (with its link-layer option) for `target`, to its group.
  void Solicit(const char* src, const char* target) {
    const IpAddress group = net::SolicitedNodeMulticast(Ip(target));
    net::NdpMessage m{.target = Ip(target), .link_address = kMacPeer};
    Inject(net::BuildNdp({kMacPeer, net::MacAddress::Ipv6Multicast(group), std::nullopt},
                         Ip(src), group, net::kIcmpv6NeighborSolicitation, m, buf_));
  }
  // An ARP message from `sender_ip` at kMacPeer about `target_ip`.
  void Arp(uint16_t op, const char* sender_ip, const char* target_ip) {
    net::ArpPacket a;
    a.op = op;
    a.sender_mac = kMacPeer;
    a.sender_ip = Ip(sender_ip);
    a.target_ip = Ip(target_ip);
    Inject(net::BuildArp({kMacPeer, net::MacAddress::Broadcast(), std::nullopt}, a, buf_));
  }
  void Inject(std::optional<size_t> n) {
    ASSERT_TRUE(wire_->Inject({buf_.data(), n.value()}));
    stack_->PollOnce();
  }
  std::optional<NeighborInfo> Find(const char* ip) {
    for (const NeighborInfo& n : stack_->Neighbors()) {
      if (n.address == Ip(ip)) return n;
    }
    return std::nullopt;
  }
  // Sends a datagram to fd00:1::1 and answers the solicitation as the peer: REACHABLE.
  void ResolvePeer() {
    SocketId s = stack_->Open(net::Family::kV6).value();
    ASSERT_EQ(stack_->Send(s, Bytes("hi"), Ep("[fd00:1::1]:9")), absl::OkStatus());
    stack_->PollOnce();
    Advertise("fd00:1::1", kMacPeer, kS | kO);
    ASSERT_EQ(Find("fd00:1::1")->state, NeighborState::kReachable);
    wire_->TakeSent();
  }

  std::vector<uint8_t> buf_ = std::vector<uint8_t>(256);
};

// An unsolicited advertisement with the override flag may move a neighbour's MAC, but only
// to STALE: the entry is probed again before it is trusted (it used to go REACHABLE). One
// without the override flag never moves it.
TEST_F(NeighborWireTest, AForgedAdvertisementLeavesTheEntryStale) {
  ResolvePeer();
  Advertise("fd00:1::1", kForged, kO);  // S=0, O=1
  EXPECT_EQ(Find("fd00:1::1")->state, NeighborState::kStale);
  EXPECT_EQ(Find("fd00:1::1")->mac, kForged);
  Advertise("fd00:1::1", kMacPeer, 0);  // S=0, O=0, another MAC: ignored
  EXPECT_EQ(Find("fd00:1::1")->mac, kForged);
  // The real peer's announcement to all nodes (S=0, O=1) puts its MAC back.
  Advertise("fd00:1::1", kMacPeer, kO, "ff02::1");
  EXPECT_EQ(Find("fd00:1::1")->mac, kMacPeer);
  EXPECT_EQ(Find("fd00:1::1")->state, NeighborState::kStale);
  // A solicited advertisement to a group is invalid (RFC 4861 7.1.2).
  const uint64_t ignored = stack_->Counters().neighbor_messages_ignored;
  Advertise("fd00:1::1", kForged, kS | kO, "ff02::1");
  EXPECT_EQ(Find("fd00:1::1")->mac, kMacPeer);
  EXPECT_EQ(stack_->Counters().neighbor_messages_ignored, ignored + 1);
}

// Only senders on our networks are learned, and only a request or solicitation for us makes an
// entry: an ARP storm from random addresses used to fill the table, off-link ones included.
TEST_F(NeighborWireTest, OnlyOnLinkSendersOfRequestsForUsAreLearned) {
  Arp(net::ArpPacket::kRequest, "10.9.9.9", "10.1.0.2");  // off-link, for us: answered only
  std::vector<std::vector<uint8_t>> keep;
  std::vector<net::ParsedFrame> sent = Sent(keep);
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].arp.op, net::ArpPacket::kReply);
  Solicit("fd00:9::9", "fd00:1::2");                     // off-link, for us: answered only
  sent = Sent(keep);
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].icmp.type, net::kIcmpv6NeighborAdvertisement);
  Arp(net::ArpPacket::kRequest, "10.1.0.7", "10.1.0.9");  // on-link, for another host
  Arp(net::ArpPacket::kReply, "10.1.0.8", "10.1.0.2");    // a reply we never asked for
  Solicit("fd00:1::7", "fd00:1::9");                      // for another host
  EXPECT_TRUE(stack_->Neighbors().empty());
  EXPECT_EQ(stack_->Counters().neighbor_messages_off_link, 2u);

  Arp(net::ArpPacket::kRequest, "10.1.0.7", "10.1.0.2");
  Solicit("fd00:1::7", "fd00:1::2");
  ASSERT_EQ(stack_->Neighbors().size(), 2u);
  EXPECT_EQ(Find("10.1.0.7")->state, NeighborState::kStale);
  EXPECT_EQ(Find("fd00:1::7")->state, NeighborState::kStale);
  // Known now: a gratuitous ARP (not for us) updates it.
  const net::MacAddress moved = *net::MacAddress::Parse("02:00:00:00:00:77");
  net::ArpPacket a;
  a.op = net::ArpPacket::kRequest;
  a.sender_mac = moved;
  a.sender_ip = Ip("10.1.0.7");
  a.target_ip = Ip("10.1.0.7");
  Inject(net::BuildArp({moved, net::MacAddress::Broadcast(), std::nullopt}, a, buf_));
  EXPECT_EQ(Find("10.1.0.7")->mac, moved);
}

// One session sending to thousands of made-up on-link addresses: its unresolved neighbours are
// capped, few solicitations go out, and the gateway's entry stays, so every other session's
// off-link traffic still leaves (the flood used to push the gateway out of a table full of
// unresolved entries and put a solicitation on the wire per address).
TEST_F(NeighborWireTest, OneSessionCannotExhaustTheNeighbourTable) {
  MakeStack(/*vlan=*/0, StackOptions().max_receive_bytes, {Ip("10.1.0.254")});
  // The gateway, resolved.
  SocketId other = stack_->Open(net::Family::kV4, {.owner = 2}).value();
  ASSERT_EQ(stack_->Send(other, Bytes("out"), Ep("192.0.2.1:9")), absl::OkStatus());
  stack_->PollOnce();
  Arp(net::ArpPacket::kReply, "10.1.0.254", "10.1.0.2");
  ASSERT_EQ(Find("10.1.0.254")->state, NeighborState::kReachable);
  wire_->TakeSent();

  SocketId flood = stack_->Open(net::Family::kV6, {.owner = 1}).value();
  constexpr int kAddresses = 4200;  // past the table's 4,096 entries
  for (int i = 0; i < kAddresses; ++i) {
    IpAddress::Bytes b = Ip("fd00:1::").bytes16();
    b[13] = static_cast<uint8_t>(1 + i / 65536);
    b[14] = static_cast<uint8_t>(i >> 8);
    b[15] = static_cast<uint8_t>(i);
    ASSERT_EQ(stack_->Send(flood, Bytes("x"), net::Endpoint{IpAddress::V6Bytes(b.data()), 9}),
              absl::OkStatus());
    if (i % 256 == 255) stack_->PollOnce();
  }
  while (stack_->PollOnce() > 0) {
  }
  stack_->PollOnce();
  const size_t solicitations = wire_->TakeSent().size();
  const StackCounters c = stack_->Counters();
  EXPECT_LE(solicitations, NeighborTable::Options().max_unresolved_per_owner);
  EXPECT_GT(c.neighbor_owner_unresolved_full, 0u);
  EXPECT_EQ(stack_->Get(flood).value().counters.tx_dropped,
            kAddresses - NeighborTable::Options().max_unresolved_per_owner);

  // The other session's off-link datagram goes straight to the gateway.
  ASSERT_EQ(stack_->Send(other, Bytes("still"), Ep("192.0.2.1:9")), absl::OkStatus());
  stack_->PollOnce();
  std::vector<std::vector<uint8_t>> keep;
  std::vector<net::ParsedFrame> sent = Sent(keep);
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].eth.dst, kMacPeer);
  EXPECT_EQ(testing_fixtures::Str(sent[0].payload(keep[0])), "still");
  // And it may still resolve a new neighbour of its own: an ARP request goes out.
  ASSERT_EQ(stack_->Send(other, Bytes("new"), Ep("10.1.0.77:9")), absl::OkStatus());
  stack_->PollOnce();
  sent = Sent(keep);
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].l3, net::L3::kArp);
  EXPECT_EQ(sent[0].arp.target_ip, Ip("10.1.0.77"));
}

// A flood of solicitations for us from made-up senders in our /64, 200,000 a second on the
// stack's clock: every one is answered, no more of them are learned than the learning bucket
// allows (each a place in the table, an XDP map update and a look-up again for every poll
// thread), and the datagrams of a live flow between them all arrive.
TEST_F(NeighborWireTest, AFloodOfSolicitationsFromMadeUpSendersIsLearnedOnlyAtTheLearningRate) {
  const SocketId live = stack_->Open(net::Family::kV4).value();
  ASSERT_TRUE(stack_->Bind(live, Ep("0.0.0.0:4000")).ok());
  constexpr int kFrames = 20000;  // a tenth of a second
  constexpr int kEvery = 100;     // a datagram of the live flow after this many solicitations
  std::mt19937_64 random(1);
  for (int i = 0; i < kFrames; ++i) {
    clock_.now += absl::Microseconds(5);
    const std::string src = absl::StrFormat("fd00:1::%x:%x:%x:%x", random() & 0xffff,
                                            random() & 0xffff, random() & 0xffff,
                                            random() & 0xffff);
    Solicit(src.c_str(), "fd00:1::2");
    if (i % kEvery == 0) {
      const std::vector<uint8_t> d = Udp("10.1.0.1:5000", "10.1.0.2:4000", absl::StrCat(i));
      ASSERT_TRUE(wire_->Inject(d));
      stack_->PollOnce();
    }
    if (i % 1000 == 0) wire_->TakeSent();
  }
  wire_->TakeSent();
  int arrived = 0;
  while (stack_->Receive(live).value().has_value()) ++arrived;
  EXPECT_EQ(arrived, kFrames / kEvery);
  const StackCounters c = stack_->Counters();
  EXPECT_EQ(c.ndp_advertisements, static_cast<uint64_t>(kFrames));
  // The bucket's burst (1,024) and a tenth of a second at 1,024 a second.
  const uint64_t learnable = 1024 + 103;
  EXPECT_LE(stack_->Neighbors().size(), learnable);
  EXPECT_GE(c.neighbor_learn_rate_limited, kFrames - learnable);
}

}  // namespace
}  // namespace quadsock::stack
