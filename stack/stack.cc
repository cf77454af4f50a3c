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
#include "stack/net/frame.h"
#include "stack/net/frame_builder.h"
#include "stack/net/ip.h"
#include "stack/net/udp.h"

namespace quadsock::stack {
namespace {

constexpr size_t kRxBatch = 64;
constexpr size_t kTxBatch = 64;
constexpr size_t kSendsPerTurn = 256;
constexpr absl::Duration kTimerPeriod = absl::Milliseconds(100);
constexpr int kIdleWaitMs = 10;

// Counters of one engine: written by its poll thread only, read by anyone.
enum Counter {
  kRxFrames, kNotForUs, kFragments, kUnhandled, kUdpDelivered, kUdpNoSocket, kEchoReplies,
  kIcmpErrorsSent, kIcmpRateLimited, kArpReplies, kNdpAdverts, kTxNoRoute, kTxNoBuffer,
  kCounterCount
};

std::span<const uint8_t> AsBytes(const std::string& s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

size_t UdpHeadroom(net::Family f) {
  return (f == net::Family::kV4 ? net::Ipv4Header::kMinSize : net::Ipv6Header::kSize) +
         net::UdpHeader::kSize;
}

}  // namespace

// The addresses that are ours, for the data path: read without locks by poll threads, replaced
// whole by the control plane and freed after an RCU grace period.
struct LocalAddresses {
  std::vector<net::IpAddress> addresses;
  bool Contains(const net::IpAddress& a) const {
    return std::find(addresses.begin(), addresses.end(), a) != addresses.end();
  }
};

struct Stack::SendRequest {
  std::shared_ptr<UdpSocket> socket;
  net::Endpoint src;  // address unspecified: the route's source
  net::Endpoint dst;
  std::string payload;
};

struct Stack::Engine {
  explicit Engine(std::unique_ptr<link::Link> l, size_t send_depth)
      : link(std::move(l)), sends(send_depth), wake_fd(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {}
  ~Engine() {
    while (std::optional<SendRequest*> r = sends.TryPop()) delete *r;
    close(wake_fd);
  }
  void Bump(Counter c, uint64_t n = 1) {
    counters[c].store(counters[c].load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
  }
  void BumpParse(net::ParseError e) {
    auto& c = parse_errors[static_cast<int>(e)];
    c.store(c.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  }

  std::unique_ptr<link::Link> link;
  BoundedQueue<SendRequest*> sends;
  const int wake_fd;
  std::atomic<bool> sleeping{false};
  std::thread thread;
  std::unique_ptr<demux::LookupContext> manual_lookup;  // for PollOnce
  std::vector<link::FrameBuffer> tx_batch;
  absl::Time next_timer = absl::InfinitePast();
  std::array<std::atomic<uint64_t>, kCounterCount> counters{};
  std::array<std::atomic<uint64_t>, net::kParseErrorCount> parse_errors{};
  std::atomic<uint64_t> tx_queue_full{0};  // written by Send() callers
  // A frame accounting check asked for by another thread, run between two turns.
  std::mutex check_mu;
  std::promise<absl::Status>* check_request = nullptr;
  std::atomic<bool> check_pending{false};
};

Stack::Stack(StackOptions options)
    : options_(std::move(options)), neighbors_(options_.neighbors) {}

absl::StatusOr<std::unique_ptr<Stack>> Stack::Create(
    StackOptions options, std::vector<std::unique_ptr<link::Link>> links) {
  if (links.empty()) return absl::InvalidArgumentError("a stack needs at least one link");
  if (options.addresses.empty()) {
    return absl::InvalidArgumentError("a stack needs at least one address (such as 10.1.0.2/24)");
  }
  std::unique_ptr<Stack> stack(new Stack(std::move(options)));
  {
    std::lock_guard<std::mutex> lock(stack->net_mu_);
    for (const net::IpPrefix& p : stack->options_.addresses) {
      if (absl::Status s = stack->routes_.AddAddress(p); !s.ok()) return s;
    }
    for (const net::IpAddress& g : stack->options_.gateways) {
      if (absl::Status s = stack->routes_.SetGateway(g); !s.ok()) return s;
    }
    stack->icmp_tokens_ = stack->options_.icmp_error_burst;
    stack->icmp_refill_ = stack->options_.clock();
  }
  auto* local = new LocalAddresses();
  for (const net::IpPrefix& p : stack->options_.addresses) local->addresses.push_back(p.address());
  stack->local_.store(local, std::memory_order_release);

  demux::SocketTable::Options table;
  table.hash4 = stack->options_.hash4;
  table.ephemeral_low = stack->options_.ephemeral_low;
  table.ephemeral_high = stack->options_.ephemeral_high;
  Stack* self = stack.get();
  table.route = [self](const net::IpAddress& peer) -> absl::StatusOr<net::IpAddress> {
    std::lock_guard<std::mutex> lock(self->net_mu_);
    return self->routes_.SourceFor(peer);
  };
  absl::StatusOr<std::unique_ptr<demux::SocketTable>> t = demux::SocketTable::Create(table);
  if (!t.ok()) return t.status();
  stack->table_ = std::move(*t);
  for (auto& l : links) {
    stack->engines_.push_back(std::make_unique<Engine>(std::move(l), stack->options_.send_queue_depth));
  }
  return stack;
}

Stack::~Stack() {
  Stop();
  for (auto& e : engines_) e->manual_lookup.reset();
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [id, s] : sockets_) (void)table_->Close(id);
  }
  table_->WaitForReaders();
  delete local_.load();
}

absl::Status Stack::Start() {
  if (running_.exchange(true)) return absl::FailedPreconditionError("the stack is already running");
  for (auto& e : engines_) {
    Engine* engine = e.get();
    engine->thread = std::thread([this, engine] { RunEngine(*engine); });
  }
  return absl::OkStatus();
}

void Stack::Stop() {
  if (!running_.exchange(false)) return;
  for (auto& e : engines_) {
    const uint64_t one = 1;
    (void)!write(e->wake_fd, &one, sizeof(one));
  }
  for (auto& e : engines_) {
    if (e->thread.joinable()) e->thread.join();
  }
}

void Stack::RunEngine(Engine& engine) {
  demux::RcuReaderThread reader;
  demux::LookupContext ctx(*table_);
  pollfd fds[2] = {{engine.link->wait_fd(), POLLIN, 0}, {engine.wake_fd, POLLIN, 0}};
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
    if (n > 0) continue;
    // Idle: sleep until frames arrive, a send is queued, or the timers are due. Offline, so that
    // writers' grace periods do not wait for a sleeping thread.
    engine.sleeping.store(true, std::memory_order_seq_cst);
    if (engine.sends.SizeApprox() == 0) {
      reader.Offline();
      poll(fds, 2, kIdleWaitMs);
      reader.Online();
    }
    engine.sleeping.store(false, std::memory_order_relaxed);
    uint64_t drain;
    (void)!read(engine.wake_fd, &drain, sizeof(drain));
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
  link::FrameBuffer frames[kRxBatch];
  const size_t n = engine.link->Receive(frames);
  engine.Bump(kRxFrames, n);
  const LocalAddresses& local = *local_.load(std::memory_order_acquire);
  for (size_t i = 0; i < n; ++i) {
    HandleFrame(engine, ctx, local, frames[i], now);
  }
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
  engine.tx_batch.clear();
}

std::optional<link::FrameBuffer> Stack::NewTxFrame(Engine& engine) {
  if (engine.tx_batch.size() >= kTxBatch) FlushTx(engine);
  std::optional<link::FrameBuffer> f = engine.link->AllocateTx();
  if (!f.has_value()) engine.Bump(kTxNoBuffer);
  return f;
}

void Stack::QueueTx(Engine& engine, link::FrameBuffer frame, std::optional<size_t> length) {
  if (!length.has_value()) {
    engine.link->Release({&frame, 1});  // did not fit: cannot happen for MTU-checked frames
    engine.Bump(kTxNoBuffer);
    return;
  }
  frame.length = static_cast<uint32_t>(*length);
  engine.tx_batch.push_back(frame);
}

void Stack::HandleFrame(Engine& engine, demux::LookupContext& ctx, const LocalAddresses& local,
                        const link::FrameBuffer& frame, absl::Time now) {
  const std::span<const uint8_t> bytes(frame.data, frame.length);
  net::ParsedFrame f;
  if (const net::ParseError e = net::ParseFrame(bytes, f); e != net::ParseError::kOk) {
    engine.BumpParse(e);
    return;
  }
  const net::MacAddress& our_mac = engine.link->info().mac;
  if (!f.eth.dst.IsMulticast() && f.eth.dst != our_mac) {
    engine.Bump(kNotForUs);
    return;
  }
  switch (f.l3) {
    case net::L3::kArp:
      HandleArp(engine, f, local, now);
      return;
    case net::L3::kIpv4:
    case net::L3::kIpv6:
      break;
    case net::L3::kOther:
      engine.Bump(kUnhandled);
      return;
  }
  if (f.l4 == net::L4::kIcmpv6 && (f.icmp.type == net::kIcmpv6NeighborSolicitation ||
                                   f.icmp.type == net::kIcmpv6NeighborAdvertisement)) {
    HandleNdp(engine, f, local, now);
    return;
  }
  if (!local.Contains(f.dst)) {
    engine.Bump(kNotForUs);
    return;
  }
  if (f.fragment) {
    engine.Bump(kFragments);
    return;
  }
  switch (f.l4) {
    case net::L4::kUdp: {
      const demux::FlowKey key{f.src, f.udp.src_port, f.dst, f.udp.dst_port,
                               engine.link->info().ifindex};
      if (std::optional<demux::LookupResult> r = table_->Lookup(ctx, key)) {
        reinterpret_cast<UdpSocket*>(r->cookie)
            ->Deliver({f.src, f.udp.src_port}, {f.dst, f.udp.dst_port}, f.payload(bytes), now);
        engine.Bump(kUdpDelivered);
        return;
      }
      engine.Bump(kUdpNoSocket);
      SendPortUnreachable(engine, f, bytes, now);
      return;
    }
    case net::L4::kIcmpv4:
      if (f.icmp.type == net::kIcmpv4EchoRequest) return SendEchoReply(engine, f, bytes);
      break;
    case net::L4::kIcmpv6:
      if (f.icmp.type == net::kIcmpv6EchoRequest) return SendEchoReply(engine, f, bytes);
      break;
    default:
      break;
  }
  engine.Bump(kUnhandled);
}

void Stack::HandleArp(Engine& engine, const net::ParsedFrame& f, const LocalAddresses& local,
                      absl::Time now) {
  const net::ArpPacket& arp = f.arp;
  const bool for_us = local.Contains(arp.target_ip);
  std::vector<PendingDatagram> ready;
  if (!arp.sender_ip.IsUnspecified()) {
    std::lock_guard<std::mutex> lock(net_mu_);
    // RFC 826: merge the sender into an existing entry; create one if the packet is for us.
    ready = neighbors_.Learn(arp.sender_ip, arp.sender_mac, now, for_us);
  }
  for (const PendingDatagram& d : ready) TransmitPending(engine, d);
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
          net::BuildArp({engine.link->info().mac, arp.sender_mac, VlanOf(f)}, reply,
                        {out->data, out->capacity}));
  engine.Bump(kArpReplies);
}

void Stack::HandleNdp(Engine& engine, const net::ParsedFrame& f, const LocalAddresses& local,
                      absl::Time now) {
  const net::NdpMessage& m = f.ndp;
  const bool for_us = local.Contains(m.target);
  std::vector<PendingDatagram> ready;
  if (m.link_address.has_value()) {
    // A solicitation teaches us its sender; an advertisement, its target.
    const net::IpAddress& who = f.icmp.type == net::kIcmpv6NeighborSolicitation ? f.src : m.target;
    if (!who.IsUnspecified()) {
      std::lock_guard<std::mutex> lock(net_mu_);
      ready = neighbors_.Learn(who, *m.link_address, now,
                               f.icmp.type == net::kIcmpv6NeighborSolicitation && for_us);
    }
  }
  for (const PendingDatagram& d : ready) TransmitPending(engine, d);
  if (f.icmp.type != net::kIcmpv6NeighborSolicitation || !for_us) return;
  std::optional<link::FrameBuffer> out = NewTxFrame(engine);
  if (!out.has_value()) return;
  net::NdpMessage advert;
  advert.target = m.target;
  advert.link_address = engine.link->info().mac;
  // To the soliciting node, or to all nodes when it had no address yet (RFC 4861 7.2.4).
  const bool dad = f.src.IsUnspecified();
  const net::IpAddress dst = dad ? *net::IpAddress::Parse("ff02::1") : f.src;
  const net::MacAddress dst_mac = dad ? net::MacAddress::Ipv6Multicast(dst) : f.eth.src;
  const uint32_t flags = (dad ? 0 : net::NdpMessage::kFlagSolicited) | net::NdpMessage::kFlagOverride;
  QueueTx(engine, *out,
          net::BuildNdp({engine.link->info().mac, dst_mac, VlanOf(f)}, m.target, dst,
                        net::kIcmpv6NeighborAdvertisement, advert, {out->data, out->capacity},
                        flags));
  engine.Bump(kNdpAdverts);
}

void Stack::SendEchoReply(Engine& engine, const net::ParsedFrame& f,
                          std::span<const uint8_t> bytes) {
  std::optional<link::FrameBuffer> out = NewTxFrame(engine);
  if (!out.has_value()) return;
  net::IcmpHeader reply = f.icmp;
  reply.type = f.l3 == net::L3::kIpv4 ? net::kIcmpv4EchoReply : net::kIcmpv6EchoReply;
  QueueTx(engine, *out,
          net::BuildIcmp({engine.link->info().mac, f.eth.src, VlanOf(f)}, f.dst, f.src, reply,
                         f.payload(bytes), {out->data, out->capacity}));
  engine.Bump(kEchoReplies);
}

void Stack::SendPortUnreachable(Engine& engine, const net::ParsedFrame& f,
                                std::span<const uint8_t> bytes, absl::Time now) {
  // Never about a datagram sent to a broadcast or multicast address (RFC 1122 3.2.2).
  if (f.eth.dst.IsMulticast() || f.dst.IsMulticast() || f.src.IsUnspecified()) return;
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
          net::BuildIcmp({engine.link->info().mac, f.eth.src, VlanOf(f)}, f.dst, f.src, h,
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

std::optional<net::VlanTag> Stack::VlanOf(const net::ParsedFrame& f) {
  if (f.eth.vlan_count == 0) return std::nullopt;
  return f.eth.vlans[f.eth.vlan_count - 1];
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
    if (!mac.has_value()) probe = neighbors_.Queue({src, dst, next_hop, request.payload}, now);
  }
  if (!mac.has_value()) {
    if (probe) SendProbe(engine, next_hop);
    return;
  }
  if (TransmitUdp(engine, src, dst, *mac, AsBytes(request.payload))) {
    request.socket->CountSent(request.payload.size());
  } else {
    request.socket->CountSendDrop();
  }
}

void Stack::TransmitPending(Engine& engine, const PendingDatagram& d) {
  std::optional<net::MacAddress> mac;
  {
    std::lock_guard<std::mutex> lock(net_mu_);
    mac = neighbors_.Lookup(d.next_hop, options_.clock());
  }
  if (mac.has_value()) TransmitUdp(engine, d.src, d.dst, *mac, AsBytes(d.payload));
}

bool Stack::TransmitUdp(Engine& engine, const net::Endpoint& src, const net::Endpoint& dst,
                        const net::MacAddress& dst_mac, std::span<const uint8_t> payload) {
  std::optional<link::FrameBuffer> out = NewTxFrame(engine);
  if (!out.has_value()) return false;
  std::optional<size_t> n = net::BuildUdp({engine.link->info().mac, dst_mac, std::nullopt},
                                          {src, dst}, payload, {out->data, out->capacity});
  QueueTx(engine, *out, n);
  return n.has_value();
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
            net::BuildArp({mac, net::MacAddress::Broadcast(), std::nullopt}, request,
                          {out->data, out->capacity}));
    return;
  }
  const net::IpAddress group = net::SolicitedNodeMulticast(target);
  net::NdpMessage solicitation;
  solicitation.target = target;
  solicitation.link_address = mac;
  QueueTx(engine, *out,
          net::BuildNdp({mac, net::MacAddress::Ipv6Multicast(group), std::nullopt}, source, group,
                        net::kIcmpv6NeighborSolicitation, solicitation,
                        {out->data, out->capacity}));
}

// ---- Control plane -------------------------------------------------------------------------

absl::StatusOr<UdpSocket*> Stack::FindSocket(SocketId id) const {
  auto it = sockets_.find(id);
  if (it == sockets_.end()) return absl::NotFoundError(absl::StrCat("no socket ", id));
  return it->second.get();
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
  auto socket = std::make_shared<UdpSocket>(family, depth);
  demux::SocketOptions o;
  o.family = family;
  o.v6only = options.v6only;
  o.reuse_port = options.reuse_port;
  o.bound_device = options.bound_device;
  o.cookie = reinterpret_cast<uintptr_t>(socket.get());
  absl::StatusOr<SocketId> id = table_->Open(o);
  if (!id.ok()) return id.status();
  sockets_.emplace(*id, std::move(socket));
  return *id;
}

absl::Status Stack::CheckLocal(const net::IpAddress& address) const {
  if (address.IsUnspecified() || (address.IsV4Mapped() && address.Unmapped().IsUnspecified())) {
    return absl::OkStatus();
  }
  if (!local_.load(std::memory_order_acquire)->Contains(address.Unmapped())) {
    return absl::InvalidArgumentError(absl::StrCat(
        address.ToString(), " is not an address of this stack (cannot assign requested address)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<net::Endpoint> Stack::Bind(SocketId id, const net::Endpoint& local) {
  if (absl::Status s = CheckLocal(local.address); !s.ok()) return s;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (absl::StatusOr<UdpSocket*> s = FindSocket(id); !s.ok()) return s.status();
  }
  return table_->Bind(id, local);
}

absl::StatusOr<net::Endpoint> Stack::Connect(SocketId id, const net::Endpoint& peer) {
  if (peer.port == 0) return absl::InvalidArgumentError("cannot connect to port 0");
  if (peer.address.IsUnspecified()) {
    return absl::InvalidArgumentError("cannot connect to the unspecified address");
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (absl::StatusOr<UdpSocket*> s = FindSocket(id); !s.ok()) return s.status();
  }
  return table_->Connect(id, peer);
}

absl::Status Stack::Disconnect(SocketId id) { return table_->Disconnect(id); }

absl::StatusOr<net::Endpoint> Stack::Rehash(SocketId id, std::optional<net::IpAddress> address,
                                            std::optional<uint16_t> port) {
  if (address.has_value()) {
    if (absl::Status s = CheckLocal(*address); !s.ok()) return s;
  }
  return table_->Rehash(id, address, port);
}

absl::Status Stack::Close(SocketId id) {
  std::shared_ptr<UdpSocket> socket;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = sockets_.find(id);
    if (it == sockets_.end()) return absl::NotFoundError(absl::StrCat("no socket ", id));
    if (absl::Status s = table_->Close(id); !s.ok()) return s;
    socket = std::move(it->second);
    sockets_.erase(it);
  }
  socket->Shutdown();  // wakes a Receive waiting on it
  // A poll thread may still hold the socket from a lookup that started before the close.
  table_->WaitForReaders();
  return absl::OkStatus();
}

absl::StatusOr<SocketStatus> Stack::Get(SocketId id) const {
  absl::StatusOr<demux::SocketInfo> info = table_->Get(id);
  if (!info.ok()) return info.status();
  std::lock_guard<std::mutex> lock(mu_);
  absl::StatusOr<UdpSocket*> s = FindSocket(id);
  if (!s.ok()) return s.status();
  return SocketStatus{*info, (*s)->counters()};
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
  net::Endpoint dst;
  if (destination.has_value()) {
    dst = *destination;
  } else if (info->state == demux::SocketState::kConnected) {
    dst = info->remote;
  } else {
    return absl::FailedPreconditionError(
        absl::StrCat("socket ", id, " is not connected: give a destination"));
  }
  if (dst.port == 0 || dst.address.IsUnspecified()) {
    return absl::InvalidArgumentError(absl::StrCat("cannot send to ", dst.ToString()));
  }
  const bool v6_socket = info->options.family == net::Family::kV6;
  // A dual-stack IPv6 socket may be given an IPv4 destination, as Linux's udpv6_sendmsg allows.
  if (v6_socket && !info->options.v6only && dst.address.is_v4()) dst.address = dst.address.ToV6();
  if ((!v6_socket && !dst.address.is_v4()) ||
      (v6_socket && dst.address.is_v4()) ||
      (v6_socket && info->options.v6only && dst.address.IsV4Mapped())) {
    return absl::InvalidArgumentError(absl::StrCat("destination ", dst.ToString(),
                                                   " is of the wrong family for socket ", id));
  }
  const net::Family wire_family = dst.address.Unmapped().family();
  const size_t mtu = engines_[0]->link->info().mtu;
  if (payload.size() + UdpHeadroom(wire_family) > mtu) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "a %u-byte datagram does not fit the MTU of %u (no fragmentation): at most %u bytes",
        payload.size(), mtu, mtu - UdpHeadroom(wire_family)));
  }
  if (info->state == demux::SocketState::kOpen) {
    // As sendto() on an unbound socket: bind to an ephemeral port first.
    const net::Endpoint any{v6_socket ? net::IpAddress::AnyV6() : net::IpAddress::AnyV4(), 0};
    absl::StatusOr<net::Endpoint> bound = table_->Bind(id, any);
    if (!bound.ok() && bound.status().code() != absl::StatusCode::kFailedPrecondition) {
      return bound.status();
    }
    info = table_->Get(id);
    if (!info.ok()) return info.status();
  }
  std::shared_ptr<UdpSocket> socket;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = sockets_.find(id);
    if (it == sockets_.end()) return absl::NotFoundError(absl::StrCat("no socket ", id));
    socket = it->second;
  }
  net::Endpoint src = info->local;
  if (src.address.IsV4Mapped() && src.address.Unmapped().IsUnspecified()) {
    src.address = net::IpAddress::AnyV6();
  }
  Engine& engine = *engines_[id % engines_.size()];
  auto* request = new SendRequest{std::move(socket), src, dst,
                                  std::string(payload.begin(), payload.end())};
  if (!engine.sends.TryPush(request)) {
    delete request;
    engine.tx_queue_full.fetch_add(1, std::memory_order_relaxed);
    return absl::ResourceExhaustedError(absl::StrFormat(
        "the send queue is full (%u datagrams): try again", engine.sends.capacity()));
  }
  if (engine.sleeping.load(std::memory_order_seq_cst)) {
    const uint64_t one = 1;
    (void)!write(engine.wake_fd, &one, sizeof(one));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::optional<ReceivedDatagram>> Stack::Receive(SocketId id) {
  std::shared_ptr<UdpSocket> socket;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = sockets_.find(id);
    if (it == sockets_.end()) return absl::NotFoundError(absl::StrCat("no socket ", id));
    socket = it->second;
  }
  return socket->Pop();
}

absl::StatusOr<bool> Stack::WaitForData(SocketId id, absl::Duration timeout) {
  std::shared_ptr<UdpSocket> socket;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = sockets_.find(id);
    if (it == sockets_.end()) return absl::NotFoundError(absl::StrCat("no socket ", id));
    socket = it->second;
  }
  return socket->WaitForData(static_cast<int>(absl::ToInt64Milliseconds(timeout)));
}

absl::Status Stack::SetReceiveCallback(SocketId id, ReceiveCallback callback) {
  std::lock_guard<std::mutex> lock(mu_);
  absl::StatusOr<UdpSocket*> s = FindSocket(id);
  if (!s.ok()) return s.status();
  (*s)->SetCallback(std::move(callback));
  return absl::OkStatus();
}

// ---- Administration ------------------------------------------------------------------------

StackCounters Stack::Counters() const {
  StackCounters c;
  for (const auto& e : engines_) {
    auto get = [&](Counter k) { return e->counters[k].load(std::memory_order_relaxed); };
    c.rx_frames += get(kRxFrames);
    c.not_for_us += get(kNotForUs);
    c.fragments += get(kFragments);
    c.unhandled += get(kUnhandled);
    c.udp_delivered += get(kUdpDelivered);
    c.udp_no_socket += get(kUdpNoSocket);
    c.icmp_echo_replies += get(kEchoReplies);
    c.icmp_errors_sent += get(kIcmpErrorsSent);
    c.icmp_errors_rate_limited += get(kIcmpRateLimited);
    c.arp_replies += get(kArpReplies);
    c.ndp_advertisements += get(kNdpAdverts);
    c.tx_no_route += get(kTxNoRoute);
    c.tx_no_buffer += get(kTxNoBuffer);
    c.tx_queue_full += e->tx_queue_full.load(std::memory_order_relaxed);
    for (int i = 0; i < net::kParseErrorCount; ++i) {
      c.parse_errors[i] += e->parse_errors[i].load(std::memory_order_relaxed);
    }
  }
  std::lock_guard<std::mutex> lock(net_mu_);
  c.neighbors = neighbors_.counters();
  return c;
}

std::vector<NeighborInfo> Stack::Neighbors() const {
  std::lock_guard<std::mutex> lock(net_mu_);
  return neighbors_.List();
}

absl::Status Stack::SetNeighbor(const net::IpAddress& ip, const net::MacAddress& mac) {
  std::lock_guard<std::mutex> lock(net_mu_);
  return neighbors_.SetPermanent(ip, mac);
}

absl::Status Stack::RemoveNeighbor(const net::IpAddress& ip) {
  std::lock_guard<std::mutex> lock(net_mu_);
  return neighbors_.Remove(ip);
}

std::vector<net::IpPrefix> Stack::Addresses() const {
  std::lock_guard<std::mutex> lock(net_mu_);
  return routes_.addresses();
}

std::optional<net::IpAddress> Stack::Gateway(net::Family family) const {
  std::lock_guard<std::mutex> lock(net_mu_);
  return routes_.gateway(family);
}

std::vector<link::LinkInfo> Stack::Links() const {
  std::vector<link::LinkInfo> out;
  for (const auto& e : engines_) out.push_back(e->link->info());
  return out;
}

std::vector<link::LinkCounters> Stack::LinkCounters() const {
  std::vector<link::LinkCounters> out;
  for (const auto& e : engines_) out.push_back(e->link->counters());
  return out;
}

absl::Status Stack::CheckFrameAccounting() const {
  for (const auto& e : engines_) {
    absl::Status s;
    if (!running_.load()) {
      s = e->link->CheckFrameAccounting();
    } else {
      std::promise<absl::Status> done;
      std::future<absl::Status> result = done.get_future();
      {
        std::lock_guard<std::mutex> lock(e->check_mu);
        if (e->check_request != nullptr) return absl::UnavailableError("a check is running");
        e->check_request = &done;
        e->check_pending.store(true, std::memory_order_release);
      }
      const uint64_t one = 1;
      (void)!write(e->wake_fd, &one, sizeof(one));
      if (result.wait_for(std::chrono::seconds(2)) != std::future_status::ready) {
        std::lock_guard<std::mutex> lock(e->check_mu);
        if (e->check_request == &done) {
          e->check_request = nullptr;
          e->check_pending.store(false);
          return absl::DeadlineExceededError("a poll thread did not answer within 2 s");
        }
      }
      s = result.get();
    }
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace quadsock::stack
