#include "clients/preload/internal/log.h"

#include <unistd.h>

#include <atomic>
#include <mutex>
#include <string>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "clients/preload/internal/libc.h"

namespace quadsock::preload {
namespace {

std::atomic<int> level{static_cast<int>(LogLevel::kWarn)};

}  // namespace

void SetLogLevel(LogLevel l) { level.store(static_cast<int>(l), std::memory_order_relaxed); }

bool Logs(LogLevel l) { return static_cast<int>(l) <= level.load(std::memory_order_relaxed); }

void Log(LogLevel l, absl::string_view line) {
  if (!Logs(l)) return;
  const std::string text = absl::StrCat("quadsock-preload[", getpid(), "]: ", line, "\n");
  (void)!Libc().write(STDERR_FILENO, text.data(), text.size());
}

void LogOnce(LogLevel l, absl::string_view key, absl::string_view line) {
  static std::mutex mu;
  static absl::flat_hash_set<std::string>* said = new absl::flat_hash_set<std::string>();
  {
    std::lock_guard<std::mutex> lock(mu);
    if (!said->insert(std::string(key)).second) return;
  }
  Log(l, line);
}

}  // namespace quadsock::preload
