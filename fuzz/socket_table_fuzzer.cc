// Fuzz target: the socket table against a plain reference. The input is a sequence of
// open / bind / connect / rehash / disconnect / set-device / close calls on a SocketTable (hash4
// on or off, as the first byte says); after the last call, every flow of a small universe (our
// two addresses and another, two source ports, two destination ports, two devices, both
// families) is looked up, singly and in a batch, and checked against a list of the live sockets
// (their SocketInfo, as the table reports it) scored as the kernel's __udp4_lib_lookup does:
//   1. hash4 (when on): a connected socket whose local address and port and peer are the
//      flow's, on its device;
//   2. else the sockets bound to the flow's destination address, best compute_score (family 2
//      or 1, exact address +4, connected peer +4 +4, bound device +4; a mismatch disqualifies;
//      with hash4 on, connected sockets are not scored: they live in hash4 only);
//   3. else the same over the sockets bound to the wildcard.
// The table must answer one of the best (or a member of the best one's reuseport group), or
// nothing when there is none. Lookup and LookupBatch must agree. Checking once an input, not
// after each of its calls, costs up to a 64th as much; a wrong state that a later call of the
// same input mends is seen only when libFuzzer tries the input cut short there (it erases and
// cuts bytes among its mutations), not every time.
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <vector>

#include "fuzz/check.h"
#include "fuzz/input.h"
#include "stack/demux/rcu.h"
#include "stack/demux/socket_table.h"

namespace {

using namespace quadsock;  // NOLINT: a fuzz target's few names
using demux::FlowKey;
using demux::SocketId;
using demux::SocketInfo;
using demux::SocketState;

const std::vector<net::IpAddress>& Addresses() {
  static const auto* all = new std::vector<net::IpAddress>{
      *net::IpAddress::Parse("10.1.0.2"),  *net::IpAddress::Parse("10.1.0.3"),
      *net::IpAddress::Parse("0.0.0.0"),   *net::IpAddress::Parse("fd00:1::2"),
      *net::IpAddress::Parse("fd00:1::3"), *net::IpAddress::Parse("::"),
      *net::IpAddress::Parse("::ffff:10.1.0.2")};
  return *all;
}
const std::vector<net::IpAddress>& Peers() {
  static const auto* all = new std::vector<net::IpAddress>{
      *net::IpAddress::Parse("10.1.0.1"), *net::IpAddress::Parse("10.1.0.9"),
      *net::IpAddress::Parse("fd00:1::1"), *net::IpAddress::Parse("::ffff:10.1.0.1")};
  return *all;
}
uint16_t LocalPort(uint8_t pick) {
  return static_cast<uint16_t>(pick % 3 == 2 ? 0 : 4000 + pick % 3);
}
uint16_t PeerPort(uint8_t pick) { return static_cast<uint16_t>(5000 + pick % 2); }

// The flow's addresses as a socket of `family` sees them (IPv4 v4-mapped for IPv6 sockets).
net::IpAddress AsSeenBy(const net::IpAddress& a, net::Family family) {
  return family == net::Family::kV6 ? a.ToV6() : a;
}

bool Accepts(const SocketInfo& s, const FlowKey& f) {
  if (f.dst.is_v4()) {
    return s.options.family == net::Family::kV4 || !s.options.v6only;
  }
  return s.options.family == net::Family::kV6;
}

bool DeviceOk(const SocketInfo& s, const FlowKey& f) {
  return s.options.bound_device == 0 || s.options.bound_device == f.device;
}

bool IsWildcard(const net::IpAddress& a) { return a.IsUnspecified(); }

// A v4-mapped wildcard (::ffff:0.0.0.0) is no wildcard; an IPv6 socket bound to a v4-mapped
// address takes IPv4 flows to that address.
bool LocalIs(const SocketInfo& s, const FlowKey& f) {
  return s.local.address == AsSeenBy(f.dst, s.options.family);
}

// The sockets the kernel's lookup would choose among (the best score of the first pass that
// has any), by id.
std::set<SocketId> Expected(const std::vector<SocketInfo>& live, const FlowKey& f, bool hash4) {
  std::set<SocketId> out;
  if (hash4) {
    for (const SocketInfo& s : live) {
      if (s.state == SocketState::kConnected && s.in_hash4 && s.local.port == f.dst_port &&
          Accepts(s, f) && LocalIs(s, f) && DeviceOk(s, f) &&
          s.remote.address == AsSeenBy(f.src, s.options.family) &&
          s.remote.port == f.src_port) {
        out.insert(s.id);
      }
    }
    if (!out.empty()) return out;
  }
  for (const bool wildcard : {false, true}) {
    int best = -1;
    for (const SocketInfo& s : live) {
      if (s.state == SocketState::kOpen || s.local.port != f.dst_port || !Accepts(s, f)) continue;
      if (hash4 && s.in_hash4) continue;  // hash4 only
      if (wildcard ? !IsWildcard(s.local.address) : !LocalIs(s, f)) continue;
      int score = (s.options.family == net::Family::kV4) == f.dst.is_v4() ? 2 : 1;
      if (!wildcard) score += 4;
      if (s.state == SocketState::kConnected) {
        if (s.remote.address != AsSeenBy(f.src, s.options.family) ||
            s.remote.port != f.src_port) {
          continue;
        }
        score += 8;
      }
      if (s.options.bound_device != 0) {
        if (s.options.bound_device != f.device) continue;
        score += 4;
      }
      if (score > best) {
        best = score;
        out.clear();
      }
      if (score == best) out.insert(s.id);
    }
    if (!out.empty()) return out;
  }
  return out;
}

// The reuseport group of `id`: unconnected reuse_port sockets of its owner on its address.
bool SameGroup(const SocketInfo& a, const SocketInfo& b) {
  return a.options.reuse_port && b.options.reuse_port && a.options.owner == b.options.owner &&
         a.local == b.local && a.options.family == b.options.family &&
         a.options.bound_device == b.options.bound_device && b.state == SocketState::kBound;
}


// The flows every input is checked with.
const std::vector<FlowKey>& Flows() {
  static const auto* flows = [] {
    auto* out = new std::vector<FlowKey>();
    for (const char* dst : {"10.1.0.2", "10.1.0.3", "10.1.0.4", "fd00:1::2", "fd00:1::3"}) {
      const net::IpAddress d = *net::IpAddress::Parse(dst);
      for (const char* src : {"10.1.0.1", "10.1.0.9", "fd00:1::1"}) {
        const net::IpAddress s = *net::IpAddress::Parse(src);
        if (s.is_v4() != d.is_v4()) continue;
        for (uint16_t sport : {5000, 5001}) {
          for (uint16_t dport : {4000, 4001, 4002}) {
            for (uint32_t device : {1u, 2u}) out->push_back({s, sport, d, dport, device});
          }
        }
      }
    }
    return out;
  }();
  return *flows;
}

// Every flow of the universe, looked up singly and in a batch, against the reference.
void CheckEveryFlow(demux::SocketTable& table, demux::LookupContext& ctx,
                    const std::vector<SocketId>& ids, const std::vector<FlowKey>& flows,
                    bool hash4) {
  std::vector<SocketInfo> live;
  std::map<SocketId, SocketInfo> by_id;
  for (SocketId s : ids) {
    absl::StatusOr<SocketInfo> info = table.Get(s);
    FUZZ_CHECK(info.ok(), "an open socket has no info");
    live.push_back(*info);
    by_id[s] = *info;
  }
  std::vector<std::optional<demux::LookupResult>> batch(flows.size());
  table.LookupBatch(ctx, flows, batch);
  for (size_t i = 0; i < flows.size(); ++i) {
    const std::optional<demux::LookupResult> got = table.Lookup(ctx, flows[i]);
    FUZZ_CHECK(got == batch[i], "Lookup and LookupBatch disagree");
    const std::set<SocketId> want = Expected(live, flows[i], hash4);
    if (want.empty()) {
      FUZZ_CHECK(!got.has_value(), "a socket took a flow the reference gives to none");
      continue;
    }
    FUZZ_CHECK(got.has_value(), "no socket took a flow the reference gives to one");
    bool ok = want.contains(got->id);
    for (SocketId w : want) ok = ok || SameGroup(by_id[w], by_id[got->id]);
    FUZZ_CHECK(ok, "the table chose a socket the reference does not");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static demux::RcuReaderThread* reader = new demux::RcuReaderThread();
  (void)reader;
  fuzz::Input r(data, size);
  const bool hash4 = (r.Byte() & 1) == 0;
  demux::SocketTable::Options o;
  o.hash4 = hash4;
  o.seed = 1;
  o.reclaim_synchronously = true;  // a table per input: no wait for liburcu's call_rcu thread
  o.secret = demux::FlowHasher::Secret{};
  o.route = [](const net::IpAddress& peer) -> absl::StatusOr<net::IpAddress> {
    return peer.Unmapped().is_v4() ? (peer.is_v4() ? *net::IpAddress::Parse("10.1.0.2")
                                                   : *net::IpAddress::Parse("::ffff:10.1.0.2"))
                                   : *net::IpAddress::Parse("fd00:1::2");
  };
  std::unique_ptr<demux::SocketTable> table = demux::SocketTable::Create(o).value();
  demux::LookupContext ctx(*table);
  std::vector<SocketId> ids;

  for (int calls = 0; r.more() && calls < 64; ++calls) {
    const uint8_t op = r.Byte(), a = r.Byte(), b = r.Byte();
    const SocketId id = ids.empty() ? 0 : ids[a % ids.size()];
    switch (op % 8) {
      case 0:
      case 1: {  // open
        demux::SocketOptions so;
        so.family = (b & 1) != 0 ? net::Family::kV6 : net::Family::kV4;
        so.v6only = (b & 2) != 0 && so.family == net::Family::kV6;
        so.reuse_port = (b & 4) != 0;
        so.owner = (b & 8) != 0 ? 2 : 1;
        so.bound_device = (b >> 4) % 3;
        if (absl::StatusOr<SocketId> s = table->Open(so); s.ok()) ids.push_back(*s);
        break;
      }
      case 2:
        (void)table->Bind(id, {Addresses()[b % Addresses().size()], LocalPort(b / 8)});
        break;
      case 3:
        (void)table->Connect(id, {Peers()[b % Peers().size()], PeerPort(b / 8)});
        break;
      case 4:
        (void)table->Disconnect(id);
        break;
      case 5:
        (void)table->Rehash(id,
                            (b & 1) != 0 ? std::optional(Addresses()[(b / 2) % Addresses().size()])
                                         : std::nullopt,
                            (b & 16) != 0 ? std::optional(LocalPort(b / 32)) : std::nullopt);
        break;
      case 6:
        (void)table->SetBoundDevice(id, b % 3);
        break;
      case 7:
        if (table->Close(id).ok()) std::erase(ids, id);
        break;
    }
    reader->Quiescent();
  }
  CheckEveryFlow(*table, ctx, ids, Flows(), hash4);
  for (SocketId s : ids) (void)table->Close(s);
  table->WaitForReaders();
  return 0;
}
