#include "clients/preload/internal/errno_of.h"

#include <cerrno>

namespace quadsock::preload {

int ErrnoOf(const absl::Status& s, Call call) {
  using absl::StatusCode;
  switch (s.code()) {
    case StatusCode::kOk:
      return 0;
    case StatusCode::kAlreadyExists:  // the address and port are taken
      return EADDRINUSE;
    case StatusCode::kInvalidArgument:
      // bind: an address quadsockd does not hold; connect: no way to that peer.
      if (call == Call::kBind) return EADDRNOTAVAIL;
      if (call == Call::kConnect) return ENETUNREACH;
      return EINVAL;
    case StatusCode::kFailedPrecondition:
      // bind on a bound socket is EINVAL in Linux; connect with no source address to use.
      if (call == Call::kConnect) return ENETUNREACH;
      if (call == Call::kDisconnect) return 0;  // connect(AF_UNSPEC) on an unconnected socket
      return EINVAL;
    case StatusCode::kResourceExhausted:
      // A quota: of sockets (the process is out of them, as at its descriptor limit), of
      // ephemeral ports (Linux says EADDRINUSE), of memory otherwise.
      if (call == Call::kOpen) return EMFILE;
      if (call == Call::kBind || call == Call::kConnect) return EADDRINUSE;
      return ENOBUFS;
    case StatusCode::kPermissionDenied:
    case StatusCode::kUnauthenticated:
      return EACCES;
    case StatusCode::kNotFound:  // the socket is gone on quadsockd's side (its session ended)
    case StatusCode::kUnavailable:
    case StatusCode::kDeadlineExceeded:
    case StatusCode::kCancelled:
      return ENETDOWN;
    case StatusCode::kAborted:  // a pending ICMP error ended the call
      return ECONNREFUSED;
    default:
      return EIO;
  }
}

}  // namespace quadsock::preload
