// Linux UDP socket semantics, checked with nothing but the C library, so that one program runs
// on the kernel and under the preload library and the two runs can be compared line for line
// (tests/preload_semantics_test.py does both). Each check prints "name: what it saw"; what it
// saw names errnos and flags, never port numbers or times, so the two runs print the same
// lines where the semantics agree. A check whose result is wrong on its face (a payload that
// came back different) prints "FAILED"; the exit status is 1 then. Signals and PKTINFO on
// sends have files of their own (signal_semantics.cc, pktinfo_semantics.cc; semantics.h).
//
//   socket_semantics --local4=10.8.0.2 --peer4=10.8.0.1 --local6=fd00:8::2 --peer6=fd00:8::1
//                    --peer-netns=/run/netns/peer
//
// The local addresses are the ones under test (quadsockd's, or the kernel's own); the peers are
// kernel sockets made in the peer's network namespace.
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "clients/preload/testing/semantics.h"

namespace semantics {

std::string local4, peer4, local6, peer6;
int peer_ns = -1, own_ns = -1;
int failures = 0;
uint16_t next_port = 7000;

std::string ErrnoName(int e) {
  const char* n = strerrorname_np(e);
  return n != nullptr ? n : std::to_string(e);
}

std::string Outcome(long r) { return r < 0 ? ErrnoName(errno) : "0"; }

void Say(const std::string& name, const std::string& what) {
  std::printf("%s: %s\n", name.c_str(), what.c_str());
  std::fflush(stdout);
}

void Expect(const std::string& name, bool ok, const std::string& what) {
  Say(name, ok ? what : "FAILED (" + what + ")");
  if (!ok) ++failures;
}

Addr Make(const std::string& ip, uint16_t port) {
  Addr a;
  if (ip.find(':') == std::string::npos) {
    auto* in = reinterpret_cast<sockaddr_in*>(&a.s);
    in->sin_family = AF_INET;
    in->sin_port = htons(port);
    inet_pton(AF_INET, ip.c_str(), &in->sin_addr);
    a.len = sizeof(sockaddr_in);
  } else {
    auto* in6 = reinterpret_cast<sockaddr_in6*>(&a.s);
    in6->sin6_family = AF_INET6;
    in6->sin6_port = htons(port);
    inet_pton(AF_INET6, ip.c_str(), &in6->sin6_addr);
    a.len = sizeof(sockaddr_in6);
    a.family = AF_INET6;
  }
  return a;
}

std::string Text(const sockaddr_storage& s, bool with_port) {
  char buf[INET6_ADDRSTRLEN] = "?";
  uint16_t port = 0;
  if (s.ss_family == AF_INET) {
    auto* in = reinterpret_cast<const sockaddr_in*>(&s);
    inet_ntop(AF_INET, &in->sin_addr, buf, sizeof(buf));
    port = ntohs(in->sin_port);
  } else if (s.ss_family == AF_INET6) {
    auto* in6 = reinterpret_cast<const sockaddr_in6*>(&s);
    inet_ntop(AF_INET6, &in6->sin6_addr, buf, sizeof(buf));
    port = ntohs(in6->sin6_port);
  } else {
    return "family " + std::to_string(s.ss_family);
  }
  return with_port ? std::string(buf) + ":" + std::to_string(port) : std::string(buf);
}

uint16_t PortOf(int fd) {
  sockaddr_storage s{};
  socklen_t len = sizeof(s);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&s), &len) != 0) return 0;
  return ntohs(s.ss_family == AF_INET ? reinterpret_cast<sockaddr_in*>(&s)->sin_port
                                      : reinterpret_cast<sockaddr_in6*>(&s)->sin6_port);
}

int Peer(const std::string& ip, uint16_t* port) {
  if (setns(peer_ns, CLONE_NEWNET) != 0) { perror("setns peer"); std::exit(2); }
  const Addr a = Make(ip, 0);
  const int fd = socket(a.family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (setns(own_ns, CLONE_NEWNET) != 0) { perror("setns back"); std::exit(2); }
  if (fd < 0 || bind(fd, a.sa(), a.len) != 0) { perror("peer socket"); std::exit(2); }
  *port = PortOf(fd);
  timeval tv{5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  return fd;
}

int Local(const std::string& ip, uint16_t* port, int extra_type) {
  const Addr probe = Make(ip, 0);
  const int fd = socket(probe.family, SOCK_DGRAM | extra_type, 0);
  for (int tries = 0; tries < 50; ++tries) {
    *port = next_port++;
    const Addr a = Make(ip, *port);
    if (bind(fd, a.sa(), a.len) == 0) return fd;
  }
  perror("bind a local socket");
  std::exit(2);
}

bool Readable(int fd, int ms) {
  pollfd p{fd, POLLIN, 0};
  return poll(&p, 1, ms) == 1 && (p.revents & POLLIN) != 0;
}

void PeerSend(int peer, const std::string& data, const std::string& ip, uint16_t port) {
  const Addr to = Make(ip, port);
  if (sendto(peer, data.data(), data.size(), 0, to.sa(), to.len) != static_cast<ssize_t>(data.size())) {
    perror("peer sendto");
  }
}

std::string PeerReceive(int peer, sockaddr_storage* from) {
  char buf[2048];
  sockaddr_storage f{};
  socklen_t len = sizeof(f);
  const ssize_t n = recvfrom(peer, buf, sizeof(buf), 0, reinterpret_cast<sockaddr*>(&f), &len);
  if (from != nullptr) *from = f;
  return n < 0 ? "<" + ErrnoName(errno) + ">" : std::string(buf, n);
}

double Now() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec / 1e9;
}

}  // namespace semantics

using namespace semantics;  // NOLINT: the program's own helpers

namespace {

void Basics(const std::string& fam, const std::string& local, const std::string& peer_ip) {
  uint16_t pport, lport;
  const int peer = Peer(peer_ip, &pport);
  const int s = Local(local, &lport, SOCK_NONBLOCK | SOCK_CLOEXEC);
  Say(fam + " socket flags", std::string("nonblock=") +
                                 ((fcntl(s, F_GETFL) & O_NONBLOCK) ? "1" : "0") + " cloexec=" +
                                 ((fcntl(s, F_GETFD) & FD_CLOEXEC) ? "1" : "0"));
  sockaddr_storage name{};
  socklen_t len = sizeof(name);
  getsockname(s, reinterpret_cast<sockaddr*>(&name), &len);
  Expect(fam + " getsockname", Text(name, false) == local && PortOf(s) == lport,
         "address " + Text(name, false) + " port " + (PortOf(s) == lport ? "as bound" : "other"));
  len = sizeof(name);
  Say(fam + " getpeername unconnected",
      Outcome(getpeername(s, reinterpret_cast<sockaddr*>(&name), &len)));
  const Addr again = Make(local, lport);
  Say(fam + " bind twice", Outcome(bind(s, again.sa(), again.len)));
  const int other = socket(again.family, SOCK_DGRAM, 0);
  Say(fam + " bind a taken port", Outcome(bind(other, again.sa(), again.len)));
  const Addr any_port = Make(local, 0);
  const std::string bound_any = Outcome(bind(other, any_port.sa(), any_port.len));
  Say(fam + " bind port 0", bound_any + (PortOf(other) != 0 ? " port chosen" : " no port"));
  close(other);
  const Addr nowhere = Make(fam == "ipv4" ? "10.77.0.9" : "fd00:77::9", 0);
  const int third = socket(again.family, SOCK_DGRAM, 0);
  Say(fam + " bind an address nobody has", Outcome(bind(third, nowhere.sa(), nowhere.len)));
  close(third);
  Say(fam + " send unconnected", Outcome(send(s, "x", 1, 0)));
  char buf[256];
  Say(fam + " recv empty non-blocking", Outcome(recv(s, buf, sizeof(buf), 0)));

  // Both ways.
  const Addr to_peer = Make(peer_ip, pport);
  Say(fam + " sendto", std::to_string(sendto(s, "to peer", 7, 0, to_peer.sa(), to_peer.len)));
  sockaddr_storage from{};
  const std::string got = PeerReceive(peer, &from);
  Expect(fam + " peer received", got == "to peer" && Text(from, false) == local &&
                                     PortOf(s) == ntohs(reinterpret_cast<sockaddr_in*>(&from)->sin_port),
         got + " from " + Text(from, false));
  PeerSend(peer, "to local", local, lport);
  Readable(s);
  len = sizeof(from);
  ssize_t n = recvfrom(s, buf, sizeof(buf), 0, reinterpret_cast<sockaddr*>(&from), &len);
  Expect(fam + " recvfrom", n == 8 && std::string(buf, 8) == "to local" && Text(from) == Text(to_peer.s),
         std::to_string(n) + " bytes, source " + (Text(from) == Text(to_peer.s) ? "the peer" : Text(from)) +
             ", length " + std::to_string(len));

  // Peek, truncation, FIONREAD.
  PeerSend(peer, std::string(100, 'p'), local, lport);
  Readable(s);
  int avail = -1;
  ioctl(s, FIONREAD, &avail);
  Say(fam + " FIONREAD", std::to_string(avail));
  n = recv(s, buf, 10, MSG_PEEK);
  Say(fam + " MSG_PEEK", std::to_string(n));
  n = recv(s, buf, 10, MSG_PEEK | MSG_TRUNC);
  Say(fam + " MSG_PEEK|MSG_TRUNC", std::to_string(n));
  iovec v{buf, 10};
  msghdr m{};
  m.msg_iov = &v;
  m.msg_iovlen = 1;
  n = recvmsg(s, &m, 0);
  Say(fam + " recvmsg truncated", std::to_string(n) + ((m.msg_flags & MSG_TRUNC) ? " MSG_TRUNC" : ""));
  Say(fam + " recv after the truncated one", Outcome(recv(s, buf, sizeof(buf), 0)));

  // Connected: write/read, writev/readv, send/recv, peer name, AF_UNSPEC.
  Say(fam + " connect", Outcome(connect(s, to_peer.sa(), to_peer.len)));
  len = sizeof(name);
  getpeername(s, reinterpret_cast<sockaddr*>(&name), &len);
  Say(fam + " getpeername", Text(name) == Text(to_peer.s) ? "the peer" : Text(name));
  Say(fam + " write", std::to_string(write(s, "w1", 2)));
  iovec parts[2] = {{const_cast<char*>("ab"), 2}, {const_cast<char*>("cd"), 2}};
  Say(fam + " writev", std::to_string(writev(s, parts, 2)));
  Expect(fam + " peer got write and writev", PeerReceive(peer) == "w1" && PeerReceive(peer) == "abcd", "in order");
  PeerSend(peer, "r1", local, lport);
  PeerSend(peer, "efgh", local, lport);
  Readable(s);
  n = read(s, buf, sizeof(buf));
  Expect(fam + " read", n == 2 && std::string(buf, 2) == "r1", std::to_string(n));
  Readable(s);
  char a[2], b[8];
  iovec into[2] = {{a, 2}, {b, 8}};
  n = readv(s, into, 2);
  Expect(fam + " readv", n == 4 && std::string(a, 2) == "ef" && std::string(b, 2) == "gh", std::to_string(n));

  // sendmmsg / recvmmsg.
  mmsghdr out[3] = {};
  iovec ov[3] = {{const_cast<char*>("m1"), 2}, {const_cast<char*>("m22"), 3}, {const_cast<char*>("m333"), 4}};
  for (int i = 0; i < 3; ++i) {
    out[i].msg_hdr.msg_iov = &ov[i];
    out[i].msg_hdr.msg_iovlen = 1;
  }
  Say(fam + " sendmmsg", std::to_string(sendmmsg(s, out, 3, 0)));
  Expect(fam + " peer got sendmmsg", PeerReceive(peer) == "m1" && PeerReceive(peer) == "m22" &&
                                         PeerReceive(peer) == "m333", "in order");
  for (const char* p : {"x1", "x22", "x333"}) PeerSend(peer, p, local, lport);
  mmsghdr in[4] = {};
  char bufs[4][64];
  iovec iv[4];
  for (int i = 0; i < 4; ++i) {
    iv[i] = {bufs[i], sizeof(bufs[i])};
    in[i].msg_hdr.msg_iov = &iv[i];
    in[i].msg_hdr.msg_iovlen = 1;
  }
  // Wait until all three are there: the count must not depend on timing.
  for (int tries = 0; tries < 500; ++tries) {
    int q = 0;
    ioctl(s, FIONREAD, &q);
    if (recv(s, buf, sizeof(buf), MSG_PEEK) == 2) {
      usleep(20000);
      break;
    }
    usleep(10000);
  }
  usleep(100000);
  const int got_m = recvmmsg(s, in, 4, MSG_DONTWAIT, nullptr);
  std::string lens;
  for (int i = 0; i < got_m; ++i) lens += " " + std::to_string(in[i].msg_len);
  Say(fam + " recvmmsg", std::to_string(got_m) + ":" + lens);

  sockaddr unspec{};
  unspec.sa_family = AF_UNSPEC;
  Say(fam + " disconnect", Outcome(connect(s, &unspec, sizeof(unspec))));
  len = sizeof(name);
  Say(fam + " getpeername after disconnect", Outcome(getpeername(s, reinterpret_cast<sockaddr*>(&name), &len)));
  Say(fam + " shutdown unconnected", Outcome(shutdown(s, SHUT_RDWR)));
  Say(fam + " recv after shutdown", Outcome(recv(s, buf, sizeof(buf), 0)));
  fcntl(s, F_SETFL, fcntl(s, F_GETFL) & ~O_NONBLOCK);
  Say(fam + " blocking recv after shutdown", Outcome(recv(s, buf, sizeof(buf), 0)));
  close(s);
  Say(fam + " recv after close", Outcome(recv(s, buf, sizeof(buf), 0)));
  close(peer);
}

void Options(const std::string& fam, const std::string& local, const std::string& peer_ip) {
  uint16_t pport, lport;
  const int peer = Peer(peer_ip, &pport);
  const int s = Local(local, &lport);
  int v = 0;
  socklen_t len = sizeof(v);
  getsockopt(s, SOL_SOCKET, SO_TYPE, &v, &len);
  std::string types = "type " + std::to_string(v);
  getsockopt(s, SOL_SOCKET, SO_DOMAIN, &v, &len);
  types += " domain " + std::to_string(v);
  getsockopt(s, SOL_SOCKET, SO_PROTOCOL, &v, &len);
  Say(fam + " SO_TYPE SO_DOMAIN SO_PROTOCOL", types + " protocol " + std::to_string(v));
  getsockopt(s, SOL_SOCKET, SO_ERROR, &v, &len);
  Say(fam + " SO_ERROR", std::to_string(v));
  v = 65536;
  setsockopt(s, SOL_SOCKET, SO_RCVBUF, &v, sizeof(v));
  getsockopt(s, SOL_SOCKET, SO_RCVBUF, &v, &len);
  Say(fam + " SO_RCVBUF 65536", std::to_string(v));
  Say(fam + " an unknown option", Outcome(setsockopt(s, SOL_SOCKET, 9999, &v, sizeof(v))));
  Say(fam + " IPV6_V6ONLY after bind",
      fam == "ipv6" ? Outcome(setsockopt(s, IPPROTO_IPV6, IPV6_V6ONLY, &v, sizeof(v))) : "n/a");

  // Receive timeout on a blocking socket.
  timeval tv{0, 200000};
  setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  char buf[256];
  double t0 = Now();
  const long r = recv(s, buf, sizeof(buf), 0);
  Say(fam + " SO_RCVTIMEO", Outcome(r) + (Now() - t0 >= 0.15 ? " after the timeout" : " early"));
  tv = {5, 0};
  setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));

  // Non-blocking by fcntl and by FIONBIO.
  fcntl(s, F_SETFL, fcntl(s, F_GETFL) | O_NONBLOCK);
  Say(fam + " O_NONBLOCK by fcntl", Outcome(recv(s, buf, sizeof(buf), 0)));
  fcntl(s, F_SETFL, fcntl(s, F_GETFL) & ~O_NONBLOCK);
  int on = 1;
  ioctl(s, FIONBIO, &on);
  Say(fam + " FIONBIO", Outcome(recv(s, buf, sizeof(buf), 0)));
  on = 0;
  ioctl(s, FIONBIO, &on);
  Say(fam + " MSG_DONTWAIT", Outcome(recv(s, buf, sizeof(buf), MSG_DONTWAIT)));

  // PKTINFO and timestamps.
  on = 1;
  if (fam == "ipv4") {
    setsockopt(s, IPPROTO_IP, IP_PKTINFO, &on, sizeof(on));
  } else {
    setsockopt(s, IPPROTO_IPV6, IPV6_RECVPKTINFO, &on, sizeof(on));
  }
  setsockopt(s, SOL_SOCKET, SO_TIMESTAMP, &on, sizeof(on));
  PeerSend(peer, "stamped", local, lport);
  Readable(s);
  iovec iv{buf, sizeof(buf)};
  alignas(cmsghdr) char control[256];
  msghdr m{.msg_iov = &iv, .msg_iovlen = 1, .msg_control = control,
           .msg_controllen = sizeof(control)};
  recvmsg(s, &m, 0);
  std::string cmsgs;
  timeval now;
  gettimeofday(&now, nullptr);
  for (cmsghdr* c = CMSG_FIRSTHDR(&m); c != nullptr; c = CMSG_NXTHDR(&m, c)) {
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_TIMESTAMP) {
      timeval t;
      memcpy(&t, CMSG_DATA(c), sizeof(t));
      cmsgs += std::string(" SCM_TIMESTAMP") + (std::abs(now.tv_sec - t.tv_sec) < 10 ? "(now)" : "(off)");
    } else if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_PKTINFO) {
      in_pktinfo p;
      memcpy(&p, CMSG_DATA(c), sizeof(p));
      char a[INET_ADDRSTRLEN], d[INET_ADDRSTRLEN];
      inet_ntop(AF_INET, &p.ipi_addr, a, sizeof(a));
      inet_ntop(AF_INET, &p.ipi_spec_dst, d, sizeof(d));
      cmsgs += std::string(" IP_PKTINFO(") + (a == local ? "addr=local" : a) + "," +
               (d == local ? "spec_dst=local" : d) + (p.ipi_ifindex > 0 ? ",ifindex" : ",no ifindex") + ")";
    } else if (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_PKTINFO) {
      in6_pktinfo p;
      memcpy(&p, CMSG_DATA(c), sizeof(p));
      char a[INET6_ADDRSTRLEN];
      inet_ntop(AF_INET6, &p.ipi6_addr, a, sizeof(a));
      cmsgs += std::string(" IPV6_PKTINFO(") + (a == local ? "addr=local" : a) +
               (p.ipi6_ifindex > 0 ? ",ifindex" : ",no ifindex") + ")";
    } else {
      cmsgs += " " + std::to_string(c->cmsg_level) + "/" + std::to_string(c->cmsg_type);
    }
  }
  Say(fam + " control messages", cmsgs);
  on = 1;
  setsockopt(s, SOL_SOCKET, SO_TIMESTAMPNS, &on, sizeof(on));
  PeerSend(peer, "ns", local, lport);
  Readable(s);
  m.msg_controllen = sizeof(control);
  recvmsg(s, &m, 0);
  cmsghdr* c = CMSG_FIRSTHDR(&m);
  Say(fam + " SO_TIMESTAMPNS", c != nullptr && c->cmsg_type == SCM_TIMESTAMPNS ? "SCM_TIMESTAMPNS first" : "missing");
  m.msg_controllen = 8;  // too small for anything
  PeerSend(peer, "ctrunc", local, lport);
  Readable(s);
  recvmsg(s, &m, 0);
  Say(fam + " control too small", (m.msg_flags & MSG_CTRUNC) ? "MSG_CTRUNC" : "no flag");

  // Interface queries on the socket.
  ifreq ifr{};
  strcpy(ifr.ifr_name, "lo");
  const std::string index_outcome = Outcome(ioctl(s, SIOCGIFINDEX, &ifr));
  Say(fam + " SIOCGIFINDEX lo", index_outcome + " " + std::to_string(ifr.ifr_ifindex));
  ifreq byindex{};
  byindex.ifr_ifindex = ifr.ifr_ifindex;
  ioctl(s, SIOCGIFNAME, &byindex);
  Say(fam + " SIOCGIFNAME", byindex.ifr_name);
  ioctl(s, SIOCGIFMTU, &ifr);
  Say(fam + " SIOCGIFMTU lo", std::to_string(ifr.ifr_mtu));
  ifr = {};
  strcpy(ifr.ifr_name, "lo");
  Say(fam + " SIOCGIFADDR lo", Outcome(ioctl(s, SIOCGIFADDR, &ifr)));
  char confbuf[4096];
  ifconf conf{};
  conf.ifc_len = sizeof(confbuf);
  conf.ifc_buf = confbuf;
  const std::string conf_outcome = Outcome(ioctl(s, SIOCGIFCONF, &conf));
  Say(fam + " SIOCGIFCONF", conf_outcome + (conf.ifc_len > 0 ? " some" : " none"));
  close(s);
  close(peer);
}

void Reuseport(const std::string& fam, const std::string& local) {
  const int one = 1;
  uint16_t port;
  const int a = socket(Make(local, 0).family, SOCK_DGRAM, 0);
  setsockopt(a, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one));
  port = next_port++;
  const Addr at = Make(local, port);
  Say(fam + " SO_REUSEPORT first", Outcome(bind(a, at.sa(), at.len)));
  const int b = socket(at.family, SOCK_DGRAM, 0);
  setsockopt(b, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one));
  Say(fam + " SO_REUSEPORT second", Outcome(bind(b, at.sa(), at.len)));
  const int c = socket(at.family, SOCK_DGRAM, 0);
  Say(fam + " without SO_REUSEPORT", Outcome(bind(c, at.sa(), at.len)));
  close(a);
  close(b);
  close(c);
}

void Readiness(const std::string& fam, const std::string& local, const std::string& peer_ip) {
  uint16_t pport, lport;
  const int peer = Peer(peer_ip, &pport);
  const int s = Local(local, &lport);
  int pipefd[2];
  pipe(pipefd);
  char buf[256];

  // poll and select with a kernel descriptor in the same set.
  pollfd p[2] = {{s, POLLIN, 0}, {pipefd[0], POLLIN, 0}};
  double t0 = Now();
  int r = poll(p, 2, 100);
  Say(fam + " poll timeout", std::to_string(r) + (Now() - t0 >= 0.08 ? " after the timeout" : " early"));
  pollfd w{s, POLLOUT, 0};
  const int writable = poll(&w, 1, 0);
  Say(fam + " poll writable", std::to_string(writable) + ((w.revents & POLLOUT) ? " POLLOUT" : ""));
  PeerSend(peer, "p", local, lport);
  r = poll(p, 2, 5000);
  Say(fam + " poll mixed", std::to_string(r) + ((p[0].revents & POLLIN) ? " socket" : "") +
                               ((p[1].revents & POLLIN) ? " pipe" : ""));
  write(pipefd[1], "k", 1);
  r = poll(p, 2, 5000);
  Say(fam + " poll both", std::to_string(r));
  recv(s, buf, sizeof(buf), 0);
  read(pipefd[0], buf, 1);
  fd_set set;
  FD_ZERO(&set);
  FD_SET(s, &set);
  FD_SET(pipefd[0], &set);
  timeval tv{0, 100000};
  r = select(std::max(s, pipefd[0]) + 1, &set, nullptr, nullptr, &tv);
  Say(fam + " select timeout", std::to_string(r));
  PeerSend(peer, "s", local, lport);
  FD_ZERO(&set);
  FD_SET(s, &set);
  FD_SET(pipefd[0], &set);
  tv = {5, 0};
  r = select(std::max(s, pipefd[0]) + 1, &set, nullptr, nullptr, &tv);
  Say(fam + " select", std::to_string(r) + (FD_ISSET(s, &set) ? " socket" : ""));
  recv(s, buf, sizeof(buf), 0);
  timespec ts{0, 50000000};
  pollfd pp{s, POLLIN, 0};
  Say(fam + " ppoll timeout", std::to_string(ppoll(&pp, 1, &ts, nullptr)));

  // epoll: level, edge, one-shot, MOD, DEL, nested.
  const int ep = epoll_create1(EPOLL_CLOEXEC);
  epoll_event ev{EPOLLIN, {.fd = s}};
  epoll_ctl(ep, EPOLL_CTL_ADD, s, &ev);
  epoll_event out[4];
  PeerSend(peer, "e1", local, lport);
  PeerSend(peer, "e2", local, lport);
  int n = epoll_wait(ep, out, 4, 5000);
  recv(s, buf, sizeof(buf), 0);
  usleep(50000);  // e2 is there by now (the peer sent it first)
  const int again = epoll_wait(ep, out, 4, 0);
  recv(s, buf, sizeof(buf), 0);
  Say(fam + " epoll level-triggered", std::to_string(n) + " then " + std::to_string(again) +
                                          " then " + std::to_string(epoll_wait(ep, out, 4, 0)));
  ev = {EPOLLIN | EPOLLET, {.fd = s}};
  Say(fam + " EPOLL_CTL_MOD", Outcome(epoll_ctl(ep, EPOLL_CTL_MOD, s, &ev)));
  PeerSend(peer, "et", local, lport);
  n = epoll_wait(ep, out, 4, 5000);
  Say(fam + " epoll edge-triggered", std::to_string(n) + " then " + std::to_string(epoll_wait(ep, out, 4, 0)));
  recv(s, buf, sizeof(buf), 0);
  ev = {EPOLLIN | EPOLLONESHOT, {.fd = s}};
  epoll_ctl(ep, EPOLL_CTL_MOD, s, &ev);
  PeerSend(peer, "o1", local, lport);
  n = epoll_wait(ep, out, 4, 5000);
  const int after = epoll_wait(ep, out, 4, 0);
  epoll_ctl(ep, EPOLL_CTL_MOD, s, &ev);
  Say(fam + " EPOLLONESHOT", std::to_string(n) + " then " + std::to_string(after) + " then re-armed " +
                                 std::to_string(epoll_wait(ep, out, 4, 0)));
  recv(s, buf, sizeof(buf), 0);
  const int outer = epoll_create1(EPOLL_CLOEXEC);
  epoll_event inner_ev{EPOLLIN, {.fd = ep}};
  epoll_ctl(outer, EPOLL_CTL_ADD, ep, &inner_ev);
  ev = {EPOLLIN, {.fd = s}};
  epoll_ctl(ep, EPOLL_CTL_MOD, s, &ev);
  PeerSend(peer, "nested", local, lport);
  n = epoll_wait(outer, out, 4, 5000);
  Say(fam + " epoll in epoll", std::to_string(n) + (n == 1 && out[0].data.fd == ep ? " inner" : ""));
  recv(s, buf, sizeof(buf), 0);
  Say(fam + " EPOLL_CTL_DEL", Outcome(epoll_ctl(ep, EPOLL_CTL_DEL, s, nullptr)));
  PeerSend(peer, "gone", local, lport);
  Readable(s);
  Say(fam + " after DEL", std::to_string(epoll_wait(ep, out, 4, 0)));
  recv(s, buf, sizeof(buf), 0);
  const int ex = epoll_create1(0);
  ev = {EPOLLIN | EPOLLEXCLUSIVE, {.fd = s}};
  Say(fam + " EPOLLEXCLUSIVE", Outcome(epoll_ctl(ex, EPOLL_CTL_ADD, s, &ev)));
  close(ex);
  close(outer);
  close(ep);

  // dup: the socket lives until its last descriptor closes.
  const int d = dup(s);
  const int d2 = fcntl(s, F_DUPFD_CLOEXEC, 100);
  close(s);
  PeerSend(peer, "dup", local, lport);
  Readable(d);
  const ssize_t via_dup = recv(d, buf, sizeof(buf), 0);
  Say(fam + " dup after close of the first",
      std::to_string(via_dup) + (PortOf(d2) == lport ? " same port" : " other port"));
  const int d3 = dup2(d2, 200);
  close(d);
  close(d2);
  PeerSend(peer, "dup2", local, lport);
  Readable(d3);
  Say(fam + " dup2", std::to_string(recv(d3, buf, sizeof(buf), 0)));
  close(d3);
  close(pipefd[0]);
  close(pipefd[1]);
  close(peer);
}

struct ThreadArg {
  int fd;
  ssize_t got;
};

void* Receiver(void* p) {
  auto* a = static_cast<ThreadArg*>(p);
  char buf[64];
  a->got = recv(a->fd, buf, sizeof(buf), 0);
  return nullptr;
}

void Threads(const std::string& fam, const std::string& local, const std::string& peer_ip) {
  uint16_t pport, lport;
  const int peer = Peer(peer_ip, &pport);
  const int s = Local(local, &lport);
  timeval tv{5, 0};
  setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  ThreadArg args[4];
  pthread_t t[4];
  for (int i = 0; i < 4; ++i) {
    args[i] = {s, -2};
    pthread_create(&t[i], nullptr, Receiver, &args[i]);
  }
  usleep(100000);
  for (int i = 0; i < 4; ++i) PeerSend(peer, "thread" + std::to_string(i), local, lport);
  int ok = 0;
  for (int i = 0; i < 4; ++i) {
    pthread_join(t[i], nullptr);
    if (args[i].got == 7) ++ok;
  }
  Expect(fam + " four threads on one socket", ok == 4, std::to_string(ok) + " received");
  close(s);
  close(peer);
}

// fork: a child receives and answers on a socket it inherited (servers such as nsd bind, then
// fork workers); exec: a program started with an inherited socket runs. Then the parent uses
// the socket again.
void Fork(const std::string& fam, const std::string& local, const std::string& peer_ip) {
  uint16_t pport, lport;
  const int peer = Peer(peer_ip, &pport);
  const int s = Local(local, &lport);
  const pid_t child = fork();
  if (child == 0) {
    timeval tv{5, 0};
    setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    char buf[64];
    sockaddr_storage from{};
    socklen_t len = sizeof(from);
    const ssize_t n = recvfrom(s, buf, sizeof(buf), 0, reinterpret_cast<sockaddr*>(&from), &len);
    if (n <= 0) _exit(3);
    const std::string reply = "child got " + std::string(buf, n);
    _exit(sendto(s, reply.data(), reply.size(), 0, reinterpret_cast<sockaddr*>(&from), len) ==
                  static_cast<ssize_t>(reply.size())
              ? 0
              : 4);
  }
  PeerSend(peer, "f1", local, lport);
  const std::string answer = PeerReceive(peer);
  int status = 0;
  waitpid(child, &status, 0);
  Expect(fam + " fork: the child answers", answer == "child got f1" && WIFEXITED(status) &&
                                               WEXITSTATUS(status) == 0,
         answer + ", exit " + std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : -1));
  PeerSend(peer, "f2", local, lport);
  Readable(s);
  char buf[64];
  const ssize_t n = recv(s, buf, sizeof(buf), 0);
  Expect(fam + " fork: the parent after the child", n == 2 && std::string(buf, 2) == "f2",
         std::to_string(n));
  const pid_t execed = fork();
  if (execed == 0) {
    execl("/bin/sh", "sh", "-c", "exit 7", static_cast<char*>(nullptr));
    _exit(127);
  }
  waitpid(execed, &status, 0);
  Say(fam + " exec with an inherited socket",
      "exit " + std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : -1));
  close(s);
  close(peer);
}

// An ICMP port unreachable for a connected socket's datagram is the socket's pending error:
// SO_ERROR says ECONNREFUSED (asked until it comes: the ICMP message is on its way back).
void PendingError(const std::string& fam, const std::string& local, const std::string& peer_ip) {
  uint16_t pport, lport;
  const int peer = Peer(peer_ip, &pport);
  close(peer);  // nobody listens on that port now
  const int s = Local(local, &lport);
  const Addr to = Make(peer_ip, pport);
  connect(s, to.sa(), to.len);
  send(s, "anyone?", 7, 0);
  int error = 0;
  for (int tries = 0; tries < 500 && error == 0; ++tries) {
    socklen_t len = sizeof(error);
    getsockopt(s, SOL_SOCKET, SO_ERROR, &error, &len);
    if (error == 0) usleep(10000);
  }
  Say(fam + " SO_ERROR after a closed port's ICMP", error == 0 ? "0" : ErrnoName(error));
  close(s);
}

// A server that drops its privileges after binding (setuid, as knotd and nsd do) keeps its
// socket and can open new ones. Last: it cannot be undone.
void DropPrivileges(const std::string& local, const std::string& peer_ip) {
  uint16_t pport, lport;
  const int peer = Peer(peer_ip, &pport);
  const int s = Local(local, &lport);
  if (setgid(65534) != 0 || setuid(65534) != 0) {
    perror("setuid");
    std::exit(2);
  }
  PeerSend(peer, "after setuid", local, lport);
  Readable(s);
  char buf[64];
  const ssize_t n = recv(s, buf, sizeof(buf), 0);
  Expect("setuid: the bound socket receives", n == 12, std::to_string(n));
  uint16_t port2;
  const int s2 = Local(local, &port2);
  PeerSend(peer, "new one", local, port2);
  Readable(s2);
  Expect("setuid: a new socket", recv(s2, buf, sizeof(buf), 0) == 7, "receives");
  const Addr to_peer = Make(peer_ip, pport);
  Say("setuid: it sends", std::to_string(sendto(s2, "x", 1, 0, to_peer.sa(), to_peer.len)));
}

std::string Arg(int argc, char** argv, const std::string& name) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.rfind("--" + name + "=", 0) == 0) return a.substr(name.size() + 3);
  }
  std::fprintf(stderr, "socket_semantics: --%s=... is required\n", name.c_str());
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  local4 = Arg(argc, argv, "local4");
  peer4 = Arg(argc, argv, "peer4");
  local6 = Arg(argc, argv, "local6");
  peer6 = Arg(argc, argv, "peer6");
  peer_ns = open(Arg(argc, argv, "peer-netns").c_str(), O_RDONLY | O_CLOEXEC);
  own_ns = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
  if (peer_ns < 0 || own_ns < 0) {
    perror("socket_semantics: opening the network namespaces");
    return 2;
  }
  signal(SIGPIPE, SIG_IGN);
  struct Family {
    std::string name, local, peer;
  };
  for (const Family& f : {Family{"ipv4", local4, peer4}, Family{"ipv6", local6, peer6}}) {
    const std::string& fam = f.name;
    const std::string& local = f.local;
    const std::string& peer = f.peer;
    Basics(fam, local, peer);
    Options(fam, local, peer);
    Reuseport(fam, local);
    PktinfoSends(fam, local, peer);
    Readiness(fam, local, peer);
    Signals(fam, local, peer);
    Threads(fam, local, peer);
    Fork(fam, local, peer);
    PendingError(fam, local, peer);
  }
  DropPrivileges(local4, peer4);
  std::printf("%d failed\n", failures);
  return failures == 0 ? 0 : 1;
}
