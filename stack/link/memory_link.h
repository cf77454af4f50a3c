// MemoryLink: a Link whose frames cross an in-memory wire, for tests without privileges.
//
// CreatePair() joins two links back to back: what one transmits, the other receives (copied
// into its own buffers, so each side's accounting stays its own). A test can also stand at the
// far end itself with a WireEnd, injecting frames and reading what the stack sent.
//
//   auto [a, b] = MemoryLink::CreatePair({.name = "a"}, {.name = "b"});
//   // or:
//   MemoryLink::Pair p = MemoryLink::CreateWithTestEnd({.name = "stack"});
//   p.test_end->Inject(frame_bytes);
//   std::vector<std::vector<uint8_t>> sent = p.test_end->TakeSent();
#ifndef QUADSOCK_STACK_LINK_MEMORY_LINK_H_
#define QUADSOCK_STACK_LINK_MEMORY_LINK_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "stack/link/frame_ledger.h"
#include "stack/link/link.h"

namespace quadsock::link {

struct MemoryLinkOptions {
  std::string name = "mem0";
  net::MacAddress mac;
  uint32_t mtu = 1500;
  uint32_t frames = 1024;       // buffers of this side
  uint32_t frame_size = 2048;   // bytes per buffer
  uint32_t rx_queue = 1024;     // frames waiting to be received; more are dropped (counted)
};

// One direction of the wire: frames in flight, bounded.
class MemoryWire;

class MemoryLink : public Link {
 public:
  class TestEnd;
  struct Pair {
    std::unique_ptr<MemoryLink> link;
    std::unique_ptr<TestEnd> test_end;
  };

  static std::pair<std::unique_ptr<MemoryLink>, std::unique_ptr<MemoryLink>> CreatePair(
      MemoryLinkOptions a, MemoryLinkOptions b);
  static Pair CreateWithTestEnd(MemoryLinkOptions options);
  ~MemoryLink() override;

  const LinkInfo& info() const override { return info_; }
  size_t Receive(std::span<FrameBuffer> out) override;
  void Release(std::span<const FrameBuffer> frames) override;
  std::optional<FrameBuffer> AllocateTx(uint32_t length) override;
  size_t Transmit(std::span<const FrameBuffer> frames) override;
  void Poll() override {}
  int wait_fd() const override;
  absl::Status CheckFrameAccounting() const override;
  LinkCounters counters() const override;

  // The far end of a link made by CreateWithTestEnd: a test's hands on the wire.
  class TestEnd {
   public:
    // Puts a frame on the wire towards the link. False when the link's queue is full.
    bool Inject(std::span<const uint8_t> frame);
    // Frames the link sent since the last call, oldest first.
    std::vector<std::vector<uint8_t>> TakeSent();

   private:
    friend class MemoryLink;
    std::shared_ptr<MemoryWire> to_link_;
    std::shared_ptr<MemoryWire> from_link_;
  };

 private:
  MemoryLink(MemoryLinkOptions options, std::shared_ptr<MemoryWire> in,
             std::shared_ptr<MemoryWire> out);
  FrameBuffer Buffer(uint32_t index, uint32_t length);

  LinkInfo info_;
  const uint32_t frame_size_;
  std::vector<uint8_t> area_;
  FrameLedger ledger_;
  std::vector<uint32_t> free_;
  std::shared_ptr<MemoryWire> in_;
  std::shared_ptr<MemoryWire> out_;
  LiveLinkCounters counters_;
};

}  // namespace quadsock::link

#endif  // QUADSOCK_STACK_LINK_MEMORY_LINK_H_
