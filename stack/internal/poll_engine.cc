#include "stack/internal/poll_engine.h"

#include <sched.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>

#include "stack/demux/rcu.h"
#include "stack/internal/icmp_protocol.h"
#include "stack/internal/neighbor_resolution.h"

namespace quadsock::stack {
namespace {

constexpr size_t kSendsPerTurn = 256;
constexpr absl::Duration kTimerPeriod = absl::Milliseconds(100);
constexpr int kIdleWaitMs = 10;
// A busy-polling link is polled this long after its last frame before the thread sleeps.
constexpr absl::Duration kBusyPollLinger = absl::Milliseconds(1);
// What woke the idle thread (epoll_event.data): the link, our own eventfd (drained), or a
// descriptor an application shares (never touched: WatchSharedFd).
constexpr uint64_t kLinkTag = uint64_t{1} << 32;
constexpr uint64_t kWakeTag = uint64_t{2} << 32;
constexpr uint64_t kSharedTag = uint64_t{3} << 32;
// How long CheckFrameAccounting waits for a running poll thread to answer.
constexpr auto kCheckTimeout = std::chrono::seconds(2);

// Whether a frame to `dst` is for the link whose address is `ours` (or a multicast).
bool ForThisLink(const net::MacAddress& dst, const net::MacAddress& ours) {
  return dst == ours || dst.IsMulticast();
}

// Whether a frame longer than `max_untagged` bytes is a tagged one within it and its 802.1Q
// tag (the tag of a stack on a VLAN, or a priority tag).
bool FitsWithATag(std::span<const uint8_t> frame, size_t max_untagged) {
  return frame.size() <= max_untagged + 4 &&
         net::LoadBe16(frame.data() + 12) == net::kEtherTypeVlan;
}

}  // namespace

PollEngine::PollEngine(uint32_t index, std::unique_ptr<link::Link> link, Protocols protocols,
                       size_t send_queue_depth, absl::Duration spin)
    : index_(index),
      spin_(spin),
      link_(std::move(link)),
      p_(std::move(protocols)),
      sends_(send_queue_depth),
      staged_(index),
      wake_fd_(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)),
      epoll_fd_(epoll_create1(EPOLL_CLOEXEC)),
      reassembly_(p_.reassembly, [this](EngineCounter c, uint64_t n) { Bump(c, n); }) {
  // Tagged: the link's fd is not ours to read; our eventfd is drained on wakeup.
  epoll_event e{};
  e.events = EPOLLIN;
  e.data.u64 = kLinkTag;
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, link_->wait_fd(), &e);
  e.data.u64 = kWakeTag;
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &e);
  ReadWallClock();
}

PollEngine::~PollEngine() {
  while (std::optional<SendRequest*> r = sends_.TryPop()) delete *r;
  close(epoll_fd_);
  close(wake_fd_);
}

void PollEngine::WatchSharedFd(int fd) {
  // Edge-triggered: each write of the application's is a new edge, so the counter need never
  // be read (a read could wait forever: the application may clear O_NONBLOCK on the shared
  // description and empty the counter first).
  epoll_event e{};
  e.events = EPOLLIN | EPOLLET;
  e.data.u64 = kSharedTag;
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &e);
}

void PollEngine::UnwatchSharedFd(int fd) { epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr); }

// ---- The loop -------------------------------------------------------------------------------

void PollEngine::Start(const std::atomic<bool>& running) {
  thread_ = std::thread([this, &running] { Run(running); });
}

void PollEngine::Join() {
  Wake();
  if (thread_.joinable()) thread_.join();
}

demux::LookupContext& PollEngine::manual_lookup() {
  if (manual_lookup_ == nullptr) manual_lookup_ = std::make_unique<demux::LookupContext>(*p_.table);
  return *manual_lookup_;
}

void PollEngine::Run(const std::atomic<bool>& running) {
  demux::RcuReaderThread reader;
  demux::LookupContext ctx(*p_.table);
  absl::Time last_frame = absl::InfinitePast();
  // The first engine sends what applications queue on data channels.
  const bool channel_sends = index_ == 0;
  while (running.load(std::memory_order_relaxed)) {
    const size_t n = Turn(ctx);
    // Not while channels wait for their wake-up (the turn holds them; a busy turn wakes them
    // every few turns, an idle one at once).
    if (staged_.empty()) reader.Quiescent();
    if (check_pending_.load(std::memory_order_acquire)) {
      std::lock_guard<std::mutex> lock(check_mu_);
      if (check_request_ != nullptr) {  // unless the asker gave up meanwhile
        check_request_->set_value(link_->CheckFrameAccounting());
        check_request_ = nullptr;
      }
      check_pending_.store(false);
    }
    // Keep turning a while after the last frame: for the spin asked for, and with a busy-polling
    // link at least kBusyPollLinger (its Receive runs the device's receive work on this thread).
    if (n > 0) last_frame = turn_time_;
    const bool busy = link_->IsBusyPolling();
    if (turn_time_ - last_frame < (busy ? std::max(kBusyPollLinger, spin_) : spin_)) {
      // Otherwise the threads that share this CPU run between idle turns (the NAPI that brings
      // the next frame, the program that answers this one).
      if (n == 0 && !busy) sched_yield();
      continue;
    }
    if (n > 0) continue;
    // Idle: sleep until frames arrive, a send is queued (here or on a data channel), or the
    // timers are due. Offline, so that writers' grace periods do not wait for a sleeping thread.
    sleeping_.exchange(1, std::memory_order_acq_rel);  // see QueueSend
    const bool channel_work = channel_sends && p_.udp->ArmChannelSends();
    if (sends_.SizeApprox() == 0 && !channel_work) {
      reader.Offline();
      epoll_event events[8];
      const int ready = epoll_wait(epoll_fd_, events, 8, kIdleWaitMs);
      reader.Online();
      // A sender woke us: drain our eventfd. (Only then: a read of an empty eventfd is a
      // system call per wakeup for nothing.) The link's and the applications' are not ours.
      for (int i = 0; i < ready; ++i) {
        if (events[i].data.u64 != kWakeTag) continue;
        uint64_t drain;
        (void)!read(wake_fd_, &drain, sizeof(drain));
      }
    }
    sleeping_.store(0, std::memory_order_relaxed);
    if (channel_sends) p_.udp->DisarmChannelSends();
  }
  staged_.WakeDeferred();
  link_->Poll();
}

size_t PollEngine::Turn(demux::LookupContext& ctx) {
  const absl::Time now = p_.clock();
  turn_time_ = now;
  link::FrameBuffer frames[kRxBatch];
  const size_t n = link_->Receive(frames);
  Bump(EngineCounter::rx_frames, n);
  if (n > 0) ReceiveBatch(ctx, {frames, n}, now, now + wall_offset_);
  link_->Release({frames, n});
  p_.udp->SendQueued(*this, now);
  if (index_ == 0) p_.udp->SendFromChannels(*this, now);
  FlushTx();
  link_->Poll();
  if (now >= next_timer_) {
    next_timer_ = now + kTimerPeriod;
    ReadWallClock();
    p_.neighbors->Tick(*this, now);
    p_.udp->path_mtu().Expire(now);
    reassembly_.Expire(now, [&](const Reassembly::Expired& e) {
      p_.icmp->SendReassemblyTimeExceeded(*this, e, now);
    });
    reassembly_bytes_.store(reassembly_.bytes_held(), std::memory_order_relaxed);
    FlushTx();
  }
  // Applications asleep on data channels this engine published in: woken now if it received
  // nothing (it may sleep next), else every few turns, so that an application busy with one
  // batch is not woken per batch and takes several at once.
  staged_.EndTurn(n == 0);
  return n;
}

void PollEngine::ReadWallClock() { wall_offset_ = p_.wall_clock() - p_.clock(); }

// ---- Receive --------------------------------------------------------------------------------

void PollEngine::ReceiveBatch(demux::LookupContext& ctx,
                              std::span<const link::FrameBuffer> frames, absl::Time now,
                              absl::Time arrival) {
  // Three passes, so that the memory loads of the whole batch overlap instead of following one
  // another frame by frame (with 100k sockets each datagram's slot, entry and socket are cold):
  // (1) parse and classify every frame, keeping only a UDP datagram's flow and payload; (2)
  // look the UDP flows up together (LookupBatch prefetches slots and entries, and each socket
  // as it is found: the stack's cookie); (3) hand every frame to its protocol in arrival order.
  // Frames that need more than the flow (control frames, datagrams answered with port
  // unreachable) are parsed again in (3): they are rare, and one parsed frame in L1 beats a
  // batch of them (20 KiB) crowding it out.
  const LocalAddresses& local = *p_.local;
  const link::LinkInfo& link = link_->info();
  // The longest untagged frame the MTU allows: an IP packet of the MTU and its Ethernet header.
  const size_t max_frame = link.mtu + net::EthernetHeader::kSize;
  size_t udp = 0;
  for (size_t i = 0; i < frames.size(); ++i) {
    const std::span<const uint8_t> bytes(frames[i].data, frames[i].length);
    if (bytes.size() > max_frame && !FitsWithATag(bytes, max_frame)) {
      Bump(EngineCounter::rx_too_long);
      rx_.kind[i] = FrameKind::kDone;
      continue;
    }
    // The commonest frame, plain UDP, without a full parse; the rest (and any error, counted
    // there) through Classify.
    net::UdpFrameView v;
    if (net::ParsePlainUdpFrame(bytes, v)) {
      // Addresses from the header's bytes: v's were just written, in narrower stores than the
      // loads of an IpAddress compare.
      const bool v4 = v.dst.is_v4();
      const uint8_t* ip = bytes.data() + net::EthernetHeader::kSize;
      const uint8_t* src = ip + (v4 ? 12 : 8);
      const uint8_t* dst = ip + (v4 ? 16 : 24);
      // (The fast parser takes untagged frames only: not ours when the stack is on a VLAN.)
      if (!ForThisLink(v.dst_mac, link.mac) || p_.vlan != 0 ||
          !(v4 ? local.ContainsV4(dst) : local.ContainsV6(dst))) {
        Bump(EngineCounter::not_for_us);
        rx_.kind[i] = FrameKind::kDone;
        continue;
      }
      if (v4 ? local.IsMartianV4(src) : local.IsMartianV6(src)) {
        Bump(EngineCounter::martian_source);
        rx_.kind[i] = FrameKind::kDone;
        continue;
      }
      rx_.kind[i] = FrameKind::kUdp;
      rx_.keys[udp] = {v.src, v.src_port, v.dst, v.dst_port, link.ifindex};
      rx_.payloads[udp++] = bytes.subspan(v.payload_offset, v.payload_length);
      continue;
    }
    net::ParsedFrame& f = rx_.parsed;
    rx_.kind[i] = Classify(bytes, f);
    if (rx_.kind[i] == FrameKind::kUdp) {
      rx_.keys[udp] = {f.src, f.udp.src_port, f.dst, f.udp.dst_port, link.ifindex};
      rx_.payloads[udp++] = f.payload(bytes);
    } else if (rx_.kind[i] == FrameKind::kFragment) {
      rx_.kind[i] = FrameKind::kDone;
      if (Reassemble(bytes, udp, now)) {
        rx_.kind[i] = FrameKind::kUdp;
        ++udp;
      }
    }
  }
  if (udp > 0) {
    p_.table->LookupBatch(ctx, {rx_.keys.data(), udp}, {rx_.found.data(), udp});
    // The line a channel delivery reads after the first (the channel's target), for the whole
    // batch: with 100k sockets it is as cold as the first, which the lookup prefetched. Only
    // while datagrams go to channels (a callback reads the first line alone).
    if (staged_.last_batch_staged()) {
      for (size_t k = 0; k < udp; ++k) {
        if (rx_.found[k].has_value()) UdpProtocol::SocketOf(*rx_.found[k]).PrefetchDelivery();
      }
    }
  }
  size_t j = 0;  // the next UDP datagram
  for (size_t i = 0; i < frames.size(); ++i) {
    const std::span<const uint8_t> bytes(frames[i].data, frames[i].length);
    switch (rx_.kind[i]) {
      case FrameKind::kDone:
      case FrameKind::kFragment:  // (1) made it kDone or kUdp
        break;
      case FrameKind::kArp:
        (void)net::ParseFrame(bytes, rx_.parsed);  // parsed fine in (1)
        p_.neighbors->HandleArp(*this, rx_.parsed, now);
        break;
      case FrameKind::kNdp:
        (void)net::ParseFrame(bytes, rx_.parsed);
        p_.neighbors->HandleNdp(*this, rx_.parsed, now);
        break;
      case FrameKind::kEcho:
        (void)net::ParseFrame(bytes, rx_.parsed);
        p_.icmp->SendEchoReply(*this, rx_.parsed, bytes);
        break;
      case FrameKind::kIcmpError:
        (void)net::ParseFrame(bytes, rx_.parsed);
        p_.icmp->HandleError(*this, ctx, rx_.parsed);
        break;
      case FrameKind::kParameterProblem:
        (void)net::ParseFrame(bytes, rx_.parsed);  // the same error as in (1)
        p_.icmp->SendParameterProblem(*this, rx_.parsed, bytes, now);
        break;
      case FrameKind::kUnknownProtocol:
        (void)net::ParseFrame(bytes, rx_.parsed);
        p_.icmp->SendProtocolUnreachable(*this, rx_.parsed, bytes, now);
        break;
      case FrameKind::kUdp: {
        const std::optional<demux::LookupResult>& found = rx_.found[j];
        if (!found.has_value()) {
          Bump(EngineCounter::udp_no_socket);
          (void)net::ParseFrame(bytes, rx_.parsed);
          p_.icmp->SendPortUnreachable(*this, rx_.parsed, bytes, now);
        } else {
          // Counted delivered either way (it found its socket); one the socket had no room for
          // is counted here too, so that the count outlives the socket.
          if (UdpProtocol::Deliver(*found, rx_.keys[j], rx_.payloads[j], arrival, staged_) ==
              UdpSocket::Delivery::kFull) {
            Bump(EngineCounter::udp_queue_full);
          }
          Bump(EngineCounter::udp_delivered);
        }
        ++j;
        break;
      }
    }
  }
  // The datagrams staged in data channels, shown to their applications: one store a channel.
  staged_.Publish();
  rx_.reassembled.clear();
}

bool PollEngine::Reassemble(std::span<const uint8_t> bytes, size_t udp, absl::Time now) {
  const net::ParsedFrame& f = rx_.parsed;
  std::vector<uint8_t> datagram;
  const bool whole = reassembly_.Add(Reassembly::FragmentOf(f, bytes), now, datagram);
  reassembly_bytes_.store(reassembly_.bytes_held(), std::memory_order_relaxed);
  if (!whole) return false;
  // Whole now: checked as any UDP datagram (its checksum covers every fragment).
  net::UdpHeader udp_header;
  if (const net::ParseError e = net::ParseUdpDatagram(f.src, f.dst, datagram, udp_header);
      e != net::ParseError::kOk) {
    BumpParse(e);
    return false;
  }
  rx_.keys[udp] = {f.src, udp_header.src_port, f.dst, udp_header.dst_port,
                   link_->info().ifindex};
  // Moved, not copied: the payload's bytes stay where they are.
  const std::span<const uint8_t> segment(datagram);
  rx_.reassembled.push_back(std::move(datagram));
  rx_.payloads[udp] = segment.subspan(net::UdpHeader::kSize,
                                      udp_header.length - net::UdpHeader::kSize);
  return true;
}

bool PollEngine::IsOurs(const net::ParsedFrame& f) const {
  return ForThisLink(f.eth.dst, link_->info().mac) && f.eth.vlan_id() == p_.vlan;
}

PollEngine::FrameKind PollEngine::Classify(std::span<const uint8_t> bytes, net::ParsedFrame& f) {
  if (const net::ParseError e = net::ParseFrame(bytes, f); e != net::ParseError::kOk) {
    BumpParse(e);
    // An IPv6 packet refused for an extension header may ask for a Parameter Problem: only
    // when it is ours to answer, from a source that may be answered.
    if (f.l3 == net::L3::kIpv6 && f.ipv6.problem.asked && IsOurs(f) &&
        p_.local->Contains(f.ipv6.dst) && !p_.local->IsMartianSource(f.ipv6.src)) {
      return FrameKind::kParameterProblem;
    }
    return FrameKind::kDone;
  }
  if (!IsOurs(f)) {
    Bump(EngineCounter::not_for_us);
    return FrameKind::kDone;
  }
  switch (f.l3) {
    case net::L3::kArp:
      return FrameKind::kArp;
    case net::L3::kIpv4:
    case net::L3::kIpv6:
      break;
    case net::L3::kOther:
      Bump(EngineCounter::unhandled);
      return FrameKind::kDone;
  }
  if (f.l4 == net::L4::kIcmpv6 && (f.icmp.type == net::kIcmpv6NeighborSolicitation ||
                                   f.icmp.type == net::kIcmpv6NeighborAdvertisement)) {
    return FrameKind::kNdp;
  }
  if (!p_.local->Contains(f.dst)) {
    Bump(EngineCounter::not_for_us);
    return FrameKind::kDone;
  }
  if (p_.local->IsMartianSource(f.src)) {
    Bump(EngineCounter::martian_source);
    return FrameKind::kDone;
  }
  if (f.fragment) {
    Bump(EngineCounter::fragments);
    if (f.protocol == net::kIpProtoUdp) return FrameKind::kFragment;
    Bump(EngineCounter::fragments_not_udp);
    return FrameKind::kDone;
  }
  if (f.l4 == net::L4::kUdp) return FrameKind::kUdp;
  if (f.l4 == net::L4::kOther) {  // TCP too: the stack has none
    Bump(EngineCounter::ip_unknown_protocol);
    return FrameKind::kUnknownProtocol;
  }
  if (f.l4 == net::L4::kIcmpv4 || f.l4 == net::L4::kIcmpv6) {
    const bool v6 = f.l4 == net::L4::kIcmpv6;
    if (net::IsIcmpError(v6, f.icmp.type)) return FrameKind::kIcmpError;
    if (f.icmp.type == (v6 ? net::kIcmpv6EchoRequest : net::kIcmpv4EchoRequest)) {
      return FrameKind::kEcho;
    }
  }
  Bump(EngineCounter::unhandled);
  return FrameKind::kDone;
}

// ---- Transmit -------------------------------------------------------------------------------

std::optional<link::FrameBuffer> PollEngine::NewTxFrame(size_t packet_bytes) {
  if (tx_batch_.size() >= kTxBatch) FlushTx();
  std::optional<link::FrameBuffer> f =
      link_->AllocateTx(static_cast<uint32_t>(packet_bytes + kLinkHeaders));
  if (!f.has_value()) Bump(EngineCounter::tx_no_buffer);
  return f;
}

void PollEngine::QueueTx(link::FrameBuffer frame, std::optional<size_t> length, TxOwner owner) {
  if (!length.has_value()) {
    link_->Release({&frame, 1});  // did not fit: cannot happen for MTU-checked frames
    Bump(EngineCounter::tx_no_buffer);
    if (owner.socket != nullptr) owner.socket->CountSendDrop();
    return;
  }
  frame.length = static_cast<uint32_t>(*length);
  tx_batch_.push_back(frame);
  tx_owners_.push_back(std::move(owner));
}

void PollEngine::FlushTx() {
  if (tx_batch_.empty()) return;
  const size_t sent = link_->Transmit(tx_batch_);
  if (sent < tx_batch_.size()) {
    // The TX ring is full: these frames are dropped (the link counted tx_ring_full).
    link_->Release(std::span(tx_batch_).subspan(sent));
  }
  for (size_t i = 0; i < tx_owners_.size(); ++i) {
    const TxOwner& o = tx_owners_[i];
    if (o.socket == nullptr) continue;
    if (i < sent) {
      o.socket->CountSent(o.bytes);
    } else {
      o.socket->CountSendDrop();
    }
  }
  tx_batch_.clear();
  tx_owners_.clear();
}

net::LinkAddresses PollEngine::LinkTo(const net::MacAddress& dst) const {
  std::optional<net::VlanTag> tag;
  if (p_.vlan != 0) tag = net::VlanTag{.tpid = net::kEtherTypeVlan, .tci = p_.vlan};
  return {link_->info().mac, dst, tag};
}

// ---- From other threads ---------------------------------------------------------------------

void PollEngine::Wake() {
  const uint64_t one = 1;
  (void)!write(wake_fd_, &one, sizeof(one));
}

bool PollEngine::QueueSend(std::unique_ptr<SendRequest> request) {
  if (!sends_.TryPush(request.get())) {
    tx_queue_full_.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  (void)request.release();  // the poll thread's now
  // Read with a read-modify-write, as the poll thread sets it: the two are ordered on this one
  // flag, so either we see it asleep or it sees the request (a plain load here, after the
  // push's relaxed CAS, could miss both ways on a weakly ordered CPU).
  if (sleeping_.fetch_add(0, std::memory_order_acq_rel) != 0) Wake();
  return true;
}

std::optional<SendRequest*> PollEngine::PopSend() { return sends_.TryPop(); }

absl::Status PollEngine::CheckFrameAccounting() {
  if (!thread_.joinable()) return link_->CheckFrameAccounting();
  std::promise<absl::Status> done;
  std::future<absl::Status> result = done.get_future();
  {
    std::lock_guard<std::mutex> lock(check_mu_);
    if (check_request_ != nullptr) return absl::UnavailableError("a check is running");
    check_request_ = &done;
    check_pending_.store(true, std::memory_order_release);
  }
  Wake();
  if (result.wait_for(kCheckTimeout) != std::future_status::ready) {
    std::lock_guard<std::mutex> lock(check_mu_);
    if (check_request_ == &done) {
      check_request_ = nullptr;
      check_pending_.store(false);
      return absl::DeadlineExceededError("a poll thread did not answer within 2 s");
    }
  }
  return result.get();
}

void PollEngine::AddCounters(StackCounters& c) const {
  auto get = [this](EngineCounter k) {
    return counters_[static_cast<int>(k)].load(std::memory_order_relaxed);
  };
#define QUADSOCK_ADD(name, help) c.name += get(EngineCounter::name);
  QUADSOCK_ENGINE_COUNTERS(QUADSOCK_ADD)
#undef QUADSOCK_ADD
  c.tx_queue_full += tx_queue_full_.load(std::memory_order_relaxed);
  c.reassembly_held_bytes += reassembly_bytes_.load(std::memory_order_relaxed);
  for (int i = 0; i < net::kParseErrorCount; ++i) {
    c.parse_errors[i] += parse_errors_[i].load(std::memory_order_relaxed);
  }
}

}  // namespace quadsock::stack
