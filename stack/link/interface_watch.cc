#include "stack/link/interface_watch.h"

#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "stack/link/errno_status.h"

namespace quadsock::link {

absl::StatusOr<std::unique_ptr<InterfaceWatch>> InterfaceWatch::Start(const std::string& name) {
  const unsigned index = if_nametoindex(name.c_str());
  if (index == 0 && errno == ENODEV) {
    return absl::NotFoundError(absl::StrCat("no interface \"", name, "\""));
  }
  if (index == 0) return ErrnoStatus(errno, absl::StrCat("looking up interface \"", name, "\""));
  std::unique_ptr<InterfaceWatch> w(new InterfaceWatch(index));
  w->last_ = w->Read();
  if (!w->last_.exists) {  // deleted since, or no socket to ask with
    return absl::UnavailableError(absl::StrCat("cannot read interface \"", name, "\""));
  }
  w->mtu_ = w->last_.mtu;
  return w;
}

InterfaceWatch::State InterfaceWatch::Read() const {
  State s;
  char name[IF_NAMESIZE] = {};
  if (if_indextoname(index_, name) == nullptr) return s;  // ENXIO: deleted
  const int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return last_;  // cannot look now (no descriptor): nothing changed, as far as known
  ifreq req{};
  std::memcpy(req.ifr_name, name, IF_NAMESIZE);
  const bool flags = ioctl(fd, SIOCGIFFLAGS, &req) == 0;
  const short f = req.ifr_flags;
  const bool mtu = ioctl(fd, SIOCGIFMTU, &req) == 0;
  close(fd);
  if (!flags || !mtu) {
    // Deleted between the two looks (ENODEV), or a failure of the moment: the next look says.
    return errno == ENODEV ? State{} : last_;
  }
  s.exists = true;
  s.name = name;
  s.up = (f & IFF_UP) != 0;
  s.running = (f & IFF_RUNNING) != 0;
  s.mtu = static_cast<uint32_t>(req.ifr_mtu);
  return s;
}

std::vector<InterfaceWatch::Change> InterfaceWatch::Check() {
  std::vector<Change> changes;
  if (!last_.exists) return changes;
  const State now = Read();
  const std::string was = last_.name;
  if (!now.exists) {
    changes.push_back({Change::Kind::kGone, absl::StrCat(was, " (index ", index_, ") is gone")});
    last_ = now;
    return changes;
  }
  const bool was_working = last_.up && last_.running;
  const bool working = now.up && now.running;
  if (was_working && !working) {
    down_.fetch_add(1, std::memory_order_relaxed);
    changes.push_back({Change::Kind::kDown,
                       absl::StrCat(now.name, " is down (", now.up ? "no carrier" : "set down",
                                    "): no frames come or go until it is up again")});
  } else if (!was_working && working) {
    changes.push_back({Change::Kind::kUp, absl::StrCat(now.name, " is up again")});
  }
  if (now.mtu != last_.mtu) {
    mtu_changes_.fetch_add(1, std::memory_order_relaxed);
    changes.push_back({Change::Kind::kMtu,
                       absl::StrCat(now.name, "'s MTU changed from ", last_.mtu, " to ", now.mtu),
                       last_.mtu, now.mtu});
  }
  last_ = now;
  return changes;
}

}  // namespace quadsock::link
