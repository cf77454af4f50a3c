// IP reassembly: the fragments of IPv4 (RFC 791, RFC 815) and IPv6 (RFC 8200 4.5) datagrams
// put back together, within a memory budget, for the poll engine that received them. One per
// poll engine, used by its poll thread only: no lock (a NIC's RSS hashes fragments on their
// addresses alone, so every fragment of a datagram reaches the same RX queue).
//
// Keyed as the RFCs say: source, destination, protocol (IPv6: the Fragment header's Next
// Header) and identification, and the IP version. What reassembly refuses, it refuses whole:
// - overlapping fragments drop the datagram (RFC 5722, and Linux's IPv4 alike; as Linux, its
//   key is forgotten: what comes of it later cannot complete and times out); a fragment that
//   repeats one held, byte range for byte range, is a harmless duplicate;
// - a datagram more than kMaxDistance fragments of its source behind is stale (the 16-bit IPv4
//   identification wraps within the timeout at a few hundred thousand datagrams a second): a
//   fragment for it starts a new datagram;
// - a first fragment too short for the UDP header (RFC 1858, RFC 7112), a fragment that is not
//   the last and whose length is not a multiple of 8, or that disagrees with the last one's
//   end: malformed;
// - a datagram whose end would pass 65,535 bytes (IPv4: with its header; IPv6: its payload
//   length): too big.
// Limits: all datagrams held charge `budget_bytes` (their bytes and a fixed cost per fragment
// and per datagram, as Linux charges an skb's truesize); one source (IPv6: its /64) at most
// `source_bytes` of it (over its share, a source's own oldest datagrams make room: one peer
// cannot take the budget); a new fragment over the whole budget evicts the oldest datagrams. A datagram not
// complete within its timeout (30 s IPv4, 60 s IPv6) is dropped; if its first fragment came, the
// caller is told, to send ICMP time exceeded (code 1) quoting it.
//
//   Reassembly r({}, [&](EngineCounter c, uint64_t n) { Bump(c, n); });
//   std::vector<uint8_t> datagram;
//   if (r.Add(Reassembly::FragmentOf(parsed, frame), now, datagram)) Deliver(datagram);
//   r.Expire(now, [&](const Reassembly::Expired& e) { SendTimeExceeded(e); });
#ifndef QUADSOCK_STACK_INTERNAL_REASSEMBLY_H_
#define QUADSOCK_STACK_INTERNAL_REASSEMBLY_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/time/time.h"
#include "stack/net/address.h"
#include "stack/net/frame.h"
#include "stack/stack_counters.h"

namespace quadsock::stack {

class Reassembly {
 public:
  struct Limits {
    size_t budget_bytes = size_t{4} << 20;  // Linux's ipfrag_high_thresh
    // One source's share; 0: a sixteenth of the budget, and at least one largest datagram.
    size_t source_bytes = 0;
    absl::Duration v4_timeout = absl::Seconds(30);  // Linux's ipfrag_time
    absl::Duration v6_timeout = absl::Seconds(60);  // RFC 8200 4.5
  };
  // A charge per fragment held and per datagram, besides their bytes.
  static constexpr size_t kFragmentCost = 64;
  static constexpr size_t kDatagramCost = 256;
  // The most fragments one datagram may have (a 65,535-byte datagram in 8-byte pieces would be
  // 8,192); more are malformed for us. 1,280-byte IPv6 links need 54, 576-byte IPv4 ones 120.
  static constexpr size_t kMaxFragments = 256;
  // A datagram more than this many fragments of its source behind is stale (Linux's
  // ipfrag_max_dist, 64).
  static constexpr uint32_t kMaxDistance = 64;

  // One fragment as the frame parser saw it: `payload` is its share of the datagram (the bytes
  // after the IPv4 header or the IPv6 Fragment header), at `offset` bytes into it; `packet` the
  // whole IP packet (a first fragment's is quoted if the datagram times out).
  struct Fragment {
    net::MacAddress src_mac;
    net::IpAddress src;
    net::IpAddress dst;
    uint8_t protocol = 0;
    uint32_t id = 0;
    uint32_t offset = 0;
    bool more = false;
    std::span<const uint8_t> payload;
    std::span<const uint8_t> packet;
  };
  static Fragment FragmentOf(const net::ParsedFrame& f, std::span<const uint8_t> frame);

  // A datagram whose timeout ran out after its first fragment came: the ICMP time exceeded's
  // destination and quote (the first fragment's IP packet, cut to IcmpQuoteLimit).
  struct Expired {
    net::MacAddress src_mac;
    net::IpAddress src;
    net::IpAddress dst;
    std::span<const uint8_t> quote;
  };

  // `count` is told each way a fragment ends (EngineCounter::reassembly_*).
  Reassembly(Limits limits, std::function<void(EngineCounter, uint64_t)> count);
  ~Reassembly();
  Reassembly(const Reassembly&) = delete;
  Reassembly& operator=(const Reassembly&) = delete;

  // Takes a fragment. True when it completed its datagram: `out` holds the datagram's upper-layer
  // bytes (the UDP header and payload), of the fragments' protocol, from f.src to f.dst.
  bool Add(const Fragment& f, absl::Time now, std::vector<uint8_t>& out);
  // Drops the datagrams whose timeout ran out by `now`, telling `expired` of each whose first
  // fragment had come.
  void Expire(absl::Time now, absl::FunctionRef<void(const Expired&)> expired);

  size_t bytes_held() const { return bytes_; }
  size_t datagrams_held() const { return datagrams_.size(); }
  size_t source_share() const { return source_bytes_; }

 private:
  struct Key {
    net::IpAddress src;
    net::IpAddress dst;
    uint32_t id = 0;
    uint8_t protocol = 0;
    friend bool operator==(const Key&, const Key&) = default;
    template <typename H>
    friend H AbslHashValue(H h, const Key& k) {
      return H::combine(std::move(h), k.src, k.dst, k.id, k.protocol);
    }
  };
  struct Datagram;

  // The budget's key for a source: its address, or an IPv6 address's /64.
  static net::IpAddress SourceKey(const net::IpAddress& src);
  // Charges `bytes` to `d` and its source; false (nothing charged) over the source's share, or
  // over the budget when evicting every older datagram would not make room.
  bool Charge(Datagram& d, size_t bytes);
  void Drop(Datagram& d);  // forgets `d` and frees its charge
  void EvictOldest(const Datagram* keep);

  const Limits limits_;
  const size_t source_bytes_;
  const std::function<void(EngineCounter, uint64_t)> count_;
  absl::flat_hash_map<Key, std::unique_ptr<Datagram>> datagrams_;
  // Per source key, while it has datagrams: the bytes they hold, its fragments taken, and its
  // datagrams, oldest first.
  struct Source {
    size_t bytes = 0;
    uint32_t fragments = 0;
    Datagram* oldest = nullptr;
    Datagram* newest = nullptr;
  };
  absl::flat_hash_map<net::IpAddress, Source> sources_;
  // Every datagram held, oldest first: a list per IP version (each has one timeout).
  Datagram* oldest_[2] = {nullptr, nullptr};
  Datagram* newest_[2] = {nullptr, nullptr};
  size_t bytes_ = 0;
};

}  // namespace quadsock::stack

#endif  // QUADSOCK_STACK_INTERNAL_REASSEMBLY_H_
