// A Stack on a real interface: quadsock's XDP program steers what the stack owns into AF_XDP
// sockets (one per RX queue, sharing one UMEM) and passes everything else to the kernel.
//
// Owned addresses are registered with the XDP program as exclusive: all UDP, ICMP, ARP and NDP
// to them is the stack's (so UDP to a closed port gets the stack's port unreachable). The
// program is attached as a bpf_link and leaves with the process, even on SIGKILL. On a VLAN,
// the NIC's VLAN tag stripping on receive is turned off while the stack runs, and back on when
// it is destroyed (not after SIGKILL: the next start finds it off and leaves it so).
//
//   AfXdpOptions o;
//   o.interface = "veth0";
//   o.stack.addresses = {*net::IpPrefix::Parse("10.1.0.2/24")};
//   std::unique_ptr<AfXdpStack> s = AfXdpStack::Create(o).value();
//   s->stack().Start();
//   LOG: s->Describe()  ->  "veth0: XDP native, AF_XDP copy, 1 queue, 4096 UMEM frames"
#ifndef QUADSOCK_STACK_AFXDP_STACK_H_
#define QUADSOCK_STACK_AFXDP_STACK_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "stack/link/xsk_link.h"
#include "stack/stack.h"
#include "stack/xdp/xdp_program.h"

namespace quadsock::stack {

struct AfXdpOptions {
  std::string interface;
  uint32_t queues = 1;
  xdp::XdpMode mode = xdp::XdpMode::kAuto;  // --xdp_mode
  uint32_t umem_frames = 4096;  // in all, over the queues
  uint32_t frame_size = 4096;
  uint32_t ring_size = 1024;
  bool busy_poll = false;  // preferred busy polling (link::XskPort::Options::busy_poll)
  StackOptions stack;
  std::function<void(absl::string_view)> log;  // default: stderr
};

class AfXdpStack {
 public:
  // Fails fast with what is wrong: no such interface (FAILED_PRECONDITION), no BPF or AF_XDP
  // privileges (PERMISSION_DENIED), a mode the interface cannot do, bad sizes.
  static absl::StatusOr<std::unique_ptr<AfXdpStack>> Create(AfXdpOptions options);
  ~AfXdpStack();  // stops the stack, closes the sockets, detaches the program

  Stack& stack() { return *stack_; }
  xdp::XdpProgram& xdp_program() { return *xdp_program_; }
  // The mode in effect: options' mode, or kSkb where auto fell back to generic XDP.
  xdp::XdpMode xdp_mode() const { return xdp_mode_; }
  // "zerocopy" or "copy".
  const std::string& bind_mode() const { return bind_mode_; }
  std::string Describe() const;

 private:
  AfXdpStack() = default;
  // On a VLAN: a NIC that strips tags on receive hides them from XDP, so stripping is turned
  // off (and back on at exit). FAILED_PRECONDITION, with the command to run, when it cannot be.
  absl::Status KeepVlanTags();

  AfXdpOptions options_;
  // Destroyed in reverse: the stack (and its links) first, then the UMEM, then the program.
  std::unique_ptr<xdp::XdpProgram> xdp_program_;
  std::unique_ptr<link::XskPort> port_;
  std::unique_ptr<Stack> stack_;
  xdp::XdpMode xdp_mode_ = xdp::XdpMode::kAuto;
  std::string bind_mode_;
  bool restore_vlan_stripping_ = false;
};

}  // namespace quadsock::stack

#endif  // QUADSOCK_STACK_AFXDP_STACK_H_
