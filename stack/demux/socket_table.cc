// The writer side of the socket table: socket operations, bind conflicts, reuseport groups,
// publishing entries and resizing. The read side (Lookup, counters) is in lookup.cc.
#include "stack/demux/socket_table.h"

#include <utility>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"

namespace quadsock::demux {

using internal::Buckets;
using internal::Entry;
using internal::ReuseMembers;
using internal::SocketRef;

struct SocketTable::Socket {
  SocketId id = 0;
  SocketOptions options;
  SocketState state = SocketState::kOpen;
  net::IpAddress local;
  uint16_t local_port = 0;
  net::Endpoint remote;
  // The kernel's SOCK_BINDADDR_LOCK / SOCK_BINDPORT_LOCK: set when the user chose them.
  bool addr_locked = false;
  bool port_locked = false;
  Entry* entry = nullptr;  // in the current Buckets, or null
  Group* group = nullptr;  // reuseport group while an unconnected reuse socket
  uint32_t group_index = 0;
  SocketRef* ref = nullptr;
};

struct SocketTable::Group {
  GroupKey key;
  internal::ReuseGroup* shared = nullptr;  // what entries point to; freed after a grace period
  std::vector<Socket*> members;            // same order as shared->members->slots
};

namespace {

// With reclaim_synchronously: replaced objects kept before one grace period frees them all.
constexpr size_t kRetiredBatch = 256;

uint64_t SplitMix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

net::IpAddress Wildcard(net::Family family) {
  return family == net::Family::kV4 ? net::IpAddress::AnyV4() : net::IpAddress::AnyV6();
}

// Lookups check hash4, then exact hash2, then wildcard hash2: the stage of an entry.
int Stage(const Entry& e) {
  if (e.in_hash4) return 0;
  return IsWildcardKey(e.local) ? 2 : 1;
}

Entry* Clone(const Entry& e) {
  Entry* c = new Entry;
  c->hash = e.hash;
  c->hash2 = e.hash2;
  c->local = e.local;
  c->remote = e.remote;
  c->local_port = e.local_port;
  c->remote_port = e.remote_port;
  c->bound_device = e.bound_device;
  c->accepts = e.accepts;
  c->family_bit = e.family_bit;
  c->connected = e.connected;
  c->in_hash4 = e.in_hash4;
  c->device_bound = e.device_bound;
  c->grouped = e.grouped;
  c->id = e.id;
  c->cookie = e.cookie;
  c->group = e.group;
  return c;
}

}  // namespace

absl::StatusOr<std::unique_ptr<SocketTable>> SocketTable::Create(Options options) {
  if (options.ephemeral_low == 0 || options.ephemeral_low > options.ephemeral_high) {
    return absl::InvalidArgumentError(absl::StrCat(
        "bad ephemeral port range ", options.ephemeral_low, "-", options.ephemeral_high));
  }
  if (options.min_log2_slots < 1 || options.min_log2_slots > options.max_log2_slots ||
      options.max_log2_slots > 30) {
    return absl::InvalidArgumentError("bad slot array size limits");
  }
  return std::unique_ptr<SocketTable>(new SocketTable(std::move(options)));
}

SocketTable::SocketTable(Options options)
    : options_(std::move(options)),
      hasher_(options_.secret ? *options_.secret : FlowHasher::RandomSecret()),
      buckets_(new Buckets(options_.min_log2_slots)) {
  rng_ = options_.seed ? *options_.seed : absl::Uniform<uint64_t>(absl::BitGen());
}

SocketTable::~SocketTable() {
  if (!options_.reclaim_synchronously) RcuBarrier();  // what went to RcuDefer is freed
  std::lock_guard<std::mutex> lock(mu_);
  FreeRetired();
  for (auto& [id, s] : sockets_) {
    delete s->entry;
    delete s->ref;
  }
  for (auto& [key, g] : groups_) {
    delete g->shared->members.load(std::memory_order_relaxed);
    delete g->shared;
  }
  delete buckets_.load(std::memory_order_relaxed);
}

absl::StatusOr<SocketTable::Socket*> SocketTable::Find(SocketId id) const {
  auto it = sockets_.find(id);
  if (it == sockets_.end()) return absl::NotFoundError("no such socket");
  return it->second.get();
}

absl::StatusOr<net::IpAddress> SocketTable::LocalAddressFor(const Socket& s,
                                                            const net::IpAddress& a) const {
  if (s.options.family == net::Family::kV4) {
    if (!a.is_v4()) {
      return absl::InvalidArgumentError(
          absl::StrCat("IPv4 socket given IPv6 address ", a.ToString()));
    }
    return a;
  }
  if (!a.is_v6()) {
    return absl::InvalidArgumentError(absl::StrCat("IPv6 socket given IPv4 address ", a.ToString(),
                                                   " (use ::ffff:", a.ToString(), ")"));
  }
  if (s.options.v6only && a.IsV4Mapped()) {
    return absl::InvalidArgumentError(
        absl::StrCat("v6only socket given v4-mapped address ", a.ToString()));
  }
  return a;
}

bool SocketTable::PortConflicts(const Socket& s, const net::IpAddress& local, uint16_t port) const {
  return ports_.Conflicts(port, internal::Coverage::Of(s.options.family, s.options.v6only, local),
                          s.options.reuse_port, s.options.bound_device, s.options.owner);
}

void SocketTable::PortsAdd(const Socket& s) {
  ports_.Add(s.local_port, internal::Coverage::Of(s.options.family, s.options.v6only, s.local),
             s.options.reuse_port, s.options.bound_device, s.options.owner);
}

void SocketTable::PortsRemove(const Socket& s) {
  ports_.Remove(s.local_port, internal::Coverage::Of(s.options.family, s.options.v6only, s.local),
                s.options.reuse_port, s.options.bound_device, s.options.owner);
}

absl::StatusOr<uint16_t> SocketTable::PickEphemeral(const Socket& s, const net::IpAddress& local) {
  const uint32_t range = uint32_t{options_.ephemeral_high} - options_.ephemeral_low + 1;
  const uint32_t start = SplitMix64(rng_) % range;  // randomised start, as the kernel
  for (uint32_t i = 0; i < range; ++i) {
    uint16_t port = options_.ephemeral_low + (start + i) % range;
    if (!PortConflicts(s, local, port)) return port;
  }
  return absl::ResourceExhaustedError(
      absl::StrCat("no free ephemeral port in ", options_.ephemeral_low, "-",
                   options_.ephemeral_high, " for ", local.ToString()));
}

// ---- Reuseport groups ----

void SocketTable::JoinGroup(Socket& s) {
  GroupKey key{AddrKeyOf(s.local), s.local_port, s.options.bound_device, s.options.family,
               s.options.v6only};
  std::unique_ptr<Group>& slot = groups_[key];
  if (slot == nullptr) {
    slot = std::make_unique<Group>();
    slot->key = key;
    slot->shared = new internal::ReuseGroup;
    slot->shared->members.store(new ReuseMembers(4), std::memory_order_release);
  }
  Group& g = *slot;
  ReuseMembers* m = g.shared->members.load(std::memory_order_relaxed);
  const uint32_t n = static_cast<uint32_t>(g.members.size());
  if (n == m->capacity) {
    auto* bigger = new ReuseMembers(m->capacity * 2);
    for (uint32_t i = 0; i < n; ++i) {
      bigger->slots[i].store(m->slots[i].load(std::memory_order_relaxed),
                             std::memory_order_relaxed);
    }
    bigger->size.store(n, std::memory_order_relaxed);
    g.shared->members.store(bigger, std::memory_order_release);
    Retire([m] { delete m; });
    m = bigger;
  }
  m->slots[n].store(s.ref, std::memory_order_release);
  m->size.store(n + 1, std::memory_order_release);
  g.members.push_back(&s);
  s.group = &g;
  s.group_index = n;
}

void SocketTable::LeaveGroup(Socket& s) {
  Group* g = s.group;
  if (g == nullptr) return;
  ReuseMembers* m = g->shared->members.load(std::memory_order_relaxed);
  const uint32_t last = static_cast<uint32_t>(g->members.size()) - 1;
  if (s.group_index != last) {
    Socket* moved = g->members[last];
    g->members[s.group_index] = moved;
    moved->group_index = s.group_index;
    m->slots[s.group_index].store(moved->ref, std::memory_order_release);
  }
  g->members.pop_back();
  m->size.store(last, std::memory_order_release);
  m->slots[last].store(nullptr, std::memory_order_release);
  s.group = nullptr;
  if (g->members.empty()) {
    // Entries may still point at g->shared until they are unlinked: the caller unlinks first
    // or in the same operation, and this deferral is queued after that unlink (see Republish).
    dead_groups_.push_back(g->shared);
    groups_.erase(g->key);
  }
}

void SocketTable::FlushDeadGroups() {
  for (internal::ReuseGroup* shared : dead_groups_) {
    Retire([shared] {
      delete shared->members.load(std::memory_order_relaxed);
      delete shared;
    });
  }
  dead_groups_.clear();
}

void SocketTable::Retire(std::function<void()> free) {
  if (!options_.reclaim_synchronously) {
    RcuDefer(std::move(free));
    return;
  }
  to_free_.push_back(std::move(free));
  if (to_free_.size() >= kRetiredBatch) FreeRetired();
}

void SocketTable::FreeRetired() {
  if (to_free_.empty()) return;
  RcuSynchronize();  // readers never take mu_: waiting under it cannot deadlock
  for (std::function<void()>& free : to_free_) free();
  to_free_.clear();
}

// ---- Entries and chains ----

Entry* SocketTable::MakeEntry(const Socket& s) const {
  auto* e = new Entry;
  e->local = AddrKeyOf(s.local);
  e->local_port = s.local_port;
  e->connected = s.state == SocketState::kConnected;
  if (e->connected) {
    e->remote = AddrKeyOf(s.remote.address);
    e->remote_port = s.remote.port;
  }
  e->in_hash4 = e->connected && options_.hash4;
  e->hash2 = hasher_.Hash2(e->local, e->local_port);
  e->hash =
      e->in_hash4 ? hasher_.Hash4(e->local, e->local_port, e->remote, e->remote_port) : e->hash2;
  e->bound_device = s.options.bound_device;
  e->device_bound = e->bound_device != 0;
  const bool v4_socket = s.options.family == net::Family::kV4;
  e->family_bit = v4_socket ? internal::kAcceptV4 : internal::kAcceptV6;
  if (v4_socket) {
    e->accepts = internal::kAcceptV4;
  } else if (e->connected) {
    e->accepts = s.remote.address.IsV4Mapped() ? internal::kAcceptV4 : internal::kAcceptV6;
  } else if (s.local.IsUnspecified()) {
    e->accepts =
        s.options.v6only ? internal::kAcceptV6 : (internal::kAcceptV4 | internal::kAcceptV6);
  } else {
    e->accepts = s.local.IsV4Mapped() ? internal::kAcceptV4 : internal::kAcceptV6;
  }
  e->id = s.id;
  e->cookie = s.options.cookie;
  e->group = s.group != nullptr ? s.group->shared : nullptr;
  e->grouped = e->group != nullptr;
  return e;
}

std::atomic<Entry*>& SocketTable::ChainHead(Buckets& b, const Entry& e) const {
  const size_t i = b.Index(e.hash);
  return e.in_hash4 ? b.hash4[i] : b.hash2[i].head;
}

void SocketTable::Link(Buckets& b, Entry* e) {
  std::atomic<Entry*>& head = ChainHead(b, *e);
  if (e->in_hash4) {
    b.filter4[b.Index(e->hash)].fetch_or(Buckets::FilterBit(e->hash), std::memory_order_relaxed);
  }
  e->next.store(head.load(std::memory_order_relaxed), std::memory_order_relaxed);
  head.store(e, std::memory_order_release);  // publishes e's fields
  if (e->in_hash4) {
    b.hash2[b.Index(e->hash2)].hash4_cnt.fetch_add(1, std::memory_order_release);
    ++hash4_entries_;
  } else {
    ++hash2_entries_;
  }
}

void SocketTable::Unlink(Buckets& b, Entry* e) {
  std::atomic<Entry*>* link = &ChainHead(b, *e);
  while (link->load(std::memory_order_relaxed) != e) {
    link = &link->load(std::memory_order_relaxed)->next;
  }
  // e->next stays intact, so a reader standing on e walks on to the rest of the chain.
  link->store(e->next.load(std::memory_order_relaxed), std::memory_order_release);
  if (e->in_hash4) {
    RefilterHash4(b, b.Index(e->hash));
    b.hash2[b.Index(e->hash2)].hash4_cnt.fetch_sub(1, std::memory_order_release);
    --hash4_entries_;
  } else {
    --hash2_entries_;
  }
}

void SocketTable::RefilterHash4(Buckets& b, size_t slot) {
  uint8_t bits = 0;
  for (const Entry* e = b.hash4[slot].load(std::memory_order_relaxed); e != nullptr;
       e = e->next.load(std::memory_order_relaxed)) {
    bits |= Buckets::FilterBit(e->hash);
  }
  b.filter4[slot].store(bits, std::memory_order_release);  // pairs with MayHaveHash4's acquire
}

void SocketTable::Publish(Socket& s, Entry* fresh) {
  Buckets& b = *buckets_.load(std::memory_order_relaxed);
  Entry* old = s.entry;
  if (fresh != nullptr && old != nullptr && &ChainHead(b, *fresh) == &ChainHead(b, *old) &&
      Stage(*fresh) >= Stage(*old)) {
    // Same chain: swap in place, so every reader sees exactly one of the two. Not when the
    // new entry belongs to an earlier stage (a wildcard socket given an exact address whose
    // hash2 chain is the wildcard's): a lookup's exact pass could see the old entry and its
    // wildcard pass the new one, and take neither. That case links, waits, unlinks, below.
    std::atomic<Entry*>* link = &ChainHead(b, *old);
    while (link->load(std::memory_order_relaxed) != old) {
      link = &link->load(std::memory_order_relaxed)->next;
    }
    if (fresh->in_hash4) {
      b.filter4[b.Index(fresh->hash)].fetch_or(Buckets::FilterBit(fresh->hash),
                                               std::memory_order_relaxed);
      b.hash2[b.Index(fresh->hash2)].hash4_cnt.fetch_add(1, std::memory_order_release);
    }
    fresh->next.store(old->next.load(std::memory_order_relaxed), std::memory_order_relaxed);
    link->store(fresh, std::memory_order_release);
    if (old->in_hash4) {
      RefilterHash4(b, b.Index(old->hash));
      b.hash2[b.Index(old->hash2)].hash4_cnt.fetch_sub(1, std::memory_order_release);
    }
  } else {
    // Link the new place before unlinking the old: a lookup that misses one finds the other.
    if (fresh != nullptr) Link(b, fresh);
    if (fresh != nullptr && old != nullptr && Stage(*fresh) < Stage(*old)) {
      // Lookups visit the new place before the old one: one that looked at the new place
      // before it was linked must not find the old place already empty. Wait it out.
      RcuSynchronize();
    }
    if (old != nullptr) Unlink(b, old);
  }
  if (old != nullptr) Retire([old] { delete old; });
  s.entry = fresh;
}

void SocketTable::Republish(Socket& s) {
  const bool wants_group = s.options.reuse_port && s.state == SocketState::kBound;
  if (s.group != nullptr) {
    const Group& g = *s.group;
    const bool same = wants_group && g.key.local == AddrKeyOf(s.local) &&
                      g.key.port == s.local_port && g.key.device == s.options.bound_device;
    if (!same) LeaveGroup(s);
  }
  if (wants_group && s.group == nullptr) JoinGroup(s);
  Publish(s, s.state == SocketState::kOpen ? nullptr : MakeEntry(s));
  FlushDeadGroups();
  MaybeResize();
}

void SocketTable::MaybeResize() {
  const Buckets& b = *buckets_.load(std::memory_order_relaxed);
  const size_t n = hash2_entries_ + hash4_entries_;
  if (n > b.size && b.log2 < options_.max_log2_slots) {
    Resize(b.log2 + 1);
  } else if (n < b.size / 8 && b.log2 > options_.min_log2_slots) {
    Resize(b.log2 - 1);
  }
}

void SocketTable::Resize(uint32_t log2) {
  Buckets* old_buckets = buckets_.load(std::memory_order_relaxed);
  auto* fresh = new Buckets(log2);
  auto* old_entries = new std::vector<Entry*>;
  old_entries->reserve(hash2_entries_ + hash4_entries_);
  hash2_entries_ = hash4_entries_ = 0;
  for (auto& [id, s] : sockets_) {
    if (s->entry == nullptr) continue;
    old_entries->push_back(s->entry);
    s->entry = Clone(*s->entry);
    Link(*fresh, s->entry);
  }
  // Readers that loaded the old arrays keep walking them: they stay complete and unchanged.
  buckets_.store(fresh, std::memory_order_release);
  Retire([old_buckets, old_entries] {
    for (Entry* e : *old_entries) delete e;
    delete old_entries;
    delete old_buckets;
  });
  resizes_.fetch_add(1, std::memory_order_relaxed);
}

// ---- Socket operations ----

absl::StatusOr<SocketId> SocketTable::Open(const SocketOptions& options) {
  if (options.family == net::Family::kV4 && options.v6only) {
    return absl::InvalidArgumentError("v6only on an IPv4 socket");
  }
  std::lock_guard<std::mutex> lock(mu_);
  auto s = std::make_unique<Socket>();
  s->id = next_id_++;
  s->options = options;
  s->local = Wildcard(options.family);
  s->ref = new SocketRef{s->id, options.cookie};
  SocketId id = s->id;
  sockets_.emplace(id, std::move(s));
  return id;
}

absl::StatusOr<net::Endpoint> SocketTable::Bind(SocketId id, const net::Endpoint& local) {
  std::lock_guard<std::mutex> lock(mu_);
  absl::StatusOr<Socket*> found = Find(id);
  if (!found.ok()) return found.status();
  Socket& s = **found;
  if (s.state != SocketState::kOpen) {
    return absl::FailedPreconditionError("the socket is already bound");
  }
  absl::StatusOr<net::IpAddress> address = LocalAddressFor(s, local.address);
  if (!address.ok()) return address.status();
  uint16_t port = local.port;
  if (port == 0) {
    absl::StatusOr<uint16_t> picked = PickEphemeral(s, *address);
    if (!picked.ok()) return picked.status();
    port = *picked;
  } else if (PortConflicts(s, *address, port)) {
    return absl::AlreadyExistsError(
        absl::StrCat("address in use: ", net::Endpoint{*address, port}.ToString()));
  }
  s.local = *address;
  s.local_port = port;
  s.addr_locked = !address->IsUnspecifiedInAnyForm();
  s.port_locked = local.port != 0;
  s.state = SocketState::kBound;
  PortsAdd(s);
  Republish(s);
  return net::Endpoint{s.local, s.local_port};
}

absl::StatusOr<net::Endpoint> SocketTable::Connect(SocketId id, const net::Endpoint& peer) {
  std::lock_guard<std::mutex> lock(mu_);
  absl::StatusOr<Socket*> found = Find(id);
  if (!found.ok()) return found.status();
  Socket& s = **found;
  if (peer.port == 0 || peer.address.IsUnspecifiedInAnyForm()) {
    return absl::InvalidArgumentError(absl::StrCat("cannot connect to ", peer.ToString()));
  }
  absl::StatusOr<net::IpAddress> remote = LocalAddressFor(s, peer.address);
  if (!remote.ok()) return remote.status();

  net::IpAddress local = s.local;
  const bool needs_source = s.state == SocketState::kOpen || local.IsUnspecifiedInAnyForm();
  if (needs_source) {
    if (!options_.route) {
      return absl::FailedPreconditionError("no route callback to choose a source address");
    }
    absl::StatusOr<net::IpAddress> source = options_.route(peer.address.Unmapped());
    if (!source.ok()) return source.status();
    if (source->IsUnspecifiedInAnyForm() ||
        source->Unmapped().family() != peer.address.Unmapped().family()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "route gave unusable source ", source->ToString(), " for ", peer.ToString()));
    }
    local = s.options.family == net::Family::kV6 ? source->ToV6() : source->Unmapped();
  }
  if (s.options.family == net::Family::kV6 && local.IsV4Mapped() != remote->IsV4Mapped()) {
    return absl::InvalidArgumentError(absl::StrCat("cannot connect ", local.ToString(), " to ",
                                                   peer.ToString(), ": mixed IPv4 and IPv6"));
  }
  uint16_t port = s.local_port;
  if (s.state == SocketState::kOpen) {
    absl::StatusOr<uint16_t> picked = PickEphemeral(s, local);
    if (!picked.ok()) return picked.status();
    port = *picked;
  } else {
    PortsRemove(s);
  }
  s.local = local;
  s.local_port = port;
  s.remote = net::Endpoint{*remote, peer.port};
  s.state = SocketState::kConnected;
  PortsAdd(s);
  // Always a new entry: reconnecting to a new peer always rehashes hash4 (the kernel missed
  // this for bind-locked sockets until 644f9108f3a5).
  Republish(s);
  return net::Endpoint{s.local, s.local_port};
}

absl::Status SocketTable::Disconnect(SocketId id) {
  std::lock_guard<std::mutex> lock(mu_);
  absl::StatusOr<Socket*> found = Find(id);
  if (!found.ok()) return found.status();
  Socket& s = **found;
  if (s.state != SocketState::kConnected) {
    return absl::FailedPreconditionError("the socket is not connected");
  }
  PortsRemove(s);
  s.remote = net::Endpoint{};
  if (!s.port_locked) {
    // Auto-bound: give the port back and leave every chain, hash4 included (6996a2d2d0a6).
    s.state = SocketState::kOpen;
    s.local = Wildcard(s.options.family);
    s.local_port = 0;
  } else {
    s.state = SocketState::kBound;
    if (!s.addr_locked) s.local = Wildcard(s.options.family);
    PortsAdd(s);
  }
  Republish(s);
  return absl::OkStatus();
}

absl::StatusOr<net::Endpoint> SocketTable::Rehash(SocketId id,
                                                  std::optional<net::IpAddress> address,
                                                  std::optional<uint16_t> port) {
  std::lock_guard<std::mutex> lock(mu_);
  absl::StatusOr<Socket*> found = Find(id);
  if (!found.ok()) return found.status();
  Socket& s = **found;
  if (s.state == SocketState::kOpen) {
    return absl::FailedPreconditionError("the socket is not bound");
  }
  if (!address && !port) return absl::InvalidArgumentError("rehash needs an address or a port");
  net::IpAddress new_local = s.local;
  if (address) {
    absl::StatusOr<net::IpAddress> a = LocalAddressFor(s, *address);
    if (!a.ok()) return a.status();
    new_local = *a;
  }
  if (s.state == SocketState::kConnected) {
    if (new_local.IsUnspecifiedInAnyForm()) {
      return absl::InvalidArgumentError("a connected socket needs a specific local address");
    }
    if (s.options.family == net::Family::kV6 &&
        new_local.IsV4Mapped() != s.remote.address.IsV4Mapped()) {
      return absl::InvalidArgumentError("local and peer address families differ");
    }
  }
  PortsRemove(s);
  uint16_t new_port = port ? *port : s.local_port;
  if (new_port == 0) {
    absl::StatusOr<uint16_t> picked = PickEphemeral(s, new_local);
    if (!picked.ok()) {
      PortsAdd(s);
      return picked.status();
    }
    new_port = *picked;
  } else if (PortConflicts(s, new_local, new_port)) {
    PortsAdd(s);
    return absl::AlreadyExistsError(
        absl::StrCat("address in use: ", net::Endpoint{new_local, new_port}.ToString()));
  }
  s.local = new_local;
  s.local_port = new_port;
  if (address) s.addr_locked = !new_local.IsUnspecifiedInAnyForm();
  if (port) s.port_locked = true;
  PortsAdd(s);
  Republish(s);
  return net::Endpoint{s.local, s.local_port};
}

absl::Status SocketTable::SetBoundDevice(SocketId id, uint32_t device) {
  std::lock_guard<std::mutex> lock(mu_);
  absl::StatusOr<Socket*> found = Find(id);
  if (!found.ok()) return found.status();
  Socket& s = **found;
  if (s.state == SocketState::kOpen) {
    s.options.bound_device = device;
    return absl::OkStatus();
  }
  PortsRemove(s);
  s.options.bound_device = device;
  PortsAdd(s);
  Republish(s);
  return absl::OkStatus();
}

absl::Status SocketTable::Close(SocketId id) {
  std::lock_guard<std::mutex> lock(mu_);
  absl::StatusOr<Socket*> found = Find(id);
  if (!found.ok()) return found.status();
  Socket& s = **found;
  if (s.state != SocketState::kOpen) PortsRemove(s);
  LeaveGroup(s);
  Publish(s, nullptr);
  FlushDeadGroups();
  SocketRef* ref = s.ref;
  Retire([ref] { delete ref; });
  sockets_.erase(id);
  MaybeResize();
  return absl::OkStatus();
}

absl::StatusOr<SocketInfo> SocketTable::Get(SocketId id) const {
  std::lock_guard<std::mutex> lock(mu_);
  absl::StatusOr<Socket*> found = Find(id);
  if (!found.ok()) return found.status();
  const Socket& s = **found;
  SocketInfo info;
  info.id = s.id;
  info.options = s.options;
  info.state = s.state;
  if (s.state != SocketState::kOpen) info.local = net::Endpoint{s.local, s.local_port};
  if (s.state == SocketState::kConnected) info.remote = s.remote;
  info.in_hash4 = s.entry != nullptr && s.entry->in_hash4;
  return info;
}

size_t SocketTable::MemoryBytes() const {
  // Heap blocks are counted at their object size plus 16 bytes of allocator overhead.
  constexpr size_t kMallocOverhead = 16;
  std::lock_guard<std::mutex> lock(mu_);
  const Buckets& b = *buckets_.load(std::memory_order_relaxed);
  size_t bytes = sizeof(*this);
  bytes += b.size * (sizeof(internal::Hslot2) + sizeof(std::atomic<Entry*>));
  bytes += (hash2_entries_ + hash4_entries_) * (sizeof(Entry) + kMallocOverhead);
  bytes += sockets_.capacity() * (sizeof(std::pair<SocketId, std::unique_ptr<Socket>>) + 1);
  bytes += sockets_.size() * (sizeof(Socket) + sizeof(SocketRef) + 2 * kMallocOverhead);
  bytes += groups_.capacity() * (sizeof(std::pair<GroupKey, std::unique_ptr<Group>>) + 1);
  for (const auto& [key, g] : groups_) {
    const ReuseMembers* m = g->shared->members.load(std::memory_order_relaxed);
    bytes += sizeof(Group) + sizeof(internal::ReuseGroup) + sizeof(ReuseMembers) +
             m->capacity * sizeof(void*) + g->members.capacity() * sizeof(Socket*) +
             4 * kMallocOverhead;
  }
  bytes += ports_.MemoryBytes();
  return bytes;
}

}  // namespace quadsock::demux
