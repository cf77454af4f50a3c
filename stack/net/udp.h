// The UDP header (RFC 768). Fields are host order; Parse and Write convert. Checksum checks
// need the IP pseudo-header and live in frame.cc.
//
//   UdpHeader udp;
//   if (udp.Parse(r) == ParseError::kOk) deliver(udp.dst_port, ...);
#ifndef QUADSOCK_STACK_NET_UDP_H_
#define QUADSOCK_STACK_NET_UDP_H_

#include <cstdint>

#include "stack/net/bytes.h"
#include "stack/net/parse_error.h"

namespace quadsock::net {

struct UdpHeader {
  static constexpr size_t kSize = 8;

  uint16_t src_port = 0;
  uint16_t dst_port = 0;
  uint16_t length = 0;  // header and payload
  uint16_t checksum = 0;

  ParseError Parse(ByteReader& r) {
    if (!r.ReadU16(src_port) || !r.ReadU16(dst_port) || !r.ReadU16(length) ||
        !r.ReadU16(checksum)) {
      return ParseError::kTruncatedUdp;
    }
    return ParseError::kOk;
  }
  void Write(ByteWriter& w) const {
    w.WriteU16(src_port);
    w.WriteU16(dst_port);
    w.WriteU16(length);
    w.WriteU16(checksum);
  }
};

}  // namespace quadsock::net

#endif  // QUADSOCK_STACK_NET_UDP_H_
