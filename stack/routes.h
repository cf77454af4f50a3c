// Interface addresses and routes: which of our addresses to send from, and which neighbour to
// hand a packet to. Connected routes come from the addresses' prefixes; one default gateway per
// family. Longest prefix wins, as in the kernel's FIB, for the small tables a stack port has.
//
//   RouteTable routes;
//   routes.AddAddress(*net::IpPrefix::Parse("10.1.0.2/24"));
//   routes.SetGateway(*net::IpAddress::Parse("10.1.0.1"));
//   absl::StatusOr<Route> r = routes.Lookup(*net::IpAddress::Parse("192.0.2.7"));
//   // r->next_hop == 10.1.0.1, r->source == 10.1.0.2
//
// Not thread-safe: the Stack guards it (writes are rare and come from the control plane).
#ifndef QUADSOCK_STACK_ROUTES_H_
#define QUADSOCK_STACK_ROUTES_H_

#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "stack/net/address.h"

namespace quadsock::stack {

struct Route {
  net::IpAddress next_hop;  // the destination itself for a connected route
  net::IpAddress source;    // our address to send from
  bool via_gateway = false;
};

class RouteTable {
 public:
  // ALREADY_EXISTS if the address is already ours; INVALID_ARGUMENT for a multicast or
  // unspecified address.
  absl::Status AddAddress(const net::IpPrefix& prefix);
  // NOT_FOUND if it is not ours.
  absl::Status RemoveAddress(const net::IpAddress& address);
  // The gateway must be reachable by a connected route: FAILED_PRECONDITION otherwise.
  absl::Status SetGateway(const net::IpAddress& gateway);

  // FAILED_PRECONDITION ("no route to host", ENETUNREACH) when nothing matches: NOT_FOUND is
  // the API's "no such socket".
  absl::StatusOr<Route> Lookup(const net::IpAddress& destination) const;
  // The source address for talking to `peer` (what connect() on a wildcard socket picks).
  absl::StatusOr<net::IpAddress> SourceFor(const net::IpAddress& peer) const;

  bool IsLocal(const net::IpAddress& address) const;
  // The longest of our prefixes that holds `address`, or null.
  const net::IpPrefix* Connected(const net::IpAddress& address) const;
  const std::vector<net::IpPrefix>& addresses() const { return addresses_; }
  std::optional<net::IpAddress> gateway(net::Family family) const;

 private:
  std::vector<net::IpPrefix> addresses_;
  std::optional<net::IpAddress> gateway_v4_;
  std::optional<net::IpAddress> gateway_v6_;
};

}  // namespace quadsock::stack

#endif  // QUADSOCK_STACK_ROUTES_H_
