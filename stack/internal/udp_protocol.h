// UDP in the stack: delivery of received datagrams to their sockets, and the send path (a
// datagram queued by Stack::Send -> route -> neighbour -> a frame in the TX batch).
//
// Receive: the poll engine looks a batch's flows up in the socket table and calls Deliver for
// each datagram that found a socket (a datagram that found none is ICMP's: port unreachable).
// Send: Stack::Send checks the datagram on the caller's thread and queues a SendRequest for a
// poll engine (PollEngine::QueueSend); on the poll thread SendQueued routes each one, resolves
// its next hop (NeighborResolution: it may wait there for an answer) and builds its frame.
// Internal to the stack.
//
//   udp.SendQueued(engine, now);                           // on the poll thread, each turn
//   TransmitUdp(engine, src, dst, mac, payload, socket);   // a datagram whose next hop is known
#ifndef QUADSOCK_STACK_INTERNAL_UDP_PROTOCOL_H_
#define QUADSOCK_STACK_INTERNAL_UDP_PROTOCOL_H_

#include <memory>
#include <span>
#include <string>
#include <vector>

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
  // `routes` is fixed for the stack's life; `neighbors` outlives this.
  UdpProtocol(const RouteTable& routes, NeighborResolution& neighbors)
      : routes_(routes), neighbors_(neighbors) {}

  // The socket a lookup found (the table's cookie is the stack's UdpSocket).
  static UdpSocket& SocketOf(const demux::LookupResult& r) {
    return *reinterpret_cast<UdpSocket*>(r.cookie);
  }
  // Poll thread `ring`: one received datagram of `flow` to the socket the lookup found.
  static void Deliver(const demux::LookupResult& found, const demux::FlowKey& flow,
                      std::span<const uint8_t> payload, absl::Time now, uint32_t ring) {
    SocketOf(found).Deliver({flow.src, flow.src_port}, {flow.dst, flow.dst_port}, payload, now,
                            ring);
  }

  // Poll thread: sends (at most a turn's worth of) the datagrams queued for `engine`.
  void SendQueued(PollEngine& engine, absl::Time now);

 private:
  void SendDatagram(PollEngine& engine, SendRequest& request, absl::Time now);

  const RouteTable& routes_;
  NeighborResolution& neighbors_;
};

// Builds a datagram's frame to `dst_mac` and puts it into `engine`'s TX batch; a datagram with
// no room (no free buffer) counts as the socket's send drop.
void TransmitUdp(PollEngine& engine, const net::Endpoint& src, const net::Endpoint& dst,
                 const net::MacAddress& dst_mac, std::span<const uint8_t> payload,
                 std::shared_ptr<UdpSocket> socket);

}  // namespace quadsock::stack

#endif  // QUADSOCK_STACK_INTERNAL_UDP_PROTOCOL_H_
