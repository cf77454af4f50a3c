#include "common/did_you_mean.h"

#include "gtest/gtest.h"

namespace quadsock {
namespace {

TEST(EditDistanceTest, CountsEachKindOfEditOnce) {
  EXPECT_EQ(EditDistance("target", "target"), 0u);
  EXPECT_EQ(EditDistance("targe", "target"), 1u);    // dropped
  EXPECT_EQ(EditDistance("targett", "target"), 1u);  // added
  EXPECT_EQ(EditDistance("tarxet", "target"), 1u);   // changed
  EXPECT_EQ(EditDistance("targte", "target"), 1u);   // swapped neighbours
  EXPECT_EQ(EditDistance("", "abc"), 3u);
  EXPECT_EQ(EditDistance("abc", ""), 3u);
  EXPECT_EQ(EditDistance("kitten", "sitting"), 3u);
}

TEST(DidYouMeanTest, SuggestsTheNearestKnownWord) {
  const std::vector<std::string> flags = {"interface", "address", "queues", "listen",
                                          "admin_listen"};
  EXPECT_EQ(DidYouMean("interfac", flags), "interface");
  EXPECT_EQ(DidYouMean("adress", flags), "address");
  EXPECT_EQ(DidYouMean("lisetn", flags), "listen");
  EXPECT_EQ(DidYouMean("admin_lsten", flags), "admin_listen");
}

TEST(DidYouMeanTest, SuggestsTheOneWordThatStartsSo) {
  EXPECT_EQ(DidYouMean("inter", {"interface", "queues"}), "interface");
  // The start of two words, or too short a start: no guess.
  EXPECT_EQ(DidYouMean("max_s", {"max_sockets", "max_streams"}), std::nullopt);
  EXPECT_EQ(DidYouMean("qu", {"queues", "target"}), std::nullopt);
}

TEST(DidYouMeanTest, GuessesNothingFarOff) {
  EXPECT_EQ(DidYouMean("zzz", {"target", "timeout"}), std::nullopt);
  EXPECT_EQ(DidYouMean("verbosity", {"vlan", "hash4"}), std::nullopt);
  EXPECT_EQ(DidYouMean("x", {}), std::nullopt);
}

TEST(DidYouMeanTest, OfEquallyNearWordsTakesTheFirst) {
  EXPECT_EQ(DidYouMean("stat", {"stats", "start"}), "stats");
}

}  // namespace
}  // namespace quadsock
