#include "clients/preload/internal/config.h"

#include <cstdlib>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"

namespace quadsock::preload {
namespace {

bool ParsePorts(absl::string_view text, std::vector<std::pair<uint16_t, uint16_t>>& out) {
  for (absl::string_view part : absl::StrSplit(text, ',', absl::SkipWhitespace())) {
    std::pair<absl::string_view, absl::string_view> range = absl::StrSplit(part, '-');
    if (!absl::StrContains(part, '-')) range.second = range.first;  // one port
    uint32_t low, high;
    if (!absl::SimpleAtoi(range.first, &low) || !absl::SimpleAtoi(range.second, &high) ||
        low == 0 || high > 65535 || low > high) {
      return false;
    }
    out.emplace_back(low, high);
  }
  return !out.empty();
}

}  // namespace

bool Config::TakesPort(uint16_t port) const {
  if (ports.empty() || port == 0) return true;  // an ephemeral port is ours to pick
  for (const auto& [low, high] : ports) {
    if (port >= low && port <= high) return true;
  }
  return false;
}

Config ConfigFromEnvironment() {
  Config c;
  auto env = [](const char* name) -> absl::string_view {
    const char* v = std::getenv(name);
    return v == nullptr ? absl::string_view() : absl::string_view(v);
  };
  if (absl::string_view v = env("QUADSOCK_TARGET"); !v.empty()) c.target = std::string(v);
  if (absl::string_view v = env("QUADSOCK_WILDCARD"); !v.empty()) {
    if (v == "kernel") {
      c.wildcard_to_quadsock = false;
    } else if (v != "quadsock") {
      c.problems.push_back(absl::StrCat("QUADSOCK_WILDCARD=", v, ": not quadsock or kernel"));
    }
  }
  if (absl::string_view v = env("QUADSOCK_PORTS"); !v.empty() && !ParsePorts(v, c.ports)) {
    c.ports.clear();
    c.problems.push_back(
        absl::StrCat("QUADSOCK_PORTS=", v, ": not a list of ports and ranges (53,5000-5100)"));
  }
  if (absl::string_view v = env("QUADSOCK_REQUIRE"); !v.empty()) {
    if (v == "1") {
      c.required = true;
    } else if (v != "0") {
      c.problems.push_back(absl::StrCat("QUADSOCK_REQUIRE=", v, ": not 0 or 1"));
    }
  }
  if (absl::string_view v = env("QUADSOCK_BUSY_POLL"); !v.empty()) {
    if (!absl::SimpleAtoi(v, &c.busy_poll_us) || c.busy_poll_us > 1'000'000) {
      c.busy_poll_us = 0;
      c.problems.push_back(
          absl::StrCat("QUADSOCK_BUSY_POLL=", v, ": not microseconds from 0 to 1000000"));
    }
  }
  if (absl::string_view v = env("QUADSOCK_LOG"); !v.empty()) {
    if (v == "error") {
      c.log_level = LogLevel::kError;
    } else if (v == "warn") {
      c.log_level = LogLevel::kWarn;
    } else if (v == "info") {
      c.log_level = LogLevel::kInfo;
    } else if (v == "debug") {
      c.log_level = LogLevel::kDebug;
    } else {
      c.problems.push_back(absl::StrCat("QUADSOCK_LOG=", v, ": not error, warn, info or debug"));
    }
  }
  return c;
}

}  // namespace quadsock::preload
