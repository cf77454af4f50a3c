#include "stack/demux/internal/port_index.h"

namespace quadsock::demux::internal {
namespace {

bool Clash(uint32_t n, uint32_t no_reuse, bool reuse) { return n > 0 && (!reuse || no_reuse > 0); }

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
    if (it != by_device.end()) {
      p.n += it->second.n;
      p.no_reuse += it->second.no_reuse;
    }
  }
  return p;
}

void PortIndex::DevCounts::Update(uint32_t device, bool reuse, int delta) {
  total.n += delta;
  if (!reuse) total.no_reuse += delta;
  Pair& p = by_device[device];
  p.n += delta;
  if (!reuse) p.no_reuse += delta;
  if (p.n == 0) by_device.erase(device);
}

bool PortIndex::SpaceConflicts(const Space& s, const AddrKey& key, bool reuse, uint32_t device) {
  if (IsWildcardKey(key)) {
    Pair p = s.all.Compatible(device);
    return Clash(p.n, p.no_reuse, reuse);
  }
  Pair w = s.wildcard.Compatible(device);
  if (Clash(w.n, w.no_reuse, reuse)) return true;
  auto it = s.exact.find(key);
  if (it == s.exact.end()) return false;
  Pair e = it->second.Compatible(device);
  return Clash(e.n, e.no_reuse, reuse);
}

void PortIndex::SpaceUpdate(Space& s, const AddrKey& key, bool reuse, uint32_t device, int delta) {
  s.all.Update(device, reuse, delta);
  if (IsWildcardKey(key)) {
    s.wildcard.Update(device, reuse, delta);
    return;
  }
  DevCounts& d = s.exact[key];
  d.Update(device, reuse, delta);
  if (d.empty()) s.exact.erase(key);
}

bool PortIndex::Conflicts(uint16_t port, const Coverage& c, bool reuse, uint32_t device) const {
  auto it = ports_.find(port);
  if (it == ports_.end()) return false;
  if (c.v4 && SpaceConflicts(it->second.v4, c.v4_key, reuse, device)) return true;
  if (c.v6 && SpaceConflicts(it->second.v6, c.v6_key, reuse, device)) return true;
  return false;
}

void PortIndex::Add(uint16_t port, const Coverage& c, bool reuse, uint32_t device) {
  Port& p = ports_[port];
  if (c.v4) SpaceUpdate(p.v4, c.v4_key, reuse, device, +1);
  if (c.v6) SpaceUpdate(p.v6, c.v6_key, reuse, device, +1);
}

void PortIndex::Remove(uint16_t port, const Coverage& c, bool reuse, uint32_t device) {
  auto it = ports_.find(port);
  if (it == ports_.end()) return;
  if (c.v4) SpaceUpdate(it->second.v4, c.v4_key, reuse, device, -1);
  if (c.v6) SpaceUpdate(it->second.v6, c.v6_key, reuse, device, -1);
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
