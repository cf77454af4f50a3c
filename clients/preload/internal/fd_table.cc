#include "clients/preload/internal/fd_table.h"

#include <utility>

#include "absl/container/flat_hash_set.h"
#include "clients/preload/internal/shared_socket.h"
#include "clients/preload/internal/socket.h"

namespace quadsock::preload {

bool FdTable::Install(int fd, std::shared_ptr<PreloadSocket> s) {
  if (!Trackable(fd)) return false;
  std::lock_guard<std::mutex> lock(mu_);
  sockets_[fd] = std::move(s);
  state_[fd].store(kQuadsock, std::memory_order_release);
  return true;
}

std::shared_ptr<PreloadSocket> FdTable::Forget(int fd) {
  if (fd < 0 || fd >= kMaxFd) return nullptr;
  const uint8_t was = state_[fd].exchange(kUnknown, std::memory_order_acq_rel);
  if (was != kQuadsock) return nullptr;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = sockets_.find(fd);
  if (it == sockets_.end()) return nullptr;
  std::shared_ptr<PreloadSocket> s = std::move(it->second);
  sockets_.erase(it);
  return s;
}

void FdTable::BeforeFork() {
  mu_.lock();
  absl::flat_hash_set<PreloadSocket*> seen;
  for (auto& [fd, s] : sockets_) {
    if (seen.insert(s.get()).second) s->shared().AddHolder();
  }
}

FdTable& Fds() {
  static FdTable* table = new FdTable();  // never destroyed: calls may come during exit
  return *table;
}

}  // namespace quadsock::preload
