// What quadsockd and its clients agree on beyond the .proto files: the metadata header that
// carries a session token, and the HTTP/2 keepalive the client libraries use by default, which
// the server must accept (its shortest permitted ping interval stays below it).
//
//   ctx.AddMetadata(kSessionHeader, session);
//
// The Python client (clients/python/quadsock/client.py) states the same values for Python.
#ifndef QUADSOCK_COMMON_PROTOCOL_H_
#define QUADSOCK_COMMON_PROTOCOL_H_

#include "absl/time/time.h"

namespace quadsock {

// The token CreateSession returned goes in this metadata of every later call.
inline constexpr char kSessionHeader[] = "quadsock-session";

// A client pings a connection quiet this long while a call (a stream) is open, and drops it
// when the ping is not answered within the timeout.
inline constexpr absl::Duration kClientKeepalive = absl::Seconds(20);
inline constexpr absl::Duration kClientKeepaliveTimeout = absl::Seconds(10);

}  // namespace quadsock

#endif  // QUADSOCK_COMMON_PROTOCOL_H_
