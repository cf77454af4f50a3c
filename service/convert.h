// Conversions between the public API's messages and the stack's types. Every field a client
// sends is checked here, and a bad one is INVALID_ARGUMENT naming the field.
//
//   absl::StatusOr<net::Endpoint> peer = ParseEndpoint(request.peer(), "peer");
//   *response.mutable_local() = ToProto(local);
#ifndef QUADSOCK_SERVICE_CONVERT_H_
#define QUADSOCK_SERVICE_CONVERT_H_

#include <string>

#include "absl/status/statusor.h"
#include "quadsock/v1/common.pb.h"
#include "quadsock/v1/socket.pb.h"
#include "stack/net/address.h"
#include "stack/stack.h"

namespace quadsock::service {

// An endpoint as the API spells it. `field` names it in errors ("peer", "local").
absl::StatusOr<net::Endpoint> ParseEndpoint(const v1::Endpoint& e, const std::string& field);
absl::StatusOr<net::IpAddress> ParseAddress(const std::string& text, const std::string& field);
absl::StatusOr<net::Family> ParseFamily(v1::Family f);

v1::Endpoint ToProto(const net::Endpoint& e);
// The same into `out`, reusing its address string (no allocation once it has one): the data
// path's form.
void ToProto(const net::Endpoint& e, v1::Endpoint* out);
v1::Family ToProto(net::Family f);
v1::SocketState ToProto(demux::SocketState s);
void ToProto(const stack::ReceivedDatagram& d, v1::Datagram* out);
void ToProto(const stack::SocketCounters& c, v1::SocketCounters* out);

}  // namespace quadsock::service

#endif  // QUADSOCK_SERVICE_CONVERT_H_
