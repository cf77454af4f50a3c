// The memory that all receive queues of one stack may hold together: the kernel's udp_mem,
// without its pressure levels. Each socket's queue is bounded in datagrams; this bounds their
// sum in bytes, so that many sockets with deep queues cannot take the host's memory. A datagram
// that would go past it is dropped and counted, like one that finds its queue full. The queues'
// own cell arrays are charged too, for the socket's life, from its Open: an Open whose queue
// would go past it is refused.
//
//
// A budget may be a share of another (an account: one peer's share of the stack's): what it
// takes, it takes from both, and it fits only when it fits both. So one peer's full share
// leaves the rest of the stack's to the others.
//
//   auto budget = std::make_shared<ReceiveBudget>(512 << 20);
//   auto peer = std::make_shared<ReceiveBudget>(256 << 20, budget);   // a peer's share
//   if (!peer->TryReserve(cells)) { /* refuse the Open */ }
//   if (!peer->TryCharge(n)) { /* drop */ }
//   ...
//   peer->Release(n);  // when the datagram leaves the queue (or the socket its cells)
#ifndef QUADSOCK_STACK_RECEIVE_BUDGET_H_
#define QUADSOCK_STACK_RECEIVE_BUDGET_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <algorithm>

namespace quadsock::stack {

class ReceiveBudget {
 public:
  // `parent`: the budget this one is a share of (none: the whole).
  explicit ReceiveBudget(size_t limit_bytes, std::shared_ptr<ReceiveBudget> parent = nullptr)
      : limit_(limit_bytes), parent_(std::move(parent)) {}

  // Poll threads: takes `bytes` if they fit under the limit (and the parent's). Charges that
  // race may each find the sum over the limit and both fail, never both succeed past it.
  bool TryCharge(size_t bytes) {
    if (TryReserve(bytes)) return true;
    CountRefusal();
    return false;
  }
  // The same for memory that is not a datagram (a queue's cells): a refusal is not a drop, and
  // refused() does not count it.
  bool TryReserve(size_t bytes) {
    const size_t before = used_.fetch_add(bytes, std::memory_order_relaxed);
    if (before + bytes <= limit_ && (parent_ == nullptr || parent_->TryReserve(bytes))) {
      return true;
    }
    used_.fetch_sub(bytes, std::memory_order_relaxed);
    return false;
  }
  // Consumers: gives back what a datagram was charged.
  void Release(size_t bytes) {
    used_.fetch_sub(bytes, std::memory_order_relaxed);
    if (parent_ != nullptr) parent_->Release(bytes);
  }

  size_t limit() const { return limit_; }
  size_t used() const { return used_.load(std::memory_order_relaxed); }
  size_t room() const { return limit_ - std::min(limit_, used()); }
  // Datagrams refused here or in a share of this budget.
  uint64_t refused() const { return refused_.load(std::memory_order_relaxed); }
  const ReceiveBudget* parent() const { return parent_.get(); }

 private:
  void CountRefusal() {
    refused_.fetch_add(1, std::memory_order_relaxed);
    if (parent_ != nullptr) parent_->CountRefusal();
  }

  const size_t limit_;
  const std::shared_ptr<ReceiveBudget> parent_;
  std::atomic<size_t> used_{0};
  std::atomic<uint64_t> refused_{0};
};

}  // namespace quadsock::stack

#endif  // QUADSOCK_STACK_RECEIVE_BUDGET_H_
