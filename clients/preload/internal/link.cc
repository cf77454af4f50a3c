#include "clients/preload/internal/link.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <string>

#include "absl/strings/str_cat.h"
#include "clients/preload/internal/log.h"
#include "stack/link/errno_status.h"

namespace quadsock::preload {
namespace {

constexpr size_t kBatch = 64;

int64_t MonotonicNs() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return int64_t{t.tv_sec} * 1'000'000'000 + t.tv_nsec;
}

}  // namespace

absl::StatusOr<Link*> Link::Start(const Config& config) {
  std::unique_ptr<Link> link(new Link(config));
  if (absl::Status s = link->Connect(); !s.ok()) {
    // What Connect made stays: tearing down a half-made gRPC client here is not worth the
    // risk in someone else's process; it happens once.
    link.release();
    return s;
  }
  return link.release();
}

absl::Status Link::Connect() {
  void* page = mmap(nullptr, sizeof(pthread_mutex_t), PROT_READ | PROT_WRITE,
                    MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (page == MAP_FAILED) return link::ErrnoStatus(errno, "mapping the send lock");
  tx_mu_ = static_cast<pthread_mutex_t*>(page);
  pthread_mutexattr_t a;
  pthread_mutexattr_init(&a);
  pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
  pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
  pthread_mutex_init(tx_mu_, &a);
  pthread_mutexattr_destroy(&a);

  ClientOptions options;
  options.client_name =
      std::string("preload:").append(program_invocation_short_name).substr(0, 64);
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect(config_.target, options);
  if (!client.ok()) return client.status();
  client_ = std::move(*client);
  absl::StatusOr<std::vector<std::string>> prefixes = client_->Addresses();
  if (!prefixes.ok()) return prefixes.status();
  for (const std::string& text : *prefixes) {
    absl::StatusOr<net::IpPrefix> p = net::IpPrefix::Parse(text);
    if (!p.ok()) continue;
    addresses_.push_back(p->address());
    networks_.push_back(*p);
  }
  absl::StatusOr<std::vector<v1::Route>> routes = client_->Routes();
  if (!routes.ok()) return routes.status();
  for (const v1::Route& r : *routes) {
    absl::StatusOr<net::IpPrefix> p = net::IpPrefix::Parse(r.destination());
    if (p.ok() && p->length() > 0) networks_.push_back(*p);
  }
  absl::StatusOr<std::vector<v1::Interface>> interfaces = client_->Interfaces();
  if (!interfaces.ok()) return interfaces.status();
  if (!interfaces->empty()) ifindex_ = interfaces->front().ifindex();
  AttachOptions attach;
  attach.transport = ChannelTransport::kSharedMemory;
  absl::StatusOr<std::unique_ptr<DataChannel>> channel = client_->AttachChannel(attach);
  if (!channel.ok()) return channel.status();
  channel_ = std::move(*channel);
  max_payload_ = channel_->max_payload();
  std::thread([this] { Pump(); }).detach();  // as long as the process: the Link is never destroyed
  return absl::OkStatus();
}

bool Link::Send(uint32_t index, std::span<const uint8_t> payload,
                const std::optional<net::Endpoint>& peer,
                const std::optional<net::IpAddress>& source) {
  if (pthread_mutex_lock(tx_mu_) == EOWNERDEAD) pthread_mutex_consistent(tx_mu_);
  const channel::SendView one{index, payload, peer, source};
  const bool queued = channel_->SendBatch({&one, 1}) == 1;
  pthread_mutex_unlock(tx_mu_);
  return queued;
}

void Link::Register(uint32_t index, std::shared_ptr<SharedSocket> shared) {
  std::lock_guard<std::mutex> lock(sockets_mu_);
  sockets_[index] = std::move(shared);
}

void Link::Unregister(uint32_t index) {
  std::lock_guard<std::mutex> lock(sockets_mu_);
  sockets_.erase(index);
}

size_t Link::Poll(bool signals_held) {
  last_poll_ns_.store(MonotonicNs(), std::memory_order_relaxed);
  // A handler that ran on this thread while it holds the channel or a socket's lock, and
  // called into the library, would wait for itself: the program's signals wait outside.
  sigset_t all, program;
  sigfillset(&all);
  if (!signals_held) pthread_sigmask(SIG_BLOCK, &all, &program);
  size_t n = 0;
  {
    std::unique_lock<std::mutex> lock(pump_mu_, std::try_to_lock);
    if (lock.owns_lock()) {
      n = Deliver(absl::ZeroDuration());
      // The hand-off thread may be keeping out of the way for good: say it here.
      if (n == 0 && !channel_->ended().ok()) MarkDown();
    }
  }
  if (!signals_held) pthread_sigmask(SIG_SETMASK, &program, nullptr);
  return n;
}

void Link::SpinEnded() {
  {
    std::lock_guard<std::mutex> lock(aside_mu_);
    last_poll_ns_.store(0, std::memory_order_relaxed);
  }
  aside_cv_.notify_one();
}

size_t Link::Deliver(absl::Duration timeout) {
  channel::ReceivedView batch[kBatch];
  const size_t n = channel_->Receive(batch, timeout);
  if (n == 0) return 0;
  SharedSocket* touched[kBatch];
  size_t touched_count = 0;
  {
    std::lock_guard<std::mutex> lock(sockets_mu_);
    for (size_t i = 0; i < n; ++i) {
      auto it = sockets_.find(batch[i].socket);
      if (it == sockets_.end()) continue;  // closed a moment ago
      SharedSocket* s = it->second.get();
      SharedSocket::Guard g(*s);
      // The receive buffer as the socket's options last set it (the shadow keeps it).
      if (s->Push(batch[i], s->state().receive_buffer) &&
          std::find(touched, touched + touched_count, s) == touched + touched_count) {
        touched[touched_count++] = s;
      }
    }
    for (size_t i = 0; i < touched_count; ++i) {
      SharedSocket::Guard g(*touched[i]);
      touched[i]->Signal();
    }
  }
  channel_->Release();
  return n;
}

void Link::Pump() {
  const int64_t spin_ns = int64_t{config_.busy_poll_us} * 1000;
  for (;;) {
    if (spin_ns > 0) {
      // Program threads poll the channel while they wait: keeping out of the way through
      // their spins, and as long again after the last (or until one runs out: SpinEnded),
      // leaves them the CPU and the channel without wake-ups.
      std::unique_lock<std::mutex> lock(aside_mu_);
      auto quiet = [&] {
        return MonotonicNs() - last_poll_ns_.load(std::memory_order_relaxed);
      };
      if (const int64_t q = quiet(); q < spin_ns) {
        aside_cv_.wait_for(lock, std::chrono::nanoseconds(spin_ns - q),
                           [&] { return quiet() >= spin_ns; });
        continue;
      }
    }
    std::lock_guard<std::mutex> lock(pump_mu_);
    if (Deliver(absl::Seconds(1)) == 0 && !channel_->ended().ok()) return MarkDown();
  }
}

void Link::MarkDown() {
  if (marked_down_.exchange(true)) return;
  Log(LogLevel::kError, absl::StrCat("quadsockd ended the data channel (",
                                     channel_->ended().message(),
                                     "): quadsock sockets fail with ENETDOWN from now on"));
  std::lock_guard<std::mutex> lock(sockets_mu_);
  for (auto& [index, s] : sockets_) {
    SharedSocket::Guard g(*s);
    s->state().down = true;
    s->Signal();
  }
}

}  // namespace quadsock::preload
