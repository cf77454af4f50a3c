// The process's one link to quadsockd: its session (a Client), its data channel on shared
// memory, and the thread that hands the channel's datagrams to the sockets they are for. Made
// on first need (the first datagram socket that binds or connects to one of quadsockd's
// networks), never before: a program that uses only kernel sockets never talks to quadsockd.
//
// The hand-off thread blocks on the channel's eventfds, copies each datagram into its socket's
// queue and writes the socket's eventfd once per batch: a program blocked in poll, epoll or recv
// on a quadsock socket costs no CPU. With QUADSOCK_BUSY_POLL it spins that long on the channel
// before it sleeps, and so do receives on their queues.
//
//   Runtime& rt = Runtime::Get();
//   if (rt.TakesLocal(AF_INET, local)) {
//     absl::StatusOr<std::shared_ptr<PreloadSocket>> s = rt.Take(fd, AF_INET);
//     ...
#ifndef QUADSOCK_CLIENTS_PRELOAD_INTERNAL_RUNTIME_H_
#define QUADSOCK_CLIENTS_PRELOAD_INTERNAL_RUNTIME_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "clients/cpp/client.h"
#include "clients/preload/internal/config.h"
#include "stack/net/address.h"

namespace quadsock::preload {

class PreloadSocket;

class Runtime {
 public:
  // The process's runtime (made with the configuration from the environment; never destroyed).
  static Runtime& Get();

  const Config& config() const { return config_; }

  // Whether a datagram socket of `family` bound to `local` belongs on quadsock: one of
  // quadsockd's addresses, or the wildcard (QUADSOCK_WILDCARD) of a family quadsockd serves,
  // on a port QUADSOCK_PORTS allows. Connects to quadsockd first if it has not.
  bool TakesLocal(int family, const net::Endpoint& local);
  // Whether an unbound datagram socket that connects or sends to `peer` belongs on quadsock:
  // the peer is in one of quadsockd's networks (its addresses' prefixes, and its routes other
  // than a default route). Loopback never is.
  bool TakesPeer(int family, const net::Endpoint& peer);

  // Moves the unbound kernel datagram socket `fd` (of `family`) onto quadsock: opens a socket
  // there with the kernel socket's options (SO_REUSEPORT, IPV6_V6ONLY), keeping the kernel
  // socket as the new socket's shadow (it answers option and interface queries). The caller
  // binds or connects it, then installs it at `fd` (PreloadSocket::InstallAt). quadsockd's
  // error for Open, or the system's for the descriptors it needs.
  absl::StatusOr<std::shared_ptr<PreloadSocket>> Take(int fd, int family);

  // Queues a datagram on the channel (the TX ring): false when the ring is full.
  bool Send(uint32_t index, std::span<const uint8_t> payload,
            const std::optional<net::Endpoint>& peer);
  uint32_t max_payload() const { return max_payload_; }
  // quadsockd's interface, as IP_PKTINFO reports it.
  uint32_t ifindex() const { return ifindex_; }
  // The channel ended (quadsockd stopped, or ended the session).
  bool down() const { return down_.load(std::memory_order_acquire); }
  bool forked() const { return forked_.load(std::memory_order_acquire); }

  // In a child after fork: the session and the channel are the parent's; the child's calls on
  // inherited quadsock sockets fail with ENETDOWN, and its new sockets stay the kernel's.
  void AfterForkInChild();

  // A socket's datagrams come to it from now on / no longer.
  void Register(uint32_t index, PreloadSocket* s);
  void Unregister(uint32_t index);

 private:
  Runtime();
  // Connects to quadsockd, learns its networks and attaches the channel, once. False when
  // that failed (said once on stderr; the process exits if QUADSOCK_REQUIRE=1).
  bool Start();
  absl::Status StartOnce();
  void Pump();
  void MarkDown();
  bool Serves(int family) const;

  Config config_;
  std::mutex start_mu_;
  enum class State { kNew, kRunning, kFailed } state_ = State::kNew;
  std::unique_ptr<Client> client_;
  std::unique_ptr<DataChannel> channel_;
  std::vector<net::IpPrefix> networks_;  // on-link prefixes, then routed ones
  std::vector<net::IpAddress> addresses_;
  uint32_t max_payload_ = 0;
  uint32_t ifindex_ = 0;
  std::atomic<bool> down_{false};
  std::atomic<bool> forked_{false};
  std::mutex tx_mu_;
  std::mutex sockets_mu_;
  absl::flat_hash_map<uint32_t, PreloadSocket*> sockets_;
  std::thread pump_;
};

}  // namespace quadsock::preload

#endif  // QUADSOCK_CLIENTS_PRELOAD_INTERNAL_RUNTIME_H_
