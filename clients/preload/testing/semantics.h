// What the semantics program's parts share (socket_semantics.cc defines it): each check prints
// "name: what it saw", in words that are the same on the kernel and under the preload.
#ifndef QUADSOCK_CLIENTS_PRELOAD_TESTING_SEMANTICS_H_
#define QUADSOCK_CLIENTS_PRELOAD_TESTING_SEMANTICS_H_

#include <cstdint>
#include <string>

namespace semantics {

void Say(const std::string& name, const std::string& what);
// "0" or the errno's name, for a call that returns -1 on failure.
std::string Outcome(long r);
// A kernel socket in the peer's namespace, bound to `ip` and a port of its own.
int Peer(const std::string& ip, uint16_t* port);
// A socket under test, bound to `ip` and a fresh port.
int Local(const std::string& ip, uint16_t* port, int extra_type = 0);
bool Readable(int fd, int ms = 5000);
void PeerSend(int peer, const std::string& data, const std::string& ip, uint16_t port);

// signal_semantics.cc: signals during a receive and during readiness waits, and what
// sigaction and its kin read back.
void Signals(const std::string& fam, const std::string& local, const std::string& peer_ip);

}  // namespace semantics

#endif  // QUADSOCK_CLIENTS_PRELOAD_TESTING_SEMANTICS_H_
