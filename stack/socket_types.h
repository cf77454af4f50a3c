// The types an application sees of a UDP socket of the stack: a received datagram, the
// callback that may take datagrams instead of the queue, and the socket's counters.
//
//   std::optional<ReceivedDatagram> d = stack.Receive(id).value();
//   if (d) Use(d->source, d->payload);
//   SocketCounters c = stack.Get(id)->counters;
#ifndef QUADSOCK_STACK_SOCKET_TYPES_H_
#define QUADSOCK_STACK_SOCKET_TYPES_H_

#include <cstdint>
#include <functional>
#include <span>
#include <string>

#include "absl/time/time.h"
#include "stack/net/address.h"

namespace quadsock::stack {

struct ReceivedDatagram {
  net::Endpoint source;
  net::Endpoint destination;
  absl::Time arrival;
  uint64_t sequence = 0;  // per socket, from 1; a gap means datagrams were dropped
  std::string payload;
};

// Runs on a poll thread for each datagram; must not block. The payload is valid during the call.
using ReceiveCallback =
    std::function<void(const net::Endpoint& source, std::span<const uint8_t> payload)>;

struct SocketCounters {
  uint64_t rx_datagrams = 0;
  uint64_t rx_bytes = 0;
  uint64_t rx_dropped = 0;  // receive queue full, or the stack's receive budget
  uint64_t tx_datagrams = 0;
  uint64_t tx_bytes = 0;
  uint64_t tx_dropped = 0;  // no route, neighbour unresolved, no buffer
  uint64_t queued = 0;      // datagrams waiting in the receive queue now
  uint64_t icmp_errors = 0;  // ICMP errors quoting the socket's datagrams (icmp_error.h)
};

}  // namespace quadsock::stack

#endif  // QUADSOCK_STACK_SOCKET_TYPES_H_
