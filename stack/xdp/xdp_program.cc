#include "stack/xdp/xdp_program.h"

#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/bpf.h>
#include <linux/if_link.h>
#include <net/if.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "stack/link/errno_status.h"
#include "stack/xdp/steer_common.h"
#include "stack/xdp/steer_object.h"

namespace quadsock::xdp {
namespace {

using link::ErrnoStatus;  // takes libbpf's -errno as well as errno


struct ProgramInfo {
  std::string name;
  int fd = -1;  // owned by the caller
};

absl::StatusOr<ProgramInfo> GetProgram(uint32_t id) {
  int fd = bpf_prog_get_fd_by_id(id);
  if (fd < 0) return ErrnoStatus(errno, absl::StrCat("cannot open XDP program id ", id));
  bpf_prog_info info;
  std::memset(&info, 0, sizeof(info));
  uint32_t length = sizeof(info);
  if (bpf_obj_get_info_by_fd(fd, &info, &length) != 0) {
    int error = errno;
    close(fd);
    return ErrnoStatus(error, absl::StrCat("cannot read XDP program id ", id));
  }
  return ProgramInfo{.name = info.name, .fd = fd};
}

}  // namespace

absl::string_view XdpModeName(XdpMode mode) {
  switch (mode) {
    case XdpMode::kAuto:
      return "auto";
    case XdpMode::kZeroCopy:
      return "zerocopy";
    case XdpMode::kCopy:
      return "copy";
    case XdpMode::kSkb:
      return "skb";
  }
  return "?";
}

absl::StatusOr<XdpMode> ParseXdpMode(absl::string_view name) {
  for (XdpMode mode : {XdpMode::kAuto, XdpMode::kZeroCopy, XdpMode::kCopy, XdpMode::kSkb}) {
    if (name == XdpModeName(mode)) return mode;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("XDP mode \"", name, "\": expected auto, zerocopy, copy or skb"));
}

absl::string_view XdpAttachName(XdpMode mode) {
  return mode == XdpMode::kSkb ? "generic" : "native";
}

std::string XdpProgramCounters::ToString() const {
  return absl::StrCat("redirect=", redirect, " redirect_no_xsk=", redirect_no_xsk,
                      " (udp=", redirect_udp, " icmp=", redirect_icmp, " arp=", redirect_arp,
                      " ns=", redirect_ns, " other=", redirect_other,
                      ") pass_not_owned=", pass_not_owned, " pass_other=", pass_other,
                      " malformed=", malformed);
}

void XdpProgram::ObjectCloser::operator()(bpf_object* object) const { bpf_object__close(object); }

absl::StatusOr<std::unique_ptr<XdpProgram>> XdpProgram::Load(Options options) {
  std::unique_ptr<XdpProgram> loaded(new XdpProgram(std::move(options)));
  std::span<const uint8_t> image = SteerBpfObject();
  LIBBPF_OPTS(bpf_object_open_opts, open_options, .object_name = QS_PROGRAM_NAME);
  bpf_object* object = bpf_object__open_mem(image.data(), image.size(), &open_options);
  if (object == nullptr) return ErrnoStatus(errno, "cannot open the embedded XDP object");
  loaded->object_.reset(object);
  bpf_program* steer = bpf_object__find_program_by_name(object, QS_PROGRAM_NAME);
  if (steer == nullptr) return absl::InternalError("the object has no " QS_PROGRAM_NAME);
  if (loaded->options_.frags) {
    bpf_program__set_flags(steer, bpf_program__flags(steer) | BPF_F_XDP_HAS_FRAGS);
  }
  if (int error = bpf_object__load(object); error != 0) {
    // libbpf's own lines (as non-root: "Make sure your kernel supports BPF") go where
    // library_log.h sends them; this error says what is missing.
    return ErrnoStatus(error, "cannot load the XDP steering program",
                       "(loading BPF needs root, or CAP_BPF, CAP_NET_ADMIN and CAP_PERFMON: run "
                       "quadsockd as root or in its container)");
  }

  loaded->program_fd_ = bpf_program__fd(steer);
  bpf_prog_info info;
  std::memset(&info, 0, sizeof(info));
  uint32_t length = sizeof(info);
  if (bpf_obj_get_info_by_fd(loaded->program_fd_, &info, &length) != 0) {
    return ErrnoStatus(errno, "cannot read the loaded program's id");
  }
  loaded->program_id_ = info.id;

  struct {
    const char* name;
    int* fd;
  } maps[] = {{QS_MAP_XSKS, &loaded->xsks_fd_},
              {QS_MAP_ADDRS, &loaded->addrs_fd_},
              {QS_MAP_PORTS, &loaded->ports_fd_},
              {QS_MAP_NEIGHBORS, &loaded->neighbors_fd_},
              {QS_MAP_COUNTERS, &loaded->counters_fd_}};
  for (const auto& map : maps) {
    bpf_map* m = bpf_object__find_map_by_name(object, map.name);
    if (m == nullptr) return absl::InternalError(absl::StrCat("the object has no map ", map.name));
    *map.fd = bpf_map__fd(m);
  }
  return loaded;
}

XdpProgram::~XdpProgram() {
  if (IsAttached()) Detach().IgnoreError();  // cannot fail when attached
}

void XdpProgram::Log(absl::string_view message) const {
  if (options_.log) {
    options_.log(message);
  } else {
    std::fprintf(stderr, "quadsock xdp: %.*s\n", static_cast<int>(message.size()),
                 message.data());
  }
}

absl::Status XdpProgram::RemoveStale(int ifindex, absl::string_view ifname) {
  LIBBPF_OPTS(bpf_xdp_query_opts, query);
  if (int error = bpf_xdp_query(ifindex, 0, &query); error != 0) {
    return ErrnoStatus(error, absl::StrCat("cannot query XDP programs on ", ifname));
  }
  struct {
    uint32_t id;
    uint32_t flag;
    const char* mode;
    const char* ip_keyword;  // `ip link set dev IF <ip_keyword> off` removes it
  } slots[] = {{query.drv_prog_id, XDP_FLAGS_DRV_MODE, "native", "xdp"},
               {query.skb_prog_id, XDP_FLAGS_SKB_MODE, "generic", "xdpgeneric"},
               {query.hw_prog_id, XDP_FLAGS_HW_MODE, "offloaded", "xdpoffload"}};
  for (const auto& slot : slots) {
    if (slot.id == 0) continue;
    const std::string remove =
        absl::StrCat("ip link set dev ", ifname, " ", slot.ip_keyword, " off");
    absl::StatusOr<ProgramInfo> program = GetProgram(slot.id);
    if (!program.ok() && program.status().code() == absl::StatusCode::kPermissionDenied) {
      // Opening a program by id takes CAP_SYS_ADMIN, which a container has no need of otherwise:
      // say which program is in the way and how to remove it where that capability is.
      return absl::PermissionDeniedError(absl::StrCat(
          "a ", slot.mode, " XDP program (id ", slot.id, ") is on ", ifname,
          ", and checking whether it is a stale one of an earlier quadsock run needs "
          "CAP_SYS_ADMIN (", program.status().message(), "); remove it from the host (`",
          remove, "`, which needs CAP_SYS_ADMIN too) and start again"));
    }
    if (!program.ok()) return program.status();
    std::string what = absl::StrCat(slot.mode, " XDP program id ", slot.id, " \"",
                                    program->name, "\" on ", ifname);
    if (!absl::StartsWith(program->name, QS_PROGRAM_NAME_PREFIX)) {
      close(program->fd);
      return absl::FailedPreconditionError(absl::StrCat(
          what, " is not quadsock's; remove it (", remove, ") or use another interface"));
    }
    // Only the program we looked at (REPLACE with it as the expected one), and only if it was
    // attached the legacy way: a live bpf_link (another quadsock running) refuses with EBUSY.
    LIBBPF_OPTS(bpf_xdp_attach_opts, detach, .old_prog_fd = program->fd);
    int error = bpf_xdp_detach(ifindex, slot.flag | XDP_FLAGS_REPLACE, &detach);
    close(program->fd);
    if (error == -EBUSY) {
      return absl::FailedPreconditionError(absl::StrCat(
          what, " is held by a live bpf_link: is another quadsock running on it?"));
    }
    if (error != 0) return ErrnoStatus(error, absl::StrCat("cannot remove stale ", what));
    Log(absl::StrCat("removed stale ", what, " (left by an earlier run)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<XdpMode> XdpProgram::Attach(int ifindex, XdpMode mode) {
  absl::MutexLock lock(&mu_);
  char name_buffer[IF_NAMESIZE] = {};
  if (ifindex <= 0 || if_indextoname(ifindex, name_buffer) == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat("no such interface: ifindex ", ifindex));
  }
  std::string ifname = name_buffer;
  if (link_fd_ >= 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("the steering program is already attached (ifindex ", ifindex_, ")"));
  }
  if (absl::Status s = RemoveStale(ifindex, ifname); !s.ok()) return s;

  // Native first, except for skb; only auto goes on to generic.
  std::vector<XdpMode> tries;
  if (mode != XdpMode::kSkb) tries.push_back(mode);
  if (mode == XdpMode::kAuto || mode == XdpMode::kSkb) tries.push_back(XdpMode::kSkb);
  std::string failures;
  int last_error = 0;
  for (XdpMode attempt : tries) {
    const uint32_t flag = attempt == XdpMode::kSkb ? XDP_FLAGS_SKB_MODE : XDP_FLAGS_DRV_MODE;
    LIBBPF_OPTS(bpf_link_create_opts, link_options, .flags = flag);
    int fd = bpf_link_create(program_fd_, ifindex, BPF_XDP, &link_options);
    if (fd >= 0) {
      link_fd_ = fd;
      ifindex_ = ifindex;
      Log(absl::StrCat("attached ", QS_PROGRAM_NAME, " (id ", program_id_, ") to ", ifname,
                       " in ", XdpAttachName(attempt), " mode as a bpf_link",
                       mode == XdpMode::kAuto ? " (auto)" : "", failures));
      return attempt;
    }
    last_error = -fd;
    absl::StrAppend(&failures, "; ", link::ErrnoStatus(last_error, XdpAttachName(attempt)).message());
    if (last_error == EPERM || last_error == EACCES) break;  // no mode will do better
  }
  std::string message = absl::StrCat(
      "cannot attach the XDP program to ", ifname, " (mode ",
      mode == XdpMode::kAuto ? "auto" : XdpAttachName(mode), failures, ")");
  if (last_error == EPERM || last_error == EACCES) return absl::PermissionDeniedError(message);
  // The interface cannot take it (no driver support, MTU too large for native XDP, ...).
  return absl::FailedPreconditionError(message);
}

absl::Status XdpProgram::Detach() {
  absl::MutexLock lock(&mu_);
  if (link_fd_ < 0) return absl::FailedPreconditionError("the steering program is not attached");
  // Closing the last reference to the link takes the program off the interface.
  close(link_fd_);
  link_fd_ = -1;
  char name[IF_NAMESIZE] = "?";
  if_indextoname(ifindex_, name);
  Log(absl::StrCat("detached ", QS_PROGRAM_NAME, " from ", name));
  ifindex_ = 0;
  return absl::OkStatus();
}

bool XdpProgram::IsAttached() const {
  absl::MutexLock lock(&mu_);
  return link_fd_ >= 0;
}

absl::Status XdpProgram::AddAddress(const net::IpAddress& address, bool exclusive,
                                  uint16_t vlan) {
  if (address.IsUnspecified() || address.IsMulticast()) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot own ", address.ToString(), ": not a unicast address"));
  }
  if (vlan > QS_MAX_VLAN) {
    return absl::InvalidArgumentError(absl::StrCat("cannot own ", address.ToString(),
                                                   " on VLAN ", vlan, ": VLAN ids are 1-",
                                                   QS_MAX_VLAN, ", or 0 for none"));
  }
  qs_addr_key key;
  std::memcpy(key.addr, address.bytes16().data(), sizeof(key.addr));
  qs_addr_value value{.flags = exclusive ? QS_ADDR_EXCLUSIVE : 0u, .vlan = vlan, .pad = 0};
  if (bpf_map_update_elem(addrs_fd_, &key, &value, BPF_ANY) != 0) {
    int error = errno;
    if (error == E2BIG) {
      return absl::ResourceExhaustedError(
          absl::StrCat("cannot own ", address.ToString(), ": ", QS_MAX_ADDRS,
                       " addresses already"));
    }
    return ErrnoStatus(error, absl::StrCat("cannot own ", address.ToString()));
  }
  return absl::OkStatus();
}

absl::Status XdpProgram::AddNeighbor(const net::IpAddress& address, uint16_t vlan) {
  if (address.is_v4() || address.IsMulticast() || address.IsUnspecified()) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot take advertisements about ", address.ToString(),
                     ": not a unicast IPv6 address"));
  }
  if (vlan > QS_MAX_VLAN) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cannot take advertisements on VLAN ", vlan, ": VLAN ids are 1-", QS_MAX_VLAN,
        ", or 0 for none"));
  }
  qs_addr_key key;
  std::memcpy(key.addr, address.bytes16().data(), sizeof(key.addr));
  qs_neighbor_value value{.vlan = vlan, .pad = 0};
  if (bpf_map_update_elem(neighbors_fd_, &key, &value, BPF_ANY) != 0) {
    const int error = errno;
    if (error == E2BIG) {
      return absl::ResourceExhaustedError(
          absl::StrCat("cannot take advertisements about ", address.ToString(), ": ",
                       QS_MAX_NEIGHBORS, " neighbours already"));
    }
    return ErrnoStatus(error, absl::StrCat("cannot take advertisements about ",
                                           address.ToString()));
  }
  return absl::OkStatus();
}

absl::Status XdpProgram::RemoveNeighbor(const net::IpAddress& address) {
  qs_addr_key key;
  std::memcpy(key.addr, address.bytes16().data(), sizeof(key.addr));
  if (bpf_map_delete_elem(neighbors_fd_, &key) != 0) {
    if (errno == ENOENT) {
      return absl::NotFoundError(absl::StrCat(address.ToString(), " is not a neighbour here"));
    }
    return ErrnoStatus(errno, absl::StrCat("cannot forget neighbour ", address.ToString()));
  }
  return absl::OkStatus();
}

absl::Status XdpProgram::RemoveAddress(const net::IpAddress& address) {
  qs_addr_key key;
  std::memcpy(key.addr, address.bytes16().data(), sizeof(key.addr));
  if (bpf_map_delete_elem(addrs_fd_, &key) != 0) {
    if (errno == ENOENT) {
      return absl::NotFoundError(absl::StrCat(address.ToString(), " is not owned"));
    }
    return ErrnoStatus(errno, absl::StrCat("cannot disown ", address.ToString()));
  }
  return absl::OkStatus();
}

namespace {

qs_port_key PortKey(const net::IpAddress& address, uint16_t port) {
  qs_port_key key;
  std::memset(&key, 0, sizeof(key));
  std::memcpy(key.addr, address.bytes16().data(), sizeof(key.addr));
  key.port = htons(port);  // the one place the port meets network order
  return key;
}

std::string PortName(const net::IpAddress& address, uint16_t port) {
  return net::Endpoint{address, port}.ToString();
}

}  // namespace

absl::Status XdpProgram::AddPort(const net::IpAddress& address, uint16_t port) {
  if (port == 0) return absl::InvalidArgumentError("cannot own port 0");
  absl::MutexLock lock(&mu_);
  int& refs = port_refs_[{address.bytes16(), port}];
  if (refs == 0) {
    qs_port_key key = PortKey(address, port);
    qs_port_value value{.flags = 0};
    if (bpf_map_update_elem(ports_fd_, &key, &value, BPF_ANY) != 0) {
      int error = errno;
      port_refs_.erase({address.bytes16(), port});
      if (error == E2BIG) {
        return absl::ResourceExhaustedError(absl::StrCat(
            "cannot own ", PortName(address, port), ": ", QS_MAX_PORTS, " ports already"));
      }
      return ErrnoStatus(error, absl::StrCat("cannot own ", PortName(address, port)));
    }
  }
  ++refs;
  return absl::OkStatus();
}

absl::Status XdpProgram::RemovePort(const net::IpAddress& address, uint16_t port) {
  absl::MutexLock lock(&mu_);
  auto it = port_refs_.find({address.bytes16(), port});
  if (it == port_refs_.end()) {
    return absl::NotFoundError(absl::StrCat(PortName(address, port), " is not owned"));
  }
  if (--it->second > 0) return absl::OkStatus();
  port_refs_.erase(it);
  qs_port_key key = PortKey(address, port);
  if (bpf_map_delete_elem(ports_fd_, &key) != 0) {
    return ErrnoStatus(errno, absl::StrCat("cannot disown ", PortName(address, port)));
  }
  return absl::OkStatus();
}

absl::Status XdpProgram::SetXsk(uint32_t queue, int xsk_fd) {
  if (queue >= QS_MAX_QUEUES) {
    return absl::InvalidArgumentError(
        absl::StrCat("RX queue ", queue, " is beyond the ", QS_MAX_QUEUES, " quadsock serves"));
  }
  uint32_t value = static_cast<uint32_t>(xsk_fd);
  if (bpf_map_update_elem(xsks_fd_, &queue, &value, BPF_ANY) != 0) {
    return ErrnoStatus(errno, absl::StrCat("cannot put AF_XDP socket fd ", xsk_fd,
                                           " on RX queue ", queue,
                                           " (not a bound AF_XDP socket?)"));
  }
  return absl::OkStatus();
}

absl::Status XdpProgram::ClearXsk(uint32_t queue) {
  if (queue >= QS_MAX_QUEUES) {
    return absl::InvalidArgumentError(
        absl::StrCat("RX queue ", queue, " is beyond the ", QS_MAX_QUEUES, " quadsock serves"));
  }
  if (bpf_map_delete_elem(xsks_fd_, &queue) != 0 && errno != ENOENT) {
    return ErrnoStatus(errno, absl::StrCat("cannot clear RX queue ", queue));
  }
  return absl::OkStatus();
}

absl::StatusOr<XdpProgramCounters> XdpProgram::Counters() const {
  int cpus = libbpf_num_possible_cpus();
  if (cpus <= 0) return ErrnoStatus(cpus, "cannot count the possible CPUs");
  std::vector<uint64_t> per_cpu(static_cast<size_t>(cpus));
  uint64_t sums[QS_COUNTER_MAX] = {};
  for (uint32_t index = 0; index < QS_COUNTER_MAX; ++index) {
    if (bpf_map_lookup_elem(counters_fd_, &index, per_cpu.data()) != 0) {
      return ErrnoStatus(errno, absl::StrCat("cannot read counter ", index));
    }
    for (uint64_t v : per_cpu) sums[index] += v;
  }
  return XdpProgramCounters{
      .redirect = sums[QS_COUNTER_REDIRECT],
      .pass_not_owned = sums[QS_COUNTER_PASS_NOT_OWNED],
      .pass_other = sums[QS_COUNTER_PASS_OTHER],
      .malformed = sums[QS_COUNTER_MALFORMED],
      .redirect_no_xsk = sums[QS_COUNTER_REDIRECT_NO_XSK],
      .redirect_udp = sums[QS_COUNTER_REDIRECT_UDP],
      .redirect_icmp = sums[QS_COUNTER_REDIRECT_ICMP],
      .redirect_arp = sums[QS_COUNTER_REDIRECT_ARP],
      .redirect_ns = sums[QS_COUNTER_REDIRECT_NS],
      .redirect_other = sums[QS_COUNTER_REDIRECT_OTHER],
  };
}

}  // namespace quadsock::xdp
