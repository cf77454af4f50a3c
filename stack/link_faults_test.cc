// The link failing on purpose (stack/testing/faulty_link.h): a TX side with no buffer to lend
// (the UMEM exhausted) and a TX ring that takes fewer frames than offered. Whatever the link
// refuses, the stack drops and counts (the socket's tx_dropped, the stack's and the link's
// counters), keeps receiving, leaks no frame, and sends again once the link does.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "stack/link/memory_link.h"
#include "stack/stack.h"
#include "stack/testing/faulty_link.h"
#include "stack/testing/stack_fixtures.h"

namespace quadsock::stack {
namespace {

using namespace testing_fixtures;  // NOLINT: the fixtures' short helpers

class LinkFaultsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto [link_a, link_b] = link::MemoryLink::CreatePair({.name = "a", .mac = kMacA},
                                                         {.name = "b", .mac = kMacB});
    std::vector<std::unique_ptr<link::Link>> la, lb;
    la.push_back(std::move(link_a));
    lb.push_back(std::make_unique<FaultyLink>(std::move(link_b), faults_));
    a_ = Stack::Create(Options(clock_, "10.1.0.1/24", "fd00:1::1/64"), std::move(la)).value();
    b_ = Stack::Create(Options(clock_, "10.1.0.2/24", "fd00:1::2/64"), std::move(lb)).value();
    peer_ = a_->Open(net::Family::kV4).value();
    ASSERT_TRUE(a_->Bind(peer_, Ep("0.0.0.0:5000")).ok());
    sender_ = b_->Open(net::Family::kV4).value();
    ASSERT_TRUE(b_->Bind(sender_, Ep("0.0.0.0:4000")).ok());
    // The neighbours know each other before the faults.
    ASSERT_EQ(b_->Send(sender_, Bytes("hello"), Ep("10.1.0.1:5000")), absl::OkStatus());
    Pump();
    ASSERT_EQ(Received(), 1);
  }
  void TearDown() override {
    EXPECT_EQ(a_->CheckFrameAccounting(), absl::OkStatus());
    EXPECT_EQ(b_->CheckFrameAccounting(), absl::OkStatus()) << "a frame leaked under a fault";
  }
  void Pump() {
    for (int i = 0; i < 20; ++i) {
      if (a_->PollOnce() + b_->PollOnce() == 0 && i > 2) return;
    }
  }
  int Received() {
    int n = 0;
    while (a_->Receive(peer_).value().has_value()) ++n;
    return n;
  }
  void SendFromB(int n) {
    for (int i = 0; i < n; ++i) {
      ASSERT_EQ(b_->Send(sender_, Bytes(std::to_string(i)), Ep("10.1.0.1:5000")), absl::OkStatus());
    }
  }

  FakeClock clock_;
  std::shared_ptr<FaultyLink::Faults> faults_ = std::make_shared<FaultyLink::Faults>();
  std::unique_ptr<Stack> a_, b_;
  SocketId peer_ = 0, sender_ = 0;
};

TEST_F(LinkFaultsTest, AnExhaustedUmemDropsAndCountsEverySendWhileReceivingGoesOn) {
  faults_->no_tx_buffer = true;
  SendFromB(50);
  // A datagram to a port nobody holds: its port unreachable finds no buffer either.
  const SocketId probe = a_->Open(net::Family::kV4).value();
  ASSERT_EQ(a_->Send(probe, Bytes("nobody"), Ep("10.1.0.2:4999")), absl::OkStatus());
  // And what comes in is still received.
  const SocketId listener = b_->Open(net::Family::kV4).value();
  ASSERT_TRUE(b_->Bind(listener, Ep("0.0.0.0:4001")).ok());
  for (int i = 0; i < 10; ++i) {
    ASSERT_EQ(a_->Send(probe, Bytes("in"), Ep("10.1.0.2:4001")), absl::OkStatus());
  }
  Pump();
  EXPECT_EQ(Received(), 0);
  int in = 0;
  while (b_->Receive(listener).value().has_value()) ++in;
  EXPECT_EQ(in, 10);
  EXPECT_EQ(b_->Get(sender_).value().counters.tx_dropped, 50u);
  EXPECT_EQ(b_->Get(sender_).value().counters.tx_datagrams, 1u);  // the hello
  EXPECT_EQ(b_->Counters().udp_no_socket, 1u);
  EXPECT_GE(b_->Counters().tx_no_buffer, 51u);  // the 50 and the port unreachable
  EXPECT_EQ(b_->LinkCounters()[0].no_tx_buffer, b_->Counters().tx_no_buffer);
  EXPECT_EQ(b_->CheckFrameAccounting(), absl::OkStatus());
  // The buffers come back: so do the sends.
  faults_->no_tx_buffer = false;
  SendFromB(5);
  Pump();
  EXPECT_EQ(Received(), 5);
}

TEST_F(LinkFaultsTest, AFullTxRingDropsWhatItDidNotTakeAndCountsIt) {
  faults_->transmit_limit = 3;
  SendFromB(10);
  Pump();
  const int arrived = Received();
  const SocketCounters c = b_->Get(sender_).value().counters;
  // Every datagram is sent or counted; what the ring refused is the link's tx_ring_full too.
  EXPECT_GE(arrived, 3);
  EXPECT_LT(arrived, 10);
  EXPECT_EQ(c.tx_datagrams, 1u + static_cast<uint64_t>(arrived));
  EXPECT_EQ(c.tx_dropped, 10u - static_cast<uint64_t>(arrived));
  EXPECT_EQ(b_->LinkCounters()[0].tx_ring_full, c.tx_dropped);
  // A ring that takes nothing: nothing leaves, nothing leaks.
  faults_->transmit_limit = 0;
  SendFromB(10);
  Pump();
  EXPECT_EQ(Received(), 0);
  EXPECT_EQ(b_->Get(sender_).value().counters.tx_dropped, c.tx_dropped + 10);
  EXPECT_EQ(b_->CheckFrameAccounting(), absl::OkStatus());
  faults_->transmit_limit = SIZE_MAX;
  SendFromB(10);
  Pump();
  EXPECT_EQ(Received(), 10);
}

}  // namespace
}  // namespace quadsock::stack
