#include "stack/channel/channel.h"

#include <fcntl.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "stack/link/errno_status.h"

namespace quadsock::channel {

absl::StatusOr<std::shared_ptr<Channel>> Channel::Create(const ChannelOptions& o) {
  ChannelHeader h{};
  h.magic = kMagic;
  h.version = kVersion;
  h.rings = o.rings;
  h.slots = o.slots;
  h.buffer_bytes = static_cast<uint32_t>(RoundUp(o.buffer_bytes, kLine));
  h.ring_bytes = RingBytes(h.slots, h.buffer_bytes);
  h.total_bytes = kHeaderBytes + (h.rings + 1) * h.ring_bytes;
  if (absl::Status s = CheckHeader(h, h.total_bytes); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "channel of ", o.rings, " rings of ", o.slots, " slots of ", o.buffer_bytes,
        " bytes: ", s.message()));
  }
  std::shared_ptr<Channel> c(new Channel());
  c->header_ = h;
  c->memfd_ = memfd_create("quadsock-channel", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (c->memfd_ < 0) return link::ErrnoStatus(errno, "memfd_create");
  if (ftruncate(c->memfd_, static_cast<off_t>(h.total_bytes)) != 0) {
    return link::ErrnoStatus(errno, "sizing the channel's memfd");
  }
  // The application maps what we map: it may neither shrink the memfd under our mapping (a
  // SIGBUS in a poll thread) nor grow it.
  if (fcntl(c->memfd_, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    return link::ErrnoStatus(errno, "sealing the channel's memfd");
  }
  void* base = mmap(nullptr, h.total_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, c->memfd_, 0);
  if (base == MAP_FAILED) return link::ErrnoStatus(errno, "mapping the channel");
  c->base_ = static_cast<uint8_t*>(base);
  // On huge pages where the host lets shared memory have them (shmem_enabled "advise"): every
  // datagram writes a slot of a ring that spans thousands of 4-KiB pages, a TLB miss each.
  (void)madvise(base, h.total_bytes, MADV_HUGEPAGE);
  std::memcpy(c->base_, &h, sizeof(h));
  c->producers_ = std::make_unique<Producer[]>(h.rings);
  for (uint32_t r = 0; r < h.rings; ++r) {
    // A pipe, not an eventfd: the application gets the read end, and the write end is ours
    // alone, so its O_NONBLOCK is ours too (an eventfd's flags and counter are shared with the
    // application, which could make our write wait forever).
    int ends[2];
    if (pipe2(ends, O_NONBLOCK | O_CLOEXEC) != 0) {
      return link::ErrnoStatus(errno, "pipe for a channel ring's wake-ups");
    }
    c->event_fds_.push_back(ends[0]);
    c->wake_writers_.push_back(ends[1]);
    // A page (the least a pipe holds): a full pipe is a pending wake-up, never a wait.
    (void)fcntl(ends[1], F_SETPIPE_SZ, static_cast<int>(kWakePipeBytes));
    Producer& p = c->producers_[r];
    p.ring = RingAt(c->base_, h, r);
    p.wake_fd = ends[1];
  }
  const int tx_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (tx_fd < 0) return link::ErrnoStatus(errno, "eventfd for a channel's TX ring");
  c->event_fds_.push_back(tx_fd);
  c->tx_ = RingAt(c->base_, h, h.rings);
  return c;
}

Channel::~Channel() {
  if (base_ != nullptr) munmap(base_, header_.total_bytes);
  for (int fd : event_fds_) close(fd);
  for (int fd : wake_writers_) close(fd);
  if (memfd_ >= 0) close(memfd_);
}

bool Channel::ReadConsumer(uint32_t ring, Producer& p) {
  // Acquire: the application has finished with the slots it gave back.
  const uint32_t consumer = p.ring.control->consumer.load(std::memory_order_acquire);
  // The consumer index moves forward, and never past what we published: anything else is a
  // scribble (unsigned arithmetic: a consumer behind its last value looks like a large move).
  if (consumer - p.consumer > p.published - p.consumer) {
    Break(absl::StrCat("ring ", ring, ": the application's consumer index ", consumer,
                       " is outside [", p.consumer, ", ", p.published, "]"));
    return false;
  }
  p.consumer = consumer;
  return true;
}

void Channel::WriteWakeup(Producer& p, uint32_t epoch) {
  p.woken_epoch = epoch;
  const char one = 1;
  (void)!write(p.wake_fd, &one, 1);  // EAGAIN: the pipe is full, a wake-up is pending
  Bump(p.wakeups);
}

std::optional<OutgoingDatagram> Channel::NextSend(SendTurn& turn) {
  if (broken_.load(std::memory_order_relaxed)) return std::nullopt;
  for (; turn.budget > 0; --turn.budget) {
    // Acquire: the application wrote the slots up to producer before it published them.
    const uint32_t producer = tx_.control->producer.load(std::memory_order_acquire);
    if (producer == tx_next_) return std::nullopt;
    // Never behind what we took, never more than a ring ahead of what we gave back.
    if (producer - tx_released_ > header_.slots ||
        producer - tx_released_ < tx_next_ - tx_released_) {
      Break(absl::StrCat("TX ring: the application's producer index ", producer,
                         " is outside [", tx_next_, ", ", tx_released_ + header_.slots, "]"));
      return std::nullopt;
    }
    // The descriptor is the application's memory: copy it, then check the copy.
    ChannelDescriptor d;
    std::memcpy(&d, &tx_.descriptor(tx_next_), sizeof(d));
    const uint8_t* buffer = tx_.buffer(tx_next_);
    ++tx_next_;
    if (d.length > header_.buffer_bytes) {
      bad_sends_.store(bad_sends_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
      ++turn.refused;
      continue;
    }
    OutgoingDatagram out{d.socket, std::nullopt, {buffer, d.length}, std::nullopt};
    if ((d.flags & kHasPeer) != 0) {
      const net::IpAddress a = net::IpAddress::V6Bytes(d.peer);
      out.peer = net::Endpoint{(d.flags & kIpv4) != 0 ? a.Unmapped() : a, d.peer_port};
    }
    if ((d.flags & kHasLocal) != 0) out.source = net::IpAddress::V6Bytes(d.local).Unmapped();
    sends_.store(sends_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    --turn.budget;
    return out;
  }
  return std::nullopt;
}

void Channel::FinishSends() {
  // Release: we are done with the slots (their payloads are in frames now) before the
  // application may write them again.
  tx_.control->consumer.store(tx_next_, std::memory_order_release);
  tx_released_ = tx_next_;
}

void Channel::DisarmSends() { tx_.control->sleeping.store(0, std::memory_order_relaxed); }

bool Channel::ArmSends() {
  // As the application does on its RX rings (layout.h): `sleeping`, then one more look, both
  // sequentially consistent.
  if (++tx_epoch_ == 0) ++tx_epoch_;  // a new sleep: non-zero
  tx_.control->sleeping.store(tx_epoch_, std::memory_order_seq_cst);
  const bool more = tx_.control->producer.load(std::memory_order_seq_cst) != tx_next_;
  if (more) tx_.control->sleeping.store(0, std::memory_order_relaxed);
  return more;
}

void Channel::Break(std::string reason) {
  std::lock_guard<std::mutex> lock(reason_mu_);
  if (broken_.load()) return;
  reason_ = std::move(reason);
  broken_.store(true, std::memory_order_release);
}

std::string Channel::broken_reason() const {
  std::lock_guard<std::mutex> lock(reason_mu_);
  return reason_;
}

ChannelCounters Channel::counters() const {
  ChannelCounters c;
  for (uint32_t r = 0; r < header_.rings; ++r) {
    const Producer& p = producers_[r];
    c.delivered += p.delivered.load(std::memory_order_relaxed);
    c.ring_full += p.ring_full.load(std::memory_order_relaxed);
    c.wakeups += p.wakeups.load(std::memory_order_relaxed);
    c.publishes += p.publishes.load(std::memory_order_relaxed);
  }
  c.sends = sends_.load(std::memory_order_relaxed);
  c.bad_sends = bad_sends_.load(std::memory_order_relaxed);
  return c;
}

}  // namespace quadsock::channel
