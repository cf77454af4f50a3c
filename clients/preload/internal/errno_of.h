// The one place the preload library turns quadsockd's answers (absl::Status) into the errno a
// program expects from the system call it made. quadsockd's codes say what went wrong; the
// call says which errno Linux uses for it (a taken port is EADDRINUSE from bind, a socket quota
// EMFILE from the socket that could not be made).
//
//   if (absl::Status s = remote.Bind(local).status(); !s.ok()) return -ErrnoOf(s, Call::kBind);
#ifndef QUADSOCK_CLIENTS_PRELOAD_INTERNAL_ERRNO_OF_H_
#define QUADSOCK_CLIENTS_PRELOAD_INTERNAL_ERRNO_OF_H_

#include "absl/status/status.h"

namespace quadsock::preload {

enum class Call { kOpen, kBind, kConnect, kDisconnect, kOther };

// A positive errno; 0 for OK.
int ErrnoOf(const absl::Status& s, Call call);

}  // namespace quadsock::preload

#endif  // QUADSOCK_CLIENTS_PRELOAD_INTERNAL_ERRNO_OF_H_
