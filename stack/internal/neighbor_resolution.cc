#include "stack/internal/neighbor_resolution.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "stack/internal/poll_engine.h"
#include "stack/internal/udp_protocol.h"
#include "stack/internal/udp_socket.h"
#include "stack/net/frame_builder.h"
#include "stack/net/icmp.h"

namespace quadsock::stack {
namespace {

// The longest message sent here: an NDP message with its option in an IPv6 packet (ARP's is 28).
constexpr size_t kMessageBytes = 128;

// Both MACs of an ARP or NDP message (the one it claims, the frame's source) are unicast.
bool AreUnicastMacs(const net::MacAddress& claimed, const net::MacAddress& frame_source) {
  return NotANeighborMacReason(claimed) == nullptr &&
         NotANeighborMacReason(frame_source) == nullptr;
}

}  // namespace

// An ARP or NDP message says "this address is at this MAC", in a frame from another MAC. It may
// be learned and answered only if the address is a neighbour's (not a connected network's
// broadcast address either) and not one of ours, and both MACs are unicast. Anything else is a
// forgery or a broken host: learning it would take a table entry for a group or give our own
// address to another host, and the answer would go to many hosts.
bool NeighborResolution::IsNeighborAddress(const net::IpAddress& ip) const {
  return NotANeighborAddressReason(ip) == nullptr && !local_.Contains(ip) &&
         local_.BroadcastOf(ip) == nullptr;
}

void NeighborResolution::HandleArp(PollEngine& engine, const net::ParsedFrame& f,
                                   absl::Time now) {
  const net::ArpPacket& arp = f.arp;
  // An ARP probe (RFC 5227) has no sender address yet: it is answered, not learned.
  const bool probe = arp.sender_ip.IsUnspecified();
  if (!AreUnicastMacs(arp.sender_mac, f.eth.src) ||
      (!probe && !IsNeighborAddress(arp.sender_ip))) {
    engine.Bump(EngineCounter::neighbor_messages_ignored);
    return;
  }
  const bool for_us = local_.Contains(arp.target_ip);
  const bool request = arp.op == net::ArpPacket::kRequest;
  // RFC 826's merge rule, as Linux has it: the sender refreshes an existing entry, and only a
  // request for us makes one. A reply to us answers our probe; any message may move the MAC
  // (ARP has no override flag): permanent entries are the protection against forgeries.
  if (!probe) {
    Learn(engine, arp.sender_ip,
          {.mac = arp.sender_mac, .solicited = !request && for_us, .create = request && for_us},
          now);
  }
  if (!for_us || !request) return;
  std::optional<link::FrameBuffer> out = engine.NewTxFrame(kMessageBytes);
  if (!out.has_value()) return;
  net::ArpPacket reply;
  reply.op = net::ArpPacket::kReply;
  reply.sender_mac = engine.info().mac;
  reply.sender_ip = arp.target_ip;
  reply.target_mac = arp.sender_mac;
  reply.target_ip = arp.sender_ip;
  engine.QueueTx(*out, net::BuildArp(engine.LinkTo(arp.sender_mac), reply,
                                     {out->data, out->capacity}));
  engine.Bump(EngineCounter::arp_replies);
}

void NeighborResolution::HandleNdp(PollEngine& engine, const net::ParsedFrame& f,
                                   absl::Time now) {
  const net::NdpMessage& m = f.ndp;
  const bool for_us = local_.Contains(m.target);
  const bool solicitation = f.icmp.type == net::kIcmpv6NeighborSolicitation;
  // A solicitation speaks for its sender, an advertisement for its target. Duplicate address
  // detection solicits from the unspecified address and carries no link-layer address (RFC 4861
  // 7.1.1); it is answered to all nodes.
  const bool dad = solicitation && f.src.IsUnspecified();
  const bool valid = dad ? !m.link_address.has_value()
                         : IsNeighborAddress(solicitation ? f.src : m.target) &&
                               AreUnicastMacs(m.link_address.value_or(f.eth.src), f.eth.src);
  if (!valid) {
    engine.Bump(EngineCounter::neighbor_messages_ignored);
    return;
  }
  if (solicitation) {
    // RFC 4861 7.2.3: a solicitation for us makes or updates its sender's entry (STALE when
    // the MAC is new); one for another node updates only.
    if (!dad && m.link_address.has_value()) {
      Learn(engine, f.src, {.mac = m.link_address, .create = for_us}, now);
    }
  } else {
    // 7.1.2: a solicited advertisement is never sent to a group.
    const bool solicited = (f.icmp.rest & net::NdpMessage::kFlagSolicited) != 0;
    if (solicited && f.dst.IsMulticast()) {
      engine.Bump(EngineCounter::neighbor_messages_ignored);
      return;
    }
    Learn(engine, m.target,
          {.mac = m.link_address,
           .solicited = solicited,
           .override = (f.icmp.rest & net::NdpMessage::kFlagOverride) != 0},
          now);
  }
  if (!solicitation || !for_us) return;
  std::optional<link::FrameBuffer> out = engine.NewTxFrame(kMessageBytes);
  if (!out.has_value()) return;
  net::NdpMessage advert;
  advert.target = m.target;
  advert.link_address = engine.info().mac;
  // To the soliciting node, or to all nodes when it had no address yet (RFC 4861 7.2.4).
  const net::IpAddress dst = dad ? *net::IpAddress::Parse("ff02::1") : f.src;
  const net::MacAddress dst_mac = dad ? net::MacAddress::Ipv6Multicast(dst) : f.eth.src;
  const uint32_t flags =
      (dad ? 0 : net::NdpMessage::kFlagSolicited) | net::NdpMessage::kFlagOverride;
  engine.QueueTx(*out, net::BuildNdp(engine.LinkTo(dst_mac), m.target, dst,
                                     net::kIcmpv6NeighborAdvertisement, advert,
                                     {out->data, out->capacity}, flags));
  engine.Bump(EngineCounter::ndp_advertisements);
}

void NeighborResolution::Learn(PollEngine& engine, const net::IpAddress& ip,
                               const NeighborAdvert& advert, absl::Time now) {
  // Only a host on one of our connected networks is ever a next hop: a sender from elsewhere
  // (answered all the same) would only take a place in the table.
  if (routes_.Connected(ip) == nullptr) {
    engine.Bump(EngineCounter::neighbor_messages_off_link);
    return;
  }
  std::vector<PendingDatagram> ready;
  bool changed;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const uint64_t before = table_.changes();
    ready = table_.Learn(ip, advert, now);
    changed = table_.changes() != before;
  }
  // The poll threads' shortcuts hold MACs looked up before: only a changed or erased entry
  // makes them look again (a new neighbour leaves what they hold right; a flood of made-up
  // senders must not send every thread to the table's lock).
  if (changed) Changed();
  if (ready.empty()) return;
  // They all waited for the neighbour that just answered with its MAC (Learn releases them
  // only when the message carried one).
  const net::MacAddress mac = *advert.mac;
  for (PendingDatagram& d : ready) {
    TransmitUdp(engine, d.src, d.dst, mac,
                {reinterpret_cast<const uint8_t*>(d.payload.data()), d.payload.size()},
                std::move(d.socket));
  }
}

std::optional<net::MacAddress> NeighborResolution::Resolve(
    PollEngine& engine, const net::IpAddress& next_hop, absl::Time now,
    absl::FunctionRef<PendingDatagram()> waiting) {
  NeighborShortcut& shortcut = engine.neighbor_shortcut();
  const uint64_t generation = generation_.load(std::memory_order_acquire);
  if (std::optional<net::MacAddress> mac = shortcut.Find(next_hop, now, generation)) return mac;
  bool probe;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (std::optional<net::MacAddress> mac = table_.Lookup(next_hop, now)) {
      shortcut.Put(next_hop, *mac, now, generation);
      return mac;
    }
    PendingDatagram d = waiting();
    // Its unresolved entries count against its session's cap: the socket's owner.
    if (d.socket != nullptr) {
      if (const demux::SocketInfo* info = d.socket->info()) {
        d.owner = info->options.owner;
        d.group = info->options.group;
      }
    }
    probe = table_.Queue(std::move(d), now);
  }
  if (probe) SendProbe(engine, next_hop);
  return std::nullopt;
}

void NeighborResolution::Tick(PollEngine& engine, absl::Time now) {
  std::vector<net::IpAddress> probes;
  {
    std::lock_guard<std::mutex> lock(mu_);
    probes = table_.Tick(now);
  }
  for (const net::IpAddress& target : probes) SendProbe(engine, target);
}

void NeighborResolution::SendProbe(PollEngine& engine, const net::IpAddress& target) {
  absl::StatusOr<net::IpAddress> source = routes_.SourceFor(target);
  if (!source.ok()) return;
  std::optional<link::FrameBuffer> out = engine.NewTxFrame(kMessageBytes);
  if (!out.has_value()) return;
  const net::MacAddress& mac = engine.info().mac;
  if (target.is_v4()) {
    net::ArpPacket request;
    request.op = net::ArpPacket::kRequest;
    request.sender_mac = mac;
    request.sender_ip = *source;
    request.target_ip = target;
    engine.QueueTx(*out, net::BuildArp(engine.LinkTo(net::MacAddress::Broadcast()), request,
                                       {out->data, out->capacity}));
    return;
  }
  const net::IpAddress group = net::SolicitedNodeMulticast(target);
  net::NdpMessage solicitation;
  solicitation.target = target;
  solicitation.link_address = mac;
  engine.QueueTx(*out, net::BuildNdp(engine.LinkTo(net::MacAddress::Ipv6Multicast(group)),
                                     *source, group, net::kIcmpv6NeighborSolicitation,
                                     solicitation, {out->data, out->capacity}));
}

absl::Status NeighborResolution::SetPermanent(const net::IpAddress& ip,
                                              const net::MacAddress& mac, absl::Time now,
                                              std::vector<PendingDatagram>& ready) {
  if (absl::Status s = CheckNeighborAddress(ip); !s.ok()) return s;
  const net::IpAddress wire = ip.Unmapped();
  if (routes_.IsLocal(wire)) {
    return absl::InvalidArgumentError(
        absl::StrCat("address ", ip.ToString(), " is the stack's own, not a neighbour's"));
  }
  // Only a host on a connected network is ever a next hop: an entry for another would never
  // be used, and would take a place in the table for nothing.
  const net::IpPrefix* on = routes_.Connected(wire);
  if (on == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("address ", ip.ToString(), " is on none of the connected networks (",
                     absl::StrJoin(routes_.addresses(), ", ", absl::StreamFormatter()), ")"));
  }
  if (on->IsBroadcast(wire)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "address ", ip.ToString(), " is the broadcast address of ", on->ToString()));
  }
  std::lock_guard<std::mutex> lock(mu_);
  absl::Status s = table_.SetPermanent(wire, mac, now, &ready);
  Changed();
  return s;
}

absl::Status NeighborResolution::Remove(const net::IpAddress& ip) {
  std::lock_guard<std::mutex> lock(mu_);
  absl::Status s = table_.Remove(ip);
  Changed();
  return s;
}

std::vector<NeighborInfo> NeighborResolution::List() const {
  std::lock_guard<std::mutex> lock(mu_);
  return table_.List();
}

NeighborCounters NeighborResolution::counters() const {
  std::lock_guard<std::mutex> lock(mu_);
  return table_.counters();
}

}  // namespace quadsock::stack
