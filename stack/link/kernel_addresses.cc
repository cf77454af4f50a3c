#include "stack/link/kernel_addresses.h"

#include <ifaddrs.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <bit>
#include <cerrno>

#include "absl/strings/str_cat.h"
#include "stack/link/errno_status.h"

namespace quadsock::link {
namespace {

// The prefix length of a netmask: its leading one bits.
int MaskLength(const uint8_t* mask, size_t bytes) {
  int length = 0;
  for (size_t i = 0; i < bytes; ++i) length += std::popcount(mask[i]);
  return length;
}

}  // namespace

absl::StatusOr<std::vector<KernelAddress>> KernelAddresses() {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return ErrnoStatus(errno, "listing the kernel's addresses");
  std::vector<KernelAddress> out;
  for (const ifaddrs* i = list; i != nullptr; i = i->ifa_next) {
    if (i->ifa_addr == nullptr) continue;
    net::IpAddress address;
    int length = 0;
    if (i->ifa_addr->sa_family == AF_INET) {
      const auto* a = reinterpret_cast<const sockaddr_in*>(i->ifa_addr);
      address = net::IpAddress::V4Bytes(reinterpret_cast<const uint8_t*>(&a->sin_addr));
      if (i->ifa_netmask != nullptr) {
        const auto* m = reinterpret_cast<const sockaddr_in*>(i->ifa_netmask);
        length = MaskLength(reinterpret_cast<const uint8_t*>(&m->sin_addr), 4);
      }
    } else if (i->ifa_addr->sa_family == AF_INET6) {
      const auto* a = reinterpret_cast<const sockaddr_in6*>(i->ifa_addr);
      address = net::IpAddress::V6Bytes(a->sin6_addr.s6_addr);
      if (i->ifa_netmask != nullptr) {
        const auto* m = reinterpret_cast<const sockaddr_in6*>(i->ifa_netmask);
        length = MaskLength(m->sin6_addr.s6_addr, 16);
      }
    } else {
      continue;
    }
    absl::StatusOr<net::IpPrefix> prefix = net::IpPrefix::Make(address, length);
    if (!prefix.ok()) continue;  // a netmask that is no prefix: not one of ours to judge
    out.push_back({i->ifa_name, *prefix});
  }
  freeifaddrs(list);
  return out;
}

absl::Status CheckNotKernelAddresses(const std::vector<net::IpPrefix>& ours,
                                     const std::vector<KernelAddress>& kernel,
                                     absl::string_view interface) {
  for (const net::IpPrefix& mine : ours) {
    for (const KernelAddress& k : kernel) {
      if (!(k.prefix.address() == mine.address())) continue;
      const std::string held = k.prefix.ToString();
      return absl::FailedPreconditionError(absl::StrCat(
          mine.address().ToString(), " is the kernel's address too: it holds ", held, " on ",
          k.interface,
          k.interface == interface
              ? absl::StrCat(", the interface quadsockd is to serve: both would answer for it, "
                             "and the kernel's traffic to it would go to quadsock")
              : absl::StrCat(": the host's own traffic to it would stay in the kernel, never "
                             "reaching quadsock on ", interface),
          ". Take it from the kernel (ip addr del ", held, " dev ", k.interface,
          ") or give quadsockd another address; --allow_kernel_address starts anyway"));
    }
  }
  return absl::OkStatus();
}

}  // namespace quadsock::link
