// Helpers shared by the socket table tests: a table with a fixed secret and seed, a route that
// answers 10.0.0.1 for IPv4 peers and fd00::1 for IPv6 peers, and parsing shorthands.
#ifndef QUADSOCK_STACK_DEMUX_TEST_UTIL_H_
#define QUADSOCK_STACK_DEMUX_TEST_UTIL_H_

#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "stack/demux/rcu.h"
#include "stack/demux/socket_table.h"
#include "stack/net/address.h"

namespace quadsock::demux::testing {

inline net::IpAddress Ip(const std::string& text) { return net::IpAddress::Parse(text).value(); }
inline net::Endpoint Ep(const std::string& text) { return net::Endpoint::Parse(text).value(); }

inline FlowKey Flow(const std::string& src, const std::string& dst, uint32_t device = 0) {
  net::Endpoint s = Ep(src), d = Ep(dst);
  return FlowKey{s.address, s.port, d.address, d.port, device};
}

inline SocketTable::Options TestOptions(bool hash4 = true) {
  SocketTable::Options o;
  o.hash4 = hash4;
  o.secret = FlowHasher::Secret{0x0123456789abcdefULL, 0xfedcba9876543210ULL};
  o.seed = 42;
  o.route = [](const net::IpAddress& peer) -> absl::StatusOr<net::IpAddress> {
    return peer.is_v4() ? Ip("10.0.0.1") : Ip("fd00::1");
  };
  return o;
}

inline SocketOptions V4(bool reuse = false, uintptr_t cookie = 0) {
  return SocketOptions{net::Family::kV4, false, reuse, 0, cookie};
}
inline SocketOptions V6(bool v6only = false, bool reuse = false) {
  return SocketOptions{net::Family::kV6, v6only, reuse, 0, 0};
}

// A table and a registered reader on the test's thread.
class TableTest : public ::testing::Test {
 protected:
  void Make(SocketTable::Options options) {
    ctx_.reset();
    table_ = SocketTable::Create(std::move(options)).value();
    ctx_ = std::make_unique<LookupContext>(*table_);
  }
  void SetUp() override { Make(TestOptions()); }
  void TearDown() override {
    ctx_.reset();
    table_.reset();
  }

  SocketId Open(const SocketOptions& o) { return table_->Open(o).value(); }
  SocketId Bound(const SocketOptions& o, const std::string& local) {
    SocketId id = Open(o);
    EXPECT_TRUE(table_->Bind(id, Ep(local)).ok());
    return id;
  }
  // The id found for a flow, or 0.
  SocketId Find(const FlowKey& flow) {
    std::optional<LookupResult> r = table_->Lookup(*ctx_, flow);
    return r ? r->id : 0;
  }
  SocketId Find(const std::string& src, const std::string& dst, uint32_t device = 0) {
    return Find(Flow(src, dst, device));
  }

  RcuReaderThread reader_;
  std::unique_ptr<SocketTable> table_;
  std::unique_ptr<LookupContext> ctx_;
};

}  // namespace quadsock::demux::testing

#endif  // QUADSOCK_STACK_DEMUX_TEST_UTIL_H_
