// ErrnoStatus: a failed system call (or libbpf or libxdp call) as an absl::Status, for the
// link, the XDP program and the benchmarks. Code and message are absl::ErrnoToStatus's ("what:
// strerror"), with a hint for the permission errors where the caller knows what is missing.
//
//   if (fd < 0) return ErrnoStatus(errno, "socket");
//   if (err != 0) return ErrnoStatus(err, "binding an AF_XDP socket", "(needs CAP_NET_RAW)");
//
// These errnos keep the code quadsock's contracts give them, not Abseil's:
//   ENODEV, ENXIO  FAILED_PRECONDITION (Abseil: NOT_FOUND): the interface went away or lacks the
//                  queue, the environment's state, as "no such interface" is at start (XskPort,
//                  XdpProgram::Attach and AfXdpStack document FAILED_PRECONDITION for it).
//   EOPNOTSUPP     FAILED_PRECONDITION (Abseil: UNIMPLEMENTED): the interface cannot do it (zero-
//                  copy on a driver without it, an ethtool feature): nothing quadsock lacks.
//   EBUSY          ALREADY_EXISTS (Abseil: FAILED_PRECONDITION): another socket holds the AF_XDP
//                  queue, as a taken port is ALREADY_EXISTS; quadsockd's start-up error says so.
#ifndef QUADSOCK_STACK_LINK_ERRNO_STATUS_H_
#define QUADSOCK_STACK_LINK_ERRNO_STATUS_H_

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace quadsock::link {

// `error`: an errno, or its negation as libbpf and libxdp return it; not 0. `permission_hint`
// is appended (after a space) to a PERMISSION_DENIED status only.
absl::Status ErrnoStatus(int error, absl::string_view what,
                         absl::string_view permission_hint = "");

}  // namespace quadsock::link

#endif  // QUADSOCK_STACK_LINK_ERRNO_STATUS_H_
