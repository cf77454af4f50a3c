// quadsock's UDP stack, in-process: sockets over one or more Links, with ARP/NDP, ICMP and
// routing. This is the C++ API that quadsockd and the benchmarks use.
//
// One poll thread per link (queue) runs the data path (stack/internal/poll_engine.h): receive a
// batch of up to 64 frames, parse them (stack/net), look the batch's UDP flows up in the socket
// table together (stack/demux, lock-free), then hand every frame in arrival order to its
// protocol: UDP (internal/udp_protocol.h), neighbour resolution for ARP and NDP
// (internal/neighbor_resolution.h) or ICMP (internal/icmp_protocol.h); then send what sockets
// queued, reap completions, refill, and run timers. Control-plane calls (Open, Bind, Connect,
// ...) come from any thread and change the socket table under its lock; nothing the data path
// waits on is held by them. Send() queues the datagram for a poll thread without blocking; a
// full send queue is RESOURCE_EXHAUSTED.
//
//   StackOptions o;
//   o.addresses = {*net::IpPrefix::Parse("10.1.0.2/24")};
//   std::unique_ptr<Stack> stack = Stack::Create(o, std::move(links)).value();
//   stack->Start();                                   // or PollOnce() from a test
//   SocketId s = stack->Open(net::Family::kV4).value();
//   stack->Bind(s, *net::Endpoint::Parse("0.0.0.0:4000"));
//   stack->Send(s, payload, *net::Endpoint::Parse("10.1.0.1:5000"));
//   std::optional<ReceivedDatagram> d = stack->Receive(s).value();
#ifndef QUADSOCK_STACK_STACK_H_
#define QUADSOCK_STACK_STACK_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <thread>
#include <vector>

#include <condition_variable>
#include <mutex>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "stack/demux/socket_table.h"
#include "stack/icmp_error.h"
#include "stack/internal/local_addresses.h"
#include "stack/link/link.h"
#include "stack/monotonic_clock.h"
#include "stack/neighbors.h"
#include "stack/net/address.h"
#include "stack/receive_budget.h"
#include "stack/routes.h"
#include "stack/socket_types.h"
#include "stack/stack_counters.h"

namespace quadsock::channel {
class Channel;
}  // namespace quadsock::channel

namespace quadsock::stack {

class IcmpProtocol;
class NeighborResolution;
class PollEngine;
class UdpProtocol;
class UdpSocket;
using SocketId = demux::SocketId;

struct StackOptions {
  std::vector<net::IpPrefix> addresses;   // ours, with their connected networks
  std::vector<net::IpAddress> gateways;   // at most one per family
  // The 802.1Q VLAN the stack's addresses are on (1-4094): it takes only frames with that one
  // tag and tags all it sends. 0: untagged (priority-tagged frames, VLAN id 0, count as such).
  uint16_t vlan = 0;
  bool hash4 = true;  // false: no hash4, as the kernel built with CONFIG_BASE_SMALL
  uint16_t ephemeral_low = 32768;
  uint16_t ephemeral_high = 60999;
  size_t max_sockets = 1 << 20;
  size_t receive_queue_depth = 256;       // datagrams per socket unless Open says otherwise
  size_t max_receive_queue_depth = 65536;
  // Bytes that all sockets' receive queues may hold together: each queue's cells (reserved at
  // Open, for the socket's life: an Open past it is RESOURCE_EXHAUSTED) and the datagrams
  // queued (payloads and their records; past it they are dropped and counted,
  // receive_budget_full and each socket's rx_dropped).
  size_t max_receive_bytes = size_t{512} << 20;
  size_t send_queue_depth = 8192;         // datagrams waiting for a poll thread, per link
  // How long a poll thread keeps turning after the last frame it received before it sleeps
  // (quadsockd's --poll_spin_us): zero, it sleeps at once. A reply a program sends within it
  // is sent with no wake-up, and the next frame is taken with none.
  absl::Duration poll_spin = absl::ZeroDuration();
  uint32_t icmp_errors_per_second = 1000; // ICMP error rate limit (the kernel's defaults)
  uint32_t icmp_error_burst = 50;
  NeighborTable::Options neighbors;
  // IP reassembly (stack/internal/reassembly.h): the bytes all datagrams being put together may
  // hold, shared equally by the poll engines (each reassembles what its RX queue receives).
  size_t reassembly_bytes = size_t{4} << 20;
  // The timers' clock (neighbours, the ICMP rate limit, the poll loop's pacing): monotonic, so
  // that a step of the wall clock neither fires nor freezes them. Tests pass a fake.
  std::function<absl::Time()> clock = MonotonicNow;
  // The wall clock, for the arrival times datagrams carry to applications only. The poll thread
  // reads it once a timer period (100 ms) and adds the difference to the monotonic time of
  // each turn, so a step shows in arrival times within that period.
  std::function<absl::Time()> wall_clock = [] { return absl::Now(); };
};

struct OpenOptions {
  bool v6only = false;
  bool reuse_port = false;
  uint64_t owner = 0;  // reuse_port shares a port with the same owner's sockets only
  uint64_t group = 0;  // the owner's group (demux::SocketOptions::group)
  uint32_t bound_device = 0;
  size_t receive_queue_depth = 0;  // 0: the stack's default
  demux::PmtuDiscovery pmtu_discovery = demux::PmtuDiscovery::kWant;
  // The owner's share of the stack's receive budget (Stack::NewReceiveShare), charged for the
  // queue's cells and its datagrams; none: the stack's budget alone.
  std::shared_ptr<ReceiveBudget> receive_share;
};

struct SocketStatus {
  demux::SocketInfo info;
  SocketCounters counters;
  // A hard ICMP error for a connected socket's datagrams, which its next Send will report.
  std::optional<IcmpError> pending_error;
  bool on_channel = false;  // its datagrams go to a data channel (PutOnChannel)
  // A connected socket's path MTU to its peer (the link's unless ICMP lowered it); else 0.
  size_t path_mtu = 0;
};

class Stack {
 public:
  static absl::StatusOr<std::unique_ptr<Stack>> Create(
      StackOptions options, std::vector<std::unique_ptr<link::Link>> links);
  // What Create refuses in `options` alone (no address, a VLAN id out of range), for callers
  // that set up the interface first: INVALID_ARGUMENT saying why.
  static absl::Status CheckOptions(const StackOptions& options);
  // A share of the receive budget (--max_receive_mib) of `limit` bytes, for OpenOptions: the
  // sockets opened with it take from it and from the whole, so that an owner that fills its
  // share leaves the rest to the others.
  std::shared_ptr<ReceiveBudget> NewReceiveShare(size_t limit) const {
    return std::make_shared<ReceiveBudget>(limit, receive_budget_);
  }
  ~Stack();  // stops the poll threads

  // Starts one poll thread per link. FAILED_PRECONDITION if already started.
  absl::Status Start();
  void Stop();
  // One turn of every link's poll loop on the calling thread (tests, benchmarks): returns the
  // frames received. Not while poll threads run.
  size_t PollOnce();

  // RESOURCE_EXHAUSTED at max_sockets, or when the receive queue's cells do not fit what is
  // left of max_receive_bytes (given back when the socket is closed and freed).
  absl::StatusOr<SocketId> Open(net::Family family, const OpenOptions& options = {});
  absl::StatusOr<net::Endpoint> Bind(SocketId id, const net::Endpoint& local);
  absl::StatusOr<net::Endpoint> Connect(SocketId id, const net::Endpoint& peer);
  absl::Status Disconnect(SocketId id);
  absl::StatusOr<net::Endpoint> Rehash(SocketId id, std::optional<net::IpAddress> address,
                                       std::optional<uint16_t> port);
  absl::Status Close(SocketId id);
  // Closes many at once, waiting for the poll threads once: a status for each, in order.
  std::vector<absl::Status> Close(std::span<const SocketId> ids);
  absl::StatusOr<SocketStatus> Get(SocketId id) const;
  std::vector<SocketId> List() const;

  // Queues one datagram. `destination` is required unless the socket is connected (then it
  // must be absent or equal to the peer). An unbound socket is bound to an ephemeral port.
  // INVALID_ARGUMENT: too big for the MTU (no fragmentation) or a bad destination (another
  // than a connected socket's peer too);
  // FAILED_PRECONDITION: no destination; RESOURCE_EXHAUSTED: send queue full; ABORTED: a hard
  // ICMP error came back for the connected socket's datagrams since its last send
  // ("ECONNREFUSED (ICMP port unreachable)"): reported once, and this datagram not sent.
  // (Linux's recv() and poll() report it too; here only Send does.)
  absl::Status Send(SocketId id, std::span<const uint8_t> payload,
                    std::optional<net::Endpoint> destination = std::nullopt);
  // The next queued datagram, if any; never blocks.
  absl::StatusOr<std::optional<ReceivedDatagram>> Receive(SocketId id);
  // A consumer took `n` datagrams off the socket with Receive and lost them (its client went, or
  // could not be written to): counted as the socket's rx_dropped and the stack's stream_dropped
  // (which outlives the socket). Nothing is lost uncounted.
  void CountReceivedButLost(SocketId id, uint64_t n);
  // Blocks until the socket has a datagram (true), or `timeout` passes (false). A socket closed
  // meanwhile wakes the waiter; the next call says NOT_FOUND. RESOURCE_EXHAUSTED at once (and
  // counted, wait_refused) when the process has no descriptor left to wait on: the caller ends
  // its stream rather than calling again. The descriptor is the reader's: EndReading frees it.
  absl::StatusOr<bool> WaitForData(SocketId id, absl::Duration timeout);
  absl::Status SetReceiveCallback(SocketId id, ReceiveCallback callback);
  // Puts the socket on a data channel (stack/channel): its datagrams go there, tagged `index`,
  // instead of to its queue or callback-less Receive. INVALID_ARGUMENT for no channel or one with
  // fewer rings than the stack has poll threads; NOT_FOUND for no socket (or one closed
  // meanwhile: a Close racing this call leaves nothing in the channel's table).
  absl::Status PutOnChannel(SocketId id, std::shared_ptr<channel::Channel> channel,
                            uint32_t index);
  // Takes sockets off their channels, back to their queues, waiting for the poll threads once
  // for them all (a channel of 65,536 sockets waits one grace period, not 65,536). Sockets
  // already gone, or on no channel, are skipped.
  void TakeOffChannels(std::span<const SocketId> ids);
  // Stops sending what the channel's application queues (after TakeOffChannels for its
  // sockets), and lets go of it once the poll threads have.
  void RemoveChannel(const channel::Channel* channel);
  // How many poll threads (links) the stack has: a data channel needs a ring for each.
  size_t poll_threads() const { return engines_.size(); }
  // A socket has one reader at a time (in quadsockd, a Receive or Exchange stream). StartReading
  // claims it, waiting up to `grace` for a reader that is leaving: FAILED_PRECONDITION when
  // another still holds it, NOT_FOUND for no such socket. EndReading gives it back.
  absl::Status StartReading(SocketId id, absl::Duration grace = absl::ZeroDuration());
  void EndReading(SocketId id);

  // Administration.
  StackCounters Counters() const;
  demux::TableStats TableStats() const { return table_->Stats(); }
  size_t TableMemoryBytes() const { return table_->MemoryBytes(); }
  std::vector<NeighborInfo> Neighbors() const;
  absl::Status SetNeighbor(const net::IpAddress& ip, const net::MacAddress& mac);
  absl::Status RemoveNeighbor(const net::IpAddress& ip);
  std::vector<net::IpPrefix> Addresses() const;
  std::optional<net::IpAddress> Gateway(net::Family family) const;
  std::vector<link::LinkInfo> Links() const;
  std::vector<link::LinkCounters> LinkCounters() const;
  bool hash4_enabled() const { return options_.hash4; }
  // Every link's frame accounting: OK, or the first discrepancy. With poll threads running, each
  // link is checked on its own thread between two turns (the kernel may still be moving frames
  // between its rings then; at rest the check is exact).
  absl::Status CheckFrameAccounting() const;

 private:
  explicit Stack(StackOptions options, RouteTable routes);

  // The socket, shared so that it outlives a concurrent Close; takes mu_ itself.
  absl::StatusOr<std::shared_ptr<UdpSocket>> FindSocket(SocketId id) const;
  // After a connect or disconnect: the socket's kept ICMP error was about another peer.
  void ForgetError(SocketId id);
  absl::Status CheckLocal(const net::IpAddress& address) const;
  // Publishes the socket's addresses for sends from its data channel (UdpSocket::PublishInfo).
  void PublishInfo(SocketId id);

  const StackOptions options_;
  // Our addresses and routes: fixed at Create, so every thread reads them without a lock.
  const RouteTable routes_;
  const LocalAddresses local_;
  std::unique_ptr<demux::SocketTable> table_;
  const std::shared_ptr<ReceiveBudget> receive_budget_;
  std::atomic<uint64_t> stream_dropped_{0};  // CountReceivedButLost
  std::atomic<uint64_t> wait_refused_{0};    // WaitForData without a descriptor
  std::atomic<uint64_t> channel_waits_{0};   // grace periods waited for channel moves

  // std::mutex, not absl::Mutex: ThreadSanitizer sees it unaided (sanitizers/tsan.cc).
  mutable std::mutex mu_;  // control plane: the sockets map
  absl::flat_hash_map<SocketId, std::shared_ptr<UdpSocket>> sockets_ ABSL_GUARDED_BY(mu_);
  std::mutex readers_mu_;
  std::condition_variable reader_left_;
  absl::flat_hash_set<SocketId> readers_ ABSL_GUARDED_BY(readers_mu_);

  // The protocols behind the poll engines, and the engines, one per link.
  std::unique_ptr<NeighborResolution> neighbors_;
  std::unique_ptr<IcmpProtocol> icmp_;
  std::unique_ptr<UdpProtocol> udp_;
  std::vector<std::unique_ptr<PollEngine>> engines_;
  std::atomic<bool> running_{false};
};

}  // namespace quadsock::stack

#endif  // QUADSOCK_STACK_STACK_H_
