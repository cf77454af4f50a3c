// The stack's API: lifecycle, the control plane (sockets), administration. The data path is the
// poll engines' (internal/poll_engine.cc) and the protocols' behind them.
#include "stack/stack.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "stack/demux/rcu.h"
#include "stack/internal/icmp_protocol.h"
#include "stack/internal/neighbor_resolution.h"
#include "stack/internal/poll_engine.h"
#include "stack/internal/udp_protocol.h"
#include "stack/internal/udp_socket.h"
#include "stack/link/errno_status.h"
#include "stack/net/ethernet.h"
#include "stack/net/ip.h"
#include "stack/net/udp.h"

namespace quadsock::stack {

Stack::Stack(StackOptions options, RouteTable routes)
    : options_(std::move(options)),
      routes_(std::move(routes)),
      local_{options_.addresses},
      receive_budget_(std::make_shared<ReceiveBudget>(options_.max_receive_bytes)) {}

absl::Status Stack::CheckOptions(const StackOptions& options) {
  if (options.addresses.empty()) {
    return absl::InvalidArgumentError("a stack needs at least one address (such as 10.1.0.2/24)");
  }
  if (options.vlan > net::kMaxVlanId) {
    return absl::InvalidArgumentError(absl::StrCat("VLAN id ", options.vlan, " is out of range: 1-",
                                                   net::kMaxVlanId, ", or 0 for none"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Stack>> Stack::Create(
    StackOptions options, std::vector<std::unique_ptr<link::Link>> links) {
  if (links.empty()) return absl::InvalidArgumentError("a stack needs at least one link");
  if (absl::Status s = CheckOptions(options); !s.ok()) return s;
  RouteTable routes;
  for (const net::IpPrefix& p : options.addresses) {
    if (absl::Status s = routes.AddAddress(p); !s.ok()) return s;
  }
  for (const net::IpAddress& g : options.gateways) {
    if (absl::Status s = routes.SetGateway(g); !s.ok()) return s;
  }
  std::unique_ptr<Stack> stack(new Stack(std::move(options), std::move(routes)));
  const StackOptions& o = stack->options_;

  demux::SocketTable::Options table;
  table.hash4 = o.hash4;
  table.ephemeral_low = o.ephemeral_low;
  table.ephemeral_high = o.ephemeral_high;
  const RouteTable* fixed_routes = &stack->routes_;
  table.route = [fixed_routes](const net::IpAddress& peer) -> absl::StatusOr<net::IpAddress> {
    return fixed_routes->SourceFor(peer);
  };
  absl::StatusOr<std::unique_ptr<demux::SocketTable>> t = demux::SocketTable::Create(table);
  if (!t.ok()) return t.status();
  stack->table_ = std::move(*t);

  stack->neighbors_ =
      std::make_unique<NeighborResolution>(o.neighbors, stack->routes_, stack->local_);
  stack->udp_ = std::make_unique<UdpProtocol>(stack->routes_, *stack->neighbors_,
                                              stack->local_, links[0]->info().mtu);
  stack->icmp_ = std::make_unique<IcmpProtocol>(
      stack->local_, *stack->table_, stack->udp_->path_mtu(),
      IcmpRateLimiter::Rate{o.icmp_errors_per_second, o.icmp_error_burst}, o.clock());
  const Protocols protocols{&stack->local_,          o.vlan,
                            o.clock,                 o.wall_clock,
                            stack->table_.get(),
                            stack->udp_.get(),       stack->neighbors_.get(),
                            stack->icmp_.get(),
                            {.budget_bytes = o.reassembly_bytes / links.size()}};
  for (auto& l : links) {
    const auto index = static_cast<uint32_t>(stack->engines_.size());
    stack->engines_.push_back(
        std::make_unique<PollEngine>(index, std::move(l), protocols, o.send_queue_depth,
                                     o.poll_spin));
  }
  return stack;
}

Stack::~Stack() {
  Stop();
  for (auto& e : engines_) e->DropManualLookup();
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [id, s] : sockets_) (void)table_->Close(id);
  }
  table_->WaitForReaders();
}

absl::Status Stack::Start() {
  if (running_.exchange(true)) return absl::FailedPreconditionError("the stack is already running");
  for (auto& e : engines_) e->Start(running_);
  return absl::OkStatus();
}

void Stack::Stop() {
  if (!running_.exchange(false)) return;
  for (auto& e : engines_) e->Join();
}

size_t Stack::PollOnce() {
  thread_local std::unique_ptr<demux::RcuReaderThread> reader;
  if (reader == nullptr) {
    reader = std::make_unique<demux::RcuReaderThread>();
  } else {
    reader->Online();
  }
  size_t n = 0;
  for (auto& e : engines_) n += e->Turn(e->manual_lookup());
  for (auto& e : engines_) e->WakeChannels();  // before going offline: they hold channels
  reader->Offline();
  return n;
}

// ---- Control plane -------------------------------------------------------------------------

absl::StatusOr<std::shared_ptr<UdpSocket>> Stack::FindSocket(SocketId id) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = sockets_.find(id);
  if (it == sockets_.end()) return absl::NotFoundError("no such socket");
  return it->second;
}

absl::StatusOr<SocketId> Stack::Open(net::Family family, const OpenOptions& options) {
  size_t depth = options.receive_queue_depth == 0 ? options_.receive_queue_depth
                                                  : options.receive_queue_depth;
  if (depth > options_.max_receive_queue_depth) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "receive queue depth %u is over the limit of %u", depth, options_.max_receive_queue_depth));
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (sockets_.size() >= options_.max_sockets) {
    return absl::ResourceExhaustedError(
        absl::StrFormat("the stack has its maximum of %u sockets", options_.max_sockets));
  }
  // The queue's cells are charged to the receive budget for the socket's life: 65,536 sockets
  // of 65,536-deep queues would otherwise hold 64 GiB of cells past it.
  const size_t cells = UdpSocket::QueueBytes(depth);
  const std::shared_ptr<ReceiveBudget>& budget =
      options.receive_share != nullptr ? options.receive_share : receive_budget_;
  if (budget != receive_budget_ && budget->parent() != receive_budget_.get()) {
    return absl::InvalidArgumentError("a receive share of another stack's budget");
  }
  if (!budget->TryReserve(cells)) {
    // Whichever is short: the owner's share, or the whole.
    const bool share_short = budget != receive_budget_ && budget->room() < cells;
    const ReceiveBudget& short_one = share_short ? *budget : *receive_budget_;
    return absl::ResourceExhaustedError(absl::StrFormat(
        "a receive queue of %u datagrams needs %u KiB, and %s: %u MiB) has %u KiB left: ask "
        "for a shallower queue, or close sockets",
        depth, (cells + 1023) >> 10,
        share_short ? "this client's share of the receive queues' budget "
                      "(--max_receive_mib_per_peer"
                    : "the receive queues' budget (--max_receive_mib",
        short_one.limit() >> 20, short_one.room() >> 10));
  }
  // With one link there is one poll thread: each socket's receive counters have one writer.
  auto socket = std::make_shared<UdpSocket>(family, depth, /*one_poller=*/engines_.size() == 1,
                                            budget, cells);
  demux::SocketOptions o;
  o.family = family;
  o.v6only = options.v6only;
  o.reuse_port = options.reuse_port;
  o.owner = options.owner;
  o.group = options.group;
  o.bound_device = options.bound_device;
  o.pmtu_discovery = options.pmtu_discovery;
  o.cookie = reinterpret_cast<uintptr_t>(socket.get());
  absl::StatusOr<SocketId> id = table_->Open(o);
  if (!id.ok()) return id.status();
  if (absl::StatusOr<demux::SocketInfo> info = table_->Get(*id); info.ok()) {
    socket->PublishInfo(*info);
  }
  sockets_.emplace(*id, std::move(socket));
  return *id;
}

absl::Status Stack::CheckLocal(const net::IpAddress& address) const {
  if (address.IsUnspecifiedInAnyForm()) {
    return absl::OkStatus();
  }
  if (!local_.Contains(address.Unmapped())) {
    return absl::InvalidArgumentError(absl::StrCat(
        address.ToString(), " is not an address of this stack (cannot assign requested address)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<net::Endpoint> Stack::Bind(SocketId id, const net::Endpoint& local) {
  if (absl::Status s = CheckLocal(local.address); !s.ok()) return s;
  absl::StatusOr<net::Endpoint> bound = table_->Bind(id, local);  // NOT_FOUND: no socket
  if (bound.ok()) PublishInfo(id);
  return bound;
}


absl::StatusOr<net::Endpoint> Stack::Connect(SocketId id, const net::Endpoint& peer) {
  absl::StatusOr<demux::SocketInfo> info = table_->Get(id);
  if (!info.ok()) return info.status();
  if (absl::Status s = udp_->CheckPeer(peer, *info); !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the socket cannot connect to ", s.message()));
  }
  // As Linux's connect() (ENETUNREACH), whatever the socket is bound to.
  if (absl::StatusOr<Route> route = routes_.Lookup(peer.address.Unmapped()); !route.ok()) {
    return route.status();
  }
  absl::StatusOr<net::Endpoint> local = table_->Connect(id, peer);
  if (local.ok()) {
    ForgetError(id);
    PublishInfo(id);
  }
  return local;
}

absl::Status Stack::Disconnect(SocketId id) {
  absl::Status s = table_->Disconnect(id);
  if (s.ok()) {
    ForgetError(id);
    PublishInfo(id);
  }
  return s;
}

void Stack::PublishInfo(SocketId id) {
  absl::StatusOr<demux::SocketInfo> info = table_->Get(id);
  absl::StatusOr<std::shared_ptr<UdpSocket>> socket = FindSocket(id);
  if (info.ok() && socket.ok()) (*socket)->PublishInfo(*info);  // else closed meanwhile
}

void Stack::ForgetError(SocketId id) {
  absl::StatusOr<std::shared_ptr<UdpSocket>> socket = FindSocket(id);
  if (socket.ok()) (*socket)->ForgetError();  // else closed meanwhile
}

absl::StatusOr<net::Endpoint> Stack::Rehash(SocketId id, std::optional<net::IpAddress> address,
                                            std::optional<uint16_t> port) {
  if (address.has_value()) {
    if (absl::Status s = CheckLocal(*address); !s.ok()) return s;
  }
  absl::StatusOr<net::Endpoint> moved = table_->Rehash(id, address, port);
  if (moved.ok()) PublishInfo(id);
  return moved;
}

absl::Status Stack::Close(SocketId id) {
  const SocketId ids[] = {id};
  return Close(std::span<const SocketId>(ids)).front();
}

std::vector<absl::Status> Stack::Close(std::span<const SocketId> ids) {
  std::vector<absl::Status> results;
  std::vector<std::shared_ptr<UdpSocket>> closed;
  results.reserve(ids.size());
  closed.reserve(ids.size());
  for (SocketId id : ids) {
    std::shared_ptr<UdpSocket> socket;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = sockets_.find(id);
      if (it == sockets_.end()) {
        results.push_back(absl::NotFoundError("no such socket"));
        continue;
      }
      if (absl::Status s = table_->Close(id); !s.ok()) {
        results.push_back(s);
        continue;
      }
      socket = std::move(it->second);
      sockets_.erase(it);
    }
    socket->Shutdown();  // wakes a Receive waiting on it
    if (const UdpSocket::ChannelTarget t = socket->channel_target(); t.channel != nullptr) {
      (void)udp_->SetChannelSocket(t.channel, t.index, nullptr);
    }
    closed.push_back(std::move(socket));
    results.push_back(absl::OkStatus());
  }
  // A poll thread may still hold a socket from a lookup that started before the close: one
  // grace period for them all (a session's 65,536 sockets close in one, not 65,536).
  if (!closed.empty()) table_->WaitForReaders();
  return results;
}

absl::StatusOr<SocketStatus> Stack::Get(SocketId id) const {
  absl::StatusOr<demux::SocketInfo> info = table_->Get(id);
  if (!info.ok()) return info.status();
  absl::StatusOr<std::shared_ptr<UdpSocket>> s = FindSocket(id);
  if (!s.ok()) return s.status();
  std::optional<IcmpError> pending;
  if (info->state == demux::SocketState::kConnected) pending = (*s)->PendingError(info->remote);
  const size_t path_mtu =
      info->state == demux::SocketState::kConnected ? udp_->PathMtu(info->remote.address) : 0;
  return SocketStatus{*info, (*s)->counters(), pending, (*s)->on_channel(), path_mtu};
}

std::vector<SocketId> Stack::List() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<SocketId> ids;
  ids.reserve(sockets_.size());
  for (const auto& [id, s] : sockets_) ids.push_back(id);
  std::sort(ids.begin(), ids.end());
  return ids;
}

absl::Status Stack::Send(SocketId id, std::span<const uint8_t> payload,
                         std::optional<net::Endpoint> destination) {
  absl::StatusOr<demux::SocketInfo> info = table_->Get(id);
  if (!info.ok()) return info.status();
  absl::StatusOr<net::Endpoint> dst = udp_->Destination(*info, destination, payload.size());
  if (!dst.ok()) return dst.status();
  if (info->state == demux::SocketState::kOpen) {
    // As sendto() on an unbound socket: bind to an ephemeral port first.
    const bool v6_socket = info->options.family == net::Family::kV6;
    const net::Endpoint any{v6_socket ? net::IpAddress::AnyV6() : net::IpAddress::AnyV4(), 0};
    absl::StatusOr<net::Endpoint> bound = table_->Bind(id, any);
    if (!bound.ok() && bound.status().code() != absl::StatusCode::kFailedPrecondition) {
      return bound.status();
    }
    PublishInfo(id);
    info = table_->Get(id);
    if (!info.ok()) return info.status();
  }
  absl::StatusOr<std::shared_ptr<UdpSocket>> found = FindSocket(id);
  if (!found.ok()) return found.status();
  std::shared_ptr<UdpSocket> socket = std::move(*found);
  // Only a connected socket hears of ICMP errors, as in Linux without IP_RECVERR. ABORTED, a
  // code of its own: UNAVAILABLE would say that quadsockd is down, and invite a retry.
  if (info->state == demux::SocketState::kConnected) {
    if (std::optional<IcmpError> e = socket->TakeError(info->remote)) {
      return absl::AbortedError(absl::StrCat("an ICMP error came back for an "
                                             "earlier datagram to ", dst->ToString(), ": ",
                                             e->ToString(), "; this one was not sent"));
    }
  }
  PollEngine& engine = *engines_[id % engines_.size()];
  if (!engine.QueueSend(std::make_unique<SendRequest>(
          SendRequest{std::move(socket), UdpProtocol::Source(*info), *dst,
                      std::string(payload.begin(), payload.end())}))) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "the send queue is full (%u datagrams): try again", engine.send_queue_capacity()));
  }
  return absl::OkStatus();
}

void Stack::CountReceivedButLost(SocketId id, uint64_t n) {
  if (n == 0) return;
  stream_dropped_.fetch_add(n, std::memory_order_relaxed);
  // A socket closed meanwhile has only the stack's count left.
  if (absl::StatusOr<std::shared_ptr<UdpSocket>> s = FindSocket(id); s.ok()) {
    (*s)->CountConsumerDrop(n);
  }
}

absl::StatusOr<std::optional<ReceivedDatagram>> Stack::Receive(SocketId id) {
  absl::StatusOr<std::shared_ptr<UdpSocket>> found = FindSocket(id);
  if (!found.ok()) return found.status();
  std::shared_ptr<UdpSocket> socket = std::move(*found);
  return socket->Pop();
}

absl::StatusOr<bool> Stack::WaitForData(SocketId id, absl::Duration timeout) {
  absl::StatusOr<std::shared_ptr<UdpSocket>> found = FindSocket(id);
  if (!found.ok()) return found.status();
  std::shared_ptr<UdpSocket> socket = std::move(*found);
  const std::optional<bool> ready =
      socket->WaitForData(static_cast<int>(absl::ToInt64Milliseconds(timeout)));
  if (ready.has_value()) return *ready;
  wait_refused_.fetch_add(1, std::memory_order_relaxed);
  const absl::Status failed =
      link::ErrnoStatus(errno, "making an eventfd to wait for the socket's datagrams");
  return absl::Status(failed.code(),
                      absl::StrCat(failed.message(), " (the process is out of descriptors: raise "
                                                     "its LimitNOFILE, or lower the limits on "
                                                     "connections and sockets)"));
}

absl::Status Stack::SetReceiveCallback(SocketId id, ReceiveCallback callback) {
  absl::StatusOr<std::shared_ptr<UdpSocket>> s = FindSocket(id);
  if (!s.ok()) return s.status();
  std::lock_guard<std::mutex> lock(mu_);  // callbacks change under the control-plane lock
  (*s)->SetCallback(std::move(callback));
  return absl::OkStatus();
}

absl::Status Stack::PutOnChannel(SocketId id, std::shared_ptr<channel::Channel> channel,
                                 uint32_t index) {
  if (channel == nullptr) {
    return absl::InvalidArgumentError("no channel (TakeOffChannels takes sockets off theirs)");
  }
  if (channel->rings() < engines_.size()) {
    return absl::InvalidArgumentError(absl::StrCat("the channel has ", channel->rings(),
                                                   " rings for ", engines_.size(),
                                                   " poll threads"));
  }
  // Its TX ring is drained by the first poll thread, woken by its eventfd.
  if (udp_->AddChannel(channel)) engines_[0]->WatchSharedFd(channel->tx_event_fd());
  UdpSocket::ChannelBinding old;
  {
    // The channel's table and the socket's binding change in one critical section with Close's
    // removal of the socket: a Close before finds nothing here (NOT_FOUND), one after finds the
    // binding and clears the table's entry. Never a closed socket left in a channel's table.
    std::lock_guard<std::mutex> lock(mu_);
    auto it = sockets_.find(id);
    if (it == sockets_.end()) return absl::NotFoundError("no such socket");
    if (!udp_->SetChannelSocket(channel.get(), index, it->second)) {
      return absl::ResourceExhaustedError(
          absl::StrCat("socket index ", index, " is over a channel's limit"));
    }
    const channel::Channel* const now_on = channel.get();
    old = it->second->SwapChannel({std::move(channel), index});
    if (old.channel != nullptr && (old.channel.get() != now_on || old.index != index)) {
      (void)udp_->SetChannelSocket(old.channel.get(), old.index, nullptr);
    }
  }
  // A poll thread may still be delivering to the old channel (and holds it until its next
  // quiescent state): let go of it after that.
  if (old.channel != nullptr) {
    table_->WaitForReaders();
    channel_waits_.fetch_add(1, std::memory_order_relaxed);
  }
  return absl::OkStatus();
}

void Stack::TakeOffChannels(std::span<const SocketId> ids) {
  // Each channel the sockets leave is held until the poll threads are past it: one wait for
  // all of them.
  std::vector<UdpSocket::ChannelBinding> left;
  {
    std::lock_guard<std::mutex> lock(mu_);  // as PutOnChannel: table and binding together
    for (SocketId id : ids) {
      auto it = sockets_.find(id);
      if (it == sockets_.end()) continue;
      UdpSocket::ChannelBinding old = it->second->SwapChannel({});
      if (old.channel == nullptr) continue;
      (void)udp_->SetChannelSocket(old.channel.get(), old.index, nullptr);
      left.push_back(std::move(old));
    }
  }
  if (left.empty()) return;
  table_->WaitForReaders();
  channel_waits_.fetch_add(1, std::memory_order_relaxed);
}

void Stack::RemoveChannel(const channel::Channel* channel) {
  udp_->RemoveChannel(channel);
  engines_[0]->UnwatchSharedFd(channel->tx_event_fd());
}

absl::Status Stack::StartReading(SocketId id, absl::Duration grace) {
  if (absl::StatusOr<std::shared_ptr<UdpSocket>> s = FindSocket(id); !s.ok()) return s.status();
  std::unique_lock<std::mutex> lock(readers_mu_);
  reader_left_.wait_for(lock, absl::ToChronoMilliseconds(grace),
                        [&] { return !readers_.contains(id); });
  if (!readers_.insert(id).second) {
    return absl::FailedPreconditionError("the socket has a reader already: one at a time");
  }
  return absl::OkStatus();
}

void Stack::EndReading(SocketId id) {
  {
    std::lock_guard<std::mutex> lock(readers_mu_);
    readers_.erase(id);
  }
  if (absl::StatusOr<std::shared_ptr<UdpSocket>> s = FindSocket(id); s.ok()) {
    (*s)->ReleaseWaitDescriptor();
  }
  reader_left_.notify_all();
}

// ---- Administration ------------------------------------------------------------------------

StackCounters Stack::Counters() const {
  StackCounters c;
  for (const auto& e : engines_) e->AddCounters(c);
  c.receive_budget_full = receive_budget_->refused();
  c.stream_dropped = stream_dropped_.load(std::memory_order_relaxed);
  c.wait_refused = wait_refused_.load(std::memory_order_relaxed);
  c.channel_waits = channel_waits_.load(std::memory_order_relaxed);
  c.receive_bytes_queued = receive_budget_->used();
  const NeighborCounters n = neighbors_->counters();
  c.neighbor_probes = n.probes_sent;
  c.neighbor_resolved = n.resolved;
  c.neighbor_failed = n.failed;
  c.neighbor_dropped = n.dropped_unresolved + n.dropped_queue_full;
  c.neighbor_table_full = n.table_full;
  c.neighbor_owner_unresolved_full = n.refused_owner_unresolved;
  c.neighbor_unresolved_full = n.refused_unresolved;
  c.neighbor_probes_rate_limited = n.probes_rate_limited;
  c.neighbor_evicted = n.evicted;
  c.neighbor_learn_rate_limited = n.learn_rate_limited;
  return c;
}

std::vector<NeighborInfo> Stack::Neighbors() const { return neighbors_->List(); }

absl::Status Stack::SetNeighbor(const net::IpAddress& ip, const net::MacAddress& mac) {
  std::vector<PendingDatagram> ready;
  if (absl::Status s = neighbors_->SetPermanent(ip, mac, options_.clock(), ready); !s.ok()) {
    return s;
  }
  // Datagrams that waited for this neighbour go out through a poll thread, as sends do.
  for (PendingDatagram& d : ready) {
    std::shared_ptr<UdpSocket> socket = d.socket;
    if (!engines_[0]->QueueSend(std::make_unique<SendRequest>(SendRequest{
            std::move(d.socket), d.src, d.dst, std::move(d.payload)})) &&
        socket != nullptr) {
      socket->CountSendDrop();
    }
  }
  return absl::OkStatus();
}

absl::Status Stack::RemoveNeighbor(const net::IpAddress& ip) { return neighbors_->Remove(ip); }

std::vector<net::IpPrefix> Stack::Addresses() const { return routes_.addresses(); }

std::optional<net::IpAddress> Stack::Gateway(net::Family family) const {
  return routes_.gateway(family);
}

std::vector<link::LinkInfo> Stack::Links() const {
  std::vector<link::LinkInfo> out;
  for (const auto& e : engines_) out.push_back(e->info());
  return out;
}

std::vector<link::LinkCounters> Stack::LinkCounters() const {
  std::vector<link::LinkCounters> out;
  for (const auto& e : engines_) out.push_back(e->link().counters());
  return out;
}

absl::Status Stack::CheckFrameAccounting() const {
  for (const auto& e : engines_) {
    if (absl::Status s = e->CheckFrameAccounting(); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace quadsock::stack
