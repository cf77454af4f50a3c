#include "stack/net/ethernet.h"

#include <gtest/gtest.h>

#include "stack/net/test_frames.h"

namespace quadsock::net {
namespace {

using testing::FromHex;

TEST(EthernetTest, ParsesPlainHeader) {
  std::vector<uint8_t> f = FromHex("ffffffffffff 020000000001 0806 aabb");
  ByteReader r(f);
  EthernetHeader eth;
  ASSERT_EQ(eth.Parse(r), ParseError::kOk);
  EXPECT_TRUE(eth.dst.IsBroadcast());
  EXPECT_EQ(eth.src.ToString(), "02:00:00:00:00:01");
  EXPECT_EQ(eth.ethertype, kEtherTypeArp);
  EXPECT_EQ(eth.vlan_count, 0);
  EXPECT_EQ(r.offset(), 14u);
  EXPECT_EQ(eth.size(), 14u);
}

TEST(EthernetTest, ParsesVlanAndQinQ) {
  std::vector<uint8_t> f = FromHex("020000000002 020000000001 88a8 0064 8100 a00a 86dd");
  ByteReader r(f);
  EthernetHeader eth;
  ASSERT_EQ(eth.Parse(r), ParseError::kOk);
  EXPECT_EQ(eth.vlan_count, 2);
  EXPECT_EQ(eth.vlans[0].tpid, kEtherTypeQinQ);
  EXPECT_EQ(eth.vlans[0].vlan_id(), 100);
  EXPECT_EQ(eth.vlans[1].vlan_id(), 10);
  EXPECT_EQ(eth.vlans[1].tci >> 13, 5);  // priority
  EXPECT_EQ(eth.ethertype, kEtherTypeIpv6);
  EXPECT_EQ(r.offset(), 22u);
}

TEST(EthernetTest, RejectsThreeTagsAndTruncation) {
  std::vector<uint8_t> three = FromHex("020000000002 020000000001 8100 0001 8100 0002 8100 0003 0800");
  ByteReader r(three);
  EthernetHeader eth;
  EXPECT_EQ(eth.Parse(r), ParseError::kTooManyVlanTags);
  for (size_t n : {0, 5, 13}) {
    std::vector<uint8_t> f = FromHex("020000000002 020000000001 0800");
    f.resize(n);
    ByteReader rr(f);
    EXPECT_EQ(eth.Parse(rr), ParseError::kTruncatedEthernet) << n;
  }
  std::vector<uint8_t> cut_tag = FromHex("020000000002 020000000001 8100 0001");
  ByteReader rt(cut_tag);
  EXPECT_EQ(eth.Parse(rt), ParseError::kTruncatedEthernet);
}

TEST(EthernetTest, WriteRoundTrips) {
  EthernetHeader eth;
  eth.dst = *MacAddress::Parse("02:00:00:00:00:02");
  eth.src = *MacAddress::Parse("02:00:00:00:00:01");
  eth.ethertype = kEtherTypeIpv4;
  eth.vlan_count = 1;
  eth.vlans[0] = VlanTag{kEtherTypeVlan, 42};
  uint8_t buf[18];
  ByteWriter w(buf);
  eth.Write(w);
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(std::vector<uint8_t>(buf, buf + 18),
            FromHex("020000000002 020000000001 8100 002a 0800"));
  ByteReader r(buf);
  EthernetHeader back;
  ASSERT_EQ(back.Parse(r), ParseError::kOk);
  EXPECT_EQ(back.vlans[0], eth.vlans[0]);
  uint8_t small[17];
  ByteWriter ws(small);
  eth.Write(ws);
  EXPECT_FALSE(ws.ok());
}

TEST(ArpTest, ParsesRequestAndWritesReply) {
  std::vector<uint8_t> body =
      FromHex("0001 0800 06 04 0001 020000000001 0a010001 000000000000 0a010002");
  ByteReader r(body);
  ArpPacket arp;
  ASSERT_EQ(arp.Parse(r), ParseError::kOk);
  EXPECT_EQ(arp.op, ArpPacket::kRequest);
  EXPECT_EQ(arp.sender_ip.ToString(), "10.1.0.1");
  EXPECT_EQ(arp.target_ip.ToString(), "10.1.0.2");
  EXPECT_EQ(arp.sender_mac.ToString(), "02:00:00:00:00:01");

  ArpPacket reply;
  reply.op = ArpPacket::kReply;
  reply.sender_mac = *MacAddress::Parse("02:00:00:00:00:02");
  reply.sender_ip = arp.target_ip;
  reply.target_mac = arp.sender_mac;
  reply.target_ip = arp.sender_ip;
  uint8_t buf[ArpPacket::kSize];
  ByteWriter w(buf);
  reply.Write(w);
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(std::vector<uint8_t>(buf, buf + sizeof(buf)),
            FromHex("0001 0800 06 04 0002 020000000002 0a010002 020000000001 0a010001"));
}

TEST(ArpTest, RejectsOtherHardwareAndOps) {
  for (const char* hex : {"0006 0800 06 04 0001 020000000001 0a010001 000000000000 0a010002",
                          "0001 86dd 06 04 0001 020000000001 0a010001 000000000000 0a010002",
                          "0001 0800 06 04 0003 020000000001 0a010001 000000000000 0a010002",
                          "0001 0800 08 04 0001 020000000001 0a010001 000000000000 0a010002"}) {
    std::vector<uint8_t> body = FromHex(hex);
    ByteReader r(body);
    ArpPacket arp;
    EXPECT_EQ(arp.Parse(r), ParseError::kUnsupportedArp) << hex;
  }
  std::vector<uint8_t> cut = FromHex("0001 0800 06 04 0001 020000000001 0a010001 0000");
  ByteReader r(cut);
  ArpPacket arp;
  EXPECT_EQ(arp.Parse(r), ParseError::kTruncatedArp);
}

}  // namespace
}  // namespace quadsock::net
