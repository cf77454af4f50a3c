// Sending on a real AF_XDP socket in copy mode (a veth): what the free frames and the kernel's
// kick allow a burst of frames with no poll between them.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "stack/link/xsk_link.h"
#include "stack/testing/netns.h"

namespace quadsock {
namespace {

const ::testing::Environment* const kPrivateNamespace =
    ::testing::AddGlobalTestEnvironment(new testing::PrivateNamespaceEnvironment);

// A minimal frame the peer's kernel drops: broadcast, an EtherType for local experiments.
void FillDiscarded(link::FrameBuffer& f) {
  std::memset(f.data, 0xff, 6);
  std::memset(f.data + 6, 0x02, 6);
  f.data[12] = 0x88;
  f.data[13] = 0xb5;
  std::memset(f.data + 14, 0, 46);
  f.length = 60;
}

// A turn may send more frames than the free pool holds (the rest of the UMEM waits in the fill
// ring): in copy mode a sent frame comes back only once the kernel is kicked, so AllocateTx
// kicks what waits in the TX ring before it gives up. Here a burst four times the free frames,
// with no Poll between the frames.
TEST(AfXdpTxTest, ABurstLargerThanTheFreeFramesLeavesWithoutAPoll) {
  testing::TestVeth veth("qs8", "qs9");
  {
    const link::XskPort::Options o{.interface = "qs8", .frames = 512, .ring_size = 256,
                                   .bind_mode = link::XskBindMode::kCopy};
    std::unique_ptr<link::XskPort> port = link::XskPort::Create(o).value();
    std::unique_ptr<link::XskLink> q = port->OpenQueue(0).value();
    q->Poll();  // the fill ring takes its 256: 256 frames stay free
    constexpr int kBurst = 1024;
    std::vector<link::FrameBuffer> batch;
    for (int i = 0; i < kBurst; ++i) {
      std::optional<link::FrameBuffer> f = q->AllocateTx(64);
      ASSERT_TRUE(f.has_value()) << "no frame for the burst's frame " << i;
      FillDiscarded(*f);
      batch.push_back(*f);
      if (batch.size() == 64 || i == kBurst - 1) {
        ASSERT_EQ(q->Transmit(batch), batch.size()) << "at frame " << i;
        batch.clear();
      }
    }
    q->Poll();
    EXPECT_EQ(q->counters().no_tx_buffer, 0u);
    EXPECT_EQ(q->counters().tx_ring_full, 0u);
    EXPECT_EQ(q->counters().tx_frames, static_cast<uint64_t>(kBurst));
    EXPECT_EQ(q->CheckFrameAccounting(), absl::OkStatus());
  }
}

// More frames in one Transmit than the TX ring has room for: the ring takes what fits (one
// reservation for the batch), the rest stays the caller's (counted once as tx_ring_full), and
// every frame is accounted for once the caller gives those back and the kernel sends the rest.
TEST(AfXdpTxTest, ABatchPastTheTxRingsRoomLeavesTheRestWithTheCaller) {
  testing::TestVeth veth("qs8", "qs9");
  {
    const link::XskPort::Options o{.interface = "qs8", .frames = 1024, .ring_size = 64,
                                   .bind_mode = link::XskBindMode::kCopy};
    std::unique_ptr<link::XskPort> port = link::XskPort::Create(o).value();
    std::unique_ptr<link::XskLink> q = port->OpenQueue(0).value();
    q->Poll();
    std::vector<link::FrameBuffer> batch;
    for (int i = 0; i < 100; ++i) {
      std::optional<link::FrameBuffer> f = q->AllocateTx(64);
      ASSERT_TRUE(f.has_value()) << i;
      FillDiscarded(*f);
      batch.push_back(*f);
    }
    const size_t taken = q->Transmit(batch);
    EXPECT_GT(taken, 0u);
    EXPECT_LE(taken, 64u);
    EXPECT_EQ(q->counters().tx_ring_full, 1u);
    EXPECT_EQ(q->counters().tx_frames, taken);
    q->Release(std::span<const link::FrameBuffer>(batch).subspan(taken));
    for (int i = 0; i < 100; ++i) q->Poll();  // kicks, and takes back what the kernel sent
    EXPECT_EQ(q->CheckFrameAccounting(), absl::OkStatus());
  }
}

}  // namespace
}  // namespace quadsock
