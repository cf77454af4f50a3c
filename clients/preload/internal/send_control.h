// What a sendmsg's control messages ask of a datagram, read as Linux's udp_sendmsg reads them
// (udp_cmsg_send, then ip_cmsg_send for an IPv4 destination, ip6_datagram_send_ctl for an IPv6
// one): every header checked (CMSG_OK), and the source address and interface of IP_PKTINFO
// and IPV6_PKTINFO taken. The other messages the kernel knows are accepted and have no effect
// here (IP_TOS, IP_TTL, IPV6_HOPLIMIT and their kin; UDP_SEGMENT: the datagram goes whole);
// one it does not know at those levels is EINVAL, as the kernel's.
//
//   SendControl c;
//   if (int r = ReadSendControl(*m, AF_INET6, /*v4_destination=*/true, &c); r < 0) return r;
#ifndef QUADSOCK_CLIENTS_PRELOAD_INTERNAL_SEND_CONTROL_H_
#define QUADSOCK_CLIENTS_PRELOAD_INTERNAL_SEND_CONTROL_H_

#include <sys/socket.h>

#include <optional>

#include "stack/net/address.h"

namespace quadsock::preload {

struct SendControl {
  std::optional<net::IpAddress> source;  // the address asked for (plain IPv4 for IPv4); none
  int ifindex = 0;                       // the interface asked for; 0 for any
};

// 0, or -EFAULT (control messages at no address) or -EINVAL. `family` is the socket's;
// `v4_destination` says the datagram goes to an IPv4 address (an IPv6 socket's v4-mapped one).
int ReadSendControl(const msghdr& m, int family, bool v4_destination, SendControl* out);

}  // namespace quadsock::preload

#endif  // QUADSOCK_CLIENTS_PRELOAD_INTERNAL_SEND_CONTROL_H_
