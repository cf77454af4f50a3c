// What the semantics program's parts share (socket_semantics.cc defines it): each check prints
// "name: what it saw", in words that are the same on the kernel and under the preload.
#ifndef QUADSOCK_CLIENTS_PRELOAD_TESTING_SEMANTICS_H_
#define QUADSOCK_CLIENTS_PRELOAD_TESTING_SEMANTICS_H_

#include <sys/socket.h>

#include <cstdint>
#include <string>

namespace semantics {

// A socket address, from text.
struct Addr {
  sockaddr_storage s{};
  socklen_t len = 0;
  int family = AF_INET;
  const sockaddr* sa() const { return reinterpret_cast<const sockaddr*>(&s); }
};
Addr Make(const std::string& ip, uint16_t port);
// "address:port" (or the address alone).
std::string Text(const sockaddr_storage& s, bool with_port = true);

void Say(const std::string& name, const std::string& what);
// "0" or the errno's name, for a call that returns -1 on failure.
std::string Outcome(long r);
// A kernel socket in the peer's namespace, bound to `ip` and a port of its own.
int Peer(const std::string& ip, uint16_t* port);
// A socket under test, bound to `ip` and a fresh port.
int Local(const std::string& ip, uint16_t* port, int extra_type = 0);
bool Readable(int fd, int ms = 5000);
void PeerSend(int peer, const std::string& data, const std::string& ip, uint16_t port);
// What the peer received next ("<EAGAIN>" after 5 s), and from where.
std::string PeerReceive(int peer, sockaddr_storage* from = nullptr);

// signal_semantics.cc: signals during a receive and during readiness waits, and what
// sigaction and its kin read back.
void Signals(const std::string& fam, const std::string& local, const std::string& peer_ip);
// pktinfo_semantics.cc: IP_PKTINFO and IPV6_PKTINFO on sends.
void PktinfoSends(const std::string& fam, const std::string& local, const std::string& peer_ip);

}  // namespace semantics

#endif  // QUADSOCK_CLIENTS_PRELOAD_TESTING_SEMANTICS_H_
