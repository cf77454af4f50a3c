#include "service/checksum_hint.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "stack/net/parse_error.h"

namespace quadsock::service {
namespace {

std::string Datagrams(uint64_t n) { return absl::StrCat(n, n == 1 ? " datagram" : " datagrams"); }

}  // namespace

void ChecksumHint::Check(const stack::StackCounters& counters, absl::Time now, bool stopping) {
  const uint64_t dropped =
      counters.parse_errors[static_cast<int>(net::ParseError::kBadUdpChecksum)];
  if (dropped <= said_) return;
  if (said_ == 0) {
    log_(absl::StrCat(
        "dropped ", Datagrams(dropped), " with a bad UDP checksum (parse_errors.bad_udp_checksum). A sender on a veth or a "
        "VM's virtio may leave its checksums to an offload that never computes them on the "
        "way here: turn transmit offload off on that peer (ethtool -K <peer> tx off). Later "
        "drops are counted, and said here at most every ",
        absl::FormatDuration(every_), "."));
  } else if (stopping || now - said_at_ >= every_) {
    log_(absl::StrCat("dropped ", Datagrams(dropped - said_),
                      " more with a bad UDP checksum in the last ",
                      absl::FormatDuration(now - said_at_), " (", dropped, " in all)"));
  } else {
    return;
  }
  said_ = dropped;
  said_at_ = now;
}

}  // namespace quadsock::service
