#include "stack/link/xsk_link.h"

#include <linux/if_xdp.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>
#include <xdp/xsk.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <span>

#include "absl/strings/str_format.h"
#include "stack/link/errno_status.h"

// Debian 12's kernel headers (Linux 6.1) predate AF_XDP multi-buffer (Linux 6.6).
#ifndef XDP_USE_SG
#define XDP_USE_SG (1 << 4)
#endif
#ifndef XDP_PKT_CONTD
#define XDP_PKT_CONTD (1 << 0)
#endif

namespace quadsock::link {
namespace {

// What an AF_XDP socket and its UMEM need, said where a call of theirs fails with EPERM.
constexpr absl::string_view kPrivilegeHint = "(needs root, or CAP_NET_RAW and CAP_BPF)";

bool IsPowerOfTwo(uint32_t v) { return v != 0 && (v & (v - 1)) == 0; }

// Frames a queue keeps back from its fill ring for sending (see XskLink::Refill): two turns'
// answers, or less where the fill ring could not otherwise be kept full.
constexpr uint32_t kTxReserve = 128;

// Large buffers a queue has for jumbo frames (multi_buffer): a receive batch of them held while
// the turn answers and sends another batch's worth.
constexpr uint32_t kLargeBuffers = 160;
// The longest chain a Receive looks for past its batch: the kernel's longest in copy mode
// (MAX_SKB_FRAGS + 1), more than a frame of the largest MTU needs in 4,096-byte frames.
constexpr uint32_t kMaxChain = 18;

}  // namespace

uint32_t MaxMtu(uint32_t frame_size) {
  // The kernel writes a received frame XDP_PACKET_HEADROOM (256) bytes into its chunk; the IP
  // packet follows an Ethernet header and perhaps one VLAN tag.
  constexpr uint32_t kRxHeadroom = 256, kLinkHeader = 14 + 4;
  return frame_size - kRxHeadroom - kLinkHeader;
}

namespace {

// The interface's MAC address and MTU, through a throwaway socket.
absl::Status ReadInterface(const std::string& name, net::MacAddress& mac, uint32_t& mtu) {
  const int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return ErrnoStatus(errno, "socket", kPrivilegeHint);
  ifreq req{};
  std::strncpy(req.ifr_name, name.c_str(), IFNAMSIZ - 1);
  absl::Status status;
  if (ioctl(fd, SIOCGIFHWADDR, &req) != 0) {
    status = ErrnoStatus(errno, "reading the MAC address of " + name, kPrivilegeHint);
  } else {
    mac = net::MacAddress::FromBytes(reinterpret_cast<const uint8_t*>(req.ifr_hwaddr.sa_data));
    if (ioctl(fd, SIOCGIFMTU, &req) != 0) {
      status = ErrnoStatus(errno, "reading the MTU of " + name, kPrivilegeHint);
    } else {
      mtu = static_cast<uint32_t>(req.ifr_mtu);
    }
  }
  close(fd);
  return status;
}

}  // namespace

absl::StatusOr<uint32_t> InterfaceMtu(const std::string& name) {
  net::MacAddress mac;
  uint32_t mtu = 0;
  if (absl::Status s = ReadInterface(name, mac, mtu); !s.ok()) return s;
  return mtu;
}

namespace {

// The UMEM's memory: one mapping of whole 2 MiB units, 2 MiB-aligned and offered to transparent
// huge pages, populated now (the kernel pins it at registration anyway). The poll thread reads
// every frame's headers once, and on 4 KiB pages a UMEM of 4096 frames of 4 KiB is 4096 pages,
// more than the TLB holds (what it saved is in bench/PERFORMANCE.md). Where THP is off, the pages
// are 4 KiB and it still works.
absl::StatusOr<std::span<uint8_t>> MapUmem(size_t bytes) {
  constexpr size_t kHuge = size_t{2} << 20;
  const size_t length = (bytes + kHuge - 1) / kHuge * kHuge;
  void* raw = mmap(nullptr, length + kHuge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                   -1, 0);
  if (raw == MAP_FAILED) return ErrnoStatus(errno, "allocating the UMEM", kPrivilegeHint);
  // Keep the aligned middle; give back the slack on either side.
  const uintptr_t start = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t aligned = (start + kHuge - 1) & ~(kHuge - 1);
  const uintptr_t end = start + length + kHuge;
  if (aligned > start) munmap(raw, aligned - start);
  if (end > aligned + length) {
    munmap(reinterpret_cast<void*>(aligned + length), end - aligned - length);
  }
  auto* area = reinterpret_cast<uint8_t*>(aligned);
  (void)madvise(area, length, MADV_HUGEPAGE);  // fails only where THP is not built in
  if (madvise(area, length, MADV_POPULATE_WRITE) != 0) std::memset(area, 0, length);
  return std::span<uint8_t>(area, length);
}

}  // namespace

absl::Status UmemRegistrationError(int err, size_t umem_bytes) {
  const std::string what = absl::StrFormat("registering the UMEM (%u MiB)", umem_bytes >> 20);
  if (err != ENOBUFS && err != EPERM) return ErrnoStatus(err, what, kPrivilegeHint);
  std::string limit;
  if (rlimit l; getrlimit(RLIMIT_MEMLOCK, &l) == 0 && l.rlim_cur != RLIM_INFINITY) {
    limit = absl::StrFormat(", RLIMIT_MEMLOCK is %u KiB", l.rlim_cur >> 10);
  }
  // RESOURCE_EXHAUSTED for ENOBUFS, PERMISSION_DENIED for EPERM, and a message that says why.
  const absl::Status status = ErrnoStatus(err, what);
  std::string message = absl::StrFormat(
      "%s: it is locked memory%s: raise RLIMIT_MEMLOCK (ulimit -l) or grant CAP_IPC_LOCK",
      status.message(), limit);
  if (err == EPERM) message += " (and it needs CAP_NET_RAW)";
  return absl::Status(status.code(), message);
}

absl::StatusOr<std::unique_ptr<XskPort>> XskPort::Create(const Options& options) {
  if (options.frame_size != 2048 && options.frame_size != 4096) {
    return absl::InvalidArgumentError(
        absl::StrFormat("UMEM frame size %u: must be 2048 or 4096", options.frame_size));
  }
  if (!IsPowerOfTwo(options.ring_size) || options.ring_size < 64) {
    return absl::InvalidArgumentError(
        absl::StrFormat("ring size %u: must be a power of two, at least 64", options.ring_size));
  }
  if (options.queues == 0 || options.frames / options.queues < 2 * options.ring_size) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%u UMEM frames over %u queues: each queue needs at least twice the ring size (%u)",
        options.frames, options.queues, 2 * options.ring_size));
  }
  std::unique_ptr<XskPort> port(new XskPort());
  port->options_ = options;
  port->ifindex_ = if_nametoindex(options.interface.c_str());
  if (port->ifindex_ == 0) {
    return absl::FailedPreconditionError(
        absl::StrFormat("no such interface: \"%s\"", options.interface));
  }
  if (absl::Status s = ReadInterface(options.interface, port->mac_, port->mtu_); !s.ok()) {
    return s;
  }
  const size_t umem_bytes = size_t{options.frames} * options.frame_size;
  absl::StatusOr<std::span<uint8_t>> mapping = MapUmem(umem_bytes);
  if (!mapping.ok()) return mapping.status();
  port->area_ = mapping->data();
  port->area_size_ = mapping->size();
  void* area = port->area_;
  port->umem_fill_ = std::make_unique<xsk_ring_prod>();
  port->umem_comp_ = std::make_unique<xsk_ring_cons>();
  xsk_umem_config config{};
  config.fill_size = options.ring_size;
  config.comp_size = options.ring_size;
  config.frame_size = options.frame_size;
  config.frame_headroom = 0;
  const int err = xsk_umem__create(&port->umem_, area, umem_bytes, port->umem_fill_.get(),
                                   port->umem_comp_.get(), &config);
  if (err != 0) return UmemRegistrationError(-err, umem_bytes);
  port->queue_open_.assign(options.queues, false);
  return port;
}

XskPort::~XskPort() {
  if (umem_ != nullptr) xsk_umem__delete(umem_);
  if (area_ != nullptr) munmap(area_, area_size_);
}

absl::StatusOr<std::unique_ptr<XskLink>> XskPort::OpenQueue(uint32_t queue) {
  if (queue >= options_.queues) {
    return absl::InvalidArgumentError(
        absl::StrFormat("queue %u: the port was made for %u queues", queue, options_.queues));
  }
  if (queue_open_[queue]) {
    return absl::AlreadyExistsError(absl::StrFormat("queue %u is already open", queue));
  }
  std::unique_ptr<XskLink> link(new XskLink());
  link->port_ = this;
  link->rx_ = std::make_unique<xsk_ring_cons>();
  link->tx_ = std::make_unique<xsk_ring_prod>();
  if (!umem_rings_used_) {
    link->fill_ = umem_fill_.get();
    link->comp_ = umem_comp_.get();
  } else {
    link->own_fill_ = std::make_unique<xsk_ring_prod>();
    link->own_comp_ = std::make_unique<xsk_ring_cons>();
    link->fill_ = link->own_fill_.get();
    link->comp_ = link->own_comp_.get();
  }

  xsk_socket_config config{};
  config.rx_size = options_.ring_size;
  config.tx_size = options_.ring_size;
  config.libxdp_flags = XSK_LIBXDP_FLAGS__INHIBIT_PROG_LOAD;
  std::vector<uint16_t> attempts;
  switch (options_.bind_mode) {
    case XskBindMode::kAuto:
      attempts = {XDP_ZEROCOPY, XDP_COPY};
      break;
    case XskBindMode::kZeroCopy:
      attempts = {XDP_ZEROCOPY};
      break;
    case XskBindMode::kCopy:
      attempts = {XDP_COPY};
      break;
  }
  // The bind flags are the first queue's only: a socket that shares the UMEM with another
  // queue's is bound with XDP_SHARED_UMEM alone (libxdp sends no others, the kernel takes none)
  // and gets the mode of the UMEM's first socket. So the mode is read back below, never assumed.
  int err = 0;
  const uint16_t chains = options_.multi_buffer ? XDP_USE_SG : 0;
  for (uint16_t flag : attempts) {
    config.bind_flags = static_cast<uint16_t>(flag | XDP_USE_NEED_WAKEUP | chains);
    err = xsk_socket__create_shared(&link->xsk_, options_.interface.c_str(), queue, umem_,
                                    link->rx_.get(), link->tx_.get(), link->fill_, link->comp_,
                                    &config);
    if (err == 0) break;
  }
  if (err == -EOPNOTSUPP && options_.bind_mode == XskBindMode::kZeroCopy) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "%s queue %u: zero-copy was asked for, and the driver has none there (binding the "
        "AF_XDP socket: EOPNOTSUPP); auto or copy mode would run",
        options_.interface, queue));
  }
  if (err != 0 && options_.multi_buffer && (err == -EINVAL || err == -EOPNOTSUPP)) {
    return ErrnoStatus(err, absl::StrFormat(
        "binding an AF_XDP socket with multi-buffer (XDP_USE_SG, for the MTU of %u) to %s "
        "queue %u: the kernel (before 6.6) or the driver cannot chain frames; lower the MTU "
        "(ip link set %s mtu %u)",
        mtu_, options_.interface, queue, options_.interface, MaxMtu(options_.frame_size)));
  }
  if (err != 0) {
    return ErrnoStatus(err,
                       absl::StrFormat("binding an AF_XDP socket to %s queue %u",
                                       options_.interface, queue),
                       kPrivilegeHint);
  }
  umem_rings_used_ = true;
  queue_open_[queue] = true;
  link->info_.queue = queue;
  link->holds_queue_ = true;
  link->fd_ = xsk_socket__fd(link->xsk_);
  xdp_options bound{};
  socklen_t bound_len = sizeof(bound);
  if (getsockopt(link->fd_, SOL_XDP, XDP_OPTIONS, &bound, &bound_len) != 0) {
    return ErrnoStatus(errno, absl::StrFormat("reading the bind mode of %s queue %u",
                                              options_.interface, queue));
  }
  const bool zero_copy = (bound.flags & XDP_OPTIONS_ZEROCOPY) != 0;
  link->info_.mode = zero_copy ? "zerocopy" : "copy";
  if (options_.bind_mode == XskBindMode::kZeroCopy && !zero_copy) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "%s queue %u: zero-copy was asked for, but the kernel bound the AF_XDP socket in copy "
        "mode (the driver has no zero-copy there); auto or copy mode would run",
        options_.interface, queue));
  }
  if (options_.busy_poll) {
    int one = 1, usecs = 20, budget = 64;
    if (setsockopt(link->fd_, SOL_SOCKET, SO_PREFER_BUSY_POLL, &one, sizeof(one)) != 0 ||
        setsockopt(link->fd_, SOL_SOCKET, SO_BUSY_POLL, &usecs, sizeof(usecs)) != 0 ||
        setsockopt(link->fd_, SOL_SOCKET, SO_BUSY_POLL_BUDGET, &budget, sizeof(budget)) != 0) {
      return ErrnoStatus(errno, "enabling busy polling", kPrivilegeHint);
    }
    link->busy_poll_ = true;
  }

  link->info_.name = options_.interface;
  link->info_.ifindex = ifindex_;
  link->info_.mac = mac_;
  // Without multi-buffer a received frame must fit its chunk after the kernel's headroom; a
  // larger interface MTU is cut to what fits, so that the stack never sends what it could not
  // receive.
  link->multi_buffer_ = options_.multi_buffer;
  link->info_.mtu = link->multi_buffer_ ? mtu_ : std::min(mtu_, MaxMtu(options_.frame_size));
  if (link->multi_buffer_) {
    // A frame of the MTU with its Ethernet header and a VLAN tag, in whole cache lines.
    link->large_size_ = (mtu_ + 14 + 4 + 63) & ~uint32_t{63};
    link->large_area_.resize(size_t{kLargeBuffers} * link->large_size_);
    link->large_ledger_ = FrameLedger(kLargeBuffers);
    for (uint32_t i = kLargeBuffers; i > 0; --i) link->large_free_.push_back(i - 1);
  }
  link->area_ = static_cast<uint8_t*>(area_);
  link->frame_size_ = options_.frame_size;
  const uint32_t per_queue = options_.frames / options_.queues;
  link->first_addr_ = uint64_t{queue} * per_queue * options_.frame_size;
  link->ledger_ = FrameLedger(per_queue);
  link->tx_reserve_ = std::min(kTxReserve, per_queue - options_.ring_size);
  link->free_.reserve(per_queue);
  for (uint32_t i = per_queue; i > 0; --i) {
    link->free_.push_back(link->first_addr_ + uint64_t{i - 1} * options_.frame_size);
  }
  link->Refill();
  return link;
}

XskLink::~XskLink() {
  if (xsk_ != nullptr) xsk_socket__delete(xsk_);
  // Only a link that opened its queue gives it back: one that failed to bind leaves the
  // queue to whichever link holds it.
  if (port_ != nullptr && holds_queue_) port_->queue_open_[info_.queue] = false;
}

uint64_t XskLink::ChunkOf(uint64_t addr) const {
  // The UMEM is in aligned mode (frame_size a power of two): a descriptor's address is its
  // chunk's plus where in the chunk the data starts (XDP_PACKET_HEADROOM for received frames).
  return addr & ~uint64_t{frame_size_ - 1};
}

uint32_t XskLink::IndexOf(uint64_t addr) const {
  return static_cast<uint32_t>((ChunkOf(addr) - first_addr_) / frame_size_);
}

FrameBuffer XskLink::Buffer(uint64_t addr, uint32_t length) const {
  const uint32_t offset = static_cast<uint32_t>(addr - ChunkOf(addr));
  return FrameBuffer{area_ + addr, length, frame_size_ - offset, addr};
}

void XskLink::Refill() {
  // Frames kept back for sending: a turn answers what it received (ARP, echo, port
  // unreachable) before it releases those frames, and under a flood the fill and RX rings
  // would otherwise hold every frame.
  if (free_.size() <= tx_reserve_) return;
  const uint32_t spare = static_cast<uint32_t>(free_.size() - tx_reserve_);
  uint32_t idx = 0;
  // Reserve only what the fill ring has room for (xsk_ring_prod__reserve is all-or-nothing;
  // xsk_prod_nb_free may say more than it was asked about).
  const uint32_t want = std::min(spare, xsk_prod_nb_free(fill_, spare));
  if (want == 0 || xsk_ring_prod__reserve(fill_, want, &idx) != want) return;
  for (uint32_t i = 0; i < want; ++i) {
    const uint64_t addr = free_.back();
    free_.pop_back();
    ledger_.Move(IndexOf(addr), FramePlace::kFree, FramePlace::kKernelRx);
    *xsk_ring_prod__fill_addr(fill_, idx + i) = addr;
  }
  // Submit publishes the entries with a release barrier: the kernel sees the addresses first.
  xsk_ring_prod__submit(fill_, want);
  if (xsk_ring_prod__needs_wakeup(fill_)) {
    // The kernel sleeps until told the fill ring has buffers (need_wakeup, copy mode).
    counters_.Add(&LinkCounters::wakeups);
    recvfrom(fd_, nullptr, 0, MSG_DONTWAIT, nullptr, nullptr);
  }
}

void XskLink::BusyPoll() {
  // A non-blocking recvfrom on an AF_XDP socket with SO_BUSY_POLL runs the NAPI of the queue it
  // is bound to (sk_busy_loop) here, filling the RX ring; with SO_PREFER_BUSY_POLL the kernel
  // keeps the queue's notifications off for gro_flush_timeout afterwards, so the next call
  // finds the work still ours.
  counters_.Add(&LinkCounters::busy_polls);
  recvfrom(fd_, nullptr, 0, MSG_DONTWAIT, nullptr, nullptr);
}

size_t XskLink::Receive(std::span<FrameBuffer> out) {
  if (busy_poll_) BusyPoll();
  // We are the ring's only consumer: what the kernel produced past our index is waiting. (A
  // relaxed load: only the count is used; peek's acquire orders the descriptors it reads.)
  counters_.Set(&LinkCounters::rx_ring_fill,
                __atomic_load_n(rx_->producer, __ATOMIC_RELAXED) - rx_->cached_cons);
  // A chain takes several descriptors: look past the batch by the longest one.
  const uint32_t want = static_cast<uint32_t>(out.size()) + (multi_buffer_ ? kMaxChain : 0);
  uint32_t idx = 0;
  // Peek has an acquire barrier: descriptors are read only after the producer index.
  const uint32_t n = xsk_ring_cons__peek(rx_.get(), want, &idx);
  uint32_t used = 0;  // descriptors taken
  size_t frames = 0;
  while (used < n && frames < out.size()) {
    const xdp_desc* d = xsk_ring_cons__rx_desc(rx_.get(), idx + used);
    const bool continued = (d->options & XDP_PKT_CONTD) != 0;
    if (dropping_chain_) {  // the rest of a chain too long to take
      ReturnChunk(d->addr);
      dropping_chain_ = continued;
      ++used;
      continue;
    }
    if (!continued) {
      ledger_.Move(IndexOf(d->addr), FramePlace::kKernelRx, FramePlace::kHeld);
      out[frames] = Buffer(d->addr, d->len);
      __builtin_prefetch(out[frames].data);  // the caller reads every frame's headers next
      ++frames;
      ++used;
      continue;
    }
    uint32_t last = used + 1;  // the chain ends with the first descriptor without CONTD
    while (last < n &&
           (xsk_ring_cons__rx_desc(rx_.get(), idx + last)->options & XDP_PKT_CONTD) != 0) {
      ++last;
    }
    if (last == n) {
      // The kernel publishes a chain whole: its rest is past this look, and the next Receive
      // starts with it. Unless the chain filled the whole look: no frame of our MTU is that
      // long, and it goes.
      if (used > 0 || n < want) break;
      counters_.Add(&LinkCounters::rx_chains_dropped);
      dropping_chain_ = true;
      continue;
    }
    if (std::optional<FrameBuffer> f = Gather(idx + used, last - used + 1); f.has_value()) {
      out[frames++] = *f;
    }
    used = last + 1;
  }
  if (used < n) xsk_ring_cons__cancel(rx_.get(), n - used);
  if (used > 0) xsk_ring_cons__release(rx_.get(), used);
  if (busy_poll_ && frames > 0 && counters_.Get(&LinkCounters::rx_frames) == 0 &&
      napi_id() == 0) {
    busy_poll_ = false;  // nothing to poll: each recvfrom would be a wasted system call
    counters_.Set(&LinkCounters::busy_poll_unavailable, 1);
  }
  counters_.Add(&LinkCounters::rx_frames, frames);
  return frames;
}

void XskLink::ReturnChunk(uint64_t addr) {
  const uint64_t chunk = ChunkOf(addr);
  ledger_.Move(IndexOf(chunk), FramePlace::kKernelRx, FramePlace::kFree);
  free_.push_back(chunk);
}

std::optional<FrameBuffer> XskLink::Gather(uint32_t idx, uint32_t count) {
  uint32_t total = 0;
  for (uint32_t i = 0; i < count; ++i) total += xsk_ring_cons__rx_desc(rx_.get(), idx + i)->len;
  std::optional<FrameBuffer> large = total <= large_size_ ? TakeLarge() : std::nullopt;
  for (uint32_t i = 0; i < count; ++i) {
    const xdp_desc* d = xsk_ring_cons__rx_desc(rx_.get(), idx + i);
    if (large.has_value()) {
      std::memcpy(large->data + large->length, area_ + d->addr, d->len);
      large->length += d->len;
    }
    ReturnChunk(d->addr);
  }
  counters_.Add(large.has_value() ? &LinkCounters::rx_chained : &LinkCounters::rx_chains_dropped);
  return large;
}

std::optional<FrameBuffer> XskLink::TakeLarge() {
  if (large_free_.empty()) return std::nullopt;
  const uint32_t i = large_free_.back();
  large_free_.pop_back();
  large_ledger_.Move(i, FramePlace::kFree, FramePlace::kHeld);
  return FrameBuffer{large_area_.data() + size_t{i} * large_size_, 0, large_size_,
                     kLargeHandle | i};
}

void XskLink::ReleaseLarge(uint64_t handle) {
  const auto i = static_cast<uint32_t>(handle & ~kLargeHandle);
  large_ledger_.Move(i, FramePlace::kHeld, FramePlace::kFree);
  large_free_.push_back(i);
}

void XskLink::Release(std::span<const FrameBuffer> frames) {
  for (const FrameBuffer& f : frames) {
    if (IsLarge(f.handle)) {
      ReleaseLarge(f.handle);
      continue;
    }
    // Back to the chunk's start: a frame sent from it next has the whole chunk.
    const uint64_t chunk = ChunkOf(f.handle);
    ledger_.Move(IndexOf(chunk), FramePlace::kHeld, FramePlace::kFree);
    free_.push_back(chunk);
  }
}

std::optional<FrameBuffer> XskLink::AllocateTx(uint32_t length) {
  if (length > frame_size_) {  // a jumbo frame: built in a large buffer, chained at Transmit
    std::optional<FrameBuffer> large =
        multi_buffer_ && length <= large_size_ ? TakeLarge() : std::nullopt;
    if (!large.has_value()) counters_.Add(&LinkCounters::no_tx_buffer);
    return large;
  }
  if (free_.empty()) {
    ReapCompletions();
    // A turn that sends more than the free frames (a burst of queued sends) has the rest in
    // the TX ring, unkicked: in copy mode the kernel sends, and gives back, a frame only when
    // kicked, so kick now rather than drop what the turn still has to send.
    if (free_.empty() && tx_pending_kick_ > 0) {
      Kick();
      ReapCompletions();
    }
    if (free_.empty()) {
      counters_.Add(&LinkCounters::no_tx_buffer);
      return std::nullopt;
    }
  }
  const uint64_t addr = free_.back();
  free_.pop_back();
  ledger_.Move(IndexOf(addr), FramePlace::kFree, FramePlace::kHeld);
  return Buffer(addr, 0);
}

size_t XskLink::Transmit(std::span<const FrameBuffer> frames) {
  if (std::none_of(frames.begin(), frames.end(),
                   [this](const FrameBuffer& f) { return IsLarge(f.handle); })) {
    return TransmitFrames(frames);
  }
  size_t taken = 0;
  uint32_t descriptors = 0;
  for (const FrameBuffer& f : frames) {
    const bool large = IsLarge(f.handle);
    // A large buffer goes as a chain of UMEM frames (one, if it is short enough).
    const uint32_t chunks =
        large ? std::max<uint32_t>(1, (f.length + frame_size_ - 1) / frame_size_) : 1;
    if (xsk_prod_nb_free(tx_.get(), chunks) < chunks) {
      counters_.Add(&LinkCounters::tx_ring_full);
      break;
    }
    if (large && free_.size() < chunks) ReapCompletions();
    if (large && free_.size() < chunks) {
      counters_.Add(&LinkCounters::no_tx_buffer);
      break;
    }
    uint32_t idx = 0;
    if (xsk_ring_prod__reserve(tx_.get(), chunks, &idx) != chunks) break;  // nb_free said room
    if (large) {
      Scatter(f, idx, chunks);
    } else {
      PutTxDescriptor(f, idx);
    }
    descriptors += chunks;
    ++taken;
  }
  if (descriptors > 0) xsk_ring_prod__submit(tx_.get(), descriptors);
  tx_pending_kick_ += descriptors;
  counters_.Add(&LinkCounters::tx_frames, taken);
  return taken;
}

size_t XskLink::TransmitFrames(std::span<const FrameBuffer> frames) {
  const auto want = static_cast<uint32_t>(frames.size());
  uint32_t n = std::min(xsk_prod_nb_free(tx_.get(), want), want);
  if (n < want) counters_.Add(&LinkCounters::tx_ring_full);
  uint32_t idx = 0;
  if (n > 0 && xsk_ring_prod__reserve(tx_.get(), n, &idx) != n) n = 0;  // nb_free said room
  for (uint32_t i = 0; i < n; ++i) PutTxDescriptor(frames[i], idx + i);
  if (n > 0) xsk_ring_prod__submit(tx_.get(), n);
  tx_pending_kick_ += n;
  counters_.Add(&LinkCounters::tx_frames, n);
  return n;
}

void XskLink::PutTxDescriptor(const FrameBuffer& frame, uint32_t idx) {
  xdp_desc* d = xsk_ring_prod__tx_desc(tx_.get(), idx);
  d->addr = frame.handle;
  d->len = frame.length;
  d->options = 0;
  ledger_.Move(IndexOf(frame.handle), FramePlace::kHeld, FramePlace::kKernelTx);
}

void XskLink::Scatter(const FrameBuffer& frame, uint32_t idx, uint32_t chunks) {
  for (uint32_t i = 0; i < chunks; ++i) {
    const uint64_t addr = free_.back();
    free_.pop_back();
    ledger_.Move(IndexOf(addr), FramePlace::kFree, FramePlace::kKernelTx);
    const uint32_t offset = i * frame_size_;
    const uint32_t length = std::min(frame_size_, frame.length - offset);
    std::memcpy(area_ + addr, frame.data + offset, length);
    xdp_desc* d = xsk_ring_prod__tx_desc(tx_.get(), idx + i);
    d->addr = addr;
    d->len = length;
    d->options = i + 1 < chunks ? XDP_PKT_CONTD : 0;
  }
  if (chunks > 1) counters_.Add(&LinkCounters::tx_chained);
  ReleaseLarge(frame.handle);
}

void XskLink::ReapCompletions() {
  uint32_t idx = 0;
  const uint32_t n = xsk_ring_cons__peek(comp_, frame_size_ /* any bound */, &idx);
  for (uint32_t i = 0; i < n; ++i) {
    const uint64_t addr = ChunkOf(*xsk_ring_cons__comp_addr(comp_, idx + i));
    ledger_.Move(IndexOf(addr), FramePlace::kKernelTx, FramePlace::kFree);
    free_.push_back(addr);
  }
  if (n > 0) xsk_ring_cons__release(comp_, n);
}

void XskLink::Kick() {
  if (tx_pending_kick_ == 0) return;
  // In copy mode the kernel transmits only when asked; with need_wakeup it says when it must be.
  if (!xsk_ring_prod__needs_wakeup(tx_.get())) {
    tx_pending_kick_ = 0;
    return;
  }
  // A copy-mode sendto sends at most 32 frames (the kernel's TX_BATCH_SIZE) and says EAGAIN
  // while more wait; left there, they would wait for the next frame queued or for this thread
  // to go idle (a poll() also drives transmission), and under receive load it never does. So:
  // kick until the ring is drained, at most a ring's worth of times in a turn.
  const uint32_t most = tx_->size / 32 + 1;
  for (uint32_t i = 0; i < most; ++i) {
    counters_.Add(&LinkCounters::wakeups);
    if (sendto(fd_, nullptr, 0, MSG_DONTWAIT, nullptr, 0) >= 0 || IsTxRingDrained()) {
      tx_pending_kick_ = 0;
      return;
    }
    if (errno == ENOBUFS || errno == ENETDOWN) {
      counters_.Add(&LinkCounters::tx_kicks_failed);
      tx_pending_kick_ = 0;  // as the kernel's own sockets: the frames wait for the next kick
      return;
    }
    if (errno != EAGAIN) return;  // EBUSY (another sender in the socket) and others: next turn
  }
}

bool XskLink::IsTxRingDrained() {
  return xsk_prod_nb_free(tx_.get(), tx_->size) == tx_->size;
}

void XskLink::Poll() {
  Kick();
  ReapCompletions();
  Refill();
}

absl::Status XskLink::CheckFrameAccounting() const {
  if (ledger_.count(FramePlace::kFree) != free_.size()) {
    return absl::InternalError(absl::StrFormat("%s/%u: %u frames marked free, %u in the pool",
                                               info_.name, info_.queue,
                                               ledger_.count(FramePlace::kFree), free_.size()));
  }
  // Frames the kernel holds for receiving are on the fill ring or the RX ring, and frames it
  // holds for sending are on the TX ring or the completion ring. Exact when the link is idle;
  // under traffic the kernel may hold a few between two rings.
  const uint32_t fill = fill_->size - xsk_prod_nb_free(fill_, fill_->size);
  const uint32_t rx = *rx_->producer - *rx_->consumer;
  const uint32_t tx = tx_->size - xsk_prod_nb_free(tx_.get(), tx_->size);
  const uint32_t comp = *comp_->producer - *comp_->consumer;
  if (ledger_.count(FramePlace::kKernelRx) != fill + rx ||
      ledger_.count(FramePlace::kKernelTx) != tx + comp) {
    return absl::InternalError(absl::StrFormat(
        "%s/%u: ledger has %u frames with the kernel for RX and %u for TX; the rings hold "
        "%u (fill %u + rx %u) and %u (tx %u + completion %u)",
        info_.name, info_.queue, ledger_.count(FramePlace::kKernelRx),
        ledger_.count(FramePlace::kKernelTx), fill + rx, fill, rx, tx + comp, tx, comp));
  }
  if (ledger_.count(FramePlace::kHeld) != 0) {
    return absl::InternalError(absl::StrFormat(
        "%s/%u: %u frames held at rest (taken by Receive or AllocateTx and never released or "
        "transmitted), frame %u first", info_.name, info_.queue, ledger_.count(FramePlace::kHeld),
        ledger_.First(FramePlace::kHeld)));
  }
  if (large_ledger_.count(FramePlace::kFree) != large_free_.size() ||
      large_ledger_.count(FramePlace::kHeld) != 0) {
    return absl::InternalError(absl::StrFormat(
        "%s/%u: %u large buffers held at rest, %u marked free, %u in the pool", info_.name,
        info_.queue, large_ledger_.count(FramePlace::kHeld),
        large_ledger_.count(FramePlace::kFree), large_free_.size()));
  }
  return absl::OkStatus();
}

uint32_t XskLink::napi_id() const {
  unsigned int id = 0;
  socklen_t len = sizeof(id);
  if (getsockopt(fd_, SOL_SOCKET, SO_INCOMING_NAPI_ID, &id, &len) != 0) return 0;
  return id;
}

LinkCounters XskLink::counters() const {
  LinkCounters c = counters_.Snapshot();
  xdp_statistics stats{};
  socklen_t len = sizeof(stats);
  if (getsockopt(fd_, SOL_XDP, XDP_STATISTICS, &stats, &len) == 0) {
    c.rx_dropped = stats.rx_dropped + stats.rx_ring_full;
    c.fill_ring_empty = stats.rx_fill_ring_empty_descs;
  }
  return c;
}

}  // namespace quadsock::link
