// quadsock's UDP stack, in-process: sockets over one or more Links, with the poll engine,
// ARP/NDP, ICMP and routing. This is the C++ API that quadsockd and the benchmarks use.
//
// One poll thread per link (queue) runs the data path: receive a batch of up to 64 frames,
// parse them (stack/net; plain IPv4/UDP through a fast path), look the batch's UDP flows up in
// the socket table together (stack/demux, lock-free, with prefetching), then handle every frame
// in arrival order: deliver, or answer ARP/NDP/ICMP; then send what sockets queued, reap
// completions, refill, and run timers. Control-plane calls
// (Open, Bind, Connect, ...) come from any thread and change the socket table under its lock;
// nothing the data path waits on is held by them. Send() queues the datagram for the poll
// thread without blocking; a full send queue is RESOURCE_EXHAUSTED.
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

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include <mutex>

#include "absl/base/thread_annotations.h"
#include "absl/time/time.h"
#include "stack/demux/socket_table.h"
#include "stack/icmp_error.h"
#include "stack/link/link.h"
#include "stack/neighbors.h"
#include "stack/net/address.h"
#include "stack/net/parse_error.h"
#include "stack/receive_budget.h"
#include "stack/routes.h"
#include "stack/udp_socket.h"

namespace quadsock::net {
struct ParsedFrame;
struct LinkAddresses;
}  // namespace quadsock::net

namespace quadsock::stack {

struct LocalAddresses;
using SocketId = demux::SocketId;

struct StackOptions {
  std::vector<net::IpPrefix> addresses;   // ours, with their connected networks
  std::vector<net::IpAddress> gateways;   // at most one per family
  // The 802.1Q VLAN the stack's addresses are on (1-4094): it takes only frames with that one
  // tag and tags all it sends. 0: untagged (priority-tagged frames, VLAN id 0, count as such).
  uint16_t vlan = 0;
  bool hash4 = true;                      // the seed's switch (CONFIG_BASE_SMALL when false)
  uint16_t ephemeral_low = 32768;
  uint16_t ephemeral_high = 60999;
  size_t max_sockets = 1 << 20;
  size_t receive_queue_depth = 256;       // datagrams per socket unless Open says otherwise
  size_t max_receive_queue_depth = 65536;
  // Bytes that all sockets' receive queues may hold together (payloads and their records); past
  // it datagrams are dropped and counted (receive_budget_full, and each socket's rx_dropped).
  size_t max_receive_bytes = size_t{512} << 20;
  size_t send_queue_depth = 8192;         // datagrams waiting for a poll thread, per link
  uint32_t icmp_errors_per_second = 1000; // ICMP error rate limit (the kernel's defaults)
  uint32_t icmp_error_burst = 50;
  NeighborTable::Options neighbors;
  std::function<absl::Time()> clock = [] { return absl::Now(); };
};

struct OpenOptions {
  bool v6only = false;
  bool reuse_port = false;
  uint32_t bound_device = 0;
  size_t receive_queue_depth = 0;  // 0: the stack's default
};

struct SocketStatus {
  demux::SocketInfo info;
  SocketCounters counters;
  // A hard ICMP error for a connected socket's datagrams, which its next Send will report.
  std::optional<IcmpError> pending_error;
};

// Why frames did not make it to a socket, counted per stack.
struct StackCounters {
  uint64_t rx_frames = 0;
  uint64_t parse_errors[net::kParseErrorCount] = {};
  uint64_t not_for_us = 0;          // for another host: its MAC or IP address, another VLAN
  uint64_t fragments = 0;           // IP fragments: no reassembly, dropped
  uint64_t unhandled = 0;           // other protocols and ethertypes; echo requests from a
                                    // source no host sends from (broadcast, multicast)
  uint64_t udp_delivered = 0;
  uint64_t udp_no_socket = 0;       // answered with port unreachable (unless rate-limited)
  uint64_t icmp_echo_replies = 0;
  uint64_t icmp_errors_sent = 0;
  uint64_t icmp_errors_rate_limited = 0;
  uint64_t icmp_errors_received = 0;   // quoting a datagram of one of our sockets
  uint64_t icmp_errors_unmatched = 0;  // quoting no datagram of ours: no such socket, not UDP,
                                       // or not from one of our addresses
  uint64_t arp_replies = 0;
  uint64_t ndp_advertisements = 0;
  uint64_t neighbor_messages_ignored = 0;  // ARP and NDP speaking for no neighbour (multicast,
                                          // broadcast, ours) or with a non-unicast MAC
  uint64_t tx_no_route = 0;
  uint64_t tx_no_buffer = 0;
  uint64_t tx_queue_full = 0;
  uint64_t receive_budget_full = 0;  // datagrams dropped: max_receive_bytes were queued
  uint64_t receive_bytes_queued = 0; // now, in all receive queues (a gauge)
  NeighborCounters neighbors;
};

class Stack {
 public:
  static absl::StatusOr<std::unique_ptr<Stack>> Create(
      StackOptions options, std::vector<std::unique_ptr<link::Link>> links);
  // What Create refuses in `options` alone (no address, a VLAN id out of range), for callers
  // that set up the interface first: INVALID_ARGUMENT saying why.
  static absl::Status CheckOptions(const StackOptions& options);
  ~Stack();  // stops the poll threads

  // Starts one poll thread per link. FAILED_PRECONDITION if already started.
  absl::Status Start();
  void Stop();
  // One turn of every link's poll loop on the calling thread (tests, benchmarks): returns the
  // frames received. Not while poll threads run.
  size_t PollOnce();

  absl::StatusOr<SocketId> Open(net::Family family, const OpenOptions& options = {});
  absl::StatusOr<net::Endpoint> Bind(SocketId id, const net::Endpoint& local);
  absl::StatusOr<net::Endpoint> Connect(SocketId id, const net::Endpoint& peer);
  absl::Status Disconnect(SocketId id);
  absl::StatusOr<net::Endpoint> Rehash(SocketId id, std::optional<net::IpAddress> address,
                                       std::optional<uint16_t> port);
  absl::Status Close(SocketId id);
  absl::StatusOr<SocketStatus> Get(SocketId id) const;
  std::vector<SocketId> List() const;

  // Queues one datagram. `destination` is required unless the socket is connected (then it
  // must be absent or equal to the peer). An unbound socket is bound to an ephemeral port.
  // INVALID_ARGUMENT: too big for the MTU (no fragmentation) or a bad destination;
  // FAILED_PRECONDITION: no destination; RESOURCE_EXHAUSTED: send queue full; ABORTED: a hard
  // ICMP error came back for the connected socket's datagrams since its last send
  // ("ECONNREFUSED (ICMP port unreachable)"): reported once, and this datagram not sent.
  // (Linux's recv() and poll() report it too; here only Send does.)
  absl::Status Send(SocketId id, std::span<const uint8_t> payload,
                    std::optional<net::Endpoint> destination = std::nullopt);
  // The next queued datagram, if any; never blocks.
  absl::StatusOr<std::optional<ReceivedDatagram>> Receive(SocketId id);
  // Blocks until the socket has a datagram (true), or `timeout` passes (false). A socket closed
  // meanwhile wakes the waiter; the next call says NOT_FOUND.
  absl::StatusOr<bool> WaitForData(SocketId id, absl::Duration timeout);
  absl::Status SetReceiveCallback(SocketId id, ReceiveCallback callback);

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
  struct Engine;
  struct SendRequest;
  // The socket a frame on the way out is a datagram of (none for the stack's own frames): it
  // counts the datagram sent once the TX ring took it, or dropped.
  struct TxOwner {
    std::shared_ptr<UdpSocket> socket;
    size_t bytes;  // no initializer, so that `TxOwner owner = {}` works inside Stack
  };
  explicit Stack(StackOptions options);

  // The socket, shared so that it outlives a concurrent Close; takes mu_ itself.
  absl::StatusOr<std::shared_ptr<UdpSocket>> FindSocket(SocketId id) const;
  // After a connect or disconnect: the socket's kept ICMP error was about another peer.
  void ForgetError(SocketId id);
  absl::Status CheckLocal(const net::IpAddress& address) const;
  // Whether `peer` can be sent to (or connected to) from `socket`: a unicast address, a port,
  // and the IP version of the socket's address if it has one. INVALID_ARGUMENT saying why.
  absl::Status CheckPeer(const net::Endpoint& peer, const demux::SocketInfo& socket) const;

  // The data path, on a poll thread (or PollOnce's caller).
  void RunEngine(Engine& engine);
  size_t Turn(Engine& engine, demux::LookupContext& ctx);
  void ReceiveBatch(Engine& engine, demux::LookupContext& ctx, const LocalAddresses& local,
                    std::span<const link::FrameBuffer> frames, absl::Time now);
  // What a received frame needs, once parsed: nothing more (dropped or unhandled, and
  // counted), a socket lookup (UDP to one of our addresses), or an answer.
  enum class FrameKind : uint8_t { kDone, kUdp, kArp, kNdp, kEcho, kIcmpError };
  FrameKind Classify(Engine& engine, const LocalAddresses& local, std::span<const uint8_t> bytes,
                     net::ParsedFrame& f);
  // Whether a frame to `dst` is for the link whose address is `ours` (or a multicast).
  static bool ForThisLink(const net::MacAddress& dst, const net::MacAddress& ours) {
    return dst == ours || dst.IsMulticast();
  }
  static UdpSocket& SocketOf(const demux::LookupResult& r) {
    return *reinterpret_cast<UdpSocket*>(r.cookie);
  }
  void HandleArp(Engine& engine, const net::ParsedFrame& f, const LocalAddresses& local,
                 absl::Time now);
  void HandleNdp(Engine& engine, const net::ParsedFrame& f, const LocalAddresses& local,
                 absl::Time now);
  // Learns (or refreshes; `create`: adds) a neighbour's MAC from a packet, and sends the
  // datagrams that were waiting for it. An unspecified address teaches nothing.
  void LearnNeighbor(Engine& engine, const net::IpAddress& ip, const net::MacAddress& mac,
                     absl::Time now, bool create);
  void SendEchoReply(Engine& engine, const net::ParsedFrame& f, std::span<const uint8_t> bytes);
  // An ICMP error about a datagram we sent: to the socket that sent it (icmp_error.h).
  void HandleIcmpError(Engine& engine, demux::LookupContext& ctx, const net::ParsedFrame& f,
                       const LocalAddresses& local);
  void SendPortUnreachable(Engine& engine, const net::ParsedFrame& f,
                           std::span<const uint8_t> bytes, absl::Time now);
  void SendQueued(Engine& engine, absl::Time now);
  // Hands a send to `engine`'s poll thread and wakes it if it sleeps; false when the queue is
  // full (counted as tx_queue_full; the request is freed).
  bool QueueSend(Engine& engine, std::unique_ptr<SendRequest> request);
  void SendDatagram(Engine& engine, const SendRequest& request, absl::Time now);
  void TransmitPending(Engine& engine, const std::vector<PendingDatagram>& ready,
                       const net::MacAddress& mac);
  void TransmitUdp(Engine& engine, const net::Endpoint& src, const net::Endpoint& dst,
                   const net::MacAddress& dst_mac, std::span<const uint8_t> payload,
                   std::shared_ptr<UdpSocket> socket);
  void SendProbe(Engine& engine, const net::IpAddress& target);
  std::optional<link::FrameBuffer> NewTxFrame(Engine& engine);
  void QueueTx(Engine& engine, link::FrameBuffer frame, std::optional<size_t> length,
               TxOwner owner = {});
  void FlushTx(Engine& engine);
  bool TakeIcmpErrorToken(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(net_mu_);
  // Our end of a frame to `dst`: the link's MAC address and the stack's VLAN tag, if any.
  net::LinkAddresses LinkTo(Engine& engine, const net::MacAddress& dst) const;

  const StackOptions options_;
  std::unique_ptr<demux::SocketTable> table_;
  const std::shared_ptr<ReceiveBudget> receive_budget_;

  // std::mutex, not absl::Mutex: Debian's Abseil is not built for ThreadSanitizer.
  mutable std::mutex mu_;  // control plane: the sockets map
  absl::flat_hash_map<SocketId, std::shared_ptr<UdpSocket>> sockets_ ABSL_GUARDED_BY(mu_);

  // Routes and neighbours: read by poll threads for ARP/NDP and sends, changed by admin calls.
  mutable std::mutex net_mu_;
  RouteTable routes_ ABSL_GUARDED_BY(net_mu_);
  NeighborTable neighbors_ ABSL_GUARDED_BY(net_mu_);
  double icmp_tokens_ ABSL_GUARDED_BY(net_mu_);
  absl::Time icmp_refill_ ABSL_GUARDED_BY(net_mu_);

  // Our addresses for the data path: lock-free reads, replaced whole, freed after a grace period.
  std::atomic<const LocalAddresses*> local_{nullptr};

  std::vector<std::unique_ptr<Engine>> engines_;
  std::atomic<bool> running_{false};
};

}  // namespace quadsock::stack

#endif  // QUADSOCK_STACK_STACK_H_
