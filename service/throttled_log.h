// A log line for what may happen thousands of times a second (refused connections, failed
// accepts): the first at once, then at most one a second, saying how many came since the last.
// One thread, or under its caller's lock.
//
//   ThrottledLog refusals(log);
//   refusals("refused a side connection: uid 1000 has 16 waiting");
#ifndef QUADSOCK_SERVICE_THROTTLED_LOG_H_
#define QUADSOCK_SERVICE_THROTTLED_LOG_H_

#include <cstdint>
#include <functional>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace quadsock::service {

class ThrottledLog {
 public:
  explicit ThrottledLog(std::function<void(absl::string_view)> log) : log_(std::move(log)) {}

  void operator()(absl::string_view message) {
    ++unlogged_;
    const absl::Time now = absl::Now();
    if (!log_ || now - last_ < absl::Seconds(1)) return;
    log_(unlogged_ == 1 ? std::string(message)
                        : absl::StrCat(message, " (", unlogged_, " such since the last line)"));
    last_ = now;
    unlogged_ = 0;
  }

 private:
  std::function<void(absl::string_view)> log_;
  absl::Time last_ = absl::InfinitePast();
  uint64_t unlogged_ = 0;
};

}  // namespace quadsock::service

#endif  // QUADSOCK_SERVICE_THROTTLED_LOG_H_
