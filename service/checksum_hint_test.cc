#include "service/checksum_hint.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "stack/net/parse_error.h"

namespace quadsock::service {
namespace {

class ChecksumHintTest : public ::testing::Test {
 protected:
  void Check(uint64_t bad_udp_checksum, absl::Duration since_start) {
    stack::StackCounters c;
    c.parse_errors[static_cast<int>(net::ParseError::kBadUdpChecksum)] = bad_udp_checksum;
    hint_.Check(c, start_ + since_start);
  }

  std::vector<std::string> lines_;
  ChecksumHint hint_{[this](absl::string_view line) { lines_.emplace_back(line); },
                     absl::Minutes(1)};
  const absl::Time start_ = absl::FromUnixSeconds(1000000);
};

TEST_F(ChecksumHintTest, SaysNothingWhileNothingIsDropped) {
  Check(0, absl::ZeroDuration());
  Check(0, absl::Hours(1));
  EXPECT_TRUE(lines_.empty());
}

TEST_F(ChecksumHintTest, SaysTheFirstDropAtOnceWithTheHint) {
  Check(0, absl::ZeroDuration());
  Check(1, absl::Seconds(1));
  ASSERT_EQ(lines_.size(), 1u);
  EXPECT_EQ(lines_[0],
            "dropped 1 datagram with a bad UDP checksum (parse_errors.bad_udp_checksum). A "
            "sender on a veth or a VM's virtio may leave its checksums to an offload that never "
            "computes them on the way here: turn transmit offload off on that peer (ethtool -K "
            "<peer> tx off). Later drops are counted, and said here at most every 1m.");
}

TEST_F(ChecksumHintTest, LaterDropsAreACountAtMostOncePerPeriod) {
  Check(3, absl::ZeroDuration());
  Check(10, absl::Seconds(1));
  Check(20, absl::Seconds(59));
  EXPECT_EQ(lines_.size(), 1u);
  Check(25, absl::Seconds(60));
  ASSERT_EQ(lines_.size(), 2u);
  EXPECT_EQ(lines_[1],
            "dropped 22 datagrams more with a bad UDP checksum in the last 1m (25 in all)");
  Check(25, absl::Minutes(10));  // no more: nothing said
  EXPECT_EQ(lines_.size(), 2u);
  Check(26, absl::Minutes(11));
  ASSERT_EQ(lines_.size(), 3u);
  EXPECT_EQ(lines_[2],
            "dropped 1 datagram more with a bad UDP checksum in the last 10m (26 in all)");
}

TEST_F(ChecksumHintTest, TheLastLookSaysWhatIsUnsaidWithinThePeriod) {
  Check(3, absl::ZeroDuration());
  Check(5, absl::Seconds(2));
  ASSERT_EQ(lines_.size(), 1u);
  stack::StackCounters c;
  c.parse_errors[static_cast<int>(net::ParseError::kBadUdpChecksum)] = 5;
  hint_.Check(c, start_ + absl::Seconds(3), /*stopping=*/true);
  ASSERT_EQ(lines_.size(), 2u);
  EXPECT_EQ(lines_[1],
            "dropped 2 datagrams more with a bad UDP checksum in the last 3s (5 in all)");
  hint_.Check(c, start_ + absl::Seconds(4), /*stopping=*/true);  // nothing new: nothing said
  EXPECT_EQ(lines_.size(), 2u);
}

TEST_F(ChecksumHintTest, OtherParseErrorsAreNotChecksumDrops) {
  stack::StackCounters c;
  c.parse_errors[static_cast<int>(net::ParseError::kTruncatedUdp)] = 5;
  hint_.Check(c, start_);
  EXPECT_TRUE(lines_.empty());
}

}  // namespace
}  // namespace quadsock::service
