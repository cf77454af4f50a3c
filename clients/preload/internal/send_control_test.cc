// ReadSendControl against what Linux's udp_sendmsg does with the same control messages.
#include "clients/preload/internal/send_control.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/udp.h>

#include <cstring>
#include <vector>

#include <gtest/gtest.h>

namespace quadsock::preload {
namespace {

// A control buffer built message by message, each at its aligned place.
class Control {
 public:
  template <typename T>
  Control& Add(int level, int type, const T& data, size_t len = CMSG_LEN(sizeof(T))) {
    const size_t at = bytes_.size();
    bytes_.resize(at + CMSG_SPACE(sizeof(T)));
    cmsghdr c{};
    c.cmsg_len = len;
    c.cmsg_level = level;
    c.cmsg_type = type;
    std::memcpy(bytes_.data() + at, &c, sizeof(c));
    std::memcpy(bytes_.data() + at + CMSG_LEN(0), &data, sizeof(T));
    return *this;
  }
  Control& Pad(size_t n) {
    bytes_.resize(bytes_.size() + n);
    return *this;
  }
  msghdr Message() {
    msghdr m{};
    m.msg_control = bytes_.data();
    m.msg_controllen = bytes_.size();
    return m;
  }

 private:
  std::vector<uint8_t> bytes_;
};

in_pktinfo Pktinfo4(const char* spec_dst, int ifindex = 0) {
  in_pktinfo p{};
  p.ipi_ifindex = ifindex;
  inet_pton(AF_INET, spec_dst, &p.ipi_spec_dst);
  return p;
}

in6_pktinfo Pktinfo6(const char* addr, unsigned ifindex = 0) {
  in6_pktinfo p{};
  p.ipi6_ifindex = ifindex;
  inet_pton(AF_INET6, addr, &p.ipi6_addr);
  return p;
}

net::IpAddress Ip(const char* text) { return *net::IpAddress::Parse(text); }

TEST(SendControlTest, IpPktinfoGivesTheSourceAndInterfaceAmongOtherMessages) {
  Control c;
  c.Add(SOL_IP, IP_TOS, 0x10).Add(SOL_IP, IP_PKTINFO, Pktinfo4("10.8.0.2", 3));
  c.Add(SOL_UDP, UDP_SEGMENT, uint16_t{1200});
  msghdr m = c.Message();
  SendControl out;
  ASSERT_EQ(ReadSendControl(m, AF_INET, true, &out), 0);
  EXPECT_EQ(out.source, Ip("10.8.0.2"));
  EXPECT_EQ(out.ifindex, 3);
  // 0.0.0.0 asks for no address; an IPv6 message on an IPv4 socket is not looked at.
  Control none;
  none.Add(SOL_IP, IP_PKTINFO, Pktinfo4("0.0.0.0")).Add(SOL_IPV6, IPV6_PKTINFO, 7);
  m = none.Message();
  ASSERT_EQ(ReadSendControl(m, AF_INET, true, &out), 0);
  EXPECT_FALSE(out.source.has_value());
}

TEST(SendControlTest, NoControlMessagesOrTooFewBytesForOneAskNothing) {
  msghdr m{};
  SendControl out;
  EXPECT_EQ(ReadSendControl(m, AF_INET, true, &out), 0);
  Control c;
  c.Pad(sizeof(cmsghdr) - 1);
  m = c.Message();
  EXPECT_EQ(ReadSendControl(m, AF_INET, true, &out), 0);
  m.msg_control = nullptr;  // bytes at no address
  EXPECT_EQ(ReadSendControl(m, AF_INET, true, &out), -EFAULT);
}

TEST(SendControlTest, AHeaderThatDoesNotFitOrSaysTooLittleIsInvalid) {
  SendControl out;
  Control past;  // a length past the buffer's end
  past.Add(SOL_IP, IP_PKTINFO, Pktinfo4("10.8.0.2"), CMSG_SPACE(sizeof(in_pktinfo)) + 8);
  msghdr m = past.Message();
  EXPECT_EQ(ReadSendControl(m, AF_INET, true, &out), -EINVAL);
  Control padded;  // zeros after the message: a header of length 0
  padded.Add(SOL_IP, IP_PKTINFO, Pktinfo4("10.8.0.2")).Pad(sizeof(cmsghdr));
  m = padded.Message();
  EXPECT_EQ(ReadSendControl(m, AF_INET, true, &out), -EINVAL);
  Control short_pktinfo;
  short_pktinfo.Add(SOL_IP, IP_PKTINFO, Pktinfo4("10.8.0.2"), CMSG_LEN(4));
  m = short_pktinfo.Message();
  EXPECT_EQ(ReadSendControl(m, AF_INET, true, &out), -EINVAL);
}

TEST(SendControlTest, TypesTheKernelDoesNotKnowAtItsLevelsAreInvalid) {
  SendControl out;
  for (auto [level, type, family, v4] :
       {std::tuple{SOL_IP, 99, AF_INET, true}, std::tuple{SOL_SOCKET, 999, AF_INET, true},
        std::tuple{SOL_UDP, 1, AF_INET, true}, std::tuple{SOL_IPV6, 999, AF_INET6, false}}) {
    Control c;
    c.Add(level, type, 1);
    msghdr m = c.Message();
    EXPECT_EQ(ReadSendControl(m, family, v4, &out), -EINVAL) << level << "/" << type;
  }
  // Other levels, and IPv6's on the way to an IPv4 address, are not looked at.
  Control ignored;
  ignored.Add(IPPROTO_TCP, 1, 1).Add(SOL_IPV6, 999, 1);
  msghdr m = ignored.Message();
  EXPECT_EQ(ReadSendControl(m, AF_INET6, true, &out), 0);
}

TEST(SendControlTest, AnIpv6SocketAsksByTheDestinationsFamily) {
  SendControl out;
  Control six;
  six.Add(SOL_IPV6, IPV6_PKTINFO, Pktinfo6("fd00:8::2", 4)).Add(SOL_IP, IP_PKTINFO, 1);
  msghdr m = six.Message();
  ASSERT_EQ(ReadSendControl(m, AF_INET6, false, &out), 0);  // IPv4's message not looked at
  EXPECT_EQ(out.source, Ip("fd00:8::2"));
  EXPECT_EQ(out.ifindex, 4);
  // To an IPv4 address: IPV6_PKTINFO must name a v4-mapped one, and IP_PKTINFO counts.
  EXPECT_EQ(ReadSendControl(m, AF_INET6, true, &out), -EINVAL);
  Control mapped;
  mapped.Add(SOL_IPV6, IPV6_PKTINFO, Pktinfo6("::ffff:10.8.0.2"));
  m = mapped.Message();
  ASSERT_EQ(ReadSendControl(m, AF_INET6, true, &out), 0);
  EXPECT_EQ(out.source, Ip("10.8.0.2"));
  Control four;
  four.Add(SOL_IP, IP_PKTINFO, Pktinfo4("10.8.0.2"));
  m = four.Message();
  ASSERT_EQ(ReadSendControl(m, AF_INET6, true, &out), 0);
  EXPECT_EQ(out.source, Ip("10.8.0.2"));
}

}  // namespace
}  // namespace quadsock::preload
