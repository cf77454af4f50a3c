#include "stack/channel/channel.h"

#include <fcntl.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace quadsock::channel {
namespace {

// An address in the descriptor's 16-byte form.
void PutAddress(const net::IpAddress& a, uint8_t (&out)[16]) {
  const net::IpAddress::Bytes b = a.bytes16();
  std::memcpy(out, b.data(), 16);
}

}  // namespace

absl::StatusOr<std::shared_ptr<Channel>> Channel::Create(const ChannelOptions& o) {
  ChannelHeader h{};
  h.magic = kMagic;
  h.version = kVersion;
  h.rings = o.rings;
  h.slots = o.slots;
  h.buffer_bytes = static_cast<uint32_t>(RoundUp(o.buffer_bytes, kLine));
  h.ring_bytes = RingBytes(h.slots, h.buffer_bytes);
  h.total_bytes = kHeaderBytes + h.rings * h.ring_bytes;
  if (absl::Status s = CheckHeader(h, h.total_bytes); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "channel of ", o.rings, " rings of ", o.slots, " slots of ", o.buffer_bytes,
        " bytes: ", s.message()));
  }
  std::shared_ptr<Channel> c(new Channel());
  c->header_ = h;
  c->memfd_ = memfd_create("quadsock-channel", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (c->memfd_ < 0) return absl::ErrnoToStatus(errno, "memfd_create");
  if (ftruncate(c->memfd_, static_cast<off_t>(h.total_bytes)) != 0) {
    return absl::ErrnoToStatus(errno, "sizing the channel's memfd");
  }
  // The application maps what we map: it may neither shrink the memfd under our mapping (a
  // SIGBUS in a poll thread) nor grow it.
  if (fcntl(c->memfd_, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    return absl::ErrnoToStatus(errno, "sealing the channel's memfd");
  }
  void* base = mmap(nullptr, h.total_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, c->memfd_, 0);
  if (base == MAP_FAILED) return absl::ErrnoToStatus(errno, "mapping the channel");
  c->base_ = static_cast<uint8_t*>(base);
  std::memcpy(c->base_, &h, sizeof(h));
  c->producers_ = std::make_unique<Producer[]>(h.rings);
  for (uint32_t r = 0; r < h.rings; ++r) {
    const int fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (fd < 0) return absl::ErrnoToStatus(errno, "eventfd for a channel ring");
    c->event_fds_.push_back(fd);
    Producer& p = c->producers_[r];
    p.ring = RingAt(c->base_, h, r);
    p.event_fd = fd;
  }
  return c;
}

Channel::~Channel() {
  if (base_ != nullptr) munmap(base_, header_.total_bytes);
  for (int fd : event_fds_) close(fd);
  if (memfd_ >= 0) close(memfd_);
}

bool Channel::Push(uint32_t ring, uint32_t socket, const net::Endpoint& source,
                   const net::Endpoint& destination, std::span<const uint8_t> payload,
                   absl::Time arrival, uint64_t sequence) {
  Producer& p = producers_[ring];
  if (broken_.load(std::memory_order_relaxed)) return false;
  // Acquire: the application has finished with the slots it gave back.
  const uint32_t consumer = p.ring.control->consumer.load(std::memory_order_acquire);
  const uint32_t in_use = p.next - consumer;
  // The consumer index moves forward, and never past what we published: anything else is a
  // scribble (unsigned arithmetic: a consumer behind its last value looks like a large use).
  if (in_use > header_.slots || consumer - p.last_consumer > p.next - p.last_consumer) {
    Break(absl::StrCat("ring ", ring, ": the application's consumer index ", consumer,
                       " is outside [", p.last_consumer, ", ", p.next, "]"));
    return false;
  }
  p.last_consumer = consumer;
  if (in_use == header_.slots || payload.size() > header_.buffer_bytes) {
    p.ring_full.store(p.ring_full.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    return false;
  }
  ChannelDescriptor& d = p.ring.descriptor(p.next);
  d.socket = socket;
  d.length = static_cast<uint32_t>(payload.size());
  d.arrival_unix_ns = absl::ToUnixNanos(arrival);
  d.sequence = sequence;
  PutAddress(source.address, d.peer);
  PutAddress(destination.address, d.local);
  d.peer_port = source.port;
  d.local_port = destination.port;
  d.flags = source.address.is_v4() ? kIpv4 : 0;
  std::memcpy(p.ring.buffer(p.next), payload.data(), payload.size());
  ++p.next;
  p.delivered.store(p.delivered.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  if (in_use != 0) {
    // Release: the descriptor and the payload are written before the application sees them.
    // The ring was not empty, so the application is awake or was woken for an earlier one.
    p.ring.control->producer.store(p.next, std::memory_order_release);
  } else {
    // The ring was empty: the application may be going to sleep. Sequentially consistent
    // store and load here, and store of `sleeping` and load of producer on its side: in the
    // single order of the four, either it sees this datagram or we see it sleeping.
    p.ring.control->producer.store(p.next, std::memory_order_seq_cst);
    if (p.ring.control->sleeping.load(std::memory_order_seq_cst) != 0) {
      const uint64_t one = 1;
      (void)!write(p.event_fd, &one, sizeof(one));
      p.wakeups.store(p.wakeups.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    }
  }
  return true;
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
  }
  return c;
}

}  // namespace quadsock::channel
