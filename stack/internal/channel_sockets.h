// A data channel's sockets by their session index, for the poll thread that sends what the
// application queued on the channel's TX ring: lookups without a lock (a two-level table of
// atomic pointers to shared pointers), changes by the control plane under the caller's lock.
// An entry replaced or taken out is freed after an RCU grace period, so a poll thread may use
// what Find returned until its next quiescent state (and copy the shared pointer to keep the
// socket longer, as a datagram waiting for its neighbour does). A page of the table is freed
// (after a grace period too) when its last socket leaves: a session's indexes only grow, and a
// session that opens and closes sockets for ever keeps the pages of those it holds, no more.
// Internal to the stack.
//
//   ChannelSockets s;
//   s.Set(7, socket);                                        // control plane
//   const std::shared_ptr<UdpSocket>* found = s.Find(7);     // poll thread
#ifndef QUADSOCK_STACK_INTERNAL_CHANNEL_SOCKETS_H_
#define QUADSOCK_STACK_INTERNAL_CHANNEL_SOCKETS_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>

#include "stack/demux/rcu.h"

namespace quadsock::stack {

class UdpSocket;

class ChannelSockets {
 public:
  static constexpr uint32_t kPageBits = 10;
  static constexpr uint32_t kPageSize = 1u << kPageBits;
  static constexpr uint32_t kPages = 4096;
  static constexpr uint32_t kMaxIndex = kPages * kPageSize - 1;  // about 4M sockets a session

  ChannelSockets() = default;
  ~ChannelSockets() {
    for (auto& p : pages_) {
      if (Page* page = p.load()) {
        for (auto& e : *page) delete e.load();
        delete page;
      }
    }
  }
  ChannelSockets(const ChannelSockets&) = delete;
  ChannelSockets& operator=(const ChannelSockets&) = delete;

  const std::shared_ptr<UdpSocket>* Find(uint32_t index) const {
    if (index > kMaxIndex) return nullptr;
    const Page* page = pages_[index >> kPageBits].load(std::memory_order_acquire);
    if (page == nullptr) return nullptr;
    return (*page)[index & (kPageSize - 1)].load(std::memory_order_acquire);
  }
  // Null takes the index out. False for an index over kMaxIndex. The entry it replaces, and a
  // page left empty, are freed after a grace period.
  bool Set(uint32_t index, std::shared_ptr<UdpSocket> socket) {
    if (index > kMaxIndex) return false;
    const uint32_t p = index >> kPageBits;
    std::atomic<Page*>& slot = pages_[p];
    Page* page = slot.load(std::memory_order_relaxed);
    if (page == nullptr) {
      if (socket == nullptr) return true;
      page = new Page{};
      slot.store(page, std::memory_order_release);
    }
    auto* entry = socket == nullptr ? nullptr : new std::shared_ptr<UdpSocket>(std::move(socket));
    const std::shared_ptr<UdpSocket>* old =
        (*page)[index & (kPageSize - 1)].exchange(entry, std::memory_order_acq_rel);
    if (old != nullptr) demux::RcuDefer([old] { delete old; });
    live_[p] += (entry != nullptr) - (old != nullptr);
    if (live_[p] == 0) {
      slot.store(nullptr, std::memory_order_release);
      demux::RcuDefer([page] { delete page; });
    }
    return true;
  }
  // Pages held now (each kPageSize pointers): what the table costs.
  size_t pages() const {
    size_t n = 0;
    for (const auto& p : pages_) n += p.load(std::memory_order_relaxed) != nullptr;
    return n;
  }

 private:
  using Page = std::array<std::atomic<const std::shared_ptr<UdpSocket>*>, kPageSize>;
  std::array<std::atomic<Page*>, kPages> pages_{};
  std::array<uint16_t, kPages> live_{};  // entries in each page (the control plane's)
};

}  // namespace quadsock::stack

#endif  // QUADSOCK_STACK_INTERNAL_CHANNEL_SOCKETS_H_
