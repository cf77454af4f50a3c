// Sends frames onto a link at set rates, from the far side of quadsockd's wire: neighbour
// solicitations for one of quadsockd's IPv6 addresses from random sources in a prefix (each
// with its own random link-layer address: a flood of new neighbours), and beside them a live
// flow of UDP datagrams numbered from 0. Python (scapy) sends a few thousand frames a second;
// this sends hundreds of thousands, through one AF_PACKET socket (qdisc bypassed, sendmmsg).
// Its frames are built here, not with stack/net's builders: a peer of the stack's own making
// would share its mistakes.
//
//   wire_flood --interface=qs1 --to_mac=02:..:01 --target=fd00:8::2 --sources=fd00:8::/64
//              --solicitations_per_second=200000 --udp_from=fd00:8::1 --udp_port=7000
//              --datagrams_per_second=2000 --seconds=3
//
// prints one JSON line when done: {"solicitations": N, "datagrams": N, "seconds": S}. Every
// run ends after --seconds; a rate of 0 sends none of that kind.
#include <arpa/inet.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "stack/link/errno_status.h"

namespace {

using Mac = std::array<uint8_t, 6>;

[[noreturn]] void Fail(const std::string& why) {
  std::fprintf(stderr, "wire_flood: %s\n", why.c_str());
  std::exit(2);
}

// What failed, with errno's words (link::ErrnoStatus, the project's one place for them).
std::string Errno(const std::string& what) {
  return std::string(quadsock::link::ErrnoStatus(errno, what).message());
}

Mac ParseMac(const std::string& s) {
  Mac m{};
  unsigned b[6];
  if (std::sscanf(s.c_str(), "%x:%x:%x:%x:%x:%x", &b[0], &b[1], &b[2], &b[3], &b[4], &b[5]) != 6) {
    Fail("bad MAC address \"" + s + "\"");
  }
  for (int i = 0; i < 6; ++i) m[i] = static_cast<uint8_t>(b[i]);
  return m;
}

in6_addr ParseIpv6(const std::string& s) {
  in6_addr a{};
  if (inet_pton(AF_INET6, s.c_str(), &a) != 1) Fail("bad IPv6 address \"" + s + "\"");
  return a;
}

// The one's complement sum of `n` bytes, added to `sum`.
uint32_t Sum(const uint8_t* p, size_t n, uint32_t sum = 0) {
  for (size_t i = 0; i + 1 < n; i += 2) sum += static_cast<uint32_t>(p[i] << 8 | p[i + 1]);
  if (n % 2 != 0) sum += static_cast<uint32_t>(p[n - 1] << 8);
  return sum;
}

// The checksum of an upper-layer message over IPv6 (RFC 8200 8.1), written at `at` in it.
void ChecksumOverIpv6(uint8_t* ip6, uint8_t next_header, size_t length, size_t at) {
  uint8_t* upper = ip6 + 40;
  upper[at] = upper[at + 1] = 0;
  uint32_t sum = Sum(ip6 + 8, 32);  // source and destination
  sum += static_cast<uint32_t>(length >> 16) + static_cast<uint32_t>(length & 0xffff);
  sum += next_header;
  sum = Sum(upper, length, sum);
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  uint16_t c = static_cast<uint16_t>(~sum);
  // UDP sends a sum of zero as all ones: zero says "no checksum", which IPv6 forbids (RFC 8200
  // 8.1); the stack drops such a datagram (one in 65,536 of a numbered flow).
  if (c == 0 && next_header == IPPROTO_UDP) c = 0xffff;
  upper[at] = static_cast<uint8_t>(c >> 8);
  upper[at + 1] = static_cast<uint8_t>(c);
}

void WriteIpv6Header(uint8_t* ip6, uint16_t payload, uint8_t next_header, uint8_t hop_limit,
                     const in6_addr& src, const in6_addr& dst) {
  ip6[0] = 0x60;
  ip6[1] = ip6[2] = ip6[3] = 0;
  ip6[4] = static_cast<uint8_t>(payload >> 8);
  ip6[5] = static_cast<uint8_t>(payload);
  ip6[6] = next_header;
  ip6[7] = hop_limit;
  std::memcpy(ip6 + 8, &src, 16);
  std::memcpy(ip6 + 24, &dst, 16);
}

constexpr size_t kEthernet = 14;
constexpr size_t kSolicitationFrame = kEthernet + 40 + 24 + 8;  // with a source LL option
constexpr size_t kDatagramFrame = kEthernet + 40 + 8 + 8;       // 8 bytes: the number

// A solicitation for `target` from a random address of `prefix`/64 and a random MAC.
void Solicitation(uint8_t* f, const in6_addr& target, const in6_addr& prefix, std::mt19937_64& r) {
  Mac from;
  const uint64_t bits = r();
  for (int i = 0; i < 6; ++i) from[i] = static_cast<uint8_t>(bits >> (8 * i));
  from[0] = static_cast<uint8_t>((from[0] & 0xfe) | 0x02);  // unicast, locally administered
  // To the target's solicited-node group (RFC 4291 2.7.1): ff02::1:ffXX:XXXX, 33:33:ff:XX:XX:XX.
  in6_addr group = ParseIpv6("ff02::1:ff00:0");
  std::memcpy(&group.s6_addr[13], &target.s6_addr[13], 3);
  const Mac to = {0x33, 0x33, 0xff, target.s6_addr[13], target.s6_addr[14], target.s6_addr[15]};
  std::memcpy(f, to.data(), 6);
  std::memcpy(f + 6, from.data(), 6);
  f[12] = 0x86;
  f[13] = 0xdd;
  in6_addr src = prefix;
  const uint64_t host = r();
  std::memcpy(&src.s6_addr[8], &host, 8);
  uint8_t* ip6 = f + kEthernet;
  WriteIpv6Header(ip6, 32, IPPROTO_ICMPV6, 255, src, group);
  uint8_t* ns = ip6 + 40;
  std::memset(ns, 0, 32);
  ns[0] = 135;  // Neighbor Solicitation
  std::memcpy(ns + 8, &target, 16);
  ns[24] = 1;  // Source Link-Layer Address, 8 bytes
  ns[25] = 1;
  std::memcpy(ns + 26, from.data(), 6);
  ChecksumOverIpv6(ip6, IPPROTO_ICMPV6, 32, 2);
}

void Datagram(uint8_t* f, const Mac& to, const Mac& from, const in6_addr& src,
              const in6_addr& dst, uint16_t port, uint64_t number) {
  std::memcpy(f, to.data(), 6);
  std::memcpy(f + 6, from.data(), 6);
  f[12] = 0x86;
  f[13] = 0xdd;
  uint8_t* ip6 = f + kEthernet;
  WriteIpv6Header(ip6, 16, IPPROTO_UDP, 64, src, dst);
  uint8_t* udp = ip6 + 40;
  const uint16_t src_port = 40000;
  udp[0] = static_cast<uint8_t>(src_port >> 8);
  udp[1] = static_cast<uint8_t>(src_port);
  udp[2] = static_cast<uint8_t>(port >> 8);
  udp[3] = static_cast<uint8_t>(port);
  udp[4] = 0;
  udp[5] = 16;
  for (int i = 0; i < 8; ++i) udp[8 + i] = static_cast<uint8_t>(number >> (56 - 8 * i));
  ChecksumOverIpv6(ip6, IPPROTO_UDP, 16, 6);
}

double Now() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

}  // namespace

int main(int argc, char** argv) {
  std::map<std::string, std::string> flags = {
      {"solicitations_per_second", "0"}, {"datagrams_per_second", "0"}, {"udp_port", "7000"},
      {"seconds", "3"}};
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const size_t eq = a.find('=');
    if (a == "--help" || a.rfind("--", 0) != 0 || eq == std::string::npos) {
      std::fprintf(stderr,
                   "usage: wire_flood --interface=DEV --to_mac=MAC --target=IPV6 "
                   "--sources=PREFIX/64\n"
                   "       [--solicitations_per_second=N] [--udp_from=IPV6 --udp_port=P "
                   "--datagrams_per_second=N] [--seconds=S]\n");
      return a == "--help" ? 0 : 2;
    }
    flags[a.substr(2, eq - 2)] = a.substr(eq + 1);
  }
  for (const char* needed : {"interface", "to_mac", "target", "sources"}) {
    if (!flags.contains(needed)) Fail(std::string("--") + needed + " is required");
  }
  const double ns_rate = std::stod(flags["solicitations_per_second"]);
  const double udp_rate = std::stod(flags["datagrams_per_second"]);
  const double seconds = std::stod(flags["seconds"]);
  if (seconds <= 0 || seconds > 600) Fail("--seconds: 0 to 600");
  const Mac to = ParseMac(flags["to_mac"]);
  const in6_addr target = ParseIpv6(flags["target"]);
  const std::string sources = flags["sources"];
  if (sources.size() < 4 || sources.substr(sources.size() - 3) != "/64") {
    Fail("--sources: a /64 prefix");
  }
  const in6_addr prefix = ParseIpv6(sources.substr(0, sources.size() - 3));
  const in6_addr udp_from = udp_rate > 0 ? ParseIpv6(flags["udp_from"]) : in6_addr{};
  const uint16_t udp_port = static_cast<uint16_t>(std::stoi(flags["udp_port"]));

  const int fd = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, 0);  // sends only: protocol 0
  if (fd < 0) Fail(Errno("socket(AF_PACKET)"));
  const int one = 1;
  (void)setsockopt(fd, SOL_PACKET, PACKET_QDISC_BYPASS, &one, sizeof(one));
  ifreq ifr{};
  std::strncpy(ifr.ifr_name, flags["interface"].c_str(), IFNAMSIZ - 1);
  if (ioctl(fd, SIOCGIFINDEX, &ifr) != 0) Fail(Errno("interface " + flags["interface"]));
  const int ifindex = ifr.ifr_ifindex;
  if (ioctl(fd, SIOCGIFHWADDR, &ifr) != 0) Fail(Errno("the MAC of " + flags["interface"]));
  Mac own;
  std::memcpy(own.data(), ifr.ifr_hwaddr.sa_data, 6);
  sockaddr_ll ll{};
  ll.sll_family = AF_PACKET;
  ll.sll_ifindex = ifindex;
  ll.sll_halen = 6;
  if (bind(fd, reinterpret_cast<sockaddr*>(&ll), sizeof(ll)) != 0) {
    Fail(Errno("bind"));
  }

  constexpr size_t kBatch = 64;
  std::vector<std::array<uint8_t, kSolicitationFrame>> frames(kBatch);
  std::vector<iovec> iov(kBatch);
  std::vector<mmsghdr> msgs(kBatch);
  std::mt19937_64 random(std::random_device{}());
  uint64_t solicitations = 0, datagrams = 0;
  const double start = Now();
  double now = start;
  while ((now = Now()) - start < seconds) {
    const double elapsed = now - start;
    auto due = [&](double rate, uint64_t sent) {
      const double d = rate * elapsed - static_cast<double>(sent);
      return d > 0 ? static_cast<uint64_t>(d) : uint64_t{0};
    };
    uint64_t ns_due = due(ns_rate, solicitations), udp_due = due(udp_rate, datagrams);
    if (ns_due == 0 && udp_due == 0) {
      const timespec pause{0, 200'000};
      nanosleep(&pause, nullptr);
      continue;
    }
    while (ns_due + udp_due > 0) {
      // The live flow first: its datagrams are never held back behind the flood.
      size_t n = 0, of_udp = 0;
      for (; n < kBatch && udp_due > 0; ++n, --udp_due, ++of_udp) {
        Datagram(frames[n].data(), to, own, udp_from, target, udp_port, datagrams + of_udp);
        iov[n] = {frames[n].data(), kDatagramFrame};
      }
      for (; n < kBatch && ns_due > 0; ++n, --ns_due) {
        Solicitation(frames[n].data(), target, prefix, random);
        iov[n] = {frames[n].data(), kSolicitationFrame};
      }
      for (size_t i = 0; i < n; ++i) {
        msgs[i] = {};
        msgs[i].msg_hdr.msg_iov = &iov[i];
        msgs[i].msg_hdr.msg_iovlen = 1;
      }
      size_t done = 0;
      while (done < n) {
        const int sent = sendmmsg(fd, msgs.data() + done, static_cast<unsigned>(n - done), 0);
        if (sent < 0) {
          if (errno != EINTR && errno != ENOBUFS && errno != EAGAIN) {
            Fail(Errno("sendmmsg"));
          }
          if (Now() - start > seconds) break;  // the link takes nothing more: the run is over
          const timespec pause{0, 50'000};
          nanosleep(&pause, nullptr);
          continue;
        }
        done += static_cast<size_t>(sent);
      }
      // Counted as sent when the link took them (a batch cut short at the end: its first ones).
      datagrams += std::min(of_udp, done);
      solicitations += done - std::min(of_udp, done);
      if (done < n) break;
    }
  }
  std::printf("{\"solicitations\": %llu, \"datagrams\": %llu, \"seconds\": %.3f}\n",
              static_cast<unsigned long long>(solicitations),
              static_cast<unsigned long long>(datagrams), Now() - start);
  close(fd);
  return 0;
}
