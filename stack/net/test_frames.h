// Helpers for tests of the wire formats: hex to bytes, and a ready-made UDP frame.
//
//   std::vector<uint8_t> frame = testing::UdpFrame4("10.0.0.1", 1000, "10.0.0.2", 53, "hi");
#ifndef QUADSOCK_STACK_NET_TEST_FRAMES_H_
#define QUADSOCK_STACK_NET_TEST_FRAMES_H_

#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "stack/net/frame_builder.h"

namespace quadsock::net::testing {

inline std::vector<uint8_t> FromHex(const std::string& hex) {
  std::string digits;
  for (char c : hex) {
    if (std::isxdigit(static_cast<unsigned char>(c))) digits += c;
  }
  std::vector<uint8_t> out;
  for (size_t i = 0; i + 1 < digits.size(); i += 2) {
    out.push_back(static_cast<uint8_t>(std::strtoul(digits.substr(i, 2).c_str(), nullptr, 16)));
  }
  return out;
}

inline LinkAddresses TestLink() {
  return {*MacAddress::Parse("02:00:00:00:00:01"), *MacAddress::Parse("02:00:00:00:00:02"), {}};
}

inline std::vector<uint8_t> UdpFrame(const std::string& src, uint16_t sport,
                                     const std::string& dst, uint16_t dport,
                                     const std::string& payload) {
  std::vector<uint8_t> buf(2048);
  UdpAddresses a{{*IpAddress::Parse(src), sport}, {*IpAddress::Parse(dst), dport}};
  std::optional<size_t> n =
      BuildUdp(TestLink(), a,
               {reinterpret_cast<const uint8_t*>(payload.data()), payload.size()}, buf);
  buf.resize(n.value_or(0));
  return buf;
}

}  // namespace quadsock::net::testing

#endif  // QUADSOCK_STACK_NET_TEST_FRAMES_H_
