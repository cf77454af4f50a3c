#include "service/convert.h"

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace quadsock::service {

absl::StatusOr<net::IpAddress> ParseAddress(const std::string& text, const std::string& field) {
  absl::StatusOr<net::IpAddress> a = net::IpAddress::Parse(text);
  if (!a.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, ": \"", absl::CHexEscape(text.substr(0, 64)), "\" is not an IP address"));
  }
  return *a;
}

absl::StatusOr<net::Endpoint> ParseEndpoint(const v1::Endpoint& e, const std::string& field) {
  absl::StatusOr<net::IpAddress> a = ParseAddress(e.address(), field + ".address");
  if (!a.ok()) return a.status();
  if (e.port() > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ".port: ", e.port(), " is not a port (0..65535)"));
  }
  return net::Endpoint{*a, static_cast<uint16_t>(e.port())};
}

absl::StatusOr<net::Family> ParseFamily(v1::Family f) {
  switch (f) {
    case v1::FAMILY_IPV4:
      return net::Family::kV4;
    case v1::FAMILY_IPV6:
      return net::Family::kV6;
    default:
      return absl::InvalidArgumentError("family: FAMILY_IPV4 or FAMILY_IPV6 is required");
  }
}

v1::Endpoint ToProto(const net::Endpoint& e) {
  v1::Endpoint out;
  ToProto(e, &out);
  return out;
}

void ToProto(const net::Endpoint& e, v1::Endpoint* out) {
  char text[net::IpAddress::kMaxText];
  out->set_address(text, e.address.Format(text));
  out->set_port(e.port);
}

v1::Family ToProto(net::Family f) {
  return f == net::Family::kV4 ? v1::FAMILY_IPV4 : v1::FAMILY_IPV6;
}

v1::SocketState ToProto(demux::SocketState s) {
  switch (s) {
    case demux::SocketState::kOpen: return v1::SOCKET_STATE_OPEN;
    case demux::SocketState::kBound: return v1::SOCKET_STATE_BOUND;
    case demux::SocketState::kConnected: return v1::SOCKET_STATE_CONNECTED;
  }
  return v1::SOCKET_STATE_UNSPECIFIED;
}

void ToProto(const stack::ReceivedDatagram& d, v1::Datagram* out) {
  out->set_payload(d.payload);
  ToProto(d.source, out->mutable_peer());
  ToProto(d.destination, out->mutable_local());
  out->set_arrival_unix_nanos(absl::ToUnixNanos(d.arrival));
  out->set_sequence(d.sequence);
}

void ToProto(const stack::SocketCounters& c, v1::SocketCounters* out) {
  out->set_rx_datagrams(c.rx_datagrams);
  out->set_rx_bytes(c.rx_bytes);
  out->set_rx_dropped(c.rx_dropped);
  out->set_tx_datagrams(c.tx_datagrams);
  out->set_tx_bytes(c.tx_bytes);
  out->set_tx_dropped(c.tx_dropped);
  out->set_queued(c.queued);
  out->set_icmp_errors(c.icmp_errors);
}

}  // namespace quadsock::service
