// The bind-conflict index: for every local port, which addresses are taken, by how many sockets,
// on which device, and whether all of them allow sharing. It plays the part of the kernel's
// primary `hash` (by port) in udp_lib_get_port/udp_lib_lport_inuse, but answers a conflict
// question in O(1) whatever the number of sockets on the port, so binding a million sockets to
// one reuseport address stays linear. Writer side only (the table's mutex guards it).
//
// A socket covers an address space: IPv4, IPv6 or both (a dual-stack socket bound to ::), and in
// each space either one address or the wildcard. Two sockets on one port conflict when their
// coverage meets, their devices are compatible (either unbound, or equal) and not both allow
// reuse.
//
//   PortIndex ports;
//   Coverage c = Coverage::Of(net::Family::kV4, /*v6only=*/false, addr);
//   if (ports.Conflicts(443, c, /*reuse=*/false, /*device=*/0)) ... ALREADY_EXISTS
//   ports.Add(443, c, false, 0);
#ifndef QUADSOCK_STACK_DEMUX_INTERNAL_PORT_INDEX_H_
#define QUADSOCK_STACK_DEMUX_INTERNAL_PORT_INDEX_H_

#include <cstddef>
#include <cstdint>

#include "absl/container/flat_hash_map.h"
#include "stack/demux/flow_hash.h"
#include "stack/net/address.h"

namespace quadsock::demux::internal {

// Which addresses a bound socket receives for, per address space.
struct Coverage {
  bool v4 = false;   // covers (part of) the IPv4 space
  bool v6 = false;   // covers (part of) the IPv6 space
  AddrKey v4_key{};  // zeros: the whole IPv4 space
  AddrKey v6_key{};  // zeros: the whole IPv6 space

  // `local` in the socket's own form: IPv4 for a v4 socket, IPv6 (maybe v4-mapped) for v6.
  static Coverage Of(net::Family family, bool v6only, const net::IpAddress& local);
};

class PortIndex {
 public:
  // `owner`: who the socket belongs to (SocketOptions::owner); reuse_port sockets share a port
  // only with sockets of the same owner.
  bool Conflicts(uint16_t port, const Coverage& c, bool reuse, uint32_t device,
                 uint64_t owner) const;
  void Add(uint16_t port, const Coverage& c, bool reuse, uint32_t device, uint64_t owner);
  void Remove(uint16_t port, const Coverage& c, bool reuse, uint32_t device, uint64_t owner);
  // Whether any socket at all is bound to the port.
  bool InUse(uint16_t port) const { return ports_.contains(port); }
  size_t MemoryBytes() const;

 private:
  struct Pair {
    uint32_t n = 0;         // sockets
    uint32_t no_reuse = 0;  // of which do not allow sharing
    uint64_t owner = 0;     // their owner, while they have one
    bool mixed = false;     // they have several (until the count is back at 0)
  };
  struct DevCounts {
    Pair total;
    absl::flat_hash_map<uint32_t, Pair> by_device;  // device 0 = unbound
    // Sockets a new socket on `device` must be compared with.
    Pair Compatible(uint32_t device) const;
    void Update(uint32_t device, bool reuse, uint64_t owner, int delta);
    bool empty() const { return total.n == 0; }
  };
  struct Space {
    DevCounts all;       // every socket in the space
    DevCounts wildcard;  // sockets covering the whole space
    absl::flat_hash_map<AddrKey, DevCounts> exact;
    bool empty() const { return all.empty(); }
  };
  struct Port {
    Space v4, v6;
  };

  static bool SpaceConflicts(const Space& s, const AddrKey& key, bool reuse, uint32_t device,
                             uint64_t owner);
  static void SpaceUpdate(Space& s, const AddrKey& key, bool reuse, uint32_t device,
                          uint64_t owner, int delta);

  absl::flat_hash_map<uint16_t, Port> ports_;
};

}  // namespace quadsock::demux::internal

#endif  // QUADSOCK_STACK_DEMUX_INTERNAL_PORT_INDEX_H_
