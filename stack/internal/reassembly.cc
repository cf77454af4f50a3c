#include "stack/internal/reassembly.h"

#include <algorithm>
#include <cstring>

#include "absl/container/inlined_vector.h"

#include "stack/net/frame_builder.h"
#include "stack/net/ip.h"
#include "stack/net/udp.h"

namespace quadsock::stack {

// A datagram being put together: one buffer, as long as the furthest fragment's end, into which
// each fragment is copied at its offset (in-order fragments append; the whole datagram leaves
// by a move, no second copy), and the byte ranges it holds, disjoint and in order.
struct Reassembly::Datagram {
  struct Piece {
    uint32_t begin = 0;
    uint32_t end = 0;
  };

  Key key;
  net::IpAddress source;  // SourceKey(key.src): what its charge counts against
  int version = 0;        // 0: IPv4, 1: IPv6 (its list)
  absl::Time created;
  absl::Time expires;
  // The source's fragment count at this datagram's last fragment (Sources::fragments).
  uint32_t last_fragment = 0;
  bool has_end = false;  // the last fragment came: `end` is the datagram's length
  uint32_t end = 0;
  size_t received = 0;  // bytes held (the pieces are disjoint: complete at received == end)
  size_t charged = 0;
  absl::InlinedVector<Piece, 8> pieces;
  std::vector<uint8_t> bytes;  // charged by its capacity
  net::MacAddress first_mac;
  std::vector<uint8_t> first;  // the first fragment's IP packet, cut to a quote
  Datagram* prev = nullptr;    // older, in its version's list
  Datagram* next = nullptr;    // newer
  Datagram* source_prev = nullptr;  // older, in its source's list
  Datagram* source_next = nullptr;  // newer
};

Reassembly::Fragment Reassembly::FragmentOf(const net::ParsedFrame& f,
                                            std::span<const uint8_t> frame) {
  Fragment r;
  r.src_mac = f.eth.src;
  r.src = f.src;
  r.dst = f.dst;
  r.protocol = f.protocol;
  if (f.l3 == net::L3::kIpv4) {
    r.id = f.ipv4.id;
    r.offset = uint32_t{f.ipv4.fragment_offset} * 8;
    r.more = f.ipv4.more_fragments;
  } else {
    r.id = f.ipv6.fragment_id;
    r.offset = uint32_t{f.ipv6.fragment_offset} * 8;
    r.more = f.ipv6.more_fragments;
  }
  r.payload = frame.subspan(f.l4_offset, f.l4_length);
  r.packet = frame.subspan(f.l3_offset, f.l4_offset + f.l4_length - f.l3_offset);
  return r;
}

Reassembly::Reassembly(Limits limits, std::function<void(EngineCounter, uint64_t)> count)
    : limits_(limits),
      // At least one largest datagram in 1,280-byte IPv6 fragments, with its costs.
      source_bytes_(limits.source_bytes != 0
                        ? limits.source_bytes
                        : std::max(limits.budget_bytes / 16,
                                   size_t{65535} + 64 * kFragmentCost + kDatagramCost + 1280)),
      count_(std::move(count)) {}

Reassembly::~Reassembly() = default;

net::IpAddress Reassembly::SourceKey(const net::IpAddress& src) {
  if (src.is_v4()) return src;
  uint8_t prefix[16] = {};
  std::memcpy(prefix, src.bytes16().data(), 8);
  return net::IpAddress::V6Bytes(prefix);
}

bool Reassembly::Add(const Fragment& f, absl::Time now, std::vector<uint8_t>& out) {
  const uint32_t begin = f.offset;
  const uint32_t length = static_cast<uint32_t>(f.payload.size());
  const uint32_t end = begin + length;
  const bool v6 = f.src.is_v6();
  // The first fragment holds the whole UDP header (RFC 1858, RFC 7112); each but the last a
  // multiple of 8 bytes (its successor's offset counts in 8-byte units).
  if (begin == 0 && length < net::UdpHeader::kSize) {
    count_(EngineCounter::reassembly_tiny, 1);
    return false;
  }
  if (length == 0 || (f.more && length % 8 != 0)) {
    count_(EngineCounter::reassembly_malformed, 1);
    return false;
  }
  // The reassembled packet's length: IPv4's total length (header included), IPv6's payload
  // length (the headers before the Fragment header and the fragmentable part).
  const size_t headers = f.packet.size() - f.payload.size();
  const size_t reassembled = v6 ? headers - net::Ipv6Header::kSize - 8 + end : headers + end;
  if (reassembled > 0xffff) {
    count_(EngineCounter::reassembly_too_big, 1);
    return false;
  }

  const Key key{f.src, f.dst, f.id, f.protocol};
  auto [it, created] = datagrams_.try_emplace(key);
  if (created) {
    it->second = std::make_unique<Datagram>();
    Datagram& d = *it->second;
    d.key = key;
    d.source = SourceKey(f.src);
    d.version = v6 ? 1 : 0;
    d.created = now;
    d.expires = now + (v6 ? limits_.v6_timeout : limits_.v4_timeout);
    Datagram*& newest = newest_[d.version];
    d.prev = newest;
    if (newest != nullptr) newest->next = &d;
    newest = &d;
    if (oldest_[d.version] == nullptr) oldest_[d.version] = &d;
    Source& source = sources_[d.source];
    d.source_prev = source.newest;
    if (source.newest != nullptr) source.newest->source_next = &d;
    source.newest = &d;
    if (source.oldest == nullptr) source.oldest = &d;
    d.last_fragment = source.fragments;
    // A new datagram sweeps its source's stale ones first (they would wait for their timeout).
    while (source.oldest != &d && source.fragments - source.oldest->last_fragment > kMaxDistance) {
      count_(EngineCounter::reassembly_stale, 1);
      Drop(*source.oldest);
    }
    if (!Charge(d, kDatagramCost)) {
      Drop(d);
      return false;
    }
  }
  Datagram& d = *it->second;
  // Stale: more than kMaxDistance fragments of its source came since its last one. At a high
  // rate the 16-bit IPv4 identification comes round within the timeout, and a datagram that
  // lost a fragment would take the next one's of the same id (Linux's ipfrag_max_dist).
  const uint32_t seen = sources_.find(d.source)->second.fragments;
  if (!created && seen - d.last_fragment > kMaxDistance) {
    count_(EngineCounter::reassembly_stale, 1);
    Drop(d);
    return Add(f, now, out);  // as the first of a new datagram
  }
  // The last fragment says where the datagram ends; every fragment must lie within it.
  if ((!f.more && d.has_end && end != d.end) || (d.has_end && end > d.end) ||
      (!f.more && !d.pieces.empty() && d.pieces.back().end > end)) {
    count_(EngineCounter::reassembly_malformed, 1);
    Drop(d);
    return false;
  }
  // The first piece that ends after `begin`: the only one that can overlap from the left.
  auto at = std::partition_point(d.pieces.begin(), d.pieces.end(),
                                 [begin](const Datagram::Piece& p) { return p.end <= begin; });
  if (at != d.pieces.end() && at->begin < end) {
    if (at->begin == begin && at->end == end) {
      count_(EngineCounter::reassembly_duplicate, 1);
      return false;
    }
    // The datagram is dropped (RFC 5722), and forgotten, as Linux does: what comes of it later
    // starts a datagram that cannot complete, and times out.
    count_(EngineCounter::reassembly_overlap, 1);
    Drop(d);
    return false;
  }
  if (d.pieces.size() >= kMaxFragments) {
    count_(EngineCounter::reassembly_malformed, 1);
    Drop(d);
    return false;
  }
  const size_t quote =
      begin == 0 ? std::min(f.packet.size(), net::IcmpQuoteLimit(f.src.family())) : 0;
  // The buffer grows to the fragment's end: exactly, once the end is known; else with room for
  // a few more in-order fragments. Its growth is charged, so a lone fragment far into a
  // datagram costs its source what it holds.
  size_t capacity = d.bytes.capacity();
  if (end > capacity) {
    capacity = d.has_end || !f.more ? std::max<size_t>(end, d.end)
                                    : std::min<size_t>(std::max<size_t>(end, 2 * capacity), 0x10000);
  }
  if (!Charge(d, capacity - d.bytes.capacity() + kFragmentCost + quote)) {
    if (d.pieces.empty()) Drop(d);  // nothing of it held
    return false;
  }
  d.bytes.reserve(capacity);
  if (end > d.bytes.size()) d.bytes.resize(end);
  std::memcpy(d.bytes.data() + begin, f.payload.data(), length);
  d.pieces.insert(at, Datagram::Piece{begin, end});
  d.received += length;
  d.last_fragment = ++sources_.find(d.source)->second.fragments;
  if (quote > 0) {
    d.first.assign(f.packet.begin(), f.packet.begin() + static_cast<ptrdiff_t>(quote));
    d.first_mac = f.src_mac;
  }
  if (!f.more) {
    d.has_end = true;
    d.end = end;
  }
  if (!d.has_end || d.received != d.end) return false;
  // Disjoint pieces within [0, end) that add up to `end`: all of it.
  out = std::move(d.bytes);
  out.resize(d.end);
  count_(EngineCounter::reassembled, 1);
  Drop(d);
  return true;
}

bool Reassembly::Charge(Datagram& d, size_t bytes) {
  // Over its source's share: that source's oldest datagrams make room (likely ones that lost a
  // fragment), never another source's.
  for (;;) {
    const Source& source = sources_.find(d.source)->second;  // d is on its list
    if (source.bytes + bytes <= source_bytes_) break;
    Datagram* victim = source.oldest != &d ? source.oldest : d.source_next;
    count_(EngineCounter::reassembly_source_full, 1);
    if (victim == nullptr) return false;
    Drop(*victim);
  }
  while (bytes_ + bytes > limits_.budget_bytes) {
    const Datagram* oldest_v4 = oldest_[0] != &d ? oldest_[0] : d.next;
    const Datagram* oldest_v6 = oldest_[1] != &d ? oldest_[1] : d.next;
    if (oldest_v4 == nullptr && oldest_v6 == nullptr) {
      count_(EngineCounter::reassembly_budget_full, 1);
      return false;
    }
    EvictOldest(&d);
  }
  sources_.find(d.source)->second.bytes += bytes;
  d.charged += bytes;
  bytes_ += bytes;
  return true;
}

void Reassembly::EvictOldest(const Datagram* keep) {
  Datagram* candidates[2];
  for (int v = 0; v < 2; ++v) {
    candidates[v] = oldest_[v] != keep ? oldest_[v] : keep->next;
  }
  Datagram* victim = candidates[0];
  if (victim == nullptr || (candidates[1] != nullptr && candidates[1]->created < victim->created)) {
    victim = candidates[1];
  }
  count_(EngineCounter::reassembly_evicted, 1);
  Drop(*victim);
}

void Reassembly::Drop(Datagram& d) {
  (d.prev != nullptr ? d.prev->next : oldest_[d.version]) = d.next;
  (d.next != nullptr ? d.next->prev : newest_[d.version]) = d.prev;
  const auto s = sources_.find(d.source);
  Source& source = s->second;
  (d.source_prev != nullptr ? d.source_prev->source_next : source.oldest) = d.source_next;
  (d.source_next != nullptr ? d.source_next->source_prev : source.newest) = d.source_prev;
  bytes_ -= d.charged;
  source.bytes -= d.charged;
  if (source.oldest == nullptr) sources_.erase(s);  // its last datagram: its count starts over
  const Key key = d.key;  // d is freed by the erase
  datagrams_.erase(key);
}

void Reassembly::Expire(absl::Time now, absl::FunctionRef<void(const Expired&)> expired) {
  for (int v = 0; v < 2; ++v) {
    while (oldest_[v] != nullptr && oldest_[v]->expires <= now) {
      Datagram& d = *oldest_[v];
      count_(EngineCounter::reassembly_timed_out, 1);
      if (!d.first.empty()) expired(Expired{d.first_mac, d.key.src, d.key.dst, d.first});
      Drop(d);
    }
  }
}

}  // namespace quadsock::stack
