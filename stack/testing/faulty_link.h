// A Link that fails on purpose, for tests of what the stack does when the link does: it wraps
// another and, as the test's Faults say, lends no TX buffer (the UMEM exhausted) or takes at
// most so many frames a Transmit (the TX ring full). Its counters are the wrapped link's with
// the faults it made counted as the link would (no_tx_buffer, tx_ring_full); its frame ledger
// is the wrapped link's, so a frame the stack leaks under a fault still shows.
//
//   auto faults = std::make_shared<FaultyLink::Faults>();
//   links.push_back(std::make_unique<FaultyLink>(std::move(memory_link), faults));
//   faults->no_tx_buffer = true;   // from any thread
#ifndef QUADSOCK_STACK_TESTING_FAULTY_LINK_H_
#define QUADSOCK_STACK_TESTING_FAULTY_LINK_H_

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <limits>
#include <memory>
#include <utility>

#include "stack/link/link.h"

namespace quadsock::stack::testing_fixtures {

class FaultyLink final : public link::Link {
 public:
  struct Faults {
    std::atomic<bool> no_tx_buffer{false};
    std::atomic<size_t> transmit_limit{std::numeric_limits<size_t>::max()};  // frames a call
  };

  FaultyLink(std::unique_ptr<link::Link> inner, std::shared_ptr<Faults> faults)
      : inner_(std::move(inner)), faults_(std::move(faults)) {}

  const link::LinkInfo& info() const override { return inner_->info(); }
  size_t Receive(std::span<link::FrameBuffer> out) override { return inner_->Receive(out); }
  void Release(std::span<const link::FrameBuffer> frames) override { inner_->Release(frames); }
  std::optional<link::FrameBuffer> AllocateTx(uint32_t length) override {
    if (faults_->no_tx_buffer.load()) {
      no_tx_buffer_.fetch_add(1, std::memory_order_relaxed);
      return std::nullopt;
    }
    return inner_->AllocateTx(length);
  }
  size_t Transmit(std::span<const link::FrameBuffer> frames) override {
    const size_t offered = std::min(frames.size(), faults_->transmit_limit.load());
    const size_t taken = inner_->Transmit(frames.first(offered));
    tx_ring_full_.fetch_add(frames.size() - offered, std::memory_order_relaxed);
    return taken;
  }
  void Poll() override { inner_->Poll(); }
  int wait_fd() const override { return inner_->wait_fd(); }
  absl::Status CheckFrameAccounting() const override { return inner_->CheckFrameAccounting(); }
  link::LinkCounters counters() const override {
    link::LinkCounters c = inner_->counters();
    c.no_tx_buffer += no_tx_buffer_.load(std::memory_order_relaxed);
    c.tx_ring_full += tx_ring_full_.load(std::memory_order_relaxed);
    return c;
  }

 private:
  std::unique_ptr<link::Link> inner_;
  std::shared_ptr<Faults> faults_;
  std::atomic<uint64_t> no_tx_buffer_{0}, tx_ring_full_{0};
};

}  // namespace quadsock::stack::testing_fixtures

#endif  // QUADSOCK_STACK_TESTING_FAULTY_LINK_H_
