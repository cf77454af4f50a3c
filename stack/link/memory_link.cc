#include "stack/link/memory_link.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cstring>
#include <deque>
#include <mutex>

#include "absl/strings/str_format.h"

namespace quadsock::link {

// Frames in flight in one direction. Both ends may be on different threads, hence the mutex:
// this is test plumbing, not the data path of a real link.
class MemoryWire {
 public:
  explicit MemoryWire(size_t limit) : limit_(limit), event_fd_(eventfd(0, EFD_NONBLOCK)) {}
  ~MemoryWire() { close(event_fd_); }

  bool Push(std::vector<uint8_t> frame) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (frames_.size() >= limit_) {
        ++dropped_;
        return false;
      }
      frames_.push_back(std::move(frame));
    }
    const uint64_t one = 1;
    (void)!write(event_fd_, &one, sizeof(one));
    return true;
  }
  bool Pop(std::vector<uint8_t>& frame) {
    std::lock_guard<std::mutex> lock(mu_);
    if (frames_.empty()) {
      uint64_t drain;
      (void)!read(event_fd_, &drain, sizeof(drain));
      return false;
    }
    frame = std::move(frames_.front());
    frames_.pop_front();
    return true;
  }
  size_t size() const {
    std::lock_guard<std::mutex> lock(mu_);
    return frames_.size();
  }
  uint64_t dropped() const {
    std::lock_guard<std::mutex> lock(mu_);
    return dropped_;
  }
  int event_fd() const { return event_fd_; }

 private:
  const size_t limit_;
  const int event_fd_;
  mutable std::mutex mu_;  // not absl::Mutex: Debian's Abseil is not built for TSAN
  std::deque<std::vector<uint8_t>> frames_ ;
  uint64_t dropped_  = 0;
};

MemoryLink::MemoryLink(MemoryLinkOptions options, std::shared_ptr<MemoryWire> in,
                       std::shared_ptr<MemoryWire> out)
    : frame_size_(options.frame_size),
      area_(size_t{options.frames} * options.frame_size),
      ledger_(options.frames),
      in_(std::move(in)),
      out_(std::move(out)) {
  info_.name = options.name;
  info_.mac = options.mac;
  info_.mtu = options.mtu;
  info_.mode = "memory";
  free_.reserve(options.frames);
  for (uint32_t i = options.frames; i > 0; --i) free_.push_back(i - 1);
}

MemoryLink::~MemoryLink() = default;

std::pair<std::unique_ptr<MemoryLink>, std::unique_ptr<MemoryLink>> MemoryLink::CreatePair(
    MemoryLinkOptions a, MemoryLinkOptions b) {
  auto a_to_b = std::make_shared<MemoryWire>(b.rx_queue);
  auto b_to_a = std::make_shared<MemoryWire>(a.rx_queue);
  std::unique_ptr<MemoryLink> first(new MemoryLink(std::move(a), b_to_a, a_to_b));
  std::unique_ptr<MemoryLink> second(new MemoryLink(std::move(b), a_to_b, b_to_a));
  return {std::move(first), std::move(second)};
}

MemoryLink::Pair MemoryLink::CreateWithTestEnd(MemoryLinkOptions options) {
  auto to_link = std::make_shared<MemoryWire>(options.rx_queue);
  auto from_link = std::make_shared<MemoryWire>(1 << 20);
  Pair p;
  p.link.reset(new MemoryLink(std::move(options), to_link, from_link));
  p.test_end.reset(new TestEnd());
  p.test_end->to_link_ = to_link;
  p.test_end->from_link_ = from_link;
  return p;
}

FrameBuffer MemoryLink::Buffer(uint32_t index, uint32_t length) {
  return FrameBuffer{area_.data() + size_t{index} * frame_size_, length, frame_size_, index};
}

size_t MemoryLink::Receive(std::span<FrameBuffer> out) {
  counters_.Set(&LinkCounters::rx_ring_fill, in_->size());
  size_t n = 0;
  std::vector<uint8_t> frame;
  while (n < out.size() && !free_.empty() && in_->Pop(frame)) {
    const uint32_t index = free_.back();
    free_.pop_back();
    ledger_.Move(index, FramePlace::kFree, FramePlace::kHeld);
    const uint32_t length = static_cast<uint32_t>(std::min<size_t>(frame.size(), frame_size_));
    out[n] = Buffer(index, length);
    if (length > 0) std::memcpy(out[n].data, frame.data(), length);  // an empty frame: no data()
    ++n;
  }
  counters_.Add(&LinkCounters::rx_frames, n);
  return n;
}

void MemoryLink::Release(std::span<const FrameBuffer> frames) {
  for (const FrameBuffer& f : frames) {
    ledger_.Move(static_cast<uint32_t>(f.handle), FramePlace::kHeld, FramePlace::kFree);
    free_.push_back(static_cast<uint32_t>(f.handle));
  }
}

std::optional<FrameBuffer> MemoryLink::AllocateTx(uint32_t length) {
  if (free_.empty() || length > frame_size_) {
    counters_.Add(&LinkCounters::no_tx_buffer);
    return std::nullopt;
  }
  const uint32_t index = free_.back();
  free_.pop_back();
  ledger_.Move(index, FramePlace::kFree, FramePlace::kHeld);
  return Buffer(index, 0);
}

size_t MemoryLink::Transmit(std::span<const FrameBuffer> frames) {
  for (const FrameBuffer& f : frames) {
    // The wire copies the frame; the buffer is "completed" at once.
    out_->Push(std::vector<uint8_t>(f.data, f.data + f.length));
    ledger_.Move(static_cast<uint32_t>(f.handle), FramePlace::kHeld, FramePlace::kFree);
    free_.push_back(static_cast<uint32_t>(f.handle));
  }
  counters_.Add(&LinkCounters::tx_frames, frames.size());
  return frames.size();
}

int MemoryLink::wait_fd() const { return in_->event_fd(); }

absl::Status MemoryLink::CheckFrameAccounting() const {
  if (ledger_.count(FramePlace::kFree) != free_.size()) {
    return absl::InternalError(absl::StrFormat("%s: %u frames marked free, %u in the free pool",
                                               info_.name, ledger_.count(FramePlace::kFree),
                                               free_.size()));
  }
  if (ledger_.count(FramePlace::kKernelRx) != 0 || ledger_.count(FramePlace::kKernelTx) != 0) {
    return absl::InternalError(info_.name + ": a memory link has no kernel rings");
  }
  if (ledger_.count(FramePlace::kHeld) != 0) {
    return absl::InternalError(absl::StrFormat(
        "%s: %u frames held at rest (taken by Receive or AllocateTx and never released or "
        "transmitted), frame %u first", info_.name, ledger_.count(FramePlace::kHeld),
        ledger_.First(FramePlace::kHeld)));
  }
  return absl::OkStatus();
}

LinkCounters MemoryLink::counters() const {
  LinkCounters c = counters_.Snapshot();
  c.rx_dropped = in_->dropped();
  return c;
}

bool MemoryLink::TestEnd::Inject(std::span<const uint8_t> frame) {
  return to_link_->Push(std::vector<uint8_t>(frame.begin(), frame.end()));
}

std::vector<std::vector<uint8_t>> MemoryLink::TestEnd::TakeSent() {
  std::vector<std::vector<uint8_t>> out;
  std::vector<uint8_t> frame;
  while (from_link_->Pop(frame)) out.push_back(std::move(frame));
  return out;
}

}  // namespace quadsock::link
