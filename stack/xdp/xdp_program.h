// XdpProgram: the steer program (steer.bpf.c, quadsock's XDP steering program), loaded and
// attached, with its maps and counters. It attaches the program to an interface and keeps the
// maps: which addresses and ports the stack owns, and which AF_XDP socket serves each RX queue.
// What the program does with them is described in steer_common.h.
//
// The program is attached as a bpf_link (BPF_LINK_CREATE), held by this object's file
// descriptor: it leaves with the object or with the process, even on SIGKILL. No bpffs is
// needed: there is no pinning and no libxdp dispatcher (the dispatcher wants bpffs, which this
// kernel does not mount by default; one program per interface is all quadsock needs). A stale
// quadsock program left on the interface by a crashed run attached the legacy way (netlink, e.g.
// `ip link set dev X xdp obj ...`) is found by its name ("quadsock_*") and removed at Attach;
// any other program on the interface is left alone and Attach fails.
//
//   absl::StatusOr<std::unique_ptr<XdpProgram>> program = XdpProgram::Load();
//   if (!program.ok()) return program.status();
//   (*program)->AddAddress(*IpAddress::Parse("10.1.0.2"), /*exclusive=*/true);
//   (*program)->AddPort(IpAddress::AnyV4(), 4000);  // shared addresses: port 4000 is ours
//   (*program)->SetXsk(0, xsk_socket__fd(xsk));
//   absl::StatusOr<XdpMode> mode = (*program)->Attach(if_nametoindex("eth0"), XdpMode::kAuto);
//
// Thread-safe: the control plane may call it from several threads. The data path never calls
// it; the program reads the maps while they change, one entry at a time.
#ifndef QUADSOCK_STACK_XDP_XDP_PROGRAM_H_
#define QUADSOCK_STACK_XDP_XDP_PROGRAM_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "stack/net/address.h"

struct bpf_object;

namespace quadsock::xdp {

// quadsockd's --xdp_mode: how the program runs and how the AF_XDP sockets bind.
//   auto:     native XDP if the driver has it (else generic); zero-copy if possible, else copy
//   zerocopy: native XDP, zero-copy sockets (fails where the driver has no zero-copy)
//   copy:     native XDP, copy-mode sockets
//   skb:      generic (skb) XDP, copy-mode sockets: works on any interface, slowest
// Native XDP runs the program in the driver; generic runs it in the kernel's skb path, after
// the driver. XdpProgram::Attach reads the XDP half, the AF_XDP sockets the binding half.
enum class XdpMode { kAuto, kZeroCopy, kCopy, kSkb };

absl::string_view XdpModeName(XdpMode mode);  // as the flag spells it: "auto", "zerocopy", ...
// INVALID_ARGUMENT for any other name.
absl::StatusOr<XdpMode> ParseXdpMode(absl::string_view name);

// Where a program attached in `mode` runs, for a mode Attach returned: "generic" for kSkb,
// "native" for the others. The admin API and the start-up log say it so.
absl::string_view XdpAttachName(XdpMode mode);

// The program's counters (steer_common.h, enum qs_counter) summed over CPUs. Every frame adds
// to one of redirect, pass_not_owned, pass_other, malformed and redirect_no_xsk (the stack's,
// but its RX queue had no socket, so passed to the kernel); redirect_udp and the other kinds say
// what the stack's frames were (redirect and redirect_no_xsk together).
struct XdpProgramCounters {
  uint64_t redirect = 0;
  uint64_t pass_not_owned = 0;
  uint64_t pass_other = 0;
  uint64_t malformed = 0;
  uint64_t redirect_no_xsk = 0;
  uint64_t redirect_udp = 0;
  uint64_t redirect_icmp = 0;
  uint64_t redirect_arp = 0;
  uint64_t redirect_ns = 0;
  uint64_t redirect_other = 0;

  uint64_t total() const {
    return redirect + pass_not_owned + pass_other + malformed + redirect_no_xsk;
  }
  std::string ToString() const;
  friend bool operator==(const XdpProgramCounters&, const XdpProgramCounters&) = default;
};

class XdpProgram {
 public:
  struct Options {
    // Where attach, detach and stale-program removal are reported. Default: stderr.
    std::function<void(absl::string_view)> log;
    // Loaded for frags (BPF_F_XDP_HAS_FRAGS, as an "xdp.frags" section): the program may see
    // frames longer than a page in pieces (it reads headers only, which are in the first), so
    // an interface with jumbo frames takes it. Needed for AF_XDP multi-buffer.
    bool frags = false;
  };

  // Opens and loads the embedded program and its maps (empty: nothing is steered). Needs BPF
  // privileges: PERMISSION_DENIED otherwise.
  static absl::StatusOr<std::unique_ptr<XdpProgram>> Load(Options options);
  static absl::StatusOr<std::unique_ptr<XdpProgram>> Load() { return Load(Options()); }

  XdpProgram(const XdpProgram&) = delete;
  XdpProgram& operator=(const XdpProgram&) = delete;
  ~XdpProgram();  // detaches, then unloads

  // Attaches to interface `ifindex`: generic for kSkb, native for kZeroCopy and kCopy, native
  // or else generic for kAuto. Returns the mode in effect: kSkb when the program runs generic
  // (asked for, or auto's fallback), else `mode`. Removes a stale quadsock program first (see
  // above). FAILED_PRECONDITION for no such
  // interface, for another program on it, or when already attached; PERMISSION_DENIED without
  // the privilege; with the kernel's reason (errno text) otherwise.
  absl::StatusOr<XdpMode> Attach(int ifindex, XdpMode mode = XdpMode::kAuto);
  // Takes the program off the interface (FAILED_PRECONDITION when not attached). The maps stay.
  absl::Status Detach();
  bool IsAttached() const;

  // An address the stack owns (IPv4 or IPv6). `exclusive`: the stack owns it outright and gets
  // all UDP, ICMP, ARP and NDP to it; otherwise it shares it with the kernel and gets only UDP to
  // the ports added with AddPort. `vlan`: the 802.1Q VLAN the address is on (1-4094); 0, none:
  // frames to it must be untagged or priority-tagged. Adding again updates flag and VLAN.
  // INVALID_ARGUMENT for the unspecified address, a multicast one, or a VLAN id past 4094;
  // RESOURCE_EXHAUSTED when the map is full.
  absl::Status AddAddress(const net::IpAddress& address, bool exclusive, uint16_t vlan = 0);
  // NOT_FOUND when the address is not owned.
  absl::Status RemoveAddress(const net::IpAddress& address);
  // Neighbour advertisements to all nodes (ff02::1) about IPv6 neighbour `address` on `vlan`
  // (0: untagged) go to the stack from now on, no longer to the kernel; those about anyone else
  // stay the kernel's (steer_common.h says why). For the neighbours in the stack's table: it
  // adds one as it makes the entry and removes it with the entry. INVALID_ARGUMENT for an
  // IPv4, multicast or unspecified address or a VLAN id past 4094; RESOURCE_EXHAUSTED when
  // the map is full. Adding again updates the VLAN.
  absl::Status AddNeighbor(const net::IpAddress& address, uint16_t vlan = 0);
  // NOT_FOUND when it was not added.
  absl::Status RemoveNeighbor(const net::IpAddress& address);

  // A UDP port the stack owns at a shared address, or at every shared address of the family
  // when `address` is unspecified (0.0.0.0 or ::). Counted: each AddPort needs a RemovePort
  // before the entry goes (several sockets may bind one port). INVALID_ARGUMENT for port 0.
  absl::Status AddPort(const net::IpAddress& address, uint16_t port);
  // NOT_FOUND when the (address, port) was not added.
  absl::Status RemovePort(const net::IpAddress& address, uint16_t port);

  // The AF_XDP socket that receives what is steered on RX queue `queue` (INVALID_ARGUMENT
  // beyond QS_MAX_QUEUES). ClearXsk is OK also when the queue had none (the kernel's XSKMAP
  // does not say; closing a socket takes it out of the map by itself).
  absl::Status SetXsk(uint32_t queue, int xsk_fd);
  absl::Status ClearXsk(uint32_t queue);

  absl::StatusOr<XdpProgramCounters> Counters() const;

  // For tests (BPF_PROG_TEST_RUN) and tools.
  int program_fd() const { return program_fd_; }
  uint32_t program_id() const { return program_id_; }
  int xsks_map_fd() const { return xsks_fd_; }

 private:
  struct ObjectCloser {
    void operator()(bpf_object* object) const;
  };

  explicit XdpProgram(Options options) : options_(std::move(options)) {}
  void Log(absl::string_view message) const;
  // Takes a quadsock program attached the legacy way off `ifindex`; fails for another program.
  absl::Status RemoveStale(int ifindex, absl::string_view ifname);

  Options options_;
  std::unique_ptr<bpf_object, ObjectCloser> object_;
  int program_fd_ = -1;
  uint32_t program_id_ = 0;
  int xsks_fd_ = -1;
  int addrs_fd_ = -1;
  int ports_fd_ = -1;
  int neighbors_fd_ = -1;
  int counters_fd_ = -1;

  mutable absl::Mutex mu_;
  int link_fd_ ABSL_GUARDED_BY(mu_) = -1;
  int ifindex_ ABSL_GUARDED_BY(mu_) = 0;
  // How many AddPort calls hold each (address bytes, port) entry.
  absl::flat_hash_map<std::pair<net::IpAddress::Bytes, uint16_t>, int> port_refs_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace quadsock::xdp

#endif  // QUADSOCK_STACK_XDP_XDP_PROGRAM_H_
