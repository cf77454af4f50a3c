#include "stack/link/nic_features.h"

#include <linux/ethtool.h>
#include <linux/sockios.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <vector>

#include "absl/strings/str_cat.h"
#include "stack/link/errno_status.h"

namespace quadsock::link {
namespace {

// One SIOCETHTOOL call on `interface` with `command` (a struct starting with its cmd word).
// `error`, when given, gets the call's errno (0 when it worked).
absl::Status Ethtool(const std::string& interface, void* command, int* result = nullptr,
                     int* error = nullptr) {
  if (interface.empty() || interface.size() >= IFNAMSIZ) {
    return absl::InvalidArgumentError(absl::StrCat("interface name \"", interface, "\""));
  }
  const int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return ErrnoStatus(errno, "socket");
  ifreq request{};
  std::memcpy(request.ifr_name, interface.data(), interface.size());
  request.ifr_data = static_cast<char*>(command);
  const int rc = ioctl(fd, SIOCETHTOOL, &request);
  const int err = rc >= 0 ? 0 : errno;
  close(fd);
  if (error != nullptr) *error = err;
  if (rc >= 0) {
    if (result != nullptr) *result = rc;
    return absl::OkStatus();
  }
  if (err == ENODEV) {  // NOT_FOUND, as this header says
    return absl::NotFoundError(absl::StrCat("no such interface: \"", interface, "\""));
  }
  return ErrnoStatus(err, absl::StrCat("SIOCETHTOOL on ", interface), "(needs CAP_NET_ADMIN)");
}

// Where a named feature's bit is: its 32-bit block and the bit's mask there.
struct FeatureBit {
  uint32_t blocks = 0;  // blocks the device has in all
  uint32_t block = 0;
  uint32_t mask = 0;
};

absl::StatusOr<FeatureBit> FindFeature(const std::string& interface, absl::string_view feature) {
  // The header and one size after it: the one set asked for.
  std::vector<uint8_t> info_buffer(sizeof(ethtool_sset_info) + sizeof(uint32_t));
  auto* info = reinterpret_cast<ethtool_sset_info*>(info_buffer.data());
  info->cmd = ETHTOOL_GSSET_INFO;
  info->sset_mask = uint64_t{1} << ETH_SS_FEATURES;
  if (absl::Status s = Ethtool(interface, info); !s.ok()) return s;
  if ((info->sset_mask & (uint64_t{1} << ETH_SS_FEATURES)) == 0 || info->data[0] == 0) {
    return absl::NotFoundError(absl::StrCat(interface, " names no features"));
  }
  const uint32_t count = info->data[0];
  std::vector<uint8_t> buffer(sizeof(ethtool_gstrings) + size_t{count} * ETH_GSTRING_LEN);
  auto* names = reinterpret_cast<ethtool_gstrings*>(buffer.data());
  names->cmd = ETHTOOL_GSTRINGS;
  names->string_set = ETH_SS_FEATURES;
  names->len = count;
  if (absl::Status s = Ethtool(interface, names); !s.ok()) return s;
  for (uint32_t i = 0; i < names->len && i < count; ++i) {
    const char* name = reinterpret_cast<const char*>(names->data + size_t{i} * ETH_GSTRING_LEN);
    if (absl::string_view(name, strnlen(name, ETH_GSTRING_LEN)) == feature) {
      return FeatureBit{(count + 31) / 32, i / 32, uint32_t{1} << (i % 32)};
    }
  }
  return absl::NotFoundError(absl::StrCat(interface, " has no feature \"", feature, "\""));
}

// The device's feature blocks.
absl::StatusOr<std::vector<ethtool_get_features_block>> ReadFeatures(const std::string& interface,
                                                                     uint32_t blocks) {
  std::vector<uint8_t> buffer(sizeof(ethtool_gfeatures) +
                              size_t{blocks} * sizeof(ethtool_get_features_block));
  auto* get = reinterpret_cast<ethtool_gfeatures*>(buffer.data());
  get->cmd = ETHTOOL_GFEATURES;
  get->size = blocks;
  if (absl::Status s = Ethtool(interface, get); !s.ok()) return s;
  return std::vector<ethtool_get_features_block>(get->features, get->features + blocks);
}

}  // namespace

absl::StatusOr<bool> GetNicFeature(const std::string& interface, absl::string_view feature) {
  absl::StatusOr<FeatureBit> bit = FindFeature(interface, feature);
  if (!bit.ok()) return bit.status();
  absl::StatusOr<std::vector<ethtool_get_features_block>> blocks =
      ReadFeatures(interface, bit->blocks);
  if (!blocks.ok()) return blocks.status();
  return ((*blocks)[bit->block].active & bit->mask) != 0;
}

absl::Status SetNicFeature(const std::string& interface, absl::string_view feature, bool on) {
  absl::StatusOr<FeatureBit> bit = FindFeature(interface, feature);
  if (!bit.ok()) return bit.status();
  absl::StatusOr<std::vector<ethtool_get_features_block>> before =
      ReadFeatures(interface, bit->blocks);
  if (!before.ok()) return before.status();
  const std::string fixed = absl::StrCat(feature, " is fixed ", on ? "off" : "on", " on ",
                                         interface, ": the driver cannot change it");
  if (((*before)[bit->block].available & bit->mask) == 0) {
    if ((((*before)[bit->block].active & bit->mask) != 0) == on) return absl::OkStatus();
    return absl::FailedPreconditionError(fixed);
  }
  std::vector<uint8_t> buffer(sizeof(ethtool_sfeatures) +
                              size_t{bit->blocks} * sizeof(ethtool_set_features_block));
  auto* set = reinterpret_cast<ethtool_sfeatures*>(buffer.data());
  set->cmd = ETHTOOL_SFEATURES;
  set->size = bit->blocks;
  set->features[bit->block].valid = bit->mask;
  set->features[bit->block].requested = on ? bit->mask : 0;
  int flags = 0;
  if (absl::Status s = Ethtool(interface, set, &flags); !s.ok()) return s;
  if (flags & ETHTOOL_F_UNSUPPORTED) return absl::FailedPreconditionError(fixed);
  // ETHTOOL_F_WISH: recorded, but other constraints of the device keep it as it was.
  absl::StatusOr<bool> now = GetNicFeature(interface, feature);
  if (!now.ok()) return now.status();
  if (*now != on) {
    return absl::FailedPreconditionError(absl::StrCat(
        interface, " kept ", feature, " ", on ? "off" : "on", " (the driver's constraints)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> DriverName(const std::string& interface) {
  ethtool_drvinfo info{};
  info.cmd = ETHTOOL_GDRVINFO;
  if (absl::Status s = Ethtool(interface, &info); !s.ok()) return s;
  return std::string(info.driver, strnlen(info.driver, sizeof(info.driver)));
}

absl::StatusOr<uint32_t> RxQueueCount(const std::string& interface) {
  ethtool_channels channels{};
  channels.cmd = ETHTOOL_GCHANNELS;
  int error = 0;
  absl::Status s = Ethtool(interface, &channels, nullptr, &error);
  if (s.ok()) return channels.rx_count + channels.combined_count;
  if (error != EOPNOTSUPP) return s;
  // No get_channels in the driver: the kernel lists each RX queue in sysfs.
  const std::filesystem::path queues =
      std::filesystem::path("/sys/class/net") / interface / "queues";
  std::error_code ec;
  uint32_t count = 0;
  for (const auto& entry : std::filesystem::directory_iterator(queues, ec)) {
    if (entry.path().filename().string().rfind("rx-", 0) == 0) ++count;
  }
  if (ec || count == 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        interface, " tells neither its channels (ethtool -l: ", s.message(), ") nor its RX "
        "queues in ", queues.string(), ec ? absl::StrCat(" (", ec.message(), ")") : ""));
  }
  return count;
}

}  // namespace quadsock::link
