#include "clients/preload/internal/libc.h"

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace quadsock::preload {
namespace {

template <typename F>
void Find(F& slot, const char* name) {
  slot = reinterpret_cast<F>(dlsym(RTLD_NEXT, name));
  if (slot == nullptr) {
    static constexpr char kWhat[] = "quadsock-preload: the C library has no ";
    (void)!::write(2, kWhat, sizeof(kWhat) - 1);
    (void)!::write(2, name, std::strlen(name));
    (void)!::write(2, "\n", 1);
    std::abort();
  }
}

LibcCalls Resolve() {
  LibcCalls c{};
  Find(c.bind, "bind");
  Find(c.connect, "connect");
  Find(c.close, "close");
  Find(c.dup, "dup");
  Find(c.dup2, "dup2");
  Find(c.dup3, "dup3");
  Find(c.fcntl, "fcntl");
  Find(c.ioctl, "ioctl");
  Find(c.getsockname, "getsockname");
  Find(c.getpeername, "getpeername");
  Find(c.getsockopt, "getsockopt");
  Find(c.setsockopt, "setsockopt");
  Find(c.shutdown, "shutdown");
  Find(c.send, "send");
  Find(c.sendto, "sendto");
  Find(c.sendmsg, "sendmsg");
  Find(c.sendmmsg, "sendmmsg");
  Find(c.write, "write");
  Find(c.writev, "writev");
  Find(c.recv, "recv");
  Find(c.recvfrom, "recvfrom");
  Find(c.recvmsg, "recvmsg");
  Find(c.recvmmsg, "recvmmsg");
  Find(c.read, "read");
  Find(c.readv, "readv");
  Find(c.epoll_ctl, "epoll_ctl");
  Find(c.epoll_wait, "epoll_wait");
  Find(c.epoll_pwait, "epoll_pwait");
  Find(c.poll, "poll");
  Find(c.select, "select");
  Find(c.sigaction, "sigaction");
  return c;
}

}  // namespace

const LibcCalls& Libc() {
  static const LibcCalls calls = Resolve();
  return calls;
}

int IntOption(int fd, int level, int name) {
  int v = 0;
  socklen_t len = sizeof(v);
  return Libc().getsockopt(fd, level, name, &v, &len) == 0 ? v : 0;
}

int PollMilliseconds(absl::Duration d) {
  if (d == absl::InfiniteDuration()) return -1;
  return static_cast<int>(std::min<int64_t>(
      absl::ToInt64Milliseconds(absl::Ceil(d, absl::Milliseconds(1))), INT_MAX));
}

}  // namespace quadsock::preload
