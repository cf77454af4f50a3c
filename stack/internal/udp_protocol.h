// UDP in the stack: delivery of received datagrams to their sockets, and the send path (a
// datagram queued by Stack::Send -> route -> neighbour -> a frame in the TX batch).
//
// Receive: the poll engine looks a batch's flows up in the socket table and calls Deliver for
// each datagram that found a socket (a datagram that found none is ICMP's: port unreachable).
// Send: Stack::Send checks the datagram on the caller's thread and queues a SendRequest for a
// poll engine (PollEngine::QueueSend); on the poll thread SendQueued routes each one, resolves
// its next hop (NeighborResolution: it may wait there for an answer) and builds its frame.
// Data channels: what an application queued on a channel's TX ring is sent by a poll thread
// (SendFromChannels), checked as Stack::Send checks it, without the socket table's lock (the
// socket's published addresses, ChannelSockets for its index). Internal to the stack.
//
//   udp.SendQueued(engine, now);                           // on the poll thread, each turn
//   TransmitUdp(engine, src, dst, mac, payload, socket);   // a datagram whose next hop is known
#ifndef QUADSOCK_STACK_INTERNAL_UDP_PROTOCOL_H_
#define QUADSOCK_STACK_INTERNAL_UDP_PROTOCOL_H_

#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "stack/channel/channel.h"
#include "stack/internal/channel_sockets.h"
#include "stack/internal/local_addresses.h"
#include "stack/internal/path_mtu.h"

#include "absl/time/time.h"
#include "stack/demux/socket_table.h"
#include "stack/internal/udp_socket.h"
#include "stack/neighbors.h"
#include "stack/net/address.h"
#include "stack/net/ethernet.h"
#include "stack/routes.h"

namespace quadsock::stack {

class NeighborResolution;
class PollEngine;

// A datagram on its way from Stack::Send to a poll thread.
struct SendRequest {
  std::shared_ptr<UdpSocket> socket;
  net::Endpoint src;  // address unspecified: the route's source
  net::Endpoint dst;
  std::string payload;
};

// The socket a frame on the way out is a datagram of (none for the stack's own frames): it
// counts the datagram sent once the TX ring took it, or dropped.
struct TxOwner {
  std::shared_ptr<UdpSocket> socket;
  size_t bytes = 0;
};

class UdpProtocol {
 public:
  // `routes` and `local` are fixed for the stack's life; `neighbors` outlives this. `mtu`: the
  // links' (the largest datagram is mtu less the IP and UDP headers).
  UdpProtocol(const RouteTable& routes, NeighborResolution& neighbors,
              const LocalAddresses& local, size_t mtu)
      : routes_(routes), neighbors_(neighbors), local_(local), mtu_(mtu) {}
  ~UdpProtocol();

  // ---- What a send from `socket` may be (Stack::Send and the data channels' sends alike) ----
  // The largest UDP payload over IPv4 (65,535 less the IP and UDP headers) and over IPv6 (its
  // payload length, 65,535, less the UDP header).
  static constexpr size_t kMaxPayloadV4 = 65507;
  static constexpr size_t kMaxPayloadV6 = 65527;
  // The destination of a `payload_bytes` datagram: `destination`, or the connected peer
  // (FAILED_PRECONDITION without one, or without a route to it); INVALID_ARGUMENT for a peer
  // that is no unicast host, of the other IP version, a connected network's broadcast,
  // loopback or one of our own addresses, a datagram over the largest UDP payload, or over the
  // path MTU from a socket that may not fragment (PmtuDiscovery::kDo).
  absl::StatusOr<net::Endpoint> Destination(const demux::SocketInfo& socket,
                                            std::optional<net::Endpoint> destination,
                                            size_t payload_bytes) const;
  // Whether `peer` can be sent to (or connected to) from `socket`; INVALID_ARGUMENT saying why.
  absl::Status CheckPeer(const net::Endpoint& peer, const demux::SocketInfo& socket) const;
  // The source of a bound socket's datagrams (unspecified address: the route's).
  static net::Endpoint Source(const demux::SocketInfo& socket);
  // The IP and UDP headers' bytes in a datagram's frame.
  static size_t Headroom(net::Family f);

  // The socket a lookup found (the table's cookie is the stack's UdpSocket).
  static UdpSocket& SocketOf(const demux::LookupResult& r) {
    return *reinterpret_cast<UdpSocket*>(r.cookie);
  }
  // Poll thread: one received datagram of `flow` to the socket the lookup found (a datagram for
  // a data channel is staged there, and `staged` publishes it with the rest of the batch).
  static UdpSocket::Delivery Deliver(const demux::LookupResult& found,
                                     const demux::FlowKey& flow,
                                     std::span<const uint8_t> payload, absl::Time now,
                                     StagedChannels& staged) {
    return SocketOf(found).Deliver({flow.src, flow.src_port}, {flow.dst, flow.dst_port},
                                   payload, now, &staged);
  }

  // The MTU datagrams to `dst` are sent with: the link's, or less where ICMP said so.
  size_t PathMtu(const net::IpAddress& dst) const { return path_mtu_.Get(dst.Unmapped(), mtu_); }
  size_t link_mtu() const { return mtu_; }
  PathMtuCache& path_mtu() { return path_mtu_; }

  // Poll thread: sends (at most a turn's worth of) the datagrams queued for `engine`.
  void SendQueued(PollEngine& engine, absl::Time now);

  // ---- Data channels' TX rings (stack/channel) ----
  // Control plane: a channel's TX ring is drained once added; its sockets by session index.
  // AddChannel returns false when it was added already. RemoveChannel waits for the poll
  // threads before it lets go of the channel.
  bool AddChannel(std::shared_ptr<channel::Channel> c);
  void RemoveChannel(const channel::Channel* c);
  // False for an index the table cannot take (over ChannelSockets::kMaxIndex) or no such
  // channel. Null takes the index out.
  bool SetChannelSocket(const channel::Channel* c, uint32_t index,
                        std::shared_ptr<UdpSocket> socket);
  // Poll thread: sends (at most a turn's worth of) what the applications queued.
  void SendFromChannels(PollEngine& engine, absl::Time now);
  // Poll thread, before it sleeps: marks every TX ring sleeping; true when one has datagrams
  // after all. After it wakes: DisarmChannelSends.
  bool ArmChannelSends();
  void DisarmChannelSends();

 private:
  struct ChannelEntry {
    std::shared_ptr<channel::Channel> channel;
    ChannelSockets sockets;
  };
  void SendDatagram(PollEngine& engine, SendRequest& request, absl::Time now);
  // Routes a datagram, resolves its next hop (it may wait there: `owned` makes its payload's
  // copy) and puts its frame into the TX batch; a datagram with no route is the socket's drop.
  void Route(PollEngine& engine, std::shared_ptr<UdpSocket> socket, net::Endpoint src,
             net::Endpoint dst, std::span<const uint8_t> payload, absl::Time now,
             absl::FunctionRef<std::string()> owned);
  void SendFromChannel(PollEngine& engine, ChannelEntry& entry,
                       const channel::OutgoingDatagram& d, absl::Time now);
  // Sends from one channel until it is empty or `budget` descriptors were read; returns how
  // many were read.
  size_t DrainChannel(PollEngine& engine, ChannelEntry& entry, size_t budget, absl::Time now);

  const RouteTable& routes_;
  NeighborResolution& neighbors_;
  const LocalAddresses& local_;
  const size_t mtu_;
  PathMtuCache path_mtu_{4096};
  // The channels whose TX rings are drained: a snapshot the poll threads read without a lock,
  // replaced whole under channels_mu_ (the old one freed after a grace period).
  std::mutex channels_mu_;
  std::vector<std::unique_ptr<ChannelEntry>> channels_;  // guarded by channels_mu_
  std::atomic<const std::vector<ChannelEntry*>*> channel_snapshot_{nullptr};
  size_t next_channel_ = 0;  // where the next turn starts (the draining poll thread's)
};

// Builds a datagram's frame to `dst_mac` and puts it into `engine`'s TX batch, or its fragments
// when it is over the path MTU (unless its socket may not fragment: then it is dropped, which
// only a path MTU that fell after Destination checked it can cause); a datagram with no room
// (no free buffer) counts as the socket's send drop.
void TransmitUdp(PollEngine& engine, const net::Endpoint& src, const net::Endpoint& dst,
                 const net::MacAddress& dst_mac, std::span<const uint8_t> payload,
                 std::shared_ptr<UdpSocket> socket);

}  // namespace quadsock::stack

#endif  // QUADSOCK_STACK_INTERNAL_UDP_PROTOCOL_H_
