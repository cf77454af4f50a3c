// A Stack on a real interface: quadsock's XDP program steers what the stack owns into AF_XDP
// sockets (one per RX queue, sharing one UMEM) and passes everything else to the kernel.
//
// Owned addresses are registered with the XDP program as exclusive: all UDP, ICMP, ARP and NDP
// to them is the stack's (so UDP to a closed port gets the stack's port unreachable). The
// program is attached as a bpf_link and leaves with the process, even on SIGKILL. The NIC's
// VLAN tag stripping on receive (802.1Q and 802.1ad) is turned off while the stack runs, on a
// VLAN or not, so that XDP sees every tag, and back on when it is destroyed (not after SIGKILL:
// the next start finds it off and leaves it so).
//
// The XDP program runs for every RX queue of the interface, but only a queue with an AF_XDP
// socket can hand frames to the stack: the stack serves all of the interface's RX queues, or
// refuses to start unless told that the operator pinned its traffic to the queues it serves.
//
//   AfXdpOptions o;
//   o.interface = "veth0";
//   o.stack.addresses = {*net::IpPrefix::Parse("10.1.0.2/24")};
//   std::unique_ptr<AfXdpStack> s = AfXdpStack::Create(o).value();
//   s->stack().Start();
//   LOG: s->Describe()  ->  "veth0: XDP native, AF_XDP copy, 1 queue, 8192 UMEM frames"
#ifndef QUADSOCK_STACK_AFXDP_STACK_H_
#define QUADSOCK_STACK_AFXDP_STACK_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "stack/link/xsk_link.h"
#include "stack/stack.h"
#include "stack/xdp/xdp_program.h"

namespace quadsock::stack {

struct AfXdpOptions {
  std::string interface;
  // RX queues served, 0..queues-1; 0: all of the interface's. Fewer than the interface has are
  // refused (their frames would never reach the stack) unless allow_unserved_queues says that
  // the operator steers the stack's traffic to the served ones (ntuple rules, `ethtool -N`).
  uint32_t queues = 0;
  bool allow_unserved_queues = false;
  xdp::XdpMode mode = xdp::XdpMode::kAuto;  // --xdp_mode
  // In all, over the queues; 0: DefaultUmemFrames.
  uint32_t umem_frames = 0;
  uint32_t frame_size = 4096;
  uint32_t ring_size = 1024;
  bool busy_poll = false;  // preferred busy polling (link::XskPort::Options::busy_poll)
  StackOptions stack;
  std::function<void(absl::string_view)> log;  // default: stderr
};

// UMEM frames for `queues` queues with rings of `ring_size`: 8192, or more with the queues, so
// that each queue has at least 4096 and twice its ring size (its fill and RX rings full, and
// frames left for sending).
uint32_t DefaultUmemFrames(uint32_t queues, uint32_t ring_size);

class AfXdpStack {
 public:
  // Fails fast with what is wrong: no such interface (FAILED_PRECONDITION), no BPF or AF_XDP
  // privileges (PERMISSION_DENIED), a mode the interface cannot do (zerocopy where the kernel
  // bound copy mode), RX queues left unserved or past the interface's (FAILED_PRECONDITION),
  // VLAN tag stripping that cannot be turned off (FAILED_PRECONDITION), bad sizes.
  static absl::StatusOr<std::unique_ptr<AfXdpStack>> Create(AfXdpOptions options);
  ~AfXdpStack();  // stops the stack, closes the sockets, detaches the program

  Stack& stack() { return *stack_; }
  xdp::XdpProgram& xdp_program() { return *xdp_program_; }
  // The mode in effect: options' mode, or kSkb where auto fell back to generic XDP.
  xdp::XdpMode xdp_mode() const { return xdp_mode_; }
  // How the kernel bound the AF_XDP sockets: "zerocopy" or "copy", or "mixed" where queues
  // differ (each queue's mode is in its link's info().mode).
  const std::string& bind_mode() const { return bind_mode_; }
  // The RX queues the interface has (the stack serves options' queues of them).
  uint32_t interface_queues() const { return interface_queues_; }
  std::string Describe() const;

 private:
  AfXdpStack() = default;
  // A NIC that strips tags on receive hides them from XDP: an untagged stack would take a
  // frame tagged for another VLAN as its own, a VLAN's stack would see none of its frames. So
  // stripping is turned off (and back on at exit). FAILED_PRECONDITION, with the command to
  // run, when it cannot be.
  absl::Status KeepVlanTags();
  // Resolves options_' queues (0: all) and umem_frames (0: the default) against the
  // interface's RX queues; FAILED_PRECONDITION, naming the fixes, for queues left unserved.
  absl::Status ChooseQueues();

  AfXdpOptions options_;
  // Destroyed in reverse: the stack (and its links) first, then the UMEM, then the program.
  std::unique_ptr<xdp::XdpProgram> xdp_program_;
  std::unique_ptr<link::XskPort> port_;
  std::unique_ptr<Stack> stack_;
  xdp::XdpMode xdp_mode_ = xdp::XdpMode::kAuto;
  std::string bind_mode_;
  uint32_t interface_queues_ = 0;
  std::vector<std::string> queue_modes_;  // each queue's bind mode, as the kernel bound it
  std::vector<std::string> restore_features_;  // turned off here, back on at exit
};

}  // namespace quadsock::stack

#endif  // QUADSOCK_STACK_AFXDP_STACK_H_
