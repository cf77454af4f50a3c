#include "stack/demux/flow_hash.h"

#include "absl/random/random.h"

namespace quadsock::demux {

FlowHasher::Secret FlowHasher::RandomSecret() {
  absl::BitGen gen;  // seeded from the OS entropy source
  return Secret{absl::Uniform<uint64_t>(gen), absl::Uniform<uint64_t>(gen)};
}

}  // namespace quadsock::demux
