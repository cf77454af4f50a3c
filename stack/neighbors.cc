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
    e.next_probe = now + options_.delay_first_probe;
  }
  return e.mac;
}

bool NeighborTable::Expired(const Entry& e, absl::Time now) const {
  return e.state == NeighborState::kStale ||
         (e.state == NeighborState::kReachable && now - e.updated > options_.reachable_time);
}

void NeighborTable::Resolved(Entry& e) {
  if (e.state != NeighborState::kIncomplete) return;
  if (e.gateway) return;  // the caps never counted it
  --unresolved_;
  auto it = unresolved_by_owner_.find(e.owner);
  if (--it->second == 0) unresolved_by_owner_.erase(it);
  if (e.group != 0) {
    auto g = unresolved_by_group_.find(e.group);
    if (--g->second == 0) unresolved_by_group_.erase(g);
  }
}

NeighborTable::Iterator NeighborTable::Insert(const net::IpAddress& ip) {
  auto it = entries_.emplace(ip, Entry{}).first;
  if (options_.on_entry) options_.on_entry(ip, /*present=*/true);
  return it;
}

void NeighborTable::Erase(Iterator it) {
  Entry& e = it->second;
  Resolved(e);
  counters_.dropped_unresolved += e.pending.size();
  Dropped(e.pending);
  const net::IpAddress ip = it->first;
  entries_.erase(it);
  ++changes_;
  if (options_.on_entry) options_.on_entry(ip, /*present=*/false);
}

bool NeighborTable::MakeRoom(absl::Time now) {
  if (entries_.size() < options_.max_entries) return true;
  // The cheapest entry to lose first: an unresolved one (a made-up next hop costs a sender
  // nothing; a resolved one took an answer), then a stale (or expired) one, then a reachable
  // one; the one updated longest ago of its kind. Permanent entries and the gateways' stay.
  const auto rank = [&](const Entry& e) -> int {
    if (e.state == NeighborState::kPermanent || e.gateway) return -1;
    if (e.state == NeighborState::kIncomplete) return 0;
    return Expired(e, now) ? 1 : 2;
  };
  auto victim = entries_.end();
  int victim_rank = -1;
  for (auto it = entries_.begin(); it != entries_.end(); ++it) {
    const int r = rank(it->second);
    if (r < 0) continue;
    if (victim == entries_.end() || r < victim_rank ||
        (r == victim_rank && it->second.updated < victim->second.updated)) {
      victim = it;
      victim_rank = r;
    }
  }
  if (victim == entries_.end()) {
    ++counters_.table_full;
    return false;
  }
  ++counters_.evicted;
  Erase(victim);
  return true;
}

bool NeighborTable::Bucket::Take(absl::Time now, double per_second, double burst) {
  if (refill != absl::InfinitePast() && now > refill) {
    tokens = std::min(burst, tokens + absl::ToDoubleSeconds(now - refill) * per_second);
  }
  if (refill == absl::InfinitePast() || now > refill) refill = now;
  if (tokens < 1) return false;
  tokens -= 1;
  return true;
}

bool NeighborTable::MakeRoomForLearned(absl::Time now) {
  if (entries_.size() < options_.max_entries) return true;
  while (!learned_.empty()) {
    const auto [ip, learned] = learned_.front();
    auto it = entries_.find(ip);
    if (it == entries_.end() || it->second.learned != learned) {
      learned_.pop_front();  // gone, or made again since (it has a later place)
      continue;
    }
    Entry& e = it->second;
    if (e.state == NeighborState::kPermanent || e.gateway || !Expired(e, now)) {
      // In use as a fresh next hop, or the administration's: the wire's no more.
      e.learned = 0;
      learned_.pop_front();
      continue;
    }
    learned_.pop_front();
    ++counters_.evicted;
    Erase(it);
    return true;
  }
  ++counters_.table_full;
  return false;
}

bool NeighborTable::MayResolve(const PendingDatagram& d, bool gateway, absl::Time now) {
  uint64_t* refused = nullptr;
  if (!gateway) {
    auto owned = unresolved_by_owner_.find(d.owner);
    auto grouped = d.group != 0 ? unresolved_by_group_.find(d.group) : unresolved_by_group_.end();
    if (unresolved_ >= options_.max_unresolved) {
      refused = &counters_.refused_unresolved;
    } else if ((owned != unresolved_by_owner_.end() &&
                owned->second >= options_.max_unresolved_per_owner) ||
               (grouped != unresolved_by_group_.end() &&
                grouped->second >= options_.max_unresolved_per_group)) {
      refused = &counters_.refused_owner_unresolved;
    } else if (!TakeProbeToken(now)) {
      refused = &counters_.probes_rate_limited;
    }
  }
  if (refused == nullptr && !MakeRoom(now)) {
    refused = &counters_.dropped_unresolved;
  }
  if (refused == nullptr) return true;
  ++*refused;
  Dropped(d);
  return false;
}

bool NeighborTable::Queue(PendingDatagram datagram, absl::Time now) {
  const net::IpAddress ip = datagram.next_hop;
  auto it = entries_.find(ip);
  bool fresh = false;
  if (it == entries_.end()) {
    const bool gateway =
        std::find(gateways_.begin(), gateways_.end(), ip) != gateways_.end();
    if (!MayResolve(datagram, gateway, now)) return false;
    it = Insert(ip);
    Entry& e = it->second;
    e.updated = now;
    e.next_probe = now + options_.retransmit;
    e.probes = 1;
    e.gateway = gateway;
    e.owner = datagram.owner;
    e.group = datagram.group;
    if (!gateway) {
      ++unresolved_;
      ++unresolved_by_owner_[e.owner];
      if (e.group != 0) ++unresolved_by_group_[e.group];
    }
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
                                                  const NeighborAdvert& a, absl::Time now) {
  auto it = entries_.find(ip);
  if (it == entries_.end()) {
    // RFC 4861 7.2.3 (and Linux's ARP): only a request or solicitation for us makes an entry,
    // STALE, and it takes only a stale entry's place: a flood of made-up senders must not push
    // out the next hops we send to.
    if (!a.create || !a.mac.has_value()) return {};
    if (!learning_.Take(now, options_.learned_per_second, options_.learn_burst)) {
      ++counters_.learn_rate_limited;
      return {};
    }
    if (!MakeRoomForLearned(now)) return {};
    Entry& e = Insert(ip)->second;
    e.mac = a.mac;
    e.state = NeighborState::kStale;
    e.updated = now;
    e.gateway = std::find(gateways_.begin(), gateways_.end(), ip) != gateways_.end();
    e.learned = next_learned_++;
    learned_.emplace_back(ip, e.learned);
    if (learned_.size() > 2 * options_.max_entries + 16) {
      std::erase_if(learned_, [this](const auto& l) {
        auto it = entries_.find(l.first);
        return it == entries_.end() || it->second.learned != l.second;
      });
    }
    return {};
  }
  Entry& e = it->second;
  if (e.state == NeighborState::kPermanent) return {};
  if (e.state == NeighborState::kIncomplete) {
    if (!a.mac.has_value()) return {};  // 7.2.5: nothing to resolve with
    Resolved(e);
    ++counters_.resolved;
    e.mac = a.mac;
    e.state = a.solicited ? NeighborState::kReachable : NeighborState::kStale;
    e.updated = now;
    e.refresh = false;
    e.probes = 0;
    std::vector<PendingDatagram> ready(std::make_move_iterator(e.pending.begin()),
                                       std::make_move_iterator(e.pending.end()));
    e.pending.clear();
    return ready;
  }
  const bool differs = a.mac.has_value() && a.mac != e.mac;
  if (differs && !a.override) {
    // 7.2.5 I: the MAC stays; a reachable entry is doubted (STALE, probed on next use).
    if (e.state == NeighborState::kReachable) {
      e.state = NeighborState::kStale;
      ++changes_;
    }
    return {};
  }
  if (differs) {
    e.mac = a.mac;
    ++changes_;
  }
  if (a.solicited) {
    e.state = NeighborState::kReachable;
    e.updated = now;
    e.refresh = false;
    e.probes = 0;
  } else if (differs) {
    e.state = NeighborState::kStale;
    e.updated = now;
  }
  return {};
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
        Erase(it++);
        continue;
      }
      e.refresh = false;  // a stale entry that did not answer stays stale, and is used
      ++it;
      continue;
    }
    if (!e.gateway && !TakeProbeToken(now)) {
      ++counters_.probes_rate_limited;  // put off: due again at the next tick
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
    if (!MakeRoom(now)) {
      return absl::ResourceExhaustedError(
          absl::StrCat("neighbour table full (", options_.max_entries, " entries)"));
    }
    it = Insert(ip);
    it->second.state = NeighborState::kPermanent;  // new: never counted as unresolved
  }
  Entry& e = it->second;
  Resolved(e);
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
  Erase(it);
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
