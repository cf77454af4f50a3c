#include "stack/channel/reader.h"

#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "stack/link/errno_status.h"

namespace quadsock::channel {
namespace {

// A descriptor's address (16 bytes, IPv4 v4-mapped) written in place: built as a temporary and
// copied, it was read back in one wide load over the narrower stores that had just written it,
// which store forwarding cannot serve.
void ReadAddress(const uint8_t (&bytes)[16], bool v4, net::IpAddress& out) {
  if (v4) {
    out.AssignV4Bytes(bytes + 12);
  } else {
    out.AssignV6Bytes(bytes);
  }
}

}  // namespace

void ViewOf(const ChannelDescriptor& d, std::span<const uint8_t> payload, ReceivedView& v) {
  const bool v4 = (d.flags & kIpv4) != 0;
  v.socket = d.socket;
  ReadAddress(d.peer, v4, v.peer.address);
  v.peer.port = d.peer_port;
  ReadAddress(d.local, v4, v.local.address);
  v.local.port = d.local_port;
  v.arrival = absl::FromUnixNanos(d.arrival_unix_ns);
  v.sequence = d.sequence;
  v.payload = payload;
}

absl::StatusOr<ChannelReader> ChannelReader::Map(int memfd, std::vector<int> event_fds) {
  ChannelReader r;
  r.memfd_ = memfd;
  r.event_fds_ = std::move(event_fds);
  struct stat st;
  if (fstat(memfd, &st) != 0) return link::ErrnoStatus(errno, "fstat of the channel's memfd");
  const size_t size = static_cast<size_t>(st.st_size);
  if (size < kHeaderBytes) return absl::FailedPreconditionError("the channel's memfd is too small");
  void* base = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
  if (base == MAP_FAILED) return link::ErrnoStatus(errno, "mapping the channel");
  r.base_ = static_cast<uint8_t*>(base);
  (void)madvise(base, size, MADV_HUGEPAGE);  // as quadsockd maps it (channel.cc)
  r.header_.total_bytes = size;  // what Close unmaps, until the header is read
  ChannelHeader h;
  std::memcpy(&h, r.base_, sizeof(h));
  if (absl::Status s = CheckHeader(h, size); !s.ok()) return s;
  r.header_ = h;
  r.header_.total_bytes = size;
  if (r.event_fds_.size() != h.rings + 1) {
    return absl::InvalidArgumentError(absl::StrCat("the channel has ", h.rings, " RX rings and ",
                                                   r.event_fds_.size(), " eventfds"));
  }
  r.tx_ = RingAt(r.base_, h, h.rings);
  r.tx_next_ = r.tx_.control->producer.load(std::memory_order_relaxed);
  r.tx_event_fd_ = r.event_fds_.back();
  r.epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  if (r.epoll_fd_ < 0) return link::ErrnoStatus(errno, "epoll_create1");
  for (uint32_t i = 0; i < h.rings; ++i) {
    r.rings_.push_back(RingAt(r.base_, h, i));
    r.taken_.push_back(r.rings_.back().control->consumer.load(std::memory_order_relaxed));
    epoll_event e{};
    e.events = EPOLLIN;
    e.data.u32 = i;
    if (epoll_ctl(r.epoll_fd_, EPOLL_CTL_ADD, r.event_fds_[i], &e) != 0) {
      return link::ErrnoStatus(errno, "adding a channel eventfd to epoll");
    }
  }
  return r;
}

ChannelReader::ChannelReader(ChannelReader&& other) noexcept { *this = std::move(other); }

ChannelReader& ChannelReader::operator=(ChannelReader&& other) noexcept {
  if (this == &other) return *this;
  Close();
  header_ = other.header_;
  base_ = std::exchange(other.base_, nullptr);
  memfd_ = std::exchange(other.memfd_, -1);
  epoll_fd_ = std::exchange(other.epoll_fd_, -1);
  event_fds_ = std::move(other.event_fds_);
  rings_ = std::move(other.rings_);
  taken_ = std::move(other.taken_);
  tx_ = other.tx_;
  tx_next_ = other.tx_next_;
  tx_event_fd_ = std::exchange(other.tx_event_fd_, -1);
  tx_woken_epoch_ = other.tx_woken_epoch_;
  sleep_epoch_ = other.sleep_epoch_;
  next_ring_ = other.next_ring_;
  other.event_fds_.clear();
  return *this;
}

ChannelReader::~ChannelReader() { Close(); }

void ChannelReader::Close() {
  if (base_ != nullptr) munmap(base_, header_.total_bytes);
  base_ = nullptr;
  for (int fd : event_fds_) close(fd);
  event_fds_.clear();
  if (epoll_fd_ >= 0) close(epoll_fd_);
  if (memfd_ >= 0) close(memfd_);
  epoll_fd_ = memfd_ = -1;
}

template <typename Sink>
size_t ChannelReader::Take(size_t max, Sink&& sink) {
  size_t n = 0;
  for (uint32_t k = 0; k < rings_.size() && n < max; ++k) {
    const uint32_t r = (next_ring_ + k) % rings_.size();
    const RingView& ring = rings_[r];
    // Acquire, and more: the slots up to producer are written, and (sequentially consistent)
    // this load is ordered after our store of `sleeping` in Receive (layout.h).
    const uint32_t producer = ring.control->producer.load(std::memory_order_seq_cst);
    if (producer - taken_[r] > ring.mask + 1) continue;  // not quadsockd's: never trust it
    for (; taken_[r] != producer && n < max; ++taken_[r], ++n) {
      const ChannelDescriptor& d = ring.descriptor(taken_[r]);
      sink(d, std::span<const uint8_t>(ring.buffer(taken_[r]),
                                       std::min<uint32_t>(d.length, ring.buffer_bytes)));
    }
  }
  next_ring_ = (next_ring_ + 1) % rings_.size();
  return n;
}

bool ChannelReader::Waiting() const {
  for (size_t r = 0; r < rings_.size(); ++r) {
    const uint32_t producer = rings_[r].control->producer.load(std::memory_order_acquire);
    if (producer != taken_[r] && producer - taken_[r] <= rings_[r].mask + 1) return true;
  }
  return false;
}

size_t ChannelReader::Take(std::span<ReceivedView> out) {
  ReceivedView* next = out.data();
  return Take(out.size(), [&next](const ChannelDescriptor& d, std::span<const uint8_t> payload) {
    ViewOf(d, payload, *next++);
  });
}

size_t ChannelReader::Receive(std::span<ReceivedView> out, absl::Duration timeout) {
  size_t n = Take(out);
  if (n > 0 || timeout <= absl::ZeroDuration()) return n;
  // Going to sleep: say so in every ring, then look once more. Both sequentially consistent,
  // as the producer's store of producer and load of `sleeping`: either it sees `sleeping`, or
  // we see its datagram.
  Arm();
  n = Take(out);
  if (n == 0) {
    epoll_event events[kMaxRings];
    const int ready = epoll_wait(epoll_fd_, events, kMaxRings,
                                 static_cast<int>(absl::ToInt64Milliseconds(timeout)));
    for (int i = 0; i < ready; ++i) DrainWakeups(event_fds_[events[i].data.u32]);
  }
  for (const RingView& ring : rings_) ring.control->sleeping.store(0, std::memory_order_relaxed);
  return n > 0 ? n : Take(out);
}

void ChannelReader::Arm() {
  if (++sleep_epoch_ == 0) ++sleep_epoch_;  // a new sleep: non-zero
  for (const RingView& ring : rings_) {
    ring.control->sleeping.store(sleep_epoch_, std::memory_order_seq_cst);
  }
}

template <typename Sink>
size_t ChannelReader::TakeOrArm(size_t max, Sink&& sink) {
  if (const size_t n = Take(max, sink); n > 0) {
    // Awake: no wake-ups wanted (quadsockd looks at `sleeping` after its batches).
    for (const RingView& ring : rings_) ring.control->sleeping.store(0, std::memory_order_relaxed);
    return n;
  }
  // As in Receive: `sleeping`, then one more look, both sequentially consistent.
  Arm();
  const size_t n = Take(max, sink);
  if (n > 0) {
    for (const RingView& ring : rings_) ring.control->sleeping.store(0, std::memory_order_relaxed);
  }
  return n;
}

size_t ChannelReader::ReceiveOrArm(std::span<ReceivedView> out) {
  ReceivedView* next = out.data();
  return TakeOrArm(out.size(),
                   [&next](const ChannelDescriptor& d, std::span<const uint8_t> payload) {
                     ViewOf(d, payload, *next++);
                   });
}

size_t ChannelReader::ForwardOrArm(size_t max, Forward forward) {
  return TakeOrArm(max, forward);
}

bool ChannelReader::Send(uint32_t socket, std::span<const uint8_t> payload,
                         const std::optional<net::Endpoint>& peer,
                         const std::optional<net::IpAddress>& source) {
  const SendView one{socket, payload, peer, source};
  return SendBatch({&one, 1}) == 1;
}

size_t ChannelReader::SendBatch(std::span<const SendView> datagrams) {
  // The producer index as the ring holds it: processes that share this mapping (a forked child
  // of the application, under a lock of their own) take turns producing. Our own last store.
  tx_next_ = tx_.control->producer.load(std::memory_order_relaxed);
  // Acquire: quadsockd has copied the slots it gave back.
  const uint32_t consumer = tx_.control->consumer.load(std::memory_order_acquire);
  size_t n = 0;
  for (; n < datagrams.size(); ++n) {
    const SendView& s = datagrams[n];
    if (tx_next_ - consumer >= tx_.mask + 1 || s.payload.size() > tx_.buffer_bytes) break;
    ChannelDescriptor& d = tx_.descriptor(tx_next_);
    d.socket = s.socket;
    d.length = static_cast<uint32_t>(s.payload.size());
    d.flags = 0;
    if (s.peer.has_value()) {
      const net::IpAddress::Bytes b = s.peer->address.bytes16();
      std::memcpy(d.peer, b.data(), 16);
      d.peer_port = s.peer->port;
      d.flags = kHasPeer | (s.peer->address.is_v4() ? kIpv4 : 0);
    }
    if (s.source.has_value()) {
      const net::IpAddress::Bytes b = s.source->bytes16();
      std::memcpy(d.local, b.data(), 16);
      d.flags |= kHasLocal;
    }
    std::memcpy(tx_.buffer(tx_next_), s.payload.data(), s.payload.size());
    ++tx_next_;
  }
  if (n == 0) return 0;
  // The poll thread may be going to sleep (layout.h's rule, roles turned round): publish, then
  // look at its sleep epoch; write the eventfd once per sleep.
  tx_.control->producer.store(tx_next_, std::memory_order_seq_cst);
  if (const uint32_t epoch = tx_.control->sleeping.load(std::memory_order_seq_cst);
      epoch != 0 && epoch != tx_woken_epoch_) {
    tx_woken_epoch_ = epoch;
    const uint64_t one = 1;
    (void)!write(tx_event_fd_, &one, sizeof(one));
  }
  return n;
}

void ChannelReader::Release() {
  // Release: we are done with the slots before quadsockd may write them again.
  for (size_t r = 0; r < rings_.size(); ++r) {
    rings_[r].control->consumer.store(taken_[r], std::memory_order_release);
  }
}

}  // namespace quadsock::channel
