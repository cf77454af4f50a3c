#include "stack/internal/path_mtu.h"

#include <algorithm>

namespace quadsock::stack {

size_t PathMtuCache::Validate(const net::IpAddress& dst, size_t mtu, size_t link_mtu) {
  if (mtu >= link_mtu) return 0;
  if (dst.is_v6()) return mtu < kMinV6 ? 0 : mtu;
  if (mtu < 68) return 0;  // RFC 791: every IPv4 link carries 68 bytes
  return std::max(mtu, kMinV4);
}

void PathMtuCache::Lower(const net::IpAddress& dst, size_t mtu, absl::Time now) {
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = entries_.find(dst); it != entries_.end()) {
    // A lower report wins; the same or a higher one only refreshes (the path may have grown,
    // but RFC 1191 6.3 lets the entry age out before trying larger again).
    it->second = {std::min(it->second.mtu, mtu), now + kLifetime};
    return;
  }
  if (entries_.size() >= capacity_) {
    auto first = std::min_element(entries_.begin(), entries_.end(), [](const auto& a, const auto& b) {
      return a.second.expires < b.second.expires;
    });
    entries_.erase(first);
  }
  entries_[dst] = {mtu, now + kLifetime};
  empty_.store(false, std::memory_order_relaxed);
}

size_t PathMtuCache::Get(const net::IpAddress& dst, size_t link_mtu) const {
  if (empty_.load(std::memory_order_relaxed)) return link_mtu;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(dst);
  if (it == entries_.end()) return link_mtu;
  return std::min(it->second.mtu, link_mtu);
}

void PathMtuCache::Expire(absl::Time now) {
  if (empty_.load(std::memory_order_relaxed)) return;
  std::lock_guard<std::mutex> lock(mu_);
  absl::erase_if(entries_, [now](const auto& e) { return e.second.expires <= now; });
  if (entries_.empty()) empty_.store(true, std::memory_order_relaxed);
}

size_t PathMtuCache::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return entries_.size();
}

}  // namespace quadsock::stack
