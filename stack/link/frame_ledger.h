// Where every frame buffer of a link is: the ledger behind Link::CheckFrameAccounting().
//
// Each buffer is in exactly one place at a time. Links record every move; a move from the
// wrong place (a double release, a frame sent twice) is a broken internal invariant and aborts
// with the frame and both places named. Counting the places against the rings' own occupancy
// tells whether any frame was lost; at rest (between two poll-loop turns) no frame may be held,
// so a frame the stack took and never gave back shows up as held and fails the check.
//
//   FrameLedger ledger(4096);               // all buffers start kFree
//   ledger.Move(index, FramePlace::kFree, FramePlace::kKernelRx);   // posted on the fill ring
#ifndef QUADSOCK_STACK_LINK_FRAME_LEDGER_H_
#define QUADSOCK_STACK_LINK_FRAME_LEDGER_H_

#include <array>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace quadsock::link {

enum class FramePlace : uint8_t {
  kFree,      // in the link's free pool
  kKernelRx,  // on the fill ring or the RX ring: the kernel's to receive into
  kHeld,      // held by the stack (received, or allocated for sending); none at rest
  kKernelTx,  // on the TX ring or the completion ring: the kernel's to send
};
inline constexpr int kFramePlaces = 4;

inline const char* FramePlaceName(FramePlace p) {
  switch (p) {
    case FramePlace::kFree: return "free";
    case FramePlace::kKernelRx: return "kernel-rx";
    case FramePlace::kHeld: return "held";
    case FramePlace::kKernelTx: return "kernel-tx";
  }
  return "?";
}

class FrameLedger {
 public:
  explicit FrameLedger(uint32_t frames) : place_(frames, FramePlace::kFree) {
    count_[static_cast<int>(FramePlace::kFree)] = frames;
  }

  uint32_t size() const { return static_cast<uint32_t>(place_.size()); }
  uint32_t count(FramePlace p) const { return count_[static_cast<int>(p)]; }
  FramePlace place(uint32_t index) const { return place_[index]; }
  // The lowest-numbered frame in `p`, or size() when none is: names a leaked frame.
  uint32_t First(FramePlace p) const {
    for (uint32_t i = 0; i < place_.size(); ++i) {
      if (place_[i] == p) return i;
    }
    return size();
  }

  void Move(uint32_t index, FramePlace from, FramePlace to) {
    if (index >= place_.size() || place_[index] != from) {
      std::fprintf(stderr, "quadsock: frame accounting broken: frame %u moved %s -> %s but is %s\n",
                   index, FramePlaceName(from), FramePlaceName(to),
                   index < place_.size() ? FramePlaceName(place_[index]) : "out of range");
      std::abort();
    }
    place_[index] = to;
    --count_[static_cast<int>(from)];
    ++count_[static_cast<int>(to)];
  }

 private:
  std::vector<FramePlace> place_;
  std::array<uint32_t, kFramePlaces> count_{};
};

}  // namespace quadsock::link

#endif  // QUADSOCK_STACK_LINK_FRAME_LEDGER_H_
