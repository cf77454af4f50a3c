// One shared object per peer (a session's peer: ServiceContext::PeerKey), made on first use and
// kept while anything holds it: what a peer's sockets or channels take from their share of a
// budget. The map holds weak references and is swept of the gone ones as it grows, so a server
// that has seen a million peers holds entries for those alive, amortized O(1) a call.
//
//   PeerShares<std::atomic<size_t>> bytes;
//   std::shared_ptr<std::atomic<size_t>> mine =
//       bytes.Get(peer, [] { return std::make_shared<std::atomic<size_t>>(0); });
#ifndef QUADSOCK_SERVICE_PEER_SHARES_H_
#define QUADSOCK_SERVICE_PEER_SHARES_H_

#include <memory>
#include <mutex>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"

namespace quadsock::service {

template <typename T>
class PeerShares {
 public:
  // The peer's object, or a new one from `make` when none of its holders is left (a new one
  // holds nothing of the old's). Any thread.
  std::shared_ptr<T> Get(const std::string& peer, absl::FunctionRef<std::shared_ptr<T>()> make) {
    std::lock_guard<std::mutex> lock(mu_);
    std::weak_ptr<T>& slot = shares_[peer];
    std::shared_ptr<T> share = slot.lock();
    if (share == nullptr) {
      share = make();
      slot = share;
    }
    if (shares_.size() >= next_sweep_) {
      absl::erase_if(shares_, [](const auto& entry) { return entry.second.expired(); });
      next_sweep_ = 2 * shares_.size() + 16;
    }
    return share;
  }
  // Peers with an entry (alive, or gone since the last sweep).
  size_t size() const {
    std::lock_guard<std::mutex> lock(mu_);
    return shares_.size();
  }

 private:
  // std::mutex, not absl::Mutex: ThreadSanitizer sees it unaided (sanitizers/tsan.cc).
  mutable std::mutex mu_;
  absl::flat_hash_map<std::string, std::weak_ptr<T>> shares_;  // guarded by mu_
  size_t next_sweep_ = 16;                                      // mu_
};

}  // namespace quadsock::service

#endif  // QUADSOCK_SERVICE_PEER_SHARES_H_
