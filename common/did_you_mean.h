// DidYouMean: the known word a mistyped one was most likely meant to be, for command lines that
// answer an unknown flag or command with a suggestion (quadsockd's flags, quadctl's options and
// commands).
//
//   DidYouMean("targte", {"target", "timeout"});    // "target"
//   DidYouMean("inter", {"interface", "queues"});   // "interface": the start of one word
//   DidYouMean("zzz", {"target"});                  // nullopt: nothing near
//
// Near means at most a third of the word's letters wrong (at least one), counting a letter
// added, dropped or changed, or two neighbours swapped, as one each (the optimal string
// alignment distance); failing that, the start (three letters or more) of exactly one known
// word. Of several near words the nearest wins, and of equally near ones the first.
#ifndef QUADSOCK_COMMON_DID_YOU_MEAN_H_
#define QUADSOCK_COMMON_DID_YOU_MEAN_H_

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/string_view.h"

namespace quadsock {

// Edits from a to b: insertions, deletions, substitutions and swaps of neighbours.
inline size_t EditDistance(absl::string_view a, absl::string_view b) {
  // d[i][j]: distance of a's first i letters to b's first j, kept as three rows.
  std::vector<size_t> before(b.size() + 1), previous(b.size() + 1), current(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) previous[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    current[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t change = a[i - 1] == b[j - 1] ? 0 : 1;
      current[j] = std::min({previous[j] + 1, current[j - 1] + 1, previous[j - 1] + change});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        current[j] = std::min(current[j], before[j - 2] + 1);
      }
    }
    std::swap(before, previous);
    std::swap(previous, current);
  }
  return previous[b.size()];
}

inline std::optional<std::string> DidYouMean(absl::string_view word,
                                             const std::vector<std::string>& known) {
  const size_t allowed = std::max<size_t>(1, word.size() / 3);
  std::optional<std::string> best;
  size_t best_distance = allowed + 1;
  for (const std::string& k : known) {
    const size_t d = EditDistance(word, k);
    if (d < best_distance) {
      best_distance = d;
      best = k;
    }
  }
  if (best.has_value() || word.size() < 3) return best;
  for (const std::string& k : known) {
    if (!absl::StartsWith(k, word)) continue;
    if (best.has_value()) return std::nullopt;  // the start of two words: no guess
    best = k;
  }
  return best;
}

}  // namespace quadsock

#endif  // QUADSOCK_COMMON_DID_YOU_MEAN_H_
