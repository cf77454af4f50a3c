// The read side of the socket table: Lookup and LookupBatch (never lock, never block) and their
// counters.
#include <algorithm>
#include <bit>

#include "absl/base/attributes.h"
#include "stack/demux/socket_table.h"

namespace quadsock::demux {

using internal::Buckets;
using internal::Entry;

LookupContext::LookupContext(SocketTable& table) : table_(table) {
  std::lock_guard<std::mutex> lock(table_.contexts_mu_);
  table_.contexts_.insert(this);
}

LookupContext::~LookupContext() {
  std::lock_guard<std::mutex> lock(table_.contexts_mu_);
  AddTo(table_.retired_);
  table_.contexts_.erase(this);
}

void LookupContext::AddTo(TableStats& s) const {
  constexpr auto kRelaxed = std::memory_order_relaxed;
  s.lookups += counters_.lookups.load(kRelaxed);
  s.misses += counters_.misses.load(kRelaxed);
  s.hash4_hits += counters_.hash4_hits.load(kRelaxed);
  s.hash4_misses += counters_.hash4_misses.load(kRelaxed);
  s.hash2_lookups += counters_.hash2_lookups.load(kRelaxed);
  s.chain_steps += counters_.chain_steps.load(kRelaxed);
  s.scored += counters_.scored.load(kRelaxed);
  for (int i = 0; i < TableStats::kHistogramBuckets; ++i) {
    s.chain_histogram[i] += counters_.histogram[i].load(kRelaxed);
  }
}

TableStats SocketTable::Stats() const {
  TableStats s;
  {
    std::lock_guard<std::mutex> lock(contexts_mu_);
    s = retired_;
    for (const LookupContext* c : contexts_) c->AddTo(s);
  }
  s.resizes = resizes_.load(std::memory_order_relaxed);
  std::lock_guard<std::mutex> lock(mu_);
  s.slots = buckets_.load(std::memory_order_relaxed)->size;
  s.sockets = sockets_.size();
  s.hash4_entries = hash4_entries_;
  s.hash2_entries = hash2_entries_;
  return s;
}

namespace {

int HistogramBucket(uint32_t steps) {
  if (steps < 4) return static_cast<int>(steps);
  // 4-7 -> 4, 8-15 -> 5, 16-31 -> 6, 32+ -> 7
  return std::min(TableStats::kHistogramBuckets - 1, static_cast<int>(std::bit_width(steps)) + 1);
}

bool DeviceMatches(const Entry& e, uint32_t device) {
  return !e.device_bound || e.bound_device == device;
}

}  // namespace

// compute_score over one hash2 chain: `want_local` is the destination address (exact pass) or
// the wildcard. A mismatch disqualifies; family, exact local address, connected peer address
// and port, and bound device add weight. The first of equal scores wins.
const Entry* SocketTable::ScoreChain(LookupContext& ctx, const Entry* e, uint64_t hash,
                                     const FlowKey& flow, const AddrKey& want_local,
                                     const AddrKey& src, uint8_t family_bit,
                                     uint32_t* steps) const {
  const Entry* best = nullptr;
  int best_score = -1;
  uint64_t scored = 0;
  for (; e != nullptr; e = e->next.load(std::memory_order_acquire)) {
    ++*steps;
    if (e->hash != hash) continue;  // the stored full hash first, the key only if it matches
    ++scored;
    if (!(e->accepts & family_bit) || e->local_port != flow.dst_port ||
        !net::SameBytes16(e->local, want_local)) {
      continue;
    }
    int score = e->family_bit == family_bit ? 2 : 1;
    if (!IsWildcardKey(e->local)) score += 4;
    if (e->connected) {
      if (!net::SameBytes16(e->remote, src)) continue;
      score += 4;
      if (e->remote_port != flow.src_port) continue;
      score += 4;
    }
    if (e->device_bound) {
      if (e->bound_device != flow.device) continue;
      score += 4;
    }
    if (score > best_score) {
      best_score = score;
      best = e;
    }
  }
  LookupContext::Bump(ctx.counters_.hash2_lookups);
  LookupContext::Bump(ctx.counters_.scored, scored);
  return best;
}

SocketTable::Probe SocketTable::MakeProbe(const Buckets& b, const FlowKey& flow) const {
  Probe p;
  p.dst = AddrKeyOf(flow.dst);
  p.src = AddrKeyOf(flow.src);
  p.family_bit = flow.dst.is_v4() ? internal::kAcceptV4 : internal::kAcceptV6;
  p.hash2 = hasher_.Hash2(p.dst, flow.dst_port);
  p.hash4 = hasher_.Hash4(p.dst, flow.dst_port, p.src, flow.src_port);
  p.slot2 = &b.hash2[b.Index(p.hash2)];
  p.slot4 = &b.hash4[b.Index(p.hash4)];
  p.filter4 = &b.filter4[b.Index(p.hash4)];
  return p;
}

bool SocketTable::Hash4Matches(const Entry& e, const FlowKey& flow, const Probe& p) {
  // The key itself, not the stored hash first: it is in the entry's first cache line.
  return e.remote_port == flow.src_port && e.local_port == flow.dst_port &&
         (e.accepts & p.family_bit) && net::SameBytes16(e.remote, p.src) &&
         net::SameBytes16(e.local, p.dst) && DeviceMatches(e, flow.device);
}

const Entry* SocketTable::StartHash4Walk(const Probe& p, Hash4Walk& w) const {
  if (!options_.hash4 || p.slot2->hash4_cnt.load(std::memory_order_acquire) == 0) return nullptr;
  w.tried = true;
  return MayHaveHash4(p) ? p.slot4->load(std::memory_order_acquire) : nullptr;
}

// Inlined into both lookups: as a real call it returned its optional result through memory,
// and the caller's load of it waited on a store forward per flow (7 ns per frame in
// stack_benchmark).
ABSL_ATTRIBUTE_ALWAYS_INLINE inline std::optional<LookupResult> SocketTable::Conclude(
    LookupContext& ctx, const Buckets& b, const FlowKey& flow, const Probe& p,
    const Hash4Walk& w) const {
  LookupContext::Counters& c = ctx.counters_;
  LookupContext::Bump(c.lookups);
  uint32_t steps = w.steps;
  const Entry* found = w.found;
  if (w.tried) LookupContext::Bump(found != nullptr ? c.hash4_hits : c.hash4_misses);
  if (found == nullptr && !IsWildcardKey(p.dst)) {
    found = ScoreChain(ctx, p.slot2->head.load(std::memory_order_acquire), p.hash2, flow, p.dst,
                       p.src, p.family_bit, &steps);
  }
  if (found == nullptr) {
    const uint64_t wild = hasher_.Hash2(AddrKey{}, flow.dst_port);
    found = ScoreChain(ctx, b.hash2[b.Index(wild)].head.load(std::memory_order_acquire), wild,
                       flow, AddrKey{}, p.src, p.family_bit, &steps);
  }
  LookupContext::Bump(c.chain_steps, steps);
  LookupContext::Bump(c.histogram[HistogramBucket(steps)]);
  if (found == nullptr) {
    LookupContext::Bump(c.misses);
    return std::nullopt;
  }
  if (found->grouped) {
    // Reuseport: spread unconnected traffic over the group by the keyed 4-tuple hash
    // (reciprocal_scale, as the kernel), stable while the group does not change.
    const internal::ReuseMembers* m = found->group->members.load(std::memory_order_acquire);
    const uint32_t n = m != nullptr ? m->size.load(std::memory_order_acquire) : 0;
    if (n > 0) {
      const uint32_t i = static_cast<uint32_t>(((p.hash4 >> 32) * n) >> 32);
      const internal::SocketRef* ref = m->slots[i].load(std::memory_order_acquire);
      if (ref != nullptr) return LookupResult{ref->id, ref->cookie};
    }
  }
  return LookupResult{found->id, found->cookie};
}

std::optional<LookupResult> SocketTable::Lookup(LookupContext& ctx, const FlowKey& flow) const {
  const Buckets* b = buckets_.load(std::memory_order_acquire);
  const Probe p = MakeProbe(*b, flow);
  Hash4Walk w;
  for (const Entry* e = StartHash4Walk(p, w); e != nullptr;
       e = e->next.load(std::memory_order_acquire)) {
    ++w.steps;
    if (Hash4Matches(*e, flow, p)) {
      w.found = e;
      break;
    }
  }
  return Conclude(ctx, *b, flow, p, w);
}

void SocketTable::LookupBatch(LookupContext& ctx, std::span<const FlowKey> flows,
                              std::span<std::optional<LookupResult>> out) const {
  constexpr size_t kChunk = 64;
  static_assert(kChunk <= 256, "`walking` holds indices as uint8_t");
  const Buckets* b = buckets_.load(std::memory_order_acquire);
  Probe probes[kChunk];
  Hash4Walk walks[kChunk];
  const Entry* at[kChunk];  // where each walk stands
  uint8_t walking[kChunk];  // the flows whose walk goes on, in order
  for (size_t base = 0; base < flows.size(); base += kChunk) {
    const size_t n = std::min(kChunk, flows.size() - base);
    const FlowKey* f = &flows[base];
    // The loads of one pass do not depend on each other, so the CPU overlaps their misses.
    for (size_t i = 0; i < n; ++i) {
      probes[i] = MakeProbe(*b, f[i]);
      __builtin_prefetch(probes[i].slot2);
      __builtin_prefetch(probes[i].slot4);
      __builtin_prefetch(probes[i].filter4);
    }
    size_t count = 0;
    for (size_t i = 0; i < n; ++i) {
      walks[i] = Hash4Walk{};
      if ((at[i] = StartHash4Walk(probes[i], walks[i])) != nullptr) {
        __builtin_prefetch(at[i]);  // what a walk reads of an entry is in its first cache line
        walking[count++] = static_cast<uint8_t>(i);
      }
    }
    // The hash4 chains one entry per flow and pass: an entry that is not the flow's has its
    // successor prefetched and compared a pass later, while other flows' entries are compared,
    // instead of the walk waiting for it. With 100k sockets about a third of the hits are not
    // their chain's head.
    while (count > 0) {
      size_t kept = 0;
      for (size_t k = 0; k < count; ++k) {
        const size_t i = walking[k];
        ++walks[i].steps;
        if (Hash4Matches(*at[i], f[i], probes[i])) {
          walks[i].found = at[i];
          __builtin_prefetch(reinterpret_cast<const void*>(at[i]->cookie));
        } else if ((at[i] = at[i]->next.load(std::memory_order_acquire)) != nullptr) {
          __builtin_prefetch(at[i]);
          walking[kept++] = static_cast<uint8_t>(i);
        }
      }
      count = kept;
    }
    for (size_t i = 0; i < n; ++i) {
      out[base + i] = Conclude(ctx, *b, f[i], probes[i], walks[i]);
      if (walks[i].found == nullptr && out[base + i].has_value()) {
        __builtin_prefetch(reinterpret_cast<const void*>(out[base + i]->cookie));
      }
    }
  }
}

}  // namespace quadsock::demux
