// Bind conflicts, ephemeral ports, and every operation's error codes.
#include <set>

#include "gtest/gtest.h"
#include "stack/demux/socket_table.h"
#include "stack/demux/test_util.h"

namespace quadsock::demux {
namespace {

using testing::Ep;
using testing::Ip;
using testing::TableTest;
using testing::V4;
using testing::V6;

absl::StatusCode BindCode(SocketTable& t, const SocketOptions& o, const std::string& ep) {
  SocketId id = t.Open(o).value();
  return t.Bind(id, Ep(ep)).status().code();
}

TEST_F(TableTest, SameAddressWithoutReuseConflicts) {
  Bound(V4(), "10.0.0.1:53");
  EXPECT_EQ(BindCode(*table_, V4(), "10.0.0.1:53"), absl::StatusCode::kAlreadyExists);
}

TEST_F(TableTest, SameAddressBothReuseShares) {
  Bound(V4(true), "10.0.0.1:53");
  EXPECT_EQ(BindCode(*table_, V4(true), "10.0.0.1:53"), absl::StatusCode::kOk);
}

TEST_F(TableTest, ReuseNeedsBothSides) {
  Bound(V4(false), "10.0.0.1:53");
  EXPECT_EQ(BindCode(*table_, V4(true), "10.0.0.1:53"), absl::StatusCode::kAlreadyExists);
  Bound(V4(true), "10.0.0.2:53");
  EXPECT_EQ(BindCode(*table_, V4(false), "10.0.0.2:53"), absl::StatusCode::kAlreadyExists);
}

// A reuseport group is one owner's (quadsockd: one session's): another owner's socket cannot
// join it, on the same address, a wildcard over it, or an address under its wildcard.
TEST_F(TableTest, ReuseSharesOnlyWithTheSameOwner) {
  SocketOptions mine = V4(true);
  mine.owner = 1;
  SocketOptions theirs = V4(true);
  theirs.owner = 2;
  Bound(mine, "10.0.0.1:53");
  EXPECT_EQ(BindCode(*table_, mine, "10.0.0.1:53"), absl::StatusCode::kOk);
  EXPECT_EQ(BindCode(*table_, theirs, "10.0.0.1:53"), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(BindCode(*table_, theirs, "0.0.0.0:53"), absl::StatusCode::kAlreadyExists);
  Bound(mine, "0.0.0.0:54");
  EXPECT_EQ(BindCode(*table_, theirs, "10.0.0.1:54"), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(BindCode(*table_, mine, "10.0.0.1:54"), absl::StatusCode::kOk);
  // Once the owner's sockets are gone, another owner may have the port.
  const SocketId a = Open(mine);
  ASSERT_TRUE(table_->Bind(a, Ep("10.0.0.9:55")).ok());
  EXPECT_EQ(BindCode(*table_, theirs, "10.0.0.9:55"), absl::StatusCode::kAlreadyExists);
  ASSERT_TRUE(table_->Close(a).ok());
  EXPECT_EQ(BindCode(*table_, theirs, "10.0.0.9:55"), absl::StatusCode::kOk);
}

TEST_F(TableTest, WildcardConflictsWithSpecificBothWays) {
  Bound(V4(), "10.0.0.1:53");
  EXPECT_EQ(BindCode(*table_, V4(), "0.0.0.0:53"), absl::StatusCode::kAlreadyExists);
  Bound(V4(), "0.0.0.0:54");
  EXPECT_EQ(BindCode(*table_, V4(), "10.0.0.1:54"), absl::StatusCode::kAlreadyExists);
}

TEST_F(TableTest, DifferentSpecificAddressesDoNotConflict) {
  Bound(V4(), "10.0.0.1:53");
  EXPECT_EQ(BindCode(*table_, V4(), "10.0.0.2:53"), absl::StatusCode::kOk);
  EXPECT_EQ(BindCode(*table_, V4(), "10.0.0.1:54"), absl::StatusCode::kOk);
}

TEST_F(TableTest, DualStackConflictsWithV4ButV6OnlyDoesNot) {
  Bound(V4(), "0.0.0.0:53");
  EXPECT_EQ(BindCode(*table_, V6(false), "[::]:53"), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(BindCode(*table_, V6(true), "[::]:53"), absl::StatusCode::kOk);
  EXPECT_EQ(BindCode(*table_, V6(false), "[::ffff:10.0.0.1]:53"), absl::StatusCode::kAlreadyExists);
  Bound(V6(false), "[::]:60");
  EXPECT_EQ(BindCode(*table_, V4(), "10.0.0.1:60"), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(BindCode(*table_, V6(true), "[fd00::1]:60"), absl::StatusCode::kAlreadyExists);
}

TEST_F(TableTest, V4MappedConflictsWithSameV4Address) {
  Bound(V6(), "[::ffff:10.0.0.1]:53");
  EXPECT_EQ(BindCode(*table_, V4(), "10.0.0.1:53"), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(BindCode(*table_, V4(), "10.0.0.2:53"), absl::StatusCode::kOk);
  EXPECT_EQ(BindCode(*table_, V6(true), "[fd00::1]:53"), absl::StatusCode::kOk);
}

TEST_F(TableTest, DifferentDevicesDoNotConflictButUnboundDoes) {
  SocketOptions d1 = V4(), d2 = V4();
  d1.bound_device = 1;
  d2.bound_device = 2;
  Bound(d1, "0.0.0.0:53");
  EXPECT_EQ(BindCode(*table_, d2, "0.0.0.0:53"), absl::StatusCode::kOk);
  EXPECT_EQ(BindCode(*table_, V4(), "0.0.0.0:53"), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(BindCode(*table_, d1, "10.0.0.1:53"), absl::StatusCode::kAlreadyExists);
}

TEST_F(TableTest, ClosingFreesThePort) {
  SocketId s = Bound(V4(), "10.0.0.1:53");
  ASSERT_TRUE(table_->Close(s).ok());
  EXPECT_EQ(BindCode(*table_, V4(), "10.0.0.1:53"), absl::StatusCode::kOk);
}

TEST_F(TableTest, EphemeralPortsFromRangeUntilExhausted) {
  SocketTable::Options o = testing::TestOptions();
  o.ephemeral_low = 5000;
  o.ephemeral_high = 5002;
  Make(o);
  std::set<uint16_t> ports;
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<net::Endpoint> e = table_->Bind(Open(V4()), Ep("0.0.0.0:0"));
    ASSERT_TRUE(e.ok()) << e.status();
    ports.insert(e->port);
  }
  EXPECT_EQ(ports, (std::set<uint16_t>{5000, 5001, 5002}));
  EXPECT_EQ(table_->Bind(Open(V4()), Ep("0.0.0.0:0")).status().code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(table_->Connect(Open(V4()), Ep("10.9.9.9:53")).status().code(),
            absl::StatusCode::kResourceExhausted);
}

TEST_F(TableTest, EphemeralStartIsRandomised) {
  std::set<uint16_t> first_ports;
  for (uint64_t seed = 1; seed <= 8; ++seed) {
    SocketTable::Options o = testing::TestOptions();
    o.seed = seed;
    Make(o);
    first_ports.insert(table_->Bind(Open(V4()), Ep("0.0.0.0:0"))->port);
  }
  EXPECT_GT(first_ports.size(), 4u);
}

TEST_F(TableTest, UnknownSocketIsNotFound) {
  constexpr SocketId kNope = 999;
  EXPECT_EQ(table_->Bind(kNope, Ep("0.0.0.0:1")).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(table_->Connect(kNope, Ep("10.0.0.9:1")).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(table_->Disconnect(kNope).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(table_->Rehash(kNope, std::nullopt, 5).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(table_->SetBoundDevice(kNope, 1).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(table_->Close(kNope).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(table_->Get(kNope).status().code(), absl::StatusCode::kNotFound);
}

TEST_F(TableTest, WrongStateIsFailedPrecondition) {
  SocketId s = Bound(V4(), "10.0.0.1:53");
  EXPECT_EQ(table_->Bind(s, Ep("10.0.0.1:54")).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(table_->Disconnect(s).code(), absl::StatusCode::kFailedPrecondition);
  SocketId open = Open(V4());
  EXPECT_EQ(table_->Rehash(open, Ip("10.0.0.2"), std::nullopt).status().code(),
            absl::StatusCode::kFailedPrecondition);
  SocketTable::Options no_route = testing::TestOptions();
  no_route.route = nullptr;
  Make(no_route);
  EXPECT_EQ(table_->Connect(Open(V4()), Ep("10.9.9.9:53")).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST_F(TableTest, BadArgumentsAreInvalidArgument) {
  EXPECT_EQ(table_->Open(SocketOptions{net::Family::kV4, true, false, 0, 0}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(BindCode(*table_, V4(), "[fd00::1]:53"), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(BindCode(*table_, V6(), "10.0.0.1:53"), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(BindCode(*table_, V6(true), "[::ffff:10.0.0.1]:53"),
            absl::StatusCode::kInvalidArgument);
  SocketId s = Bound(V4(), "10.0.0.1:53");
  EXPECT_EQ(table_->Connect(s, Ep("10.9.9.9:0")).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(table_->Connect(s, Ep("0.0.0.0:53")).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(table_->Connect(s, Ep("[fd00::9]:53")).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(table_->Rehash(s, std::nullopt, std::nullopt).status().code(),
            absl::StatusCode::kInvalidArgument);
  SocketId v6only = Bound(V6(true), "[::]:54");
  EXPECT_EQ(table_->Connect(v6only, Ep("[::ffff:10.9.9.9]:53")).status().code(),
            absl::StatusCode::kInvalidArgument);
  SocketId mapped = Bound(V6(), "[::ffff:10.0.0.1]:55");
  EXPECT_EQ(table_->Connect(mapped, Ep("[fd00::9]:53")).status().code(),
            absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(table_->Connect(s, Ep("10.9.9.9:53")).ok());
  EXPECT_EQ(table_->Rehash(s, Ip("0.0.0.0"), std::nullopt).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(TableTest, RouteErrorIsReturnedAndSocketUnchanged) {
  SocketTable::Options o = testing::TestOptions();
  o.route = [](const net::IpAddress&) -> absl::StatusOr<net::IpAddress> {
    return absl::UnavailableError("no route");
  };
  Make(o);
  SocketId s = Bound(V4(), "0.0.0.0:4000");
  EXPECT_EQ(table_->Connect(s, Ep("10.9.9.9:53")).status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(table_->Get(s)->state, SocketState::kBound);
  EXPECT_EQ(Find("10.9.9.9:53", "10.0.0.7:4000"), s);
}

TEST_F(TableTest, RehashConflictLeavesSocketUnchanged) {
  Bound(V4(), "10.0.0.2:53");
  SocketId s = Bound(V4(), "10.0.0.1:53");
  EXPECT_EQ(table_->Rehash(s, Ip("10.0.0.2"), std::nullopt).status().code(),
            absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(Find("10.9.9.9:1000", "10.0.0.1:53"), s);
  EXPECT_EQ(BindCode(*table_, V4(), "10.0.0.1:53"), absl::StatusCode::kAlreadyExists);
}

}  // namespace
}  // namespace quadsock::demux
