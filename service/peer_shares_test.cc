// PeerShares: one share per peer while held, swept when gone.
#include "service/peer_shares.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace quadsock::service {
namespace {

std::shared_ptr<int> Zero() { return std::make_shared<int>(0); }

TEST(PeerSharesTest, APeerHasOneShareWhileItIsHeldAndANewOneAfter) {
  PeerShares<int> shares;
  std::shared_ptr<int> a = shares.Get("uid:1000", Zero);
  *a = 7;
  EXPECT_EQ(shares.Get("uid:1000", Zero), a);
  EXPECT_NE(shares.Get("uid:1001", Zero), a);
  a.reset();
  std::shared_ptr<int> again = shares.Get("uid:1000", Zero);
  EXPECT_EQ(*again, 0) << "the old share's count came back";
}

TEST(PeerSharesTest, PeersThatAreGoneAreSweptAsTheMapGrows) {
  PeerShares<int> shares;
  std::shared_ptr<int> held = shares.Get("held", Zero);
  for (int i = 0; i < 100000; ++i) (void)shares.Get("peer " + std::to_string(i), Zero);
  EXPECT_LT(shares.size(), 100u);  // a million seen would leave as few
  EXPECT_EQ(shares.Get("held", Zero), held);
}

}  // namespace
}  // namespace quadsock::service
