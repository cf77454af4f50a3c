#include "stack/link/kernel_addresses.h"

#include "gtest/gtest.h"

namespace quadsock::link {
namespace {

net::IpPrefix P(absl::string_view text) { return *net::IpPrefix::Parse(text); }

TEST(CheckNotKernelAddressesTest, AnAddressTheKernelHoldsOnTheInterfaceIsRefused) {
  const std::vector<KernelAddress> kernel = {{"lo", P("127.0.0.1/8")},
                                             {"eth0", P("10.2.0.9/24")}};
  absl::Status s = CheckNotKernelAddresses({P("fd00:1::2/64"), P("10.2.0.9/24")}, kernel, "eth0");
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.message(),
            "10.2.0.9 is the kernel's address too: it holds 10.2.0.9/24 on eth0, the interface "
            "quadsockd is to serve: both would answer for it, and the kernel's traffic to it "
            "would go to quadsock. Take it from the kernel (ip addr del 10.2.0.9/24 dev eth0) or "
            "give quadsockd another address; --allow_kernel_address starts anyway");
}

TEST(CheckNotKernelAddressesTest, SoIsOneOnAnotherInterfaceWhateverThePrefixLength) {
  absl::Status s = CheckNotKernelAddresses({P("fd00:1::2/64")},
                                           {{"eth1", P("fd00:1::2/128")}}, "eth0");
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.message(),
            "fd00:1::2 is the kernel's address too: it holds fd00:1::2/128 on eth1: the host's "
            "own traffic to it would stay in the kernel, never reaching quadsock on eth0. Take "
            "it from the kernel (ip addr del fd00:1::2/128 dev eth1) or give quadsockd another "
            "address; --allow_kernel_address starts anyway");
}

TEST(CheckNotKernelAddressesTest, AddressesOfTheSameNetworksAreFine) {
  const std::vector<KernelAddress> kernel = {{"eth0", P("10.2.0.1/24")},
                                             {"eth0", P("fd00:1::1/64")}};
  EXPECT_TRUE(CheckNotKernelAddresses({P("10.2.0.9/24"), P("fd00:1::2/64")}, kernel, "eth0").ok());
  EXPECT_TRUE(CheckNotKernelAddresses({P("10.2.0.9/24")}, {}, "eth0").ok());
}

}  // namespace
}  // namespace quadsock::link
