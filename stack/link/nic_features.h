// An interface's offload features, by the names `ethtool -k` prints in its kernel form
// ("rx-vlan-hw-parse" is what `ethtool -k` shows as rx-vlan-offload), read and changed with the
// SIOCETHTOOL ioctl: the string set ETH_SS_FEATURES names the bits, ETHTOOL_GFEATURES and
// ETHTOOL_SFEATURES read and set them. Reading needs no privilege; changing needs CAP_NET_ADMIN.
//
// quadsock needs two of them: a NIC that strips VLAN tags on receive (rx-vlan-hw-parse, and
// rx-vlan-stag-hw-parse for 802.1ad tags) hides them from the XDP program, which steers by VLAN.
// It also needs the interface's RX queue count (ETHTOOL_GCHANNELS), since each RX queue needs an
// AF_XDP socket of its own.
//
//   absl::StatusOr<bool> strips = link::GetNicFeature("eth0", link::kRxVlanStripping);
//   if (strips.ok() && *strips) s = link::SetNicFeature("eth0", link::kRxVlanStripping, false);
//   absl::StatusOr<uint32_t> queues = link::RxQueueCount("eth0");  // 4 on a 4-queue NIC
#ifndef QUADSOCK_STACK_LINK_NIC_FEATURES_H_
#define QUADSOCK_STACK_LINK_NIC_FEATURES_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace quadsock::link {

// The NIC removes 802.1Q tags from received frames and hands them on beside the frame.
inline constexpr absl::string_view kRxVlanStripping = "rx-vlan-hw-parse";
// The same for 802.1ad (service VLAN, QinQ outer) tags.
inline constexpr absl::string_view kRxStagStripping = "rx-vlan-stag-hw-parse";

// Whether `feature` is active on `interface`. NOT_FOUND when the interface does not exist or
// knows no such feature, INVALID_ARGUMENT for an empty name or one of IFNAMSIZ characters or
// more; the ioctl's error otherwise.
absl::StatusOr<bool> GetNicFeature(const std::string& interface, absl::string_view feature);

// Turns `feature` on or off, and checks that it took. FAILED_PRECONDITION when the driver
// cannot change it (a fixed feature), PERMISSION_DENIED without CAP_NET_ADMIN, NOT_FOUND and
// INVALID_ARGUMENT as above.
absl::Status SetNicFeature(const std::string& interface, absl::string_view feature, bool on);

// The RX queues `interface` has now: the channels' rx_count plus combined_count (ethtool -l).
// Where the driver has no get_channels (EOPNOTSUPP), the queues sysfs lists
// (/sys/class/net/IF/queues/rx-*; this network namespace's only where sysfs was mounted in it).
// NOT_FOUND and INVALID_ARGUMENT as above.
absl::StatusOr<uint32_t> RxQueueCount(const std::string& interface);

// The interface's driver, as `ethtool -i` names it ("veth", "mlx5_core"). NOT_FOUND and
// INVALID_ARGUMENT as above.
absl::StatusOr<std::string> DriverName(const std::string& interface);

}  // namespace quadsock::link

#endif  // QUADSOCK_STACK_LINK_NIC_FEATURES_H_
