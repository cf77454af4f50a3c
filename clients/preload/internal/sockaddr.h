// The one place the preload library turns socket addresses into the stack's endpoints and
// back. An IPv6 socket sees an IPv4 peer as ::ffff:a.b.c.d, as in Linux.
//
//   std::optional<net::Endpoint> e = EndpointOf(addr, len);        // nullopt: not AF_INET/6
//   socklen_t n = WriteSockaddr(*e, AF_INET6, out, out_len);        // what getsockname gives
#ifndef QUADSOCK_CLIENTS_PRELOAD_INTERNAL_SOCKADDR_H_
#define QUADSOCK_CLIENTS_PRELOAD_INTERNAL_SOCKADDR_H_

#include <sys/socket.h>

#include <optional>

#include "stack/net/address.h"

namespace quadsock::preload {

// The endpoint of an AF_INET or AF_INET6 address of a long enough length (a v4-mapped IPv6
// address stays IPv6, as an IPv6 socket holds it). nullopt for anything else.
std::optional<net::Endpoint> EndpointOf(const sockaddr* addr, socklen_t len);

// Writes `e` as the family `family` sees it into `out` (at most *out_len bytes, as the kernel
// truncates) and sets *out_len to the full length.
void WriteSockaddr(const net::Endpoint& e, int family, sockaddr* out, socklen_t* out_len);

// The address family of an AF_INET/AF_INET6 socket address (AF_UNSPEC for others, or too short).
int FamilyOf(const sockaddr* addr, socklen_t len);

}  // namespace quadsock::preload

#endif  // QUADSOCK_CLIENTS_PRELOAD_INTERNAL_SOCKADDR_H_
