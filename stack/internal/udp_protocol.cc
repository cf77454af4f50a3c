#include "stack/internal/udp_protocol.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "stack/demux/rcu.h"
#include "stack/internal/neighbor_resolution.h"
#include "stack/internal/poll_engine.h"
#include "stack/net/frame_builder.h"
#include "stack/net/ip.h"
#include "stack/net/udp.h"

namespace quadsock::stack {
namespace {

constexpr size_t kSendsPerTurn = 256;

std::span<const uint8_t> AsBytes(const std::string& s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

}  // namespace

UdpProtocol::~UdpProtocol() { delete channel_snapshot_.load(); }

// ---- Checks ---------------------------------------------------------------------------------

size_t UdpProtocol::Headroom(net::Family f) {
  return (f == net::Family::kV4 ? net::Ipv4Header::kMinSize : net::Ipv6Header::kSize) +
         net::UdpHeader::kSize;
}

absl::Status UdpProtocol::CheckPeer(const net::Endpoint& peer,
                                    const demux::SocketInfo& socket) const {
  const net::IpAddress wire = peer.address.Unmapped();
  std::string why;
  if (peer.port == 0) {
    why = "port 0";
  } else if (const char* not_a_host = wire.NotAHostReason()) {
    why = not_a_host;
  } else if (const net::IpAddress local = socket.local.address.Unmapped();
             !local.IsUnspecifiedInAnyForm() && local.family() != wire.family()) {
    why = absl::StrCat("another IP version than the socket's address ", local.ToString());
  } else if (const net::IpPrefix* network = local_.BroadcastOf(wire)) {
    why = absl::StrCat("the broadcast address of ", network->ToString());
  } else if (const net::IpPrefix* network = local_.NetworkAddressOf(wire)) {
    why = absl::StrCat("the network address of ", network->ToString());
  } else if (wire.IsLoopback()) {
    why = "a loopback address (this stack has no loopback)";
  } else if (local_.Contains(wire)) {
    why = "one of this stack's own addresses";
  }
  if (why.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(peer.ToString(), " is ", why));
}

absl::StatusOr<net::Endpoint> UdpProtocol::Destination(const demux::SocketInfo& info,
                                                       std::optional<net::Endpoint> destination,
                                                       size_t payload_bytes) const {
  net::Endpoint dst;
  if (destination.has_value()) {
    dst = *destination;
    // A connected socket sends to its peer only (its datagrams' answers could not reach it from
    // elsewhere: hash4 takes only the peer's). Both forms of an IPv4 peer are the same peer.
    if (info.state == demux::SocketState::kConnected &&
        (dst.address.Unmapped() != info.remote.address.Unmapped() ||
         dst.port != info.remote.port)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "destination ", dst.ToString(), " is not the connected peer ", info.remote.ToString(),
          ": a connected socket sends to its peer only (leave the destination out, or Disconnect "
          "first)"));
    }
  } else if (info.state == demux::SocketState::kConnected) {
    dst = info.remote;
  } else {
    return absl::FailedPreconditionError("the socket is not connected: give a destination");
  }
  if (absl::Status s = CheckPeer(dst, info); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("the socket cannot send to ", s.message()));
  }
  const bool v6_socket = info.options.family == net::Family::kV6;
  // A dual-stack IPv6 socket may be given an IPv4 destination, as Linux's udpv6_sendmsg allows.
  if (v6_socket && !info.options.v6only && dst.address.is_v4()) dst.address = dst.address.ToV6();
  if ((!v6_socket && !dst.address.is_v4()) || (v6_socket && dst.address.is_v4()) ||
      (v6_socket && info.options.v6only && dst.address.IsV4Mapped())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "destination ", dst.ToString(), " is of the other IP version than the socket"));
  }
  // As connect() does, a send finds its route first: a datagram with none would only be
  // dropped on the poll thread.
  if (absl::StatusOr<stack::Route> route = routes_.Lookup(dst.address.Unmapped()); !route.ok()) {
    return route.status();
  }
  const net::IpAddress wire = dst.address.Unmapped();
  const size_t largest = wire.is_v4() ? kMaxPayloadV4 : kMaxPayloadV6;
  if (payload_bytes > largest) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "a %u-byte datagram is over the largest UDP datagram over IPv%d: %u bytes",
        payload_bytes, wire.is_v4() ? 4 : 6, largest));
  }
  // Over the path MTU, a datagram leaves in fragments, unless its socket says not to.
  if (info.options.pmtu_discovery == demux::PmtuDiscovery::kDo) {
    const size_t mtu = PathMtu(wire);
    if (payload_bytes + Headroom(wire.family()) > mtu) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "EMSGSIZE: a %u-byte datagram does not fit the path MTU of %u to %s, and the socket "
          "does not fragment (pmtu_discovery DO): at most %u bytes",
          payload_bytes, mtu, wire.ToString(), mtu - Headroom(wire.family())));
    }
  }
  return dst;
}

net::Endpoint UdpProtocol::Source(const demux::SocketInfo& socket) {
  net::Endpoint src = socket.local;
  if (src.address.IsV4Mapped() && src.address.Unmapped().IsUnspecified()) {
    src.address = net::IpAddress::AnyV6();
  }
  return src;
}

// ---- Sends queued by Stack::Send --------------------------------------------------------------

void UdpProtocol::SendQueued(PollEngine& engine, absl::Time now) {
  for (size_t i = 0; i < kSendsPerTurn; ++i) {
    std::optional<SendRequest*> r = engine.PopSend();
    if (!r.has_value()) return;
    std::unique_ptr<SendRequest> request(*r);
    SendDatagram(engine, *request, now);
  }
}

void UdpProtocol::SendDatagram(PollEngine& engine, SendRequest& request, absl::Time now) {
  Route(engine, std::move(request.socket), request.src, request.dst, AsBytes(request.payload),
        now, [&] { return std::move(request.payload); });
}

void UdpProtocol::Route(PollEngine& engine, std::shared_ptr<UdpSocket> socket,
                        net::Endpoint src, net::Endpoint dst, std::span<const uint8_t> payload,
                        absl::Time now, absl::FunctionRef<std::string()> owned) {
  // On the wire a v4-mapped IPv6 socket speaks IPv4.
  dst.address = dst.address.Unmapped();
  src.address = src.address.Unmapped();
  absl::StatusOr<stack::Route> route = routes_.Lookup(dst.address);
  if (!route.ok()) {
    engine.Bump(EngineCounter::tx_no_route);
    socket->CountSendDrop();
    return;
  }
  if (src.address.IsUnspecified()) src.address = route->source;
  // No MAC yet: the datagram waits for the neighbour (and is counted there if it cannot).
  const std::optional<net::MacAddress> mac =
      neighbors_.Resolve(engine, route->next_hop, now, [&] {
        return PendingDatagram{src, dst, route->next_hop, owned(), socket};
      });
  if (!mac.has_value()) return;
  TransmitUdp(engine, src, dst, *mac, payload, std::move(socket));
}

namespace {

// A datagram over the path MTU, in fragments (RFC 791 3.2; RFC 8200 4.5: only the source
// fragments an IPv6 datagram, with an identification of its own): the whole UDP datagram is
// built once, then cut at `mtu` into pieces of a multiple of 8 bytes. The socket counts the
// datagram sent or dropped with its last fragment; a fragment with no buffer drops the rest.
void TransmitFragments(PollEngine& engine, const net::Endpoint& src, const net::Endpoint& dst,
                       const net::MacAddress& dst_mac, std::span<const uint8_t> payload,
                       std::shared_ptr<UdpSocket> socket, size_t mtu) {
  const bool v4 = dst.address.is_v4();
  std::vector<uint8_t>& whole = engine.fragment_scratch();
  whole.resize(net::UdpHeader::kSize + payload.size());
  if (!net::BuildUdpSegment({src, dst}, payload, whole).has_value()) {
    if (socket != nullptr) socket->CountSendDrop();
    return;
  }
  // Each fragment's share: what the MTU leaves after the IP header (and IPv6's Fragment
  // header), rounded down to 8 bytes.
  const size_t headers = v4 ? net::Ipv4Header::kMinSize : net::Ipv6Header::kSize + 8;
  const size_t piece = (mtu - headers) & ~size_t{7};
  const uint32_t id = v4 ? engine.NextIpv4Id() : engine.RandomIpv6Id();
  const net::LinkAddresses link = engine.LinkTo(dst_mac);
  const std::span<const uint8_t> bytes(whole);
  for (size_t offset = 0; offset < bytes.size(); offset += piece) {
    const bool last = offset + piece >= bytes.size();
    std::optional<link::FrameBuffer> out = engine.NewTxFrame(mtu);
    if (!out.has_value()) {
      if (socket != nullptr) socket->CountSendDrop();
      return;
    }
    const std::span<const uint8_t> share = bytes.subspan(offset, std::min(piece, bytes.size() - offset));
    const net::FragmentFields f{src.address, dst.address, net::kIpProtoUdp, id,
                                static_cast<uint32_t>(offset), !last};
    std::optional<size_t> n = net::BuildIpFragment(link, f, share, {out->data, out->capacity});
    engine.Bump(EngineCounter::tx_fragments);
    if (!last) {
      engine.QueueTx(*out, n);
      if (!n.has_value()) {
        if (socket != nullptr) socket->CountSendDrop();
        return;
      }
      continue;
    }
    const demux::SocketInfo* info = socket != nullptr ? socket->info() : nullptr;
    engine.Bump(info != nullptr && info->state == demux::SocketState::kConnected
                    ? EngineCounter::udp_sent_connected
                    : EngineCounter::udp_sent_unconnected);
    engine.Bump(EngineCounter::tx_fragmented);
    engine.QueueTx(*out, n, {std::move(socket), payload.size()});
  }
}

}  // namespace

void TransmitUdp(PollEngine& engine, const net::Endpoint& src, const net::Endpoint& dst,
                 const net::MacAddress& dst_mac, std::span<const uint8_t> payload,
                 std::shared_ptr<UdpSocket> socket) {
  // The socket's state as the control plane last published it (a poll thread's view).
  const demux::SocketInfo* info = socket != nullptr ? socket->info() : nullptr;
  const demux::PmtuDiscovery pmtu =
      info != nullptr ? info->options.pmtu_discovery : demux::PmtuDiscovery::kWant;
  const size_t mtu = engine.udp().PathMtu(dst.address);
  if (payload.size() + UdpProtocol::Headroom(dst.address.family()) > mtu) {
    if (pmtu == demux::PmtuDiscovery::kDo) {
      engine.Bump(EngineCounter::tx_over_path_mtu);
      if (socket != nullptr) socket->CountSendDrop();
      return;
    }
    TransmitFragments(engine, src, dst, dst_mac, payload, std::move(socket), mtu);
    return;
  }
  std::optional<link::FrameBuffer> out =
      engine.NewTxFrame(UdpProtocol::Headroom(dst.address.family()) + payload.size());
  if (!out.has_value()) {
    if (socket != nullptr) socket->CountSendDrop();
    return;
  }
  net::IpOptions ip;
  ip.dont_fragment = pmtu != demux::PmtuDiscovery::kDont;
  std::optional<size_t> n = net::BuildUdp(engine.LinkTo(dst_mac), {src, dst}, payload,
                                          {out->data, out->capacity}, ip);
  if (n.has_value()) {
    engine.Bump(info != nullptr && info->state == demux::SocketState::kConnected
                    ? EngineCounter::udp_sent_connected
                    : EngineCounter::udp_sent_unconnected);
  }
  engine.QueueTx(*out, n, {std::move(socket), payload.size()});
}

// ---- Data channels' sends ---------------------------------------------------------------------

bool UdpProtocol::AddChannel(std::shared_ptr<channel::Channel> c) {
  std::lock_guard<std::mutex> lock(channels_mu_);
  for (const auto& e : channels_) {
    if (e->channel == c) return false;
  }
  channels_.push_back(std::make_unique<ChannelEntry>());
  channels_.back()->channel = std::move(c);
  auto* snapshot = new std::vector<ChannelEntry*>();
  for (const auto& e : channels_) snapshot->push_back(e.get());
  const auto* old = channel_snapshot_.exchange(snapshot, std::memory_order_acq_rel);
  if (old != nullptr) demux::RcuDefer([old] { delete old; });
  return true;
}

void UdpProtocol::RemoveChannel(const channel::Channel* c) {
  std::unique_ptr<ChannelEntry> gone;
  const std::vector<ChannelEntry*>* old;
  {
    std::lock_guard<std::mutex> lock(channels_mu_);
    auto it = std::find_if(channels_.begin(), channels_.end(),
                           [c](const auto& e) { return e->channel.get() == c; });
    if (it == channels_.end()) return;
    gone = std::move(*it);
    channels_.erase(it);
    auto* snapshot = new std::vector<ChannelEntry*>();
    for (const auto& e : channels_) snapshot->push_back(e.get());
    old = channel_snapshot_.exchange(snapshot, std::memory_order_acq_rel);
  }
  // A poll thread may be draining the channel from the old snapshot.
  demux::RcuSynchronize();
  delete old;
}

bool UdpProtocol::SetChannelSocket(const channel::Channel* c, uint32_t index,
                                   std::shared_ptr<UdpSocket> socket) {
  std::lock_guard<std::mutex> lock(channels_mu_);
  for (const auto& e : channels_) {
    if (e->channel.get() == c) return e->sockets.Set(index, std::move(socket));
  }
  return false;
}

void UdpProtocol::SendFromChannels(PollEngine& engine, absl::Time now) {
  const std::vector<ChannelEntry*>* channels =
      channel_snapshot_.load(std::memory_order_acquire);
  if (channels == nullptr || channels->empty()) return;
  // Round robin, a share at a time: a channel that keeps its TX ring full (or full of
  // descriptors to refuse: each is charged) takes its share of a turn and no more, and the turn
  // starts at the next channel each time, whatever the order they were attached in.
  const size_t n = channels->size();
  const size_t share = std::max<size_t>(kSendsPerTurn / n, 8);
  size_t budget = kSendsPerTurn;
  bool more = true;
  while (budget > 0 && more) {
    more = false;
    for (size_t k = 0; k < n && budget > 0; ++k) {
      ChannelEntry& e = *(*channels)[(next_channel_ + k) % n];
      const size_t allowed = std::min(share, budget);
      const size_t read = DrainChannel(engine, e, allowed, now);
      budget -= read;
      more |= read == allowed;  // it may have more
    }
  }
  next_channel_ = (next_channel_ + 1) % n;
}

size_t UdpProtocol::DrainChannel(PollEngine& engine, ChannelEntry& entry, size_t budget,
                                 absl::Time now) {
  channel::SendTurn turn{.budget = budget};
  bool took = false;
  while (std::optional<channel::OutgoingDatagram> d = entry.channel->NextSend(turn)) {
    took = true;
    SendFromChannel(engine, entry, *d, now);
  }
  if (turn.refused > 0) engine.Bump(EngineCounter::tx_channel_bad_length, turn.refused);
  // Every payload taken is in a frame (or copied to wait for its neighbour): the slots can go
  // back to the application.
  if (took || turn.refused > 0) entry.channel->FinishSends();
  return budget - turn.budget;
}

void UdpProtocol::SendFromChannel(PollEngine& engine, ChannelEntry& entry,
                                  const channel::OutgoingDatagram& d, absl::Time now) {
  const std::shared_ptr<UdpSocket>* found = entry.sockets.Find(d.socket);
  if (found == nullptr) {
    engine.Bump(EngineCounter::tx_channel_no_socket);
    return;
  }
  UdpSocket* socket = found->get();
  // What the control plane last published; a socket that is not bound cannot send from a
  // channel (Stack::Send binds it first).
  const demux::SocketInfo* info = socket->info();
  if (info == nullptr || info->state == demux::SocketState::kOpen) {
    engine.Bump(EngineCounter::tx_channel_not_bound);
    socket->CountSendDrop();
    return;
  }
  absl::StatusOr<net::Endpoint> dst = Destination(*info, d.peer, d.payload.size());
  if (!dst.ok()) {
    engine.Bump(EngineCounter::tx_channel_refused);
    socket->CountSendDrop();
    return;
  }
  net::Endpoint src = Source(*info);
  if (d.source.has_value()) {
    // As IP_PKTINFO's source: one of ours, of the destination's family, and one the socket
    // holds its port on: any when it is bound to the wildcard, else its own address alone
    // (another session's socket may hold the port on another).
    const net::IpAddress own = info->local.address.Unmapped();
    if (!local_.Contains(*d.source) || d.source->is_v4() != dst->address.Unmapped().is_v4() ||
        (!own.IsUnspecified() && own != *d.source)) {
      engine.Bump(EngineCounter::tx_channel_refused);
      socket->CountSendDrop();
      return;
    }
    src.address = *d.source;  // Route unmaps the destination too
  }
  Route(engine, *found, src, *dst, d.payload, now,
        [&] { return std::string(d.payload.begin(), d.payload.end()); });
}

bool UdpProtocol::ArmChannelSends() {
  const std::vector<ChannelEntry*>* channels =
      channel_snapshot_.load(std::memory_order_acquire);
  bool more = false;
  if (channels != nullptr) {
    for (ChannelEntry* e : *channels) more |= e->channel->ArmSends();
  }
  return more;
}

void UdpProtocol::DisarmChannelSends() {
  const std::vector<ChannelEntry*>* channels =
      channel_snapshot_.load(std::memory_order_acquire);
  if (channels == nullptr) return;
  for (ChannelEntry* e : *channels) e->channel->DisarmSends();
}

}  // namespace quadsock::stack
