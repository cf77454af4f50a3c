#include "clients/quadctl/top.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <iostream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "clients/quadctl/output.h"

namespace quadsock::quadctl {
namespace {

// Every number of the message by its flattened name (strings and flags are not counters).
std::map<std::string, double> Numbers(const v1::Counters& counters) {
  std::vector<std::pair<std::string, std::string>> flat;
  Flatten(counters, "", &flat);
  std::map<std::string, double> out;
  for (const auto& [name, text] : flat) {
    double v = 0;
    if (absl::SimpleAtod(text, &v)) out[name] = v;
  }
  return out;
}

std::string Number(double v) {
  return std::floor(v) == v ? absl::StrFormat("%.0f", v) : absl::StrFormat("%.1f", v);
}

}  // namespace

std::vector<Moved> MovedSince(const std::map<std::string, double>& before,
                              const std::map<std::string, double>& now, double seconds) {
  std::vector<Moved> moved;
  for (const auto& [name, v] : now) {
    auto it = before.find(name);
    const double delta = v - (it == before.end() ? 0 : it->second);
    if (delta == 0) continue;
    moved.push_back({name, v, delta, seconds > 0 ? delta / seconds : 0});
  }
  std::stable_sort(moved.begin(), moved.end(), [](const Moved& a, const Moved& b) {
    return std::fabs(a.per_second) > std::fabs(b.per_second);
  });
  return moved;
}

absl::Status Top(Context& c) {
  const absl::Duration interval = c.args.GetDuration("interval", absl::Seconds(1));
  if (interval <= absl::ZeroDuration()) {
    throw UsageError(absl::StrCat("--interval=", c.args.Get("interval"),
                                  ": expected a duration above zero, like 1s"));
  }
  const uint32_t count = c.args.GetUint("count", 0);
  const bool screen = !c.json && isatty(STDOUT_FILENO);
  std::map<std::string, double> before;
  absl::Time then;
  for (uint32_t i = 0; count == 0 || i < count; ++i) {
    if (i > 0) absl::SleepFor(interval);
    absl::StatusOr<v1::Counters> counters = c.client().Counters();
    if (!counters.ok()) return counters.status();
    const absl::Time now = absl::Now();
    if (c.json) {
      PrintJson(*counters);
      std::cout.flush();
      continue;
    }
    std::map<std::string, double> values = Numbers(*counters);
    const double seconds = absl::ToDoubleSeconds(now - then);
    const v1::TableCounters& t = counters->table();
    const uint64_t tried = t.hash4_hits() + t.hash4_misses();
    if (screen) std::cout << "\033[H\033[2J";
    std::cout << absl::FormatTime("%H:%M:%S", now, absl::LocalTimeZone()) << "  sessions "
              << counters->sessions() << "  sockets " << counters->sockets()
              << "  hash4 hit ratio "
              << (tried == 0 ? std::string("-")
                             : absl::StrFormat("%.1f%%", 100.0 * t.hash4_hits() / tried))
              << "\n";
    if (i == 0) {
      std::cout << "(counters that move show from the next refresh, every "
                << absl::FormatDuration(interval) << ")\n";
    } else {
      std::vector<std::vector<std::string>> rows;
      for (const Moved& m : MovedSince(before, values, seconds)) {
        rows.push_back({m.name, Number(m.total), Number(m.delta),
                        absl::StrFormat("%.1f", m.per_second)});
      }
      if (rows.empty()) {
        std::cout << "(nothing moved)\n";
      } else {
        PrintTable({"COUNTER", "TOTAL", "DELTA", "PER SECOND"}, rows);
      }
    }
    if (!screen) std::cout << "\n";
    std::cout.flush();
    before = std::move(values);
    then = now;
  }
  return absl::OkStatus();
}

}  // namespace quadsock::quadctl
