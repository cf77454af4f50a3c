// The C library's own socket and descriptor calls, found behind ours (dlsym RTLD_NEXT). The
// preload library defines the same names (interpose.cc); everything it passes on to the kernel,
// and every call it makes for itself on a kernel descriptor, goes through Libc().
//
//   ssize_t n = Libc().recvfrom(fd, buf, len, flags, from, from_len);
#ifndef QUADSOCK_CLIENTS_PRELOAD_INTERNAL_LIBC_H_
#define QUADSOCK_CLIENTS_PRELOAD_INTERNAL_LIBC_H_

#include <poll.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "absl/time/time.h"

namespace quadsock::preload {

struct LibcCalls {
  int (*bind)(int, const sockaddr*, socklen_t);
  int (*connect)(int, const sockaddr*, socklen_t);
  int (*close)(int);
  int (*dup)(int);
  int (*dup2)(int, int);
  int (*dup3)(int, int, int);
  int (*fcntl)(int, int, ...);
  int (*ioctl)(int, unsigned long, ...);
  int (*getsockname)(int, sockaddr*, socklen_t*);
  int (*getpeername)(int, sockaddr*, socklen_t*);
  int (*getsockopt)(int, int, int, void*, socklen_t*);
  int (*setsockopt)(int, int, int, const void*, socklen_t);
  int (*shutdown)(int, int);
  ssize_t (*send)(int, const void*, size_t, int);
  ssize_t (*sendto)(int, const void*, size_t, int, const sockaddr*, socklen_t);
  ssize_t (*sendmsg)(int, const msghdr*, int);
  int (*sendmmsg)(int, mmsghdr*, unsigned int, int);
  ssize_t (*write)(int, const void*, size_t);
  ssize_t (*writev)(int, const iovec*, int);
  ssize_t (*recv)(int, void*, size_t, int);
  ssize_t (*recvfrom)(int, void*, size_t, int, sockaddr*, socklen_t*);
  ssize_t (*recvmsg)(int, msghdr*, int);
  int (*recvmmsg)(int, mmsghdr*, unsigned int, int, struct timespec*);
  ssize_t (*read)(int, void*, size_t);
  ssize_t (*readv)(int, const iovec*, int);
  int (*epoll_ctl)(int, int, int, epoll_event*);
  int (*epoll_wait)(int, epoll_event*, int, int);
  int (*epoll_pwait)(int, epoll_event*, int, int, const sigset_t*);
  int (*poll)(pollfd*, nfds_t, int);
  int (*select)(int, fd_set*, fd_set*, fd_set*, timeval*);
  int (*sigaction)(int, const struct sigaction*, struct sigaction*);
};

// Resolved on first use; aborts with a message if the C library lacks one of them.
const LibcCalls& Libc();

// An int socket option of a kernel socket (getsockopt); 0 when the kernel will not say.
int IntOption(int fd, int level, int name);

// A wait of `d` as poll and epoll_wait take it: -1 for no end, else milliseconds rounded up.
int PollMilliseconds(absl::Duration d);

}  // namespace quadsock::preload

#endif  // QUADSOCK_CLIENTS_PRELOAD_INTERNAL_LIBC_H_
