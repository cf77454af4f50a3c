#include "stack/demux/internal/port_index.h"

namespace quadsock::demux::internal {
namespace {

// A new socket (sharing if `reuse`, of `owner`) may not join sockets that are there and either
// do not share, or belong to another owner: a reuseport group is one owner's, as in Linux,
// where sockets of one uid only may share a port.
template <typename Pair>
bool Clash(const Pair& p, bool reuse, uint64_t owner) {
  return p.n > 0 && (!reuse || p.no_reuse > 0 || p.mixed || p.owner != owner);
}

// Counts `delta` sockets of `owner` in or out of `p`.
template <typename Pair>
void Count(Pair& p, bool reuse, uint64_t owner, int delta) {
  if (delta > 0) {
    if (p.n == 0) {
      p.owner = owner;
    } else if (p.owner != owner) {
      p.mixed = true;
    }
  }
  p.n += delta;
  if (!reuse) p.no_reuse += delta;
  if (p.n == 0) {
    p.owner = 0;
    p.mixed = false;
  }
}

}  // namespace

Coverage Coverage::Of(net::Family family, bool v6only, const net::IpAddress& local) {
  Coverage c;
  if (family == net::Family::kV4) {
    c.v4 = true;
    c.v4_key = AddrKeyOf(local);
    return c;
  }
  if (local.IsUnspecified()) {  // "::"
    c.v6 = true;
    c.v4 = !v6only;
    return c;
  }
  if (local.IsV4Mapped()) {  // ::ffff:a.b.c.d, or ::ffff:0.0.0.0 for the IPv4 wildcard
    c.v4 = true;
    c.v4_key = AddrKeyOf(local);
    return c;
  }
  c.v6 = true;
  c.v6_key = local.bytes16();
  return c;
}

PortIndex::Pair PortIndex::DevCounts::Compatible(uint32_t device) const {
  if (device == 0) return total;
  Pair p;
  for (uint32_t d : {0u, device}) {
    auto it = by_device.find(d);
    if (it == by_device.end()) continue;
    const Pair& q = it->second;
    p.mixed |= q.mixed || (p.n > 0 && q.owner != p.owner);
    if (p.n == 0) p.owner = q.owner;
    p.n += q.n;
    p.no_reuse += q.no_reuse;
  }
  return p;
}

void PortIndex::DevCounts::Update(uint32_t device, bool reuse, uint64_t owner, int delta) {
  Count(total, reuse, owner, delta);
  Pair& p = by_device[device];
  Count(p, reuse, owner, delta);
  if (p.n == 0) by_device.erase(device);
}

bool PortIndex::SpaceConflicts(const Space& s, const AddrKey& key, bool reuse, uint32_t device,
                               uint64_t owner) {
  if (IsWildcardKey(key)) return Clash(s.all.Compatible(device), reuse, owner);
  if (Clash(s.wildcard.Compatible(device), reuse, owner)) return true;
  auto it = s.exact.find(key);
  if (it == s.exact.end()) return false;
  return Clash(it->second.Compatible(device), reuse, owner);
}

void PortIndex::SpaceUpdate(Space& s, const AddrKey& key, bool reuse, uint32_t device,
                            uint64_t owner, int delta) {
  s.all.Update(device, reuse, owner, delta);
  if (IsWildcardKey(key)) {
    s.wildcard.Update(device, reuse, owner, delta);
    return;
  }
  DevCounts& d = s.exact[key];
  d.Update(device, reuse, owner, delta);
  if (d.empty()) s.exact.erase(key);
}

bool PortIndex::Conflicts(uint16_t port, const Coverage& c, bool reuse, uint32_t device,
                          uint64_t owner) const {
  auto it = ports_.find(port);
  if (it == ports_.end()) return false;
  if (c.v4 && SpaceConflicts(it->second.v4, c.v4_key, reuse, device, owner)) return true;
  if (c.v6 && SpaceConflicts(it->second.v6, c.v6_key, reuse, device, owner)) return true;
  return false;
}

void PortIndex::Add(uint16_t port, const Coverage& c, bool reuse, uint32_t device,
                    uint64_t owner) {
  Port& p = ports_[port];
  if (c.v4) SpaceUpdate(p.v4, c.v4_key, reuse, device, owner, +1);
  if (c.v6) SpaceUpdate(p.v6, c.v6_key, reuse, device, owner, +1);
}

void PortIndex::Remove(uint16_t port, const Coverage& c, bool reuse, uint32_t device,
                       uint64_t owner) {
  auto it = ports_.find(port);
  if (it == ports_.end()) return;
  if (c.v4) SpaceUpdate(it->second.v4, c.v4_key, reuse, device, owner, -1);
  if (c.v6) SpaceUpdate(it->second.v6, c.v6_key, reuse, device, owner, -1);
  if (it->second.v4.empty() && it->second.v6.empty()) ports_.erase(it);
}

size_t PortIndex::MemoryBytes() const {
  size_t bytes = ports_.capacity() * (sizeof(uint16_t) + sizeof(Port) + 1);
  for (const auto& [port, p] : ports_) {
    for (const Space* s : {&p.v4, &p.v6}) {
      bytes += s->exact.capacity() * (sizeof(AddrKey) + sizeof(DevCounts) + 1);
    }
  }
  return bytes;
}

}  // namespace quadsock::demux::internal
