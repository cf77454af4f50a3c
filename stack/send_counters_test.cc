// The stack counts the datagrams it hands to the link by whether their socket is connected:
// udp_sent_connected and udp_sent_unconnected (the send side of hash4 hits and hash2 lookups).
#include <gtest/gtest.h>

#include "stack/testing/stack_fixtures.h"

namespace quadsock::stack {
namespace {

using testing_fixtures::Bytes;
using testing_fixtures::Ep;
using testing_fixtures::TwoStacksTest;

TEST_F(TwoStacksTest, SentDatagramsCountByWhetherTheSocketIsConnected) {
  SocketId server = b_->Open(net::Family::kV4).value();
  ASSERT_TRUE(b_->Bind(server, Ep("0.0.0.0:4000")).ok());

  // Unconnected: a sendto, which waits for ARP before it goes out.
  SocketId loose = a_->Open(net::Family::kV4).value();
  ASSERT_EQ(a_->Send(loose, Bytes("one"), Ep("10.1.0.2:4000")), absl::OkStatus());
  Pump();
  EXPECT_EQ(a_->Counters().udp_sent_unconnected, 1u);
  EXPECT_EQ(a_->Counters().udp_sent_connected, 0u);

  // Connected: two sends to its peer, the neighbour known now.
  SocketId tied = a_->Open(net::Family::kV4).value();
  ASSERT_TRUE(a_->Connect(tied, Ep("10.1.0.2:4000")).ok());
  ASSERT_EQ(a_->Send(tied, Bytes("two")), absl::OkStatus());
  ASSERT_EQ(a_->Send(tied, Bytes("three")), absl::OkStatus());
  Pump();
  EXPECT_EQ(a_->Counters().udp_sent_connected, 2u);
  EXPECT_EQ(a_->Counters().udp_sent_unconnected, 1u);

  // Disconnected, it counts as unconnected again.
  ASSERT_TRUE(a_->Disconnect(tied).ok());
  ASSERT_EQ(a_->Send(tied, Bytes("four"), Ep("10.1.0.2:4000")), absl::OkStatus());
  Pump();
  EXPECT_EQ(a_->Counters().udp_sent_connected, 2u);
  EXPECT_EQ(a_->Counters().udp_sent_unconnected, 2u);

  // B received all four; it sent nothing.
  for (int i = 0; i < 4; ++i) {
    std::optional<ReceivedDatagram> d = b_->Receive(server).value();
    EXPECT_TRUE(d.has_value()) << i;
  }
  EXPECT_EQ(b_->Counters().udp_sent_connected + b_->Counters().udp_sent_unconnected, 0u);
}

}  // namespace
}  // namespace quadsock::stack
