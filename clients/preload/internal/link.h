// One session with quadsockd and its data channel on shared memory: what a process's quadsock
// sockets are opened in. The hand-off thread blocks on the channel's eventfds, copies each
// datagram into its socket's shared queue and signals the socket once per batch, so a program
// blocked in poll, epoll or recv costs no CPU. With QUADSOCK_BUSY_POLL the program's waiting
// threads take from the channel themselves (Poll, busy_poll.h), and the hand-off thread keeps
// out of their way while they do, and for as long again after.
//
// A child made by fork keeps its parent's Link for the sockets it inherited: it sends on the
// same TX ring (in the channel's shared mapping, taken in turn under a process-shared lock)
// and the parent's hand-off thread fills the sockets' shared queues. Only the process that made
// a Link talks to quadsockd through it (owned_here()). Links are never destroyed: a program may
// exit at any moment, and a child must not tear down its parent's gRPC client.
//
//   Link* link = Link::Start(config).value();
//   RemoteSocket s = link->client().Open(options).value();
//   link->Register(s.index(), shared);
#ifndef QUADSOCK_CLIENTS_PRELOAD_INTERNAL_LINK_H_
#define QUADSOCK_CLIENTS_PRELOAD_INTERNAL_LINK_H_

#include <pthread.h>
#include <sys/types.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "clients/cpp/client.h"
#include "clients/preload/internal/config.h"
#include "clients/preload/internal/shared_socket.h"
#include "stack/net/address.h"

namespace quadsock::preload {

class Link {
 public:
  // Connects to quadsockd, learns its addresses and networks, attaches the channel and starts
  // the hand-off thread. The Link lives as long as the process.
  static absl::StatusOr<Link*> Start(const Config& config);

  bool owned_here() const { return getpid() == owner_; }
  Client& client() { return *client_; }
  const std::vector<net::IpAddress>& addresses() const { return addresses_; }
  // On-link prefixes and routed ones (not default routes).
  const std::vector<net::IpPrefix>& networks() const { return networks_; }
  uint32_t max_payload() const { return max_payload_; }
  uint32_t ifindex() const { return ifindex_; }

  // Queues a datagram on the TX ring: false when it is full.
  bool Send(uint32_t index, std::span<const uint8_t> payload,
            const std::optional<net::Endpoint>& peer,
            const std::optional<net::IpAddress>& source = std::nullopt);

  // Busy polling: takes what the channel holds and hands it to the sockets' queues, as the
  // hand-off thread does, without waiting (the owner only). How many datagrams it took: none
  // when there were none, or another thread was taking them. It holds the program's signals
  // meanwhile, unless the caller does already (`signals_held`: a spin, busy_poll.h).
  size_t Poll(bool signals_held = false);
  // A spin ran out with nothing for its thread, which goes to sleep: the hand-off thread takes
  // over at once, not only when the spin's time has passed again.
  void SpinEnded();

  // The socket's datagrams go to `shared` from now on / no longer (the owner only).
  void Register(uint32_t index, std::shared_ptr<SharedSocket> shared);
  void Unregister(uint32_t index);

 private:
  Link(const Config& config) : config_(config), owner_(getpid()) {}
  absl::Status Connect();
  void Pump();
  // Receive (waiting up to `timeout` when the channel is empty), then each datagram to its
  // socket's queue, each socket signalled once; pump_mu_ held.
  size_t Deliver(absl::Duration timeout);
  void MarkDown();

  const Config& config_;
  const pid_t owner_;
  std::unique_ptr<Client> client_;
  std::unique_ptr<DataChannel> channel_;
  std::vector<net::IpAddress> addresses_;
  std::vector<net::IpPrefix> networks_;
  uint32_t max_payload_ = 0;
  uint32_t ifindex_ = 0;
  std::mutex pump_mu_;  // the channel's receiving side: the hand-off thread, or a Poll
  std::atomic<int64_t> last_poll_ns_{0};  // when a program thread last polled (monotonic)
  std::mutex aside_mu_;  // the hand-off thread waits on aside_cv_ while threads poll
  std::condition_variable aside_cv_;
  std::atomic<bool> marked_down_{false};
  pthread_mutex_t* tx_mu_ = nullptr;  // process-shared, in a page of its own
  std::mutex sockets_mu_;
  absl::flat_hash_map<uint32_t, std::shared_ptr<SharedSocket>> sockets_;
};

}  // namespace quadsock::preload

#endif  // QUADSOCK_CLIENTS_PRELOAD_INTERNAL_LINK_H_
