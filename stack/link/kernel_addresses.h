// The kernel's own IP addresses in this network namespace, and the check that quadsockd's
// addresses are none of them. An address both hold is answered twice (ARP, NDP, ICMP) and
// served by neither as it should: on quadsock's interface the XDP program takes the kernel's
// traffic for it, and on any interface the host's own programs reach it in the kernel (its
// local routing table), never in quadsock. So quadsockd refuses it, on any interface.
//
//   absl::StatusOr<std::vector<KernelAddress>> held = KernelAddresses();
//   absl::Status s = CheckNotKernelAddresses(stack_addresses, *held, "eth0");
#ifndef QUADSOCK_STACK_LINK_KERNEL_ADDRESSES_H_
#define QUADSOCK_STACK_LINK_KERNEL_ADDRESSES_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "stack/net/address.h"

namespace quadsock::link {

struct KernelAddress {
  std::string interface;
  net::IpPrefix prefix;  // the address with its prefix length: 10.1.0.2/24
};

// Every IPv4 and IPv6 address of every interface (getifaddrs), as `ip addr` lists them.
absl::StatusOr<std::vector<KernelAddress>> KernelAddresses();

// FAILED_PRECONDITION for the first of `ours` that the kernel holds too, naming the kernel's
// address and interface and the command that takes it from the kernel; `interface` is the one
// quadsockd serves (said so when the kernel's is the same one).
absl::Status CheckNotKernelAddresses(const std::vector<net::IpPrefix>& ours,
                                     const std::vector<KernelAddress>& kernel,
                                     absl::string_view interface);

}  // namespace quadsock::link

#endif  // QUADSOCK_STACK_LINK_KERNEL_ADDRESSES_H_
