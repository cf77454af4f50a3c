#include "stack/routes.h"

#include "absl/strings/str_cat.h"

namespace quadsock::stack {

absl::Status RouteTable::AddAddress(const net::IpPrefix& prefix) {
  const net::IpAddress& a = prefix.address();
  if (a.IsUnspecified() || a.IsMulticast()) {
    return absl::InvalidArgumentError(absl::StrCat(a.ToString(), " cannot be an interface address"));
  }
  if (IsLocal(a)) return absl::AlreadyExistsError(absl::StrCat(a.ToString(), " is already ours"));
  addresses_.push_back(prefix);
  return absl::OkStatus();
}

absl::Status RouteTable::RemoveAddress(const net::IpAddress& address) {
  for (auto it = addresses_.begin(); it != addresses_.end(); ++it) {
    if (it->address() == address) {
      addresses_.erase(it);
      return absl::OkStatus();
    }
  }
  return absl::NotFoundError(absl::StrCat(address.ToString(), " is not one of our addresses"));
}

absl::Status RouteTable::SetGateway(const net::IpAddress& gateway) {
  bool connected = false;
  for (const net::IpPrefix& p : addresses_) connected |= p.Contains(gateway);
  if (!connected) {
    return absl::FailedPreconditionError(absl::StrCat(
        "gateway ", gateway.ToString(), " is not on a connected network; add an address first"));
  }
  (gateway.is_v4() ? gateway_v4_ : gateway_v6_) = gateway;
  return absl::OkStatus();
}

std::optional<net::IpAddress> RouteTable::gateway(net::Family family) const {
  return family == net::Family::kV4 ? gateway_v4_ : gateway_v6_;
}

const net::IpPrefix* RouteTable::Connected(const net::IpAddress& address) const {
  const net::IpPrefix* best = nullptr;
  for (const net::IpPrefix& p : addresses_) {
    if (p.Contains(address) && (best == nullptr || p.length() > best->length())) best = &p;
  }
  return best;
}

absl::StatusOr<Route> RouteTable::Lookup(const net::IpAddress& to) const {
  // An IPv6 socket talking to a v4-mapped peer sends IPv4.
  const net::IpAddress destination = to.Unmapped();
  if (const net::IpPrefix* p = Connected(destination)) {
    return Route{destination, p->address(), false};
  }
  const std::optional<net::IpAddress> gw = gateway(destination.family());
  if (!gw.has_value()) {
    return absl::FailedPreconditionError(
        absl::StrCat("no route to host ", destination.ToString()));
  }
  const net::IpPrefix* via = Connected(*gw);
  if (via == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat("no route to host ", destination.ToString(),
                                            ": gateway ", gw->ToString(),
                                            " is on no connected network any more"));
  }
  // The source is the address on the gateway's network, unless that is link-local (the usual
  // IPv6 gateway is fe80::1) and the destination is not: a router drops a link-local source
  // beyond the link, so an address of wider scope of the family goes instead, where there is
  // one (RFC 6724 5, rule 2).
  net::IpAddress source = via->address();
  if (source.IsLinkLocal() && !destination.IsLinkLocal()) {
    for (const net::IpPrefix& p : addresses_) {
      if (p.address().family() == destination.family() && !p.address().IsLinkLocal()) {
        source = p.address();
        break;
      }
    }
  }
  return Route{*gw, source, true};
}

absl::StatusOr<net::IpAddress> RouteTable::SourceFor(const net::IpAddress& peer) const {
  absl::StatusOr<Route> r = Lookup(peer);
  if (!r.ok()) return r.status();
  return peer.IsV4Mapped() ? r->source.ToV6() : r->source;
}

bool RouteTable::IsLocal(const net::IpAddress& address) const {
  for (const net::IpPrefix& p : addresses_) {
    if (p.address() == address) return true;
  }
  return false;
}

}  // namespace quadsock::stack
