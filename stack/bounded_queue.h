// A bounded multi-producer multi-consumer queue that never locks and never allocates after
// construction (Dmitry Vyukov's array queue: each cell carries a sequence number that says
// whether it is ready for a producer or for a consumer).
//
// The data path pushes into it (a poll thread delivering datagrams, a gRPC thread queueing a
// send) and the other side pops; when it is full, TryPush fails and the caller drops and counts.
//
//   BoundedQueue<Datagram*> q(256);            // capacity rounds up to a power of two
//   if (!q.TryPush(d)) ++dropped;
//   std::optional<Datagram*> next = q.TryPop();
#ifndef QUADSOCK_STACK_BOUNDED_QUEUE_H_
#define QUADSOCK_STACK_BOUNDED_QUEUE_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>

namespace quadsock::stack {

template <typename T>
class BoundedQueue {
 public:
  explicit BoundedQueue(size_t capacity) {
    const size_t size = CellBytes(capacity) / sizeof(Cell);
    mask_ = size - 1;
    cells_ = std::make_unique<Cell[]>(size);
    for (size_t i = 0; i < size; ++i) cells_[i].sequence.store(i, std::memory_order_relaxed);
  }
  BoundedQueue(const BoundedQueue&) = delete;
  BoundedQueue& operator=(const BoundedQueue&) = delete;

  size_t capacity() const { return mask_ + 1; }
  // The bytes of the cell array a queue of `capacity` allocates (as the constructor rounds it).
  static size_t CellBytes(size_t capacity) {
    size_t size = 2;
    while (size < capacity) size <<= 1;
    return size * sizeof(Cell);
  }

  bool TryPush(T value) {
    size_t pos = tail_.load(std::memory_order_relaxed);
    for (;;) {
      Cell& cell = cells_[pos & mask_];
      // Acquire: the consumer that emptied this cell is done with its value.
      const size_t seq = cell.sequence.load(std::memory_order_acquire);
      const intptr_t diff = static_cast<intptr_t>(seq) - static_cast<intptr_t>(pos);
      if (diff == 0) {
        if (tail_.compare_exchange_weak(pos, pos + 1, std::memory_order_relaxed)) {
          cell.value = std::move(value);
          // Release: the value is written before the cell says "ready for a consumer".
          cell.sequence.store(pos + 1, std::memory_order_release);
          return true;
        }
      } else if (diff < 0) {
        return false;  // full
      } else {
        pos = tail_.load(std::memory_order_relaxed);
      }
    }
  }

  std::optional<T> TryPop() {
    size_t pos = head_.load(std::memory_order_relaxed);
    for (;;) {
      Cell& cell = cells_[pos & mask_];
      // Acquire: pairs with the producer's release; the value is visible.
      const size_t seq = cell.sequence.load(std::memory_order_acquire);
      const intptr_t diff = static_cast<intptr_t>(seq) - static_cast<intptr_t>(pos + 1);
      if (diff == 0) {
        if (head_.compare_exchange_weak(pos, pos + 1, std::memory_order_relaxed)) {
          T value = std::move(cell.value);
          // Release: the cell is free for the producer one lap later.
          cell.sequence.store(pos + mask_ + 1, std::memory_order_release);
          return value;
        }
      } else if (diff < 0) {
        return std::nullopt;  // empty
      } else {
        pos = head_.load(std::memory_order_relaxed);
      }
    }
  }

  // Approximate (racy) number of queued values, for counters.
  size_t SizeApprox() const {
    const size_t tail = tail_.load(std::memory_order_relaxed);
    const size_t head = head_.load(std::memory_order_relaxed);
    return tail >= head ? tail - head : 0;
  }

 private:
  struct Cell {
    std::atomic<size_t> sequence;
    T value;
  };
  std::unique_ptr<Cell[]> cells_;
  size_t mask_ = 0;
  alignas(64) std::atomic<size_t> tail_{0};
  alignas(64) std::atomic<size_t> head_{0};
};

}  // namespace quadsock::stack

#endif  // QUADSOCK_STACK_BOUNDED_QUEUE_H_
