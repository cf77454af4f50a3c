// The stack's internals shared by its two halves: stack.cc (lifecycle, control plane,
// administration) and data_path.cc (the poll engine). Not API: only those two include it.
//
//   Engine& e = *engines_[i];     // one per link: its send queue, wakeup fd and counters
#ifndef QUADSOCK_STACK_INTERNAL_ENGINE_H_
#define QUADSOCK_STACK_INTERNAL_ENGINE_H_

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "stack/net/frame.h"
#include "stack/net/ip.h"
#include "stack/net/udp.h"
#include "stack/stack.h"

namespace quadsock::stack {

constexpr size_t kRxBatch = 64;
constexpr size_t kTxBatch = 64;
constexpr size_t kSendsPerTurn = 256;
constexpr absl::Duration kTimerPeriod = absl::Milliseconds(100);
constexpr int kIdleWaitMs = 10;
// A busy-polling link is polled this long after its last frame before the thread sleeps.
constexpr absl::Duration kBusyPollLinger = absl::Milliseconds(1);

// Counters of one engine: written by its poll thread only, read by anyone.
enum Counter {
  kRxFrames, kNotForUs, kFragments, kUnhandled, kUdpDelivered, kUdpNoSocket, kEchoReplies,
  kIcmpErrorsSent, kIcmpRateLimited, kIcmpErrorsReceived, kIcmpErrorsUnmatched, kArpReplies,
  kNdpAdverts, kNeighborIgnored, kTxNoRoute, kTxNoBuffer, kCounterCount
};

inline std::span<const uint8_t> AsBytes(const std::string& s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

inline size_t UdpHeadroom(net::Family f) {
  return (f == net::Family::kV4 ? net::Ipv4Header::kMinSize : net::Ipv6Header::kSize) +
         net::UdpHeader::kSize;
}

// The addresses that are ours, for the data path: read without locks by poll threads, replaced
// whole by the control plane and freed after an RCU grace period.
struct LocalAddresses {
  std::vector<net::IpPrefix> prefixes;  // our addresses, with their connected networks
  bool Contains(const net::IpAddress& a) const {
    return std::any_of(prefixes.begin(), prefixes.end(),
                       [&a](const net::IpPrefix& p) { return p.address() == a; });
  }
  // The connected network whose broadcast address `a` is, or null.
  const net::IpPrefix* BroadcastOf(const net::IpAddress& a) const {
    for (const net::IpPrefix& p : prefixes) {
      if (p.IsBroadcast(a)) return &p;
    }
    return nullptr;
  }
};

struct Stack::SendRequest {
  std::shared_ptr<UdpSocket> socket;
  net::Endpoint src;  // address unspecified: the route's source
  net::Endpoint dst;
  std::string payload;
};

struct Stack::Engine {
  explicit Engine(std::unique_ptr<link::Link> l, size_t send_depth)
      : link(std::move(l)), sends(send_depth), wake_fd(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {}
  ~Engine() {
    while (std::optional<SendRequest*> r = sends.TryPop()) delete *r;
    close(wake_fd);
  }
  void Bump(Counter c, uint64_t n = 1) {
    counters[c].store(counters[c].load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
  }
  void BumpParse(net::ParseError e) {
    auto& c = parse_errors[static_cast<int>(e)];
    c.store(c.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  }

  // ReceiveBatch's working space for one batch.
  struct RxBatch {
    net::ParsedFrame parsed;  // the frame being parsed
    std::array<FrameKind, kRxBatch> kind;
    // Of the UDP datagrams, in order: flow, payload (in the frame), socket.
    std::array<demux::FlowKey, kRxBatch> keys;
    std::array<std::span<const uint8_t>, kRxBatch> payloads;
    std::array<std::optional<demux::LookupResult>, kRxBatch> found;
  };

  std::unique_ptr<link::Link> link;
  RxBatch rx;
  BoundedQueue<SendRequest*> sends;
  const int wake_fd;
  std::atomic<uint32_t> sleeping{0};  // 1 while the poll thread sleeps (see Stack::Send)
  std::thread thread;
  std::unique_ptr<demux::LookupContext> manual_lookup;  // for PollOnce
  std::vector<link::FrameBuffer> tx_batch;
  std::vector<TxOwner> tx_owners;  // one per frame of tx_batch
  absl::Time next_timer = absl::InfinitePast();
  absl::Time turn_time = absl::InfinitePast();  // the stack clock at the start of the last turn
  std::array<std::atomic<uint64_t>, kCounterCount> counters{};
  std::array<std::atomic<uint64_t>, net::kParseErrorCount> parse_errors{};
  std::atomic<uint64_t> tx_queue_full{0};  // written by Send() callers
  // A frame accounting check asked for by another thread, run between two turns.
  std::mutex check_mu;
  std::promise<absl::Status>* check_request = nullptr;
  std::atomic<bool> check_pending{false};
};

}  // namespace quadsock::stack

#endif  // QUADSOCK_STACK_INTERNAL_ENGINE_H_
