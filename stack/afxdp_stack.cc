#include "stack/afxdp_stack.h"

#include <net/if.h>

#include <algorithm>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "stack/link/nic_features.h"
#include "stack/xdp/steer_common.h"

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

// "queue 3" or "queues 1-3".
std::string QueueRange(uint32_t first, uint32_t last) {
  return first == last ? absl::StrCat("queue ", first)
                       : absl::StrCat("queues ", first, "-", last);
}

}  // namespace

uint32_t DefaultUmemFrames(uint32_t queues, uint32_t ring_size) {
  const uint64_t per_queue = std::max<uint64_t>(4096, 2 * uint64_t{ring_size});
  const uint64_t frames = std::max<uint64_t>(8192, per_queue * queues);
  return static_cast<uint32_t>(std::min<uint64_t>(frames, UINT32_MAX));
}

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
  // A frame longer than a UMEM frame holds (jumbo frames) comes and goes as a chain of them:
  // AF_XDP multi-buffer, with a program loaded for frags. Where the kernel or driver has none,
  // the bind fails and says what to change.
  absl::StatusOr<uint32_t> mtu = link::InterfaceMtu(options.interface);
  if (!mtu.ok()) return mtu.status();
  const bool jumbo = *mtu > link::MaxMtu(options.frame_size);
  std::unique_ptr<AfXdpStack> s(new AfXdpStack());
  s->options_ = options;
  if (absl::Status st = s->ChooseQueues(); !st.ok()) return st;
  options.queues = s->options_.queues;
  options.umem_frames = s->options_.umem_frames;

  xdp::XdpProgram::Options program_options;
  program_options.log = options.log;
  program_options.frags = jumbo;
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
  port.multi_buffer = jumbo;
  if (absl::Status st = s->KeepVlanTags(); !st.ok()) return st;
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
    s->queue_modes_.push_back((*l)->info().mode);
    links.push_back(std::move(*l));
  }
  s->bind_mode_ = s->queue_modes_[0];
  for (const std::string& m : s->queue_modes_) {
    if (m != s->bind_mode_) s->bind_mode_ = "mixed";
  }
  for (const net::IpPrefix& p : options.stack.addresses) {
    if (absl::Status st = s->xdp_program_->AddAddress(p.address(), /*exclusive=*/true,
                                                      options.stack.vlan);
        !st.ok()) {
      return st;
    }
  }
  // The announcements to all nodes about the stack's IPv6 neighbours come to the stack: a
  // forged advertisement is mended so. Only about those (steer_common.h): the kernel still
  // hears the rest. A full map loses only the speed-up (unreachability detection still mends
  // an entry), so it is logged once.
  options.stack.neighbors.on_entry = [program = s->xdp_program_.get(), vlan = options.stack.vlan,
                                      log = options.log,
                                      warned = false](const net::IpAddress& ip,
                                                      bool present) mutable {
    if (ip.is_v4()) return;
    const absl::Status st = present ? program->AddNeighbor(ip, vlan) : program->RemoveNeighbor(ip);
    if (!st.ok() && !warned) {
      warned = true;
      log(absl::StrCat("neighbour announcements: ", st.message(), " (logged once)"));
    }
  };
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
  for (const std::string& feature : restore_features_) {
    const absl::Status s = link::SetNicFeature(options_.interface, feature, true);
    options_.log(s.ok() ? absl::StrCat(options_.interface, ": ", feature, " (VLAN tag stripping "
                                       "on receive) is back on")
                        : absl::StrCat(options_.interface, ": could not turn ", feature,
                                       " back on: ", s.message()));
  }
}

absl::Status AfXdpStack::ChooseQueues() {
  const std::string& interface = options_.interface;
  absl::StatusOr<uint32_t> count = link::RxQueueCount(interface);
  if (!count.ok()) {
    return absl::Status(count.status().code(),
                        absl::StrCat("counting the RX queues of ", interface, ": ",
                                     count.status().message()));
  }
  interface_queues_ = *count;
  uint32_t& queues = options_.queues;
  if (queues == 0) queues = *count;
  if (queues > *count) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "%u queues asked for, but %s has %u RX queue%s", queues, interface, *count,
        *count == 1 ? "" : "s"));
  }
  if (queues > QS_MAX_QUEUES) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "%s has %u RX queues, and quadsock serves at most %u: give it fewer (ethtool -L %s "
        "combined %u)",
        interface, queues, QS_MAX_QUEUES, interface, QS_MAX_QUEUES));
  }
  if (queues < *count) {
    const std::string unserved = QueueRange(queues, *count - 1);
    if (!options_.allow_unserved_queues) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "%s has %u RX queues and %u would be served: frames for the stack that the NIC puts "
          "on %s would go to the kernel, which does not hold the stack's addresses. Serve them "
          "all (--queues=0, the default, or --queues=%u), give the interface %u queue%s "
          "(ethtool -L %s combined %u, or rx %u), or pin the stack's addresses to the served "
          "queues with ntuple rules (ethtool -N %s flow-type udp4 dst-ip ADDRESS action 0, and "
          "the same for ARP/NDP) and pass --allow_unserved_queues",
          interface, *count, queues, unserved, *count, queues, queues == 1 ? "" : "s",
          interface, queues, queues, interface));
    }
    options_.log(absl::StrFormat(
        "%s: serving %s of its %u RX queues (allowed unserved): frames for the stack on %s "
        "go to the kernel and count in redirect_no_xsk",
        interface, QueueRange(0, queues - 1), *count, unserved));
  }
  if (options_.umem_frames == 0) {
    options_.umem_frames = DefaultUmemFrames(queues, options_.ring_size);
  }
  return absl::OkStatus();
}

absl::Status AfXdpStack::KeepVlanTags() {
  const std::string& interface = options_.interface;
  for (absl::string_view feature : {link::kRxVlanStripping, link::kRxStagStripping}) {
    absl::StatusOr<bool> strips = link::GetNicFeature(interface, feature);
    // A device without the feature cannot strip.
    if (strips.status().code() == absl::StatusCode::kNotFound) continue;
    if (!strips.ok()) return strips.status();
    if (!*strips) continue;
    if (absl::Status s = link::SetNicFeature(interface, feature, false); !s.ok()) {
      const bool stag = feature == link::kRxStagStripping;
      return absl::FailedPreconditionError(absl::StrFormat(
          "%s strips VLAN tags on receive (%s), which hides them from XDP, and it could not be "
          "turned off (%s): run `ethtool -K %s %s off`",
          interface, feature, s.message(), interface, stag ? "rx-vlan-stag-hw-parse" : "rxvlan"));
    }
    restore_features_.emplace_back(feature);
    options_.log(absl::StrFormat(
        "%s: turned %s (VLAN tag stripping on receive) off, so that XDP sees every tag; it is "
        "turned back on at exit",
        interface, feature));
  }
  // A veth's peer may hand a frame's tag beside it (its tx-vlan offload, on by default), and
  // XDP then sees the frame untagged: nothing here can turn that off, so say so.
  if (absl::StatusOr<std::string> driver = link::DriverName(interface);
      driver.ok() && *driver == "veth") {
    options_.log(absl::StrFormat(
        "%s: a veth: a VLAN tag its peer offloads (tx-vlan-offload) reaches XDP beside the frame, "
        "which then looks untagged%s; where tagged frames may come, run `ethtool -K PEER txvlan "
        "off` on the peer",
        interface, options_.stack.vlan == 0
                       ? " and is taken as ours"
                       : absl::StrFormat(", so that even VLAN %u's go to the kernel",
                                         options_.stack.vlan)));
  }
  return absl::OkStatus();
}

std::string AfXdpStack::Describe() const {
  const std::string vlan =
      options_.stack.vlan != 0 ? absl::StrFormat(", VLAN %u", options_.stack.vlan) : "";
  std::string modes = bind_mode_;
  if (bind_mode_ == "mixed") {
    std::vector<std::string> each;
    for (size_t q = 0; q < queue_modes_.size(); ++q) {
      each.push_back(absl::StrCat(q, " ", queue_modes_[q]));
    }
    modes = absl::StrCat("per queue ", absl::StrJoin(each, ", "));
  }
  const uint32_t queues = options_.queues;
  const std::string served =
      queues < interface_queues_
          ? absl::StrFormat("%u of %u RX queues", queues, interface_queues_)
          : absl::StrFormat("%u queue%s", queues, queues == 1 ? "" : "s");
  const absl::Duration spin = options_.stack.poll_spin;
  return absl::StrFormat("%s%s: XDP %s, AF_XDP %s, %s, %u UMEM frames of %u bytes%s%s",
                         options_.interface, vlan, xdp::XdpAttachName(xdp_mode_), modes, served,
                         options_.umem_frames, options_.frame_size,
                         options_.busy_poll ? ", busy polling" : "",
                         spin > absl::ZeroDuration()
                             ? absl::StrCat(", poll threads spin ", absl::FormatDuration(spin))
                             : "");
}

}  // namespace quadsock::stack
