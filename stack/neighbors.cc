#include "stack/neighbors.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "stack/internal/udp_socket.h"

namespace quadsock::stack {

namespace {

// A datagram the table gives up on: the sending socket counts it as dropped.
void Dropped(const PendingDatagram& d) {
  if (d.socket != nullptr) d.socket->CountSendDrop();
}

void Dropped(const std::deque<PendingDatagram>& ds) {
  for (const PendingDatagram& d : ds) Dropped(d);
}

}  // namespace

const char* NeighborStateName(NeighborState s) {
  switch (s) {
    case NeighborState::kIncomplete: return "incomplete";
    case NeighborState::kReachable: return "reachable";
    case NeighborState::kStale: return "stale";
    case NeighborState::kPermanent: return "permanent";
  }
  return "?";
}

std::optional<net::MacAddress> NeighborTable::Lookup(const net::IpAddress& ip, absl::Time now) {
  auto it = entries_.find(ip);
  if (it == entries_.end() || !it->second.mac.has_value()) return std::nullopt;
  Entry& e = it->second;
  if (e.state == NeighborState::kReachable && now - e.updated > options_.reachable_time) {
    e.state = NeighborState::kStale;
  }
  if (e.state == NeighborState::kStale && !e.refresh) {
    e.refresh = true;
    e.probes = 0;
    e.next_probe = now;
  }
  return e.mac;
}

bool NeighborTable::Expired(const Entry& e, absl::Time now) const {
  return e.state == NeighborState::kStale ||
         (e.state == NeighborState::kReachable && now - e.updated > options_.reachable_time);
}

bool NeighborTable::MakeRoom(absl::Time now, bool evict_reachable) {
  if (entries_.size() < options_.max_entries) return true;
  // The entry updated longest ago among the stale (or expired) ones, else, if allowed, among
  // the reachable: they can be resolved again. Permanent entries and unresolved ones (our own
  // datagrams wait there) stay.
  auto oldest = entries_.end();
  bool oldest_expired = false;
  for (auto it = entries_.begin(); it != entries_.end(); ++it) {
    const Entry& e = it->second;
    const bool expired = Expired(e, now);
    if (!expired && !(evict_reachable && e.state == NeighborState::kReachable)) continue;
    if (oldest == entries_.end() || (expired && !oldest_expired) ||
        (expired == oldest_expired && e.updated < oldest->second.updated)) {
      oldest = it;
      oldest_expired = expired;
    }
  }
  if (oldest == entries_.end()) {
    ++counters_.table_full;
    return false;
  }
  counters_.dropped_unresolved += oldest->second.pending.size();
  Dropped(oldest->second.pending);
  entries_.erase(oldest);
  return true;
}

bool NeighborTable::Queue(PendingDatagram datagram, absl::Time now) {
  const net::IpAddress ip = datagram.next_hop;
  auto it = entries_.find(ip);
  bool fresh = false;
  if (it == entries_.end()) {
    if (!MakeRoom(now, /*evict_reachable=*/true)) {
      ++counters_.dropped_unresolved;
      Dropped(datagram);
      return false;
    }
    it = entries_.emplace(ip, Entry{}).first;
    it->second.updated = now;
    it->second.next_probe = now + options_.retransmit;
    it->second.probes = 1;
    ++counters_.probes_sent;
    fresh = true;
  }
  Entry& e = it->second;
  if (e.pending.size() >= options_.max_pending) {
    ++counters_.dropped_queue_full;
    Dropped(datagram);
    return fresh;
  }
  e.pending.push_back(std::move(datagram));
  return fresh;
}

std::vector<PendingDatagram> NeighborTable::Learn(const net::IpAddress& ip,
                                                  const net::MacAddress& mac, absl::Time now,
                                                  bool create) {
  auto it = entries_.find(ip);
  if (it == entries_.end()) {
    // A neighbour learned from the wire (a request for us, RFC 826) takes only a stale
    // entry's place: a flood of made-up senders must not push out the next hops we send to.
    if (!create || !MakeRoom(now, /*evict_reachable=*/false)) return {};
    it = entries_.emplace(ip, Entry{}).first;
  }
  Entry& e = it->second;
  if (e.state == NeighborState::kPermanent) return {};
  if (!e.mac.has_value()) ++counters_.resolved;
  e.mac = mac;
  e.state = NeighborState::kReachable;
  e.updated = now;
  e.refresh = false;
  e.probes = 0;
  std::vector<PendingDatagram> ready(std::make_move_iterator(e.pending.begin()),
                                     std::make_move_iterator(e.pending.end()));
  e.pending.clear();
  return ready;
}

std::vector<net::IpAddress> NeighborTable::Tick(absl::Time now) {
  std::vector<net::IpAddress> probe;
  for (auto it = entries_.begin(); it != entries_.end();) {
    Entry& e = it->second;
    const bool probing = e.state == NeighborState::kIncomplete || e.refresh;
    if (!probing || now < e.next_probe) {
      ++it;
      continue;
    }
    if (e.probes >= options_.max_probes) {
      if (e.state == NeighborState::kIncomplete) {
        ++counters_.failed;
        counters_.dropped_unresolved += e.pending.size();
        Dropped(e.pending);
        entries_.erase(it++);
        continue;
      }
      e.refresh = false;  // a stale entry that did not answer stays stale, and is used
      ++it;
      continue;
    }
    ++e.probes;
    ++counters_.probes_sent;
    e.next_probe = now + options_.retransmit;
    probe.push_back(it->first);
    ++it;
  }
  return probe;
}

// A neighbour is a unicast host: no entry for a group, the wildcard, loopback or broadcast.
const char* NotANeighborAddressReason(const net::IpAddress& ip) {
  if (const char* wrong = ip.NotAHostReason()) return wrong;
  if (ip.IsLoopback() || ip.Unmapped().IsLoopback()) return "a loopback address";
  return nullptr;
}

const char* NotANeighborMacReason(const net::MacAddress& mac) {
  if (mac.IsZero()) return "all zeros";
  if (mac.IsBroadcast()) return "broadcast";
  if (mac.IsMulticast()) return "multicast";
  return nullptr;
}

absl::Status CheckNeighborAddress(const net::IpAddress& ip) {
  const char* wrong = NotANeighborAddressReason(ip);
  if (wrong == nullptr) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("address ", ip.ToString(), " is ", wrong, ", not a neighbour's"));
}

absl::Status NeighborTable::SetPermanent(const net::IpAddress& ip, const net::MacAddress& mac,
                                         absl::Time now, std::vector<PendingDatagram>* ready) {
  if (absl::Status s = CheckNeighborAddress(ip); !s.ok()) return s;
  if (const char* wrong = NotANeighborMacReason(mac)) {
    return absl::InvalidArgumentError(absl::StrCat("mac ", mac.ToString(), " is ", wrong,
                                                   ": a neighbour has a unicast MAC address"));
  }
  auto it = entries_.find(ip);
  // Permanent entries are never evicted: at most half the table, or they could leave no room
  // for the neighbours the stack learns and sends to.
  const size_t max_permanent = std::max<size_t>(1, options_.max_entries / 2);
  if (it == entries_.end() || it->second.state != NeighborState::kPermanent) {
    size_t permanent = 0;
    for (const auto& [a, e] : entries_) permanent += e.state == NeighborState::kPermanent;
    if (permanent >= max_permanent) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "the neighbour table has its maximum of ", max_permanent,
          " permanent entries (half of ", options_.max_entries, "); remove one first"));
    }
  }
  if (it == entries_.end()) {
    if (!MakeRoom(now, /*evict_reachable=*/true)) {
      return absl::ResourceExhaustedError(
          absl::StrCat("neighbour table full (", options_.max_entries, " entries)"));
    }
    it = entries_.emplace(ip, Entry{}).first;
  }
  Entry& e = it->second;
  e.mac = mac;
  e.state = NeighborState::kPermanent;
  e.refresh = false;
  // A permanent entry is never probed nor learned again: what waited must leave now.
  std::deque<PendingDatagram> pending = std::move(e.pending);
  e.pending.clear();
  if (ready != nullptr) {
    for (PendingDatagram& d : pending) ready->push_back(std::move(d));
  } else {
    counters_.dropped_unresolved += pending.size();
    Dropped(pending);
  }
  return absl::OkStatus();
}

absl::Status NeighborTable::Remove(const net::IpAddress& ip) {
  if (absl::Status s = CheckNeighborAddress(ip); !s.ok()) return s;
  auto it = entries_.find(ip);
  if (it == entries_.end()) {
    return absl::NotFoundError(absl::StrCat("no neighbour entry for ", ip.ToString()));
  }
  counters_.dropped_unresolved += it->second.pending.size();
  Dropped(it->second.pending);
  entries_.erase(it);
  return absl::OkStatus();
}

std::vector<NeighborInfo> NeighborTable::List() const {
  std::vector<NeighborInfo> out;
  for (const auto& [ip, e] : entries_) {
    out.push_back({ip, e.mac, e.state, e.updated, e.pending.size()});
  }
  return out;
}

}  // namespace quadsock::stack
