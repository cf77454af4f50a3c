// The semantics program's checks of IP_PKTINFO and IPV6_PKTINFO on sends: the source address
// and interface a datagram asks for, as a DNS server bound to the wildcard asks for them.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <string>

#include "clients/preload/testing/semantics.h"

namespace semantics {
namespace {

// sendmsg of "pktinfo" to the peer with a PKTINFO asking for `source` ("" for none) on
// interface `ifindex`; `len`, if given, in place of the message's own length.
long SendWithPktinfo(int s, const std::string& fam, const std::string& source, int ifindex,
                     const Addr& to, size_t len = 0) {
  char data[] = "pktinfo";
  iovec iv{data, sizeof(data) - 1};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(in6_pktinfo))] = {};
  msghdr m{};
  m.msg_name = const_cast<sockaddr*>(to.sa());
  m.msg_namelen = to.len;
  m.msg_iov = &iv;
  m.msg_iovlen = 1;
  m.msg_control = control;
  cmsghdr* c = reinterpret_cast<cmsghdr*>(control);
  if (fam == "ipv4") {
    in_pktinfo p{};
    p.ipi_ifindex = ifindex;
    if (!source.empty()) inet_pton(AF_INET, source.c_str(), &p.ipi_spec_dst);
    *c = {CMSG_LEN(sizeof(p)), IPPROTO_IP, IP_PKTINFO};
    memcpy(CMSG_DATA(c), &p, sizeof(p));
    m.msg_controllen = CMSG_SPACE(sizeof(p));
  } else {
    in6_pktinfo p{};
    p.ipi6_ifindex = ifindex;
    if (!source.empty()) inet_pton(AF_INET6, source.c_str(), &p.ipi6_addr);
    *c = {CMSG_LEN(sizeof(p)), IPPROTO_IPV6, IPV6_PKTINFO};
    memcpy(CMSG_DATA(c), &p, sizeof(p));
    m.msg_controllen = CMSG_SPACE(sizeof(p));
  }
  if (len != 0) c->cmsg_len = len;
  return sendmsg(s, &m, 0);
}

}  // namespace

// PKTINFO on sends: a server bound to the wildcard answers from the address it was asked at,
// on the interface the question came in by (both from the question's own PKTINFO).
void PktinfoSends(const std::string& fam, const std::string& local, const std::string& peer_ip) {
  uint16_t pport, lport;
  const int peer = Peer(peer_ip, &pport);
  const int s = Local(fam == "ipv4" ? "0.0.0.0" : "::", &lport);
  int on = 1;
  setsockopt(s, fam == "ipv4" ? IPPROTO_IP : IPPROTO_IPV6,
             fam == "ipv4" ? IP_PKTINFO : IPV6_RECVPKTINFO, &on, sizeof(on));
  PeerSend(peer, "ask", local, lport);
  Readable(s);
  char buf[64];
  iovec iv{buf, sizeof(buf)};
  alignas(cmsghdr) char control[256];
  msghdr m{.msg_iov = &iv, .msg_iovlen = 1, .msg_control = control,
           .msg_controllen = sizeof(control)};
  recvmsg(s, &m, 0);
  int ifindex = 0;
  for (cmsghdr* c = CMSG_FIRSTHDR(&m); c != nullptr; c = CMSG_NXTHDR(&m, c)) {
    if (c->cmsg_type == IP_PKTINFO && c->cmsg_level == IPPROTO_IP) {
      ifindex = reinterpret_cast<in_pktinfo*>(CMSG_DATA(c))->ipi_ifindex;
    } else if (c->cmsg_type == IPV6_PKTINFO && c->cmsg_level == IPPROTO_IPV6) {
      ifindex = static_cast<int>(reinterpret_cast<in6_pktinfo*>(CMSG_DATA(c))->ipi6_ifindex);
    }
  }
  const Addr to = Make(peer_ip, pport);
  // What the send returned, and whether the peer had it from local:`port`.
  const auto answer = [&](long r, uint16_t port = 0) {
    sockaddr_storage from{};
    const std::string got = r < 0 ? "" : PeerReceive(peer, &from);
    const std::string expected = local + ":" + std::to_string(port != 0 ? port : lport);
    return Outcome(r) + (got != "pktinfo"          ? " not received"
                         : Text(from) == expected ? " from local"
                                                  : " elsewhere");
  };
  Say(fam + " PKTINFO send, the address asked at",
      answer(SendWithPktinfo(s, fam, local, ifindex, to)));
  Say(fam + " PKTINFO send, no address", answer(SendWithPktinfo(s, fam, "", 0, to)));
  const std::string not_ours = fam == "ipv4" ? "192.0.2.1" : "2001:db8::1";
  Say(fam + " PKTINFO send, an address not ours",
      answer(SendWithPktinfo(s, fam, not_ours, 0, to)));
  Say(fam + " PKTINFO send, an interface no one has",
      answer(SendWithPktinfo(s, fam, local, 9999, to)));
  Say(fam + " PKTINFO send, too short", answer(SendWithPktinfo(s, fam, local, 0, to, CMSG_LEN(4))));
  Say(fam + " PKTINFO send, past the buffer",
      answer(SendWithPktinfo(s, fam, local, 0, to, CMSG_SPACE(sizeof(in6_pktinfo)) + 8)));
  close(s);
  if (fam == "ipv4") {
    // A dual-stack IPv6 socket answers an IPv4 peer: IPV6_PKTINFO must name a v4-mapped
    // address then.
    uint16_t port;
    const int dual = Local("::", &port);
    const Addr mapped_peer = Make("::ffff:" + peer_ip, pport);
    Say("dual-stack PKTINFO send, v4-mapped",
        answer(SendWithPktinfo(dual, "ipv6", "::ffff:" + local, 0, mapped_peer), port));
    Say("dual-stack PKTINFO send, an IPv6 address",
        answer(SendWithPktinfo(dual, "ipv6", "fd00::1", 0, mapped_peer), port));
    close(dual);
  }
  close(peer);
}

}  // namespace semantics
