#include "stack/afxdp_stack.h"

#include <net/if.h>

#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "stack/link/nic_features.h"

namespace quadsock::stack {

namespace {

// How the AF_XDP sockets bind in XDP mode `mode` (zero-copy needs the driver's native XDP).
link::XskBindMode BindMode(xdp::XdpMode mode) {
  switch (mode) {
    case xdp::XdpMode::kAuto:
      return link::XskBindMode::kAuto;
    case xdp::XdpMode::kZeroCopy:
      return link::XskBindMode::kZeroCopy;
    case xdp::XdpMode::kCopy:
    case xdp::XdpMode::kSkb:
      return link::XskBindMode::kCopy;
  }
  return link::XskBindMode::kCopy;
}

}  // namespace

absl::StatusOr<std::unique_ptr<AfXdpStack>> AfXdpStack::Create(AfXdpOptions options) {
  if (!options.log) {
    options.log = [](absl::string_view m) { std::fprintf(stderr, "%.*s\n", static_cast<int>(m.size()), m.data()); };
  }
  // Before anything is done to the interface (VLAN stripping, the program).
  if (absl::Status st = Stack::CheckOptions(options.stack); !st.ok()) return st;
  const int ifindex = static_cast<int>(if_nametoindex(options.interface.c_str()));
  if (ifindex == 0) {
    return absl::FailedPreconditionError(
        absl::StrFormat("no such interface: \"%s\"", options.interface));
  }
  std::unique_ptr<AfXdpStack> s(new AfXdpStack());
  s->options_ = options;

  xdp::XdpProgram::Options program_options;
  program_options.log = options.log;
  absl::StatusOr<std::unique_ptr<xdp::XdpProgram>> program =
      xdp::XdpProgram::Load(program_options);
  if (!program.ok()) return program.status();
  s->xdp_program_ = std::move(*program);

  link::XskPort::Options port;
  port.interface = options.interface;
  port.frames = options.umem_frames;
  port.frame_size = options.frame_size;
  port.ring_size = options.ring_size;
  port.queues = options.queues;
  port.busy_poll = options.busy_poll;
  if (options.stack.vlan != 0) {
    if (absl::Status st = s->KeepVlanTags(); !st.ok()) return st;
  }
  absl::StatusOr<xdp::XdpMode> attached = s->xdp_program_->Attach(ifindex, options.mode);
  if (!attached.ok()) return attached.status();
  s->xdp_mode_ = *attached;
  port.bind_mode = BindMode(s->xdp_mode_);

  absl::StatusOr<std::unique_ptr<link::XskPort>> xsk_port = link::XskPort::Create(port);
  if (!xsk_port.ok()) return xsk_port.status();
  s->port_ = std::move(*xsk_port);
  std::vector<std::unique_ptr<link::Link>> links;
  for (uint32_t q = 0; q < options.queues; ++q) {
    absl::StatusOr<std::unique_ptr<link::XskLink>> l = s->port_->OpenQueue(q);
    if (!l.ok()) return l.status();
    if (absl::Status st = s->xdp_program_->SetXsk(q, (*l)->socket_fd()); !st.ok()) return st;
    s->bind_mode_ = (*l)->info().mode;
    links.push_back(std::move(*l));
  }
  if (const uint32_t mtu = links[0]->info().mtu; mtu < s->port_->interface_mtu()) {
    options.log(absl::StrFormat(
        "%s: MTU %u, not the interface's %u: a received frame must fit a %u-byte UMEM frame",
        options.interface, mtu, s->port_->interface_mtu(), options.frame_size));
  }
  for (const net::IpPrefix& p : options.stack.addresses) {
    if (absl::Status st = s->xdp_program_->AddAddress(p.address(), /*exclusive=*/true,
                                                      options.stack.vlan);
        !st.ok()) {
      return st;
    }
  }
  absl::StatusOr<std::unique_ptr<Stack>> stack = Stack::Create(options.stack, std::move(links));
  if (!stack.ok()) return stack.status();
  s->stack_ = std::move(*stack);
  options.log(s->Describe());
  return s;
}

AfXdpStack::~AfXdpStack() {
  if (stack_ != nullptr) stack_->Stop();
  stack_.reset();
  port_.reset();
  xdp_program_.reset();
  if (restore_vlan_stripping_) {
    const absl::Status s = link::SetNicFeature(options_.interface, link::kRxVlanStripping, true);
    options_.log(s.ok() ? absl::StrCat(options_.interface, ": VLAN tag stripping on receive is "
                                       "back on")
                        : absl::StrCat(options_.interface, ": could not turn VLAN tag stripping "
                                       "back on: ", s.message()));
  }
}

absl::Status AfXdpStack::KeepVlanTags() {
  const std::string& interface = options_.interface;
  absl::StatusOr<bool> strips = link::GetNicFeature(interface, link::kRxVlanStripping);
  // A device without the feature cannot strip.
  if (strips.status().code() == absl::StatusCode::kNotFound) return absl::OkStatus();
  if (!strips.ok()) return strips.status();
  if (!*strips) return absl::OkStatus();
  if (absl::Status s = link::SetNicFeature(interface, link::kRxVlanStripping, false); !s.ok()) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "%s strips VLAN tags on receive, which hides them from XDP, and it could not be turned "
        "off (%s): run `ethtool -K %s rxvlan off`",
        interface, s.message(), interface));
  }
  restore_vlan_stripping_ = true;
  options_.log(absl::StrFormat(
      "%s: turned VLAN tag stripping on receive off (ethtool rxvlan), so that XDP sees VLAN "
      "%u's tags; it is turned back on at exit",
      interface, options_.stack.vlan));
  return absl::OkStatus();
}

std::string AfXdpStack::Describe() const {
  const std::string vlan =
      options_.stack.vlan != 0 ? absl::StrFormat(", VLAN %u", options_.stack.vlan) : "";
  return absl::StrFormat("%s%s: XDP %s, AF_XDP %s, %u queue%s, %u UMEM frames of %u bytes%s",
                         options_.interface, vlan, xdp::XdpAttachName(xdp_mode_), bind_mode_,
                         options_.queues, options_.queues == 1 ? "" : "s", options_.umem_frames,
                         options_.frame_size, options_.busy_poll ? ", busy polling" : "");
}

}  // namespace quadsock::stack
