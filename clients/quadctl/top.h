// quadctl top: the server's counters that moved since the previous refresh, with their rates
// per second, busiest first, like top(1). A refreshing screen on a terminal, plain blocks of
// lines otherwise (one per refresh), one Counters message per line with --json. What did not
// move (constants such as the table's size, counters of things that do not happen, gauges that
// held still) is left out.
//
//   quadctl top --interval=1s --count=10
#ifndef QUADSOCK_CLIENTS_QUADCTL_TOP_H_
#define QUADSOCK_CLIENTS_QUADCTL_TOP_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "clients/quadctl/cli.h"

namespace quadsock::quadctl {

struct Moved {
  std::string name;  // as `quadctl stats` names it: "stack.rx_frames"
  double total = 0;
  double delta = 0;
  double per_second = 0;
};

// The values of `now` that differ from `before` (a name new in `now` moved from 0), busiest
// first; `seconds` is the time between the two.
std::vector<Moved> MovedSince(const std::map<std::string, double>& before,
                              const std::map<std::string, double>& now, double seconds);

absl::Status Top(Context& c);

}  // namespace quadsock::quadctl

#endif  // QUADSOCK_CLIENTS_QUADCTL_TOP_H_
