// ChecksumHint: datagrams dropped for a bad UDP checksum, said in quadsockd's log with their
// likely cause. A kernel peer on a veth (or a VM's virtio) may leave its UDP checksums to an
// offload that nothing on the way performs, and XDP sees them unfinished: each such datagram is
// only a count (parse_errors.bad_udp_checksum), and the application just sees nothing arrive.
//
// The log comes from the control plane reading the counters now and then, never from a poll
// thread: the first drops are said at once with the hint, later ones as a count at most once
// per `every`.
//
//   ChecksumHint hint(Log);
//   while (running) { hint.Check(stack.Counters(), absl::Now()); sleep one second; }
//   hint.Check(stack.Counters(), absl::Now(), /*stopping=*/true);
#ifndef QUADSOCK_SERVICE_CHECKSUM_HINT_H_
#define QUADSOCK_SERVICE_CHECKSUM_HINT_H_

#include <cstdint>
#include <functional>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "stack/stack_counters.h"

namespace quadsock::service {

class ChecksumHint {
 public:
  using LogFn = std::function<void(absl::string_view)>;

  explicit ChecksumHint(LogFn log, absl::Duration every = absl::Minutes(1))
      : log_(std::move(log)), every_(every) {}

  // `stopping`: quadsockd's last look, which says what is still unsaid whenever it was said
  // last, so that the log holds every drop.
  void Check(const stack::StackCounters& counters, absl::Time now, bool stopping = false);

 private:
  LogFn log_;
  absl::Duration every_;
  uint64_t said_ = 0;  // the count at the last line
  absl::Time said_at_ = absl::InfinitePast();
};

}  // namespace quadsock::service

#endif  // QUADSOCK_SERVICE_CHECKSUM_HINT_H_
