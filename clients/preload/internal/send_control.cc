#include "clients/preload/internal/send_control.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/udp.h>

#include <cstring>

namespace quadsock::preload {
namespace {

// Linux's, which the C library's headers do not name (linux/in.h, linux/in6.h).
constexpr int kIpProtocol = 52;
constexpr int kIpv6FlowInfo = 11;

// The types the kernel takes at SOL_SOCKET (__sock_cmsg_send), at SOL_IP for an IPv4
// destination (ip_cmsg_send) and at SOL_IPV6 for an IPv6 one (ip6_datagram_send_ctl).
bool KnownSocketType(int type) {
  return type == SO_MARK || type == SO_TIMESTAMPING_OLD || type == SCM_TXTIME ||
         type == SCM_RIGHTS || type == SCM_CREDENTIALS;
}
bool KnownIpType(int type) {
  return type == IP_RETOPTS || type == IP_PKTINFO || type == IP_TTL || type == IP_TOS ||
         type == kIpProtocol;
}
bool KnownIpv6Type(int type) {
  switch (type) {
    case IPV6_PKTINFO: case IPV6_2292PKTINFO: case kIpv6FlowInfo: case IPV6_2292HOPOPTS:
    case IPV6_HOPOPTS: case IPV6_2292DSTOPTS: case IPV6_DSTOPTS: case IPV6_RTHDRDSTOPTS:
    case IPV6_2292RTHDR: case IPV6_RTHDR: case IPV6_2292HOPLIMIT: case IPV6_HOPLIMIT:
    case IPV6_TCLASS: case IPV6_DONTFRAG:
      return true;
    default:
      return false;
  }
}

}  // namespace

int ReadSendControl(const msghdr& m, int family, bool v4_destination, SendControl* out) {
  *out = {};
  if (m.msg_controllen == 0) return 0;
  if (m.msg_control == nullptr) return -EFAULT;
  const auto* control = static_cast<const uint8_t*>(m.msg_control);
  // As the kernel's for_each_cmsghdr: a header is read while a whole one fits.
  for (size_t at = 0; at <= m.msg_controllen && m.msg_controllen - at >= sizeof(cmsghdr);) {
    cmsghdr c;
    std::memcpy(&c, control + at, sizeof(c));
    if (c.cmsg_len < sizeof(cmsghdr) || c.cmsg_len > m.msg_controllen - at) return -EINVAL;
    const uint8_t* data = control + at + CMSG_LEN(0);
    at += CMSG_ALIGN(c.cmsg_len);
    if (c.cmsg_level == SOL_UDP) {
      if (c.cmsg_type != UDP_SEGMENT || c.cmsg_len != CMSG_LEN(sizeof(uint16_t))) return -EINVAL;
      continue;
    }
    if (c.cmsg_level == SOL_SOCKET) {
      if (!KnownSocketType(c.cmsg_type)) return -EINVAL;
      continue;
    }
    const bool pktinfo6 = c.cmsg_type == IPV6_PKTINFO ||
                          (c.cmsg_type == IPV6_2292PKTINFO && !v4_destination);
    if (c.cmsg_level == SOL_IPV6 && pktinfo6 && family == AF_INET6) {
      if (c.cmsg_len < CMSG_LEN(sizeof(in6_pktinfo))) return -EINVAL;
      in6_pktinfo p;
      std::memcpy(&p, data, sizeof(p));
      const net::IpAddress a = net::IpAddress::V6Bytes(p.ipi6_addr.s6_addr);
      if (p.ipi6_ifindex != 0) out->ifindex = static_cast<int>(p.ipi6_ifindex);
      if (v4_destination) {
        // An IPv4 datagram takes a v4-mapped address only.
        if (!a.IsV4Mapped()) return -EINVAL;
        out->source = a.Unmapped();
      } else if (!a.IsUnspecified()) {
        out->source = a;
      }
      continue;
    }
    if (v4_destination && c.cmsg_level == SOL_IP) {
      if (!KnownIpType(c.cmsg_type)) return -EINVAL;
      if (c.cmsg_type != IP_PKTINFO) continue;
      if (c.cmsg_len != CMSG_LEN(sizeof(in_pktinfo))) return -EINVAL;
      in_pktinfo p;
      std::memcpy(&p, data, sizeof(p));
      if (p.ipi_ifindex != 0) out->ifindex = p.ipi_ifindex;
      out->source = net::IpAddress::V4(ntohl(p.ipi_spec_dst.s_addr));
      continue;
    }
    if (!v4_destination && c.cmsg_level == SOL_IPV6 && !KnownIpv6Type(c.cmsg_type)) {
      return -EINVAL;
    }
  }
  // 0.0.0.0 asks for none.
  if (out->source.has_value() && out->source->IsUnspecifiedInAnyForm()) out->source.reset();
  return 0;
}

}  // namespace quadsock::preload
