// The poll engine: one per link (an RX queue and its TX ring), run by one poll thread. Each turn
// it receives a batch of frames, parses and classifies them (plain IPv4/UDP through a fast
// path), looks the batch's UDP flows up in the socket table together, and hands every frame in
// arrival order to its protocol: UDP delivery (udp_protocol.h), neighbour resolution for ARP and
// NDP (neighbor_resolution.h), ICMP (icmp_protocol.h), and publishes the batch's datagrams in
// data channels (staged_channels.h). Then it sends what sockets queued for it, flushes its TX
// batch, reaps completions, refills, runs the neighbour timers, and wakes the applications of
// data channels it published in, at its idle turn or every few busy ones.
//
// The protocols answer through the engine they were called on: NewTxFrame, build the frame,
// QueueTx; the engine hands its TX batch to the link. Counters are the engine's own (one
// writer: its poll thread), summed by Stack::Counters. Internal to the stack.
//
//   PollEngine e(0, std::move(link), protocols, send_queue_depth);
//   e.Start(running);                  // a poll thread runs e.Run() while `running`
//   e.Turn(ctx);                       // or one turn on the caller's thread (tests)
#ifndef QUADSOCK_STACK_INTERNAL_POLL_ENGINE_H_
#define QUADSOCK_STACK_INTERNAL_POLL_ENGINE_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <thread>
#include <vector>

#include "absl/random/random.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "stack/bounded_queue.h"
#include "stack/demux/socket_table.h"
#include "stack/internal/local_addresses.h"
#include "stack/internal/neighbor_resolution.h"
#include "stack/internal/reassembly.h"
#include "stack/internal/staged_channels.h"
#include "stack/internal/udp_protocol.h"
#include "stack/link/link.h"
#include "stack/net/frame.h"
#include "stack/net/frame_builder.h"
#include "stack/net/parse_error.h"
#include "stack/stack_counters.h"

namespace quadsock::stack {

class IcmpProtocol;

constexpr size_t kRxBatch = 64;
constexpr size_t kTxBatch = 64;

// What the engine hands frames to, and what it reads: all owned by the Stack, which outlives
// its engines.
struct Protocols {
  const LocalAddresses* local;
  uint16_t vlan;  // the stack's 802.1Q VLAN id, 0 for none (StackOptions::vlan)
  std::function<absl::Time()> clock;       // monotonic: the timers' (StackOptions::clock)
  std::function<absl::Time()> wall_clock;  // for datagrams' arrival times only
  demux::SocketTable* table;
  UdpProtocol* udp;
  NeighborResolution* neighbors;
  IcmpProtocol* icmp;
  Reassembly::Limits reassembly;  // this engine's share
};

class PollEngine {
 public:
  // `index`: the engine's place among the stack's, which names its ring in data channels.
  // `spin`: how long the thread keeps turning after its last received frame (StackOptions).
  PollEngine(uint32_t index, std::unique_ptr<link::Link> link, Protocols protocols,
             size_t send_queue_depth, absl::Duration spin = absl::ZeroDuration());
  ~PollEngine();  // after Join
  PollEngine(const PollEngine&) = delete;
  PollEngine& operator=(const PollEngine&) = delete;

  // ---- The loop ----
  // Starts the poll thread: it runs turns while `running` is true.
  void Start(const std::atomic<bool>& running);
  // Wakes the poll thread and waits for it to end (after `running` went false).
  void Join();
  // One turn on the calling thread (Stack::PollOnce): the frames received. Before that thread
  // reports a quiescent state or goes offline, WakeChannels (the turn may leave data channels'
  // wake-ups for a later turn, and holds those channels until then).
  size_t Turn(demux::LookupContext& ctx);
  void WakeChannels() { staged_.WakeDeferred(); }
  // The lookup context for turns on other threads than the poll thread's (made on first use).
  demux::LookupContext& manual_lookup();
  void DropManualLookup() { manual_lookup_.reset(); }

  // ---- For the protocols, on the poll thread ----
  link::Link& link() { return *link_; }
  const link::LinkInfo& info() const { return link_->info(); }
  // A free TX frame for an IP packet (or an ARP message) of up to `packet_bytes`, with room for
  // its Ethernet header and a VLAN tag; flushes the batch first when it is full. None (counted)
  // when the link has no free buffer that long.
  std::optional<link::FrameBuffer> NewTxFrame(size_t packet_bytes);
  // The Ethernet header and a VLAN tag: what NewTxFrame adds to the packet's bytes.
  static constexpr size_t kLinkHeaders = 14 + 4;
  // Puts a frame built to `length` bytes into the TX batch (none: it did not fit, and is freed).
  // `owner`: the socket whose datagram it is, counted as sent once the TX ring took it.
  void QueueTx(link::FrameBuffer frame, std::optional<size_t> length, TxOwner owner = {});
  // Our end of a frame to `dst`: the link's MAC address and the stack's VLAN tag, if any.
  net::LinkAddresses LinkTo(const net::MacAddress& dst) const;
  // Recent neighbour answers, for sends without the neighbour cache's lock.
  NeighborShortcut& neighbor_shortcut() { return neighbor_shortcut_; }
  UdpProtocol& udp() { return *p_.udp; }
  absl::Time turn_time() const { return turn_time_; }  // the stack clock at this turn's start
  // For datagrams sent in fragments (TransmitUdp): a buffer to build the whole datagram in,
  // and their identifications (IPv4: a counter from a random start; IPv6: random, RFC 7739).
  std::vector<uint8_t>& fragment_scratch() { return fragment_scratch_; }
  uint32_t NextIpv4Id() { return next_ipv4_id_++; }
  uint32_t RandomIpv6Id() { return absl::Uniform<uint32_t>(bitgen_); }
  // The next datagram Stack::Send queued for this engine (UdpProtocol::SendQueued).
  std::optional<SendRequest*> PopSend();
  void Bump(EngineCounter c, uint64_t n = 1) {
    std::atomic<uint64_t>& a = counters_[static_cast<int>(c)];
    a.store(a.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
  }

  // ---- From any thread ----
  // Hands a datagram to this engine's poll thread and wakes it if it sleeps; false when the
  // send queue is full (counted as tx_queue_full; the request is freed).
  bool QueueSend(std::unique_ptr<SendRequest> request);
  size_t send_queue_capacity() const { return sends_.capacity(); }
  // A descriptor an application shares with us (a data channel's TX eventfd) whose writes wake
  // the idle poll thread: watched edge-triggered and never read or written, so that nothing
  // the application does to it (its flags, its counter) can make this thread wait. Any thread.
  void WatchSharedFd(int fd);
  void UnwatchSharedFd(int fd);
  // The link's frame accounting: checked between two turns by the poll thread when it runs.
  absl::Status CheckFrameAccounting();
  // Adds this engine's counters to `c`.
  void AddCounters(StackCounters& c) const;

 private:
  // What a received frame needs, once parsed: nothing more (dropped or unhandled, and
  // counted), a socket lookup (UDP to one of our addresses), or an answer.
  enum class FrameKind : uint8_t {
    kDone,
    kUdp,
    kArp,
    kNdp,
    kEcho,
    kIcmpError,
    kParameterProblem,  // refused for an IPv6 extension header, answered with the ICMPv6 error
    kUnknownProtocol,   // to us, of a protocol we do not speak: answered with protocol unreachable
    kFragment,          // to us: reassembled in (1)
  };

  // ReceiveBatch's working space for one batch.
  struct RxBatch {
    net::ParsedFrame parsed;  // the frame being parsed
    std::array<FrameKind, kRxBatch> kind;
    // Of the UDP datagrams, in order: flow, payload (in the frame), socket.
    std::array<demux::FlowKey, kRxBatch> keys;
    std::array<std::span<const uint8_t>, kRxBatch> payloads;
    std::array<std::optional<demux::LookupResult>, kRxBatch> found;
    // The datagrams reassembly completed in this batch (payloads point into them).
    std::vector<std::vector<uint8_t>> reassembled;
  };

  void Run(const std::atomic<bool>& running);
  // `now` on the stack's (monotonic) clock; `arrival` the same instant on the wall clock.
  void ReceiveBatch(demux::LookupContext& ctx, std::span<const link::FrameBuffer> frames,
                    absl::Time now, absl::Time arrival);
  void ReadWallClock();  // sets wall_offset_
  FrameKind Classify(std::span<const uint8_t> bytes, net::ParsedFrame& f);
  // A fragment to us (rx_.parsed, of `bytes`): true when it completed a UDP datagram, whose
  // flow and payload are then the batch's next.
  bool Reassemble(std::span<const uint8_t> bytes, size_t udp, absl::Time now);
  // Whether a parsed frame came to our MAC (or a multicast one) on our VLAN.
  bool IsOurs(const net::ParsedFrame& f) const;
  void FlushTx();
  void Wake();
  void BumpParse(net::ParseError e) {
    std::atomic<uint64_t>& a = parse_errors_[static_cast<int>(e)];
    a.store(a.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  }

  const uint32_t index_;
  const absl::Duration spin_;
  const std::unique_ptr<link::Link> link_;
  const Protocols p_;
  RxBatch rx_;
  BoundedQueue<SendRequest*> sends_;
  StagedChannels staged_;  // data channels this engine published in but has not woken yet
  const int wake_fd_;
  const int epoll_fd_;  // the link's wait fd, wake_fd_, and WatchSharedFd's
  std::atomic<uint32_t> sleeping_{0};  // 1 while the poll thread sleeps (see QueueSend)
  std::thread thread_;
  std::unique_ptr<demux::LookupContext> manual_lookup_;
  NeighborShortcut neighbor_shortcut_;
  Reassembly reassembly_;
  std::vector<uint8_t> fragment_scratch_;
  absl::BitGen bitgen_;
  uint32_t next_ipv4_id_ = absl::Uniform<uint32_t>(bitgen_);
  std::vector<link::FrameBuffer> tx_batch_;
  std::vector<TxOwner> tx_owners_;  // one per frame of tx_batch_
  absl::Time next_timer_ = absl::InfinitePast();
  absl::Time turn_time_ = absl::InfinitePast();  // the stack clock at the start of the last turn
  // The wall clock minus the monotonic one, read with the timers: a turn's monotonic time plus
  // this is its arrival time, without a second clock read per turn.
  absl::Duration wall_offset_ = absl::ZeroDuration();
  std::array<std::atomic<uint64_t>, kEngineCounterCount> counters_{};
  std::array<std::atomic<uint64_t>, net::kParseErrorCount> parse_errors_{};
  std::atomic<uint64_t> tx_queue_full_{0};  // written by QueueSend's callers
  std::atomic<uint64_t> reassembly_bytes_{0};  // reassembly_.bytes_held(), for other threads
  // A frame accounting check asked for by another thread, run between two turns.
  std::mutex check_mu_;
  std::promise<absl::Status>* check_request_ = nullptr;
  std::atomic<bool> check_pending_{false};
};

}  // namespace quadsock::stack

#endif  // QUADSOCK_STACK_INTERNAL_POLL_ENGINE_H_
