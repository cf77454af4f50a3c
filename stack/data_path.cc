// The data path: one poll loop per link (see stack.h for the picture).
#include "stack/stack.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <future>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "stack/demux/rcu.h"
#include "stack/internal/engine.h"
#include "stack/net/frame.h"
#include "stack/net/frame_builder.h"
#include "stack/net/ip.h"
#include "stack/net/udp.h"

namespace quadsock::stack {

void Stack::RunEngine(Engine& engine) {
  demux::RcuReaderThread reader;
  demux::LookupContext ctx(*table_);
  pollfd fds[2] = {{engine.link->wait_fd(), POLLIN, 0}, {engine.wake_fd, POLLIN, 0}};
  absl::Time last_frame = absl::InfinitePast();
  while (running_.load(std::memory_order_relaxed)) {
    const size_t n = Turn(engine, ctx);
    reader.Quiescent();
    if (engine.check_pending.load(std::memory_order_acquire)) {
      std::lock_guard<std::mutex> lock(engine.check_mu);
      if (engine.check_request != nullptr) {  // unless the asker gave up meanwhile
        engine.check_request->set_value(engine.link->CheckFrameAccounting());
        engine.check_request = nullptr;
      }
      engine.check_pending.store(false);
    }
    if (engine.link->busy_polling()) {
      // Receive runs the device's receive work on this thread: keep at it while frames come.
      if (n > 0) last_frame = engine.turn_time;
      if (engine.turn_time - last_frame < kBusyPollLinger) continue;
    }
    if (n > 0) continue;
    // Idle: sleep until frames arrive, a send is queued, or the timers are due. Offline, so that
    // writers' grace periods do not wait for a sleeping thread.
    engine.sleeping.exchange(1, std::memory_order_acq_rel);  // see Stack::Send
    fds[1].revents = 0;
    if (engine.sends.SizeApprox() == 0) {
      reader.Offline();
      poll(fds, 2, kIdleWaitMs);
      reader.Online();
    }
    engine.sleeping.store(0, std::memory_order_relaxed);
    if (fds[1].revents & POLLIN) {
      // A sender woke us. (Only then: a read of an empty eventfd is a system call per wakeup
      // for nothing; a wakeup that comes later keeps the fd readable and the next poll short.)
      uint64_t drain;
      (void)!read(engine.wake_fd, &drain, sizeof(drain));
    }
  }
  engine.link->Poll();
}

size_t Stack::PollOnce() {
  thread_local std::unique_ptr<demux::RcuReaderThread> reader;
  if (reader == nullptr) {
    reader = std::make_unique<demux::RcuReaderThread>();
  } else {
    reader->Online();
  }
  size_t n = 0;
  for (auto& e : engines_) {
    if (e->manual_lookup == nullptr) e->manual_lookup = std::make_unique<demux::LookupContext>(*table_);
    n += Turn(*e, *e->manual_lookup);
  }
  reader->Offline();
  return n;
}

size_t Stack::Turn(Engine& engine, demux::LookupContext& ctx) {
  const absl::Time now = options_.clock();
  engine.turn_time = now;
  link::FrameBuffer frames[kRxBatch];
  const size_t n = engine.link->Receive(frames);
  engine.Bump(kRxFrames, n);
  const LocalAddresses& local = *local_.load(std::memory_order_acquire);
  if (n > 0) ReceiveBatch(engine, ctx, local, {frames, n}, now);
  engine.link->Release({frames, n});
  SendQueued(engine, now);
  FlushTx(engine);
  engine.link->Poll();
  if (now >= engine.next_timer) {
    engine.next_timer = now + kTimerPeriod;
    std::vector<net::IpAddress> probes;
    {
      std::lock_guard<std::mutex> lock(net_mu_);
      probes = neighbors_.Tick(now);
    }
    for (const net::IpAddress& target : probes) SendProbe(engine, target);
    FlushTx(engine);
  }
  return n;
}

void Stack::FlushTx(Engine& engine) {
  if (engine.tx_batch.empty()) return;
  const size_t sent = engine.link->Transmit(engine.tx_batch);
  if (sent < engine.tx_batch.size()) {
    // The TX ring is full: these frames are dropped (the link counted tx_ring_full).
    engine.link->Release(std::span(engine.tx_batch).subspan(sent));
  }
  for (size_t i = 0; i < engine.tx_owners.size(); ++i) {
    const TxOwner& o = engine.tx_owners[i];
    if (o.socket == nullptr) continue;
    if (i < sent) {
      o.socket->CountSent(o.bytes);
    } else {
      o.socket->CountSendDrop();
    }
  }
  engine.tx_batch.clear();
  engine.tx_owners.clear();
}

std::optional<link::FrameBuffer> Stack::NewTxFrame(Engine& engine) {
  if (engine.tx_batch.size() >= kTxBatch) FlushTx(engine);
  std::optional<link::FrameBuffer> f = engine.link->AllocateTx();
  if (!f.has_value()) engine.Bump(kTxNoBuffer);
  return f;
}

void Stack::QueueTx(Engine& engine, link::FrameBuffer frame, std::optional<size_t> length,
                    TxOwner owner) {
  if (!length.has_value()) {
    engine.link->Release({&frame, 1});  // did not fit: cannot happen for MTU-checked frames
    engine.Bump(kTxNoBuffer);
    if (owner.socket != nullptr) owner.socket->CountSendDrop();
    return;
  }
  frame.length = static_cast<uint32_t>(*length);
  engine.tx_batch.push_back(frame);
  engine.tx_owners.push_back(std::move(owner));
}

void Stack::ReceiveBatch(Engine& engine, demux::LookupContext& ctx, const LocalAddresses& local,
                         std::span<const link::FrameBuffer> frames, absl::Time now) {
  // Three passes, so that the memory loads of the whole batch overlap instead of following one
  // another frame by frame (with 100k sockets each datagram's slot, entry and socket are cold):
  // (1) parse and classify every frame, keeping only a UDP datagram's flow and payload; (2)
  // look the UDP flows up together (LookupBatch prefetches slots and entries, and each socket
  // as it is found: the stack's cookie); (3) handle every frame in arrival order. Frames that
  // need more than the flow (control frames, datagrams answered with port unreachable) are
  // parsed again in (3): they are rare, and one parsed frame in L1 beats a batch of them
  // (20 KiB) crowding it out.
  Engine::RxBatch& rx = engine.rx;
  const link::LinkInfo& link = engine.link->info();
  size_t udp = 0;
  for (size_t i = 0; i < frames.size(); ++i) {
    const std::span<const uint8_t> bytes(frames[i].data, frames[i].length);
    // The commonest frame, plain UDP, without a full parse; the rest (and any error, counted
    // there) through Classify.
    net::UdpFrameView v;
    if (net::ParsePlainUdpFrame(bytes, v)) {
      // (The fast parser takes untagged frames only: not ours when the stack is on a VLAN.)
      if (!ForThisLink(v.dst_mac, link.mac) || options_.vlan != 0 || !local.Contains(v.dst)) {
        engine.Bump(kNotForUs);
        rx.kind[i] = FrameKind::kDone;
        continue;
      }
      rx.kind[i] = FrameKind::kUdp;
      rx.keys[udp] = {v.src, v.src_port, v.dst, v.dst_port, link.ifindex};
      rx.payloads[udp++] = bytes.subspan(v.payload_offset, v.payload_length);
      continue;
    }
    net::ParsedFrame& f = rx.parsed;
    rx.kind[i] = Classify(engine, local, bytes, f);
    if (rx.kind[i] == FrameKind::kUdp) {
      rx.keys[udp] = {f.src, f.udp.src_port, f.dst, f.udp.dst_port, link.ifindex};
      rx.payloads[udp++] = f.payload(bytes);
    }
  }
  if (udp > 0) {
    table_->LookupBatch(ctx, {rx.keys.data(), udp}, {rx.found.data(), udp});
  }
  size_t j = 0;  // the next UDP datagram
  for (size_t i = 0; i < frames.size(); ++i) {
    const std::span<const uint8_t> bytes(frames[i].data, frames[i].length);
    switch (rx.kind[i]) {
      case FrameKind::kDone:
        break;
      case FrameKind::kArp:
        (void)net::ParseFrame(bytes, rx.parsed);  // parsed fine in (1)
        HandleArp(engine, rx.parsed, local, now);
        break;
      case FrameKind::kNdp:
        (void)net::ParseFrame(bytes, rx.parsed);
        HandleNdp(engine, rx.parsed, local, now);
        break;
      case FrameKind::kEcho:
        (void)net::ParseFrame(bytes, rx.parsed);
        SendEchoReply(engine, rx.parsed, bytes);
        break;
      case FrameKind::kIcmpError:
        (void)net::ParseFrame(bytes, rx.parsed);
        HandleIcmpError(engine, ctx, rx.parsed, local);
        break;
      case FrameKind::kUdp: {
        const demux::FlowKey& k = rx.keys[j];
        const std::optional<demux::LookupResult>& r = rx.found[j];
        const std::span<const uint8_t> payload = rx.payloads[j];
        ++j;
        if (!r.has_value()) {
          engine.Bump(kUdpNoSocket);
          (void)net::ParseFrame(bytes, rx.parsed);
          SendPortUnreachable(engine, rx.parsed, bytes, now);
          break;
        }
        SocketOf(*r).Deliver({k.src, k.src_port}, {k.dst, k.dst_port}, payload, now);
        engine.Bump(kUdpDelivered);
        break;
      }
    }
  }
}

Stack::FrameKind Stack::Classify(Engine& engine, const LocalAddresses& local,
                                 std::span<const uint8_t> bytes, net::ParsedFrame& f) {
  if (const net::ParseError e = net::ParseFrame(bytes, f); e != net::ParseError::kOk) {
    engine.BumpParse(e);
    return FrameKind::kDone;
  }
  if (!ForThisLink(f.eth.dst, engine.link->info().mac) || f.eth.vlan_id() != options_.vlan) {
    engine.Bump(kNotForUs);
    return FrameKind::kDone;
  }
  switch (f.l3) {
    case net::L3::kArp:
      return FrameKind::kArp;
    case net::L3::kIpv4:
    case net::L3::kIpv6:
      break;
    case net::L3::kOther:
      engine.Bump(kUnhandled);
      return FrameKind::kDone;
  }
  if (f.l4 == net::L4::kIcmpv6 && (f.icmp.type == net::kIcmpv6NeighborSolicitation ||
                                   f.icmp.type == net::kIcmpv6NeighborAdvertisement)) {
    return FrameKind::kNdp;
  }
  if (!local.Contains(f.dst)) {
    engine.Bump(kNotForUs);
    return FrameKind::kDone;
  }
  if (f.fragment) {
    engine.Bump(kFragments);
    return FrameKind::kDone;
  }
  if (f.l4 == net::L4::kUdp) return FrameKind::kUdp;
  if (f.l4 == net::L4::kIcmpv4 || f.l4 == net::L4::kIcmpv6) {
    const bool v6 = f.l4 == net::L4::kIcmpv6;
    if (net::IsIcmpError(v6, f.icmp.type)) return FrameKind::kIcmpError;
    if (f.icmp.type == (v6 ? net::kIcmpv6EchoRequest : net::kIcmpv4EchoRequest)) {
      return FrameKind::kEcho;
    }
  }
  engine.Bump(kUnhandled);
  return FrameKind::kDone;
}

void Stack::HandleIcmpError(Engine& engine, demux::LookupContext& ctx,
                            const net::ParsedFrame& f, const LocalAddresses& local) {
  // The datagram it quotes must be one we could have sent: UDP, from one of our addresses (of
  // the message's own IP version: ParseFrame took no other quote). Then the socket it came from
  // is the one that would receive the answer: the lookup of the quoted flow turned around (as
  // the kernel's __udp4_lib_err), which for a connected socket is its own 4-tuple in hash4.
  const net::IcmpQuote& q = f.quote;
  if (q.protocol != net::kIpProtoUdp || !local.Contains(q.src)) {
    engine.Bump(kIcmpErrorsUnmatched);
    return;
  }
  const demux::FlowKey flow{q.dst, q.dst_port, q.src, q.src_port, engine.link->info().ifindex};
  const std::optional<demux::LookupResult> r = table_->Lookup(ctx, flow);
  if (!r.has_value()) {
    engine.Bump(kIcmpErrorsUnmatched);
    return;
  }
  SocketOf(*r).ReportIcmpError(IcmpError{f.l4 == net::L4::kIcmpv6, f.icmp.type, f.icmp.code},
                               {q.dst, q.dst_port});
  engine.Bump(kIcmpErrorsReceived);
}

namespace {

// An ARP or NDP message says "this address is at this MAC", in a frame from another MAC. It may
// be learned and answered only if the address is a neighbour's (not a connected network's
// broadcast address either) and not one of ours, and both MACs are unicast. Anything else is a
// forgery or a broken host: learning it would take a table entry for a group or give our own
// address to another host, and the answer would go to many hosts.
bool NeighborsAddress(const net::IpAddress& ip, const LocalAddresses& local) {
  return NotANeighborAddressReason(ip) == nullptr && !local.Contains(ip) &&
         local.BroadcastOf(ip) == nullptr;
}
bool UnicastMacs(const net::MacAddress& claimed, const net::MacAddress& frame_source) {
  return NotANeighborMacReason(claimed) == nullptr &&
         NotANeighborMacReason(frame_source) == nullptr;
}

}  // namespace

void Stack::HandleArp(Engine& engine, const net::ParsedFrame& f, const LocalAddresses& local,
                      absl::Time now) {
  const net::ArpPacket& arp = f.arp;
  // An ARP probe (RFC 5227) has no sender address yet: it is answered, not learned.
  const bool probe = arp.sender_ip.IsUnspecified();
  if (!UnicastMacs(arp.sender_mac, f.eth.src) ||
      (!probe && !NeighborsAddress(arp.sender_ip, local))) {
    engine.Bump(kNeighborIgnored);
    return;
  }
  const bool for_us = local.Contains(arp.target_ip);
  // RFC 826: merge the sender into an existing entry; create one if the packet is for us.
  if (!probe) LearnNeighbor(engine, arp.sender_ip, arp.sender_mac, now, for_us);
  if (!for_us || arp.op != net::ArpPacket::kRequest) return;
  std::optional<link::FrameBuffer> out = NewTxFrame(engine);
  if (!out.has_value()) return;
  net::ArpPacket reply;
  reply.op = net::ArpPacket::kReply;
  reply.sender_mac = engine.link->info().mac;
  reply.sender_ip = arp.target_ip;
  reply.target_mac = arp.sender_mac;
  reply.target_ip = arp.sender_ip;
  QueueTx(engine, *out,
          net::BuildArp(LinkTo(engine, arp.sender_mac), reply,
                        {out->data, out->capacity}));
  engine.Bump(kArpReplies);
}

void Stack::LearnNeighbor(Engine& engine, const net::IpAddress& ip, const net::MacAddress& mac,
                          absl::Time now, bool create) {
  std::vector<PendingDatagram> ready;
  {
    std::lock_guard<std::mutex> lock(net_mu_);
    ready = neighbors_.Learn(ip, mac, now, create);
  }
  TransmitPending(engine, ready, mac);
}

void Stack::HandleNdp(Engine& engine, const net::ParsedFrame& f, const LocalAddresses& local,
                      absl::Time now) {
  const net::NdpMessage& m = f.ndp;
  const bool for_us = local.Contains(m.target);
  const bool solicitation = f.icmp.type == net::kIcmpv6NeighborSolicitation;
  // A solicitation speaks for its sender, an advertisement for its target. Duplicate address
  // detection solicits from the unspecified address and carries no link-layer address (RFC 4861
  // 7.1.1); it is answered to all nodes.
  const bool dad = solicitation && f.src.IsUnspecified();
  const bool valid = dad ? !m.link_address.has_value()
                         : NeighborsAddress(solicitation ? f.src : m.target, local) &&
                               UnicastMacs(m.link_address.value_or(f.eth.src), f.eth.src);
  if (!valid) {
    engine.Bump(kNeighborIgnored);
    return;
  }
  if (m.link_address.has_value()) {
    LearnNeighbor(engine, solicitation ? f.src : m.target, *m.link_address, now,
                  solicitation && for_us);
  }
  if (!solicitation || !for_us) return;
  std::optional<link::FrameBuffer> out = NewTxFrame(engine);
  if (!out.has_value()) return;
  net::NdpMessage advert;
  advert.target = m.target;
  advert.link_address = engine.link->info().mac;
  // To the soliciting node, or to all nodes when it had no address yet (RFC 4861 7.2.4).
  const net::IpAddress dst = dad ? *net::IpAddress::Parse("ff02::1") : f.src;
  const net::MacAddress dst_mac = dad ? net::MacAddress::Ipv6Multicast(dst) : f.eth.src;
  const uint32_t flags = (dad ? 0 : net::NdpMessage::kFlagSolicited) | net::NdpMessage::kFlagOverride;
  QueueTx(engine, *out,
          net::BuildNdp(LinkTo(engine, dst_mac), m.target, dst,
                        net::kIcmpv6NeighborAdvertisement, advert, {out->data, out->capacity},
                        flags));
  engine.Bump(kNdpAdverts);
}

namespace {

// Whether a frame's sender may be answered (an echo reply, an ICMP error): not from a broadcast
// or multicast address, MAC or IP, nor from an unspecified or loopback one, which no host sends
// from (RFC 1122 3.2.1.3, 3.2.2). An answer to such a source would go to many hosts at once: a
// reflector.
bool AnswerableSource(const net::ParsedFrame& f) {
  static const net::IpAddress kLimitedBroadcast = net::IpAddress::V4(0xffffffff);
  return !f.eth.src.IsMulticast() && !f.src.IsMulticast() && !f.src.IsUnspecified() &&
         !f.src.IsLoopback() && f.src != kLimitedBroadcast;
}

}  // namespace

void Stack::SendEchoReply(Engine& engine, const net::ParsedFrame& f,
                          std::span<const uint8_t> bytes) {
  if (!AnswerableSource(f)) {
    engine.Bump(kUnhandled);
    return;
  }
  std::optional<link::FrameBuffer> out = NewTxFrame(engine);
  if (!out.has_value()) return;
  net::IcmpHeader reply = f.icmp;
  reply.type = f.l3 == net::L3::kIpv4 ? net::kIcmpv4EchoReply : net::kIcmpv6EchoReply;
  QueueTx(engine, *out,
          net::BuildIcmp(LinkTo(engine, f.eth.src), f.dst, f.src, reply,
                         f.payload(bytes), {out->data, out->capacity}));
  engine.Bump(kEchoReplies);
}

void Stack::SendPortUnreachable(Engine& engine, const net::ParsedFrame& f,
                                std::span<const uint8_t> bytes, absl::Time now) {
  // Never about a datagram sent to a broadcast or multicast address (RFC 1122 3.2.2).
  if (f.eth.dst.IsMulticast() || f.dst.IsMulticast() || !AnswerableSource(f)) return;
  {
    std::lock_guard<std::mutex> lock(net_mu_);
    if (!TakeIcmpErrorToken(now)) {
      engine.Bump(kIcmpRateLimited);
      return;
    }
  }
  std::optional<link::FrameBuffer> out = NewTxFrame(engine);
  if (!out.has_value()) return;
  net::IcmpHeader h;
  const bool v4 = f.l3 == net::L3::kIpv4;
  h.type = v4 ? net::kIcmpv4DestUnreachable : net::kIcmpv6DestUnreachable;
  h.code = v4 ? net::kIcmpv4CodePortUnreachable : net::kIcmpv6CodePortUnreachable;
  // Quote the offending IP packet, as much as fits in the minimum MTU.
  const size_t ip_length = f.l4_offset + f.l4_length - f.l3_offset;
  const size_t quote = std::min(ip_length, net::IcmpQuoteLimit(f.src.family()));
  QueueTx(engine, *out,
          net::BuildIcmp(LinkTo(engine, f.eth.src), f.dst, f.src, h,
                         bytes.subspan(f.l3_offset, quote), {out->data, out->capacity}));
  engine.Bump(kIcmpErrorsSent);
}

bool Stack::TakeIcmpErrorToken(absl::Time now) {
  // A token bucket, as the kernel's icmp_global_allow: errors_per_second, with a burst.
  icmp_tokens_ = std::min<double>(options_.icmp_error_burst,
                                  icmp_tokens_ + absl::ToDoubleSeconds(now - icmp_refill_) *
                                                     options_.icmp_errors_per_second);
  icmp_refill_ = now;
  if (icmp_tokens_ < 1) return false;
  icmp_tokens_ -= 1;
  return true;
}

net::LinkAddresses Stack::LinkTo(Engine& engine, const net::MacAddress& dst) const {
  std::optional<net::VlanTag> tag;
  if (options_.vlan != 0) tag = net::VlanTag{.tpid = net::kEtherTypeVlan, .tci = options_.vlan};
  return {engine.link->info().mac, dst, tag};
}

void Stack::SendQueued(Engine& engine, absl::Time now) {
  for (size_t i = 0; i < kSendsPerTurn; ++i) {
    std::optional<SendRequest*> r = engine.sends.TryPop();
    if (!r.has_value()) return;
    std::unique_ptr<SendRequest> request(*r);
    SendDatagram(engine, *request, now);
  }
}

void Stack::SendDatagram(Engine& engine, const SendRequest& request, absl::Time now) {
  // On the wire a v4-mapped IPv6 socket speaks IPv4.
  net::Endpoint dst{request.dst.address.Unmapped(), request.dst.port};
  net::Endpoint src{request.src.address.Unmapped(), request.src.port};
  std::optional<net::MacAddress> mac;
  bool probe = false;
  net::IpAddress next_hop;
  {
    std::lock_guard<std::mutex> lock(net_mu_);
    absl::StatusOr<Route> route = routes_.Lookup(dst.address);
    if (!route.ok()) {
      engine.Bump(kTxNoRoute);
      request.socket->CountSendDrop();
      return;
    }
    if (src.address.IsUnspecified()) src.address = route->source;
    next_hop = route->next_hop;
    mac = neighbors_.Lookup(next_hop, now);
    // No MAC yet: the datagram waits for the neighbour (and is counted there if it cannot).
    if (!mac.has_value()) {
      probe = neighbors_.Queue({src, dst, next_hop, request.payload, request.socket}, now);
    }
  }
  if (!mac.has_value()) {
    if (probe) SendProbe(engine, next_hop);
    return;
  }
  TransmitUdp(engine, src, dst, *mac, AsBytes(request.payload), request.socket);
}

void Stack::TransmitPending(Engine& engine, const std::vector<PendingDatagram>& ready,
                            const net::MacAddress& mac) {
  // They all waited for the neighbour that just answered with `mac`.
  for (const PendingDatagram& d : ready) {
    TransmitUdp(engine, d.src, d.dst, mac, AsBytes(d.payload), d.socket);
  }
}

void Stack::TransmitUdp(Engine& engine, const net::Endpoint& src, const net::Endpoint& dst,
                        const net::MacAddress& dst_mac, std::span<const uint8_t> payload,
                        std::shared_ptr<UdpSocket> socket) {
  std::optional<link::FrameBuffer> out = NewTxFrame(engine);
  if (!out.has_value()) {
    if (socket != nullptr) socket->CountSendDrop();
    return;
  }
  std::optional<size_t> n =
      net::BuildUdp(LinkTo(engine, dst_mac), {src, dst}, payload, {out->data, out->capacity});
  QueueTx(engine, *out, n, {std::move(socket), payload.size()});
}

void Stack::SendProbe(Engine& engine, const net::IpAddress& target) {
  net::IpAddress source;
  {
    std::lock_guard<std::mutex> lock(net_mu_);
    absl::StatusOr<net::IpAddress> s = routes_.SourceFor(target);
    if (!s.ok()) return;
    source = *s;
  }
  std::optional<link::FrameBuffer> out = NewTxFrame(engine);
  if (!out.has_value()) return;
  const net::MacAddress& mac = engine.link->info().mac;
  if (target.is_v4()) {
    net::ArpPacket request;
    request.op = net::ArpPacket::kRequest;
    request.sender_mac = mac;
    request.sender_ip = source;
    request.target_ip = target;
    QueueTx(engine, *out,
            net::BuildArp(LinkTo(engine, net::MacAddress::Broadcast()), request,
                          {out->data, out->capacity}));
    return;
  }
  const net::IpAddress group = net::SolicitedNodeMulticast(target);
  net::NdpMessage solicitation;
  solicitation.target = target;
  solicitation.link_address = mac;
  QueueTx(engine, *out,
          net::BuildNdp(LinkTo(engine, net::MacAddress::Ipv6Multicast(group)), source, group,
                        net::kIcmpv6NeighborSolicitation, solicitation,
                        {out->data, out->capacity}));
}


}  // namespace quadsock::stack
