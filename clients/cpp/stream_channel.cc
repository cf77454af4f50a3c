#include "clients/cpp/internal/stream_channel.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "stack/channel/packed.h"

namespace quadsock::client_internal {
namespace {

// Released responses kept for the next reads to parse into: a response read into a used one
// reuses its datagrams, their endpoints and strings (a fresh one allocates about six objects a
// datagram).
constexpr size_t kSpareResponses = 8;
// A request's sends: at most this many datagrams, and (counting each datagram's framing as 64
// bytes) at most this many bytes, under the smallest message quadsockd accepts
// (--max_message_bytes=65536) and its 1024 datagrams a request.
constexpr int kMaxSendsPerRequest = 256;
constexpr size_t kMaxRequestBytes = 63 << 10;
constexpr size_t kFramingBytes = 64;
// How long the waiter thread (wait_fd's) sleeps in one turn before it looks whether the channel
// is closing.
constexpr auto kWaiterTurn = std::chrono::milliseconds(100);

// An endpoint the server wrote: it is trusted, and a malformed one reads as unset.
net::Endpoint EndpointOf(const v1::Endpoint& e) {
  absl::StatusOr<net::IpAddress> a = net::IpAddress::Parse(e.address());
  return a.ok() ? net::Endpoint{*a, static_cast<uint16_t>(e.port())} : net::Endpoint{};
}

using Clock = std::chrono::system_clock;

// The stream's operations, as completion queue tags.
enum class Op : intptr_t { kRead = 1, kWrite, kFinish };
void* TagOf(Op op) { return reinterpret_cast<void*>(static_cast<intptr_t>(op)); }

// No thread of its own: the application's thread moves the stream along when it calls in.
// Receive waits on the stream's completion queue itself, so a batch goes from gRPC's read
// straight to the caller, without a hand-off between threads. An application that sleeps on
// wait_fd() instead gets a waiter thread (started by the first wait_fd()) that does the waiting
// and signals the eventfd; from then on Receive and Send wait for that thread's progress.
class StreamChannel final : public DataChannel {
 public:
  StreamChannel(std::shared_ptr<Connection> c, uint32_t window)
      : c_(std::move(c)), window_(window), event_fd_(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {}

  absl::Status Start(const AttachOptions& o) {
    c_->Prepare(ctx_, /*deadline=*/false);
    // Corked: the call's metadata goes with the first request, and StartCall completes nothing
    // (it would hold the write until then).
    ctx_.set_initial_metadata_corked(true);
    stream_ = c_->sockets->PrepareAsyncStreamChannel(&ctx_, &cq_);
    v1::ChannelRequest& first = outgoing_;
    for (const std::string& s : o.sockets) first.add_sockets(s);
    first.set_ring_slots(o.ring_slots);
    first.set_credit(window_);
    first.set_packed(true);
    std::unique_lock<std::mutex> lock(mu_);
    stream_->StartCall(nullptr);
    WriteLocked();
    ReadLocked();
    // Opened once the first request went out (a refusal comes later, as the stream's end).
    while (writing_) WaitLocked(lock, Clock::time_point::max());
    if (!write_ok_) return absl::UnavailableError("the data channel stream could not be opened");
    return absl::OkStatus();
  }

  ~StreamChannel() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      closing_ = true;
    }
    // Whatever is in flight completes now, failed; the waiter sees closing_ at its next turn.
    ctx_.TryCancel();
    if (waiter_.joinable()) waiter_.join();
    std::unique_lock<std::mutex> lock(mu_);
    while (reading_ || writing_ || !finished_) {
      WaitLocked(lock, Clock::time_point::max());
    }
    lock.unlock();
    cq_.Shutdown();
    void* tag;
    bool ok;
    while (cq_.Next(&tag, &ok)) {
    }
    close(event_fd_);
  }

  size_t Receive(std::span<channel::ReceivedView> out, absl::Duration timeout) override {
    std::unique_lock<std::mutex> lock(mu_);
    if (queue_.empty() && finished_) return 0;
    if (queue_.empty()) {
      // Zero: what has arrived, without sleeping (one look at the socket).
      const Clock::time_point deadline =
          timeout > absl::ZeroDuration() ? Deadline(timeout) : Clock::now();
      do {
        if (!WaitLocked(lock, deadline)) break;
      } while (queue_.empty() && !finished_);
    }
    size_t n = 0;
    while (n < out.size() && !queue_.empty()) {
      v1::ChannelResponse& r = queue_.front();
      const size_t count = Count(r);
      for (; next_ < count && n < out.size(); ++next_) out[n++] = TakeAt(r, next_);
      if (next_ < count) break;
      held_.push_back(std::move(r));  // the views point into it until Release
      queue_.pop_front();
      next_ = 0;
      next_offset_ = 0;
    }
    taken_ += n;
    if (queue_.empty() && waiter_.joinable()) {
      uint64_t drain;
      (void)!read(event_fd_, &drain, sizeof(drain));
    }
    return n;
  }

  void Release() override {
    std::unique_lock<std::mutex> lock(mu_);
    // A partly taken response stays queued; only whole ones are held.
    for (v1::ChannelResponse& r : held_) {
      if (spare_.size() < kSpareResponses) spare_.push_back(std::move(r));
    }
    held_.clear();
    if (taken_ < window_ / 2) return;  // grant in chunks, not per datagram
    const uint64_t grant = taken_;
    taken_ = 0;
    if (!WaitForWriteLocked(lock)) return;
    outgoing_.Clear();
    outgoing_.set_credit(static_cast<uint32_t>(grant));
    WriteLocked();
  }

  bool Send(uint32_t socket, std::span<const uint8_t> payload,
            const std::optional<net::Endpoint>& peer) override {
    const channel::SendView one{socket, payload, peer};
    return SendBatch({&one, 1}) == 1;
  }

  // As few requests as the limits allow, one write each (the next waits for the one before),
  // up to the first datagram Send would refuse.
  size_t SendBatch(std::span<const channel::SendView> datagrams) override {
    const size_t sendable = static_cast<size_t>(
        std::find_if(datagrams.begin(), datagrams.end(),
                     [&](const channel::SendView& v) {
                       return v.payload.size() > max_payload() || v.source.has_value();
                     }) -
        datagrams.begin());
    std::unique_lock<std::mutex> lock(mu_);
    size_t n = 0;
    while (n < sendable && WaitForWriteLocked(lock)) {
      outgoing_.Clear();
      size_t bytes = 0;
      while (n < sendable && outgoing_.send_size() < kMaxSendsPerRequest) {
        const channel::SendView& v = datagrams[n];
        const size_t more = v.payload.size() + kFramingBytes;
        if (outgoing_.send_size() > 0 && bytes + more > kMaxRequestBytes) break;
        v1::ChannelDatagram* d = outgoing_.add_send();
        d->set_socket(v.socket);
        d->set_payload(v.payload.data(), v.payload.size());
        if (v.peer.has_value()) {
          d->mutable_peer()->set_address(v.peer->address.ToString());
          d->mutable_peer()->set_port(v.peer->port);
        }
        bytes += more;
        ++n;
      }
      WriteLocked();
    }
    return n;
  }

  int wait_fd() const override {
    std::lock_guard<std::mutex> lock(mu_);
    if (!waiter_.joinable() && !closing_) {
      if (!queue_.empty() || finished_) Signal();
      // wait_fd() is const to its callers; the thread it starts moves the stream along.
      waiter_ = std::thread([self = const_cast<StreamChannel*>(this)] { self->Wait(); });
    }
    return event_fd_;
  }
  ChannelTransport transport() const override { return ChannelTransport::kGrpcStream; }
  uint32_t max_payload() const override { return 65507; }  // the server checks the MTU
  absl::Status ended() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return ended_;
  }
  absl::Status last_send_error() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return last_send_error_;
  }

 private:
  // Datagrams in a response: packed (what Start asks for), or messages (a server that does not
  // pack).
  static size_t Count(const v1::ChannelResponse& r) {
    return r.descriptors().empty() ? static_cast<size_t>(r.datagrams_size())
                                   : channel::PackedCount(r.descriptors());
  }
  // The front response's datagram i, taken in order.
  channel::ReceivedView TakeAt(const v1::ChannelResponse& r, size_t i) {
    if (!r.descriptors().empty()) {
      channel::ReceivedView v = channel::UnpackAt(r.descriptors(), r.payloads(), i, next_offset_);
      next_offset_ += v.payload.size();
      return v;
    }
    const v1::ChannelDatagram& d = r.datagrams(static_cast<int>(i));
    return {.socket = d.socket(),
            .peer = EndpointOf(d.peer()),
            .local = EndpointOf(d.local()),
            .arrival = absl::FromUnixNanos(d.arrival_unix_nanos()),
            .sequence = d.sequence(),
            .payload = {reinterpret_cast<const uint8_t*>(d.payload().data()), d.payload().size()}};
  }

  // Until the write in flight (if any) has gone; false when the stream is ending.
  bool WaitForWriteLocked(std::unique_lock<std::mutex>& lock) {
    while (writing_ && !ending_) WaitLocked(lock, Clock::time_point::max());
    return !ending_ && !closing_ && write_ok_;
  }

  // outgoing_ on its way (serialized now: it may be cleared at once); one write at a time.
  void WriteLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    writing_ = true;
    stream_->Write(outgoing_, TagOf(Op::kWrite));
  }
  // The next response, into incoming_; one read at a time.
  void ReadLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    reading_ = true;
    stream_->Read(&incoming_, TagOf(Op::kRead));
  }

  // Waits until `deadline` for the stream to move: the waiter thread's progress, if there is
  // one, or else one completion of the queue, handled here. False when nothing moved in time.
  bool WaitLocked(std::unique_lock<std::mutex>& lock, Clock::time_point deadline) {
    if (waiter_.joinable() && std::this_thread::get_id() != waiter_.get_id()) {
      return moved_.wait_until(lock, deadline) == std::cv_status::no_timeout;
    }
    lock.unlock();
    void* tag;
    bool ok;
    const grpc::CompletionQueue::NextStatus next = cq_.AsyncNext(&tag, &ok, deadline);
    lock.lock();
    if (next != grpc::CompletionQueue::GOT_EVENT) return false;
    Handle(static_cast<Op>(reinterpret_cast<intptr_t>(tag)), ok);
    moved_.notify_all();
    return true;
  }

  // One completed operation of the stream.
  void Handle(Op op, bool ok) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    switch (op) {
      case Op::kWrite:
        writing_ = false;
        write_ok_ = write_ok_ && ok;
        if (finish_due_) FinishLocked();
        return;
      case Op::kFinish:
        finished_ = true;
        if (ended_.ok()) {  // not ended by a batch that did not add up
          ended_ = finish_.ok() ? absl::CancelledError("the data channel stream ended")
                                : absl::Status(static_cast<absl::StatusCode>(finish_.error_code()),
                                               finish_.error_message());
        }
        if (waiter_.joinable()) Signal();
        return;
      case Op::kRead:
        reading_ = false;
        if (ok && Accept()) {
          ReadLocked();
          return;
        }
        // The stream is ending: its status, once no write is in flight.
        ending_ = true;
        finish_due_ = true;
        if (!writing_) FinishLocked();
        return;
    }
  }

  // Takes the response just read: its send results, and its datagrams onto the queue. False
  // when the server's bytes do not add up: nothing of the batch is handed out, the stream ends.
  bool Accept() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    v1::ChannelResponse& r = incoming_;
    for (const v1::SendResult& s : r.send_results()) {
      last_send_error_ = absl::Status(
          static_cast<absl::StatusCode>(s.code()),
          absl::StrCat("request ", s.request(), " (", s.queued(), " queued): ", s.message()));
    }
    if (absl::Status s = channel::CheckPacked(r.descriptors(), r.payloads()); !s.ok()) {
      ended_ = absl::InternalError(absl::StrCat("the data channel stream: ", s.message()));
      ctx_.TryCancel();
      return false;
    }
    if (Count(r) == 0) return true;
    queue_.push_back(std::move(r));
    // The parse clears what it reads into, keeping the allocations.
    if (spare_.empty()) {
      r = v1::ChannelResponse();
    } else {
      r = std::move(spare_.back());
      spare_.pop_back();
    }
    if (waiter_.joinable()) Signal();
    return true;
  }

  void FinishLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    finish_due_ = false;
    stream_->Finish(&finish_, TagOf(Op::kFinish));
  }

  void Signal() const {
    const uint64_t one = 1;
    (void)!write(event_fd_, &one, sizeof(one));
  }

  // The waiter thread: moves the stream along until the channel closes, or the stream has
  // ended with nothing in flight.
  void Wait() {
    std::unique_lock<std::mutex> lock(mu_);
    while (!closing_ && !(finished_ && !writing_)) WaitLocked(lock, Clock::now() + kWaiterTurn);
  }

  const std::shared_ptr<Connection> c_;
  const uint32_t window_;
  const int event_fd_;
  grpc::ClientContext ctx_;
  grpc::CompletionQueue cq_;
  std::unique_ptr<grpc::ClientAsyncReaderWriter<v1::ChannelRequest, v1::ChannelResponse>> stream_;
  // wait_fd()'s thread, if asked for.
  mutable std::thread waiter_ ABSL_GUARDED_BY(mu_);

  mutable std::mutex mu_;
  std::condition_variable moved_;  // an operation completed (the waiter's progress)
  bool reading_ ABSL_GUARDED_BY(mu_) = false;   // a Read into incoming_ in flight
  bool writing_ ABSL_GUARDED_BY(mu_) = false;   // a Write of outgoing_ in flight
  bool write_ok_ ABSL_GUARDED_BY(mu_) = true;   // every write went
  bool ending_ ABSL_GUARDED_BY(mu_) = false;      // reads ended: no more writes
  bool finish_due_ ABSL_GUARDED_BY(mu_) = false;  // Finish, once the write in flight is done
  bool finished_ ABSL_GUARDED_BY(mu_) = false;    // the stream's status is in
  bool closing_ ABSL_GUARDED_BY(mu_) = false;   // the destructor runs
  v1::ChannelResponse incoming_ ABSL_GUARDED_BY(mu_);
  v1::ChannelRequest outgoing_ ABSL_GUARDED_BY(mu_);
  grpc::Status finish_ ABSL_GUARDED_BY(mu_);
  std::deque<v1::ChannelResponse> queue_ ABSL_GUARDED_BY(mu_);  // read, not yet handed out
  size_t next_ ABSL_GUARDED_BY(mu_) = 0;         // the front response's next datagram
  size_t next_offset_ ABSL_GUARDED_BY(mu_) = 0;  // where its payload starts, when packed
  // Handed out, until Release.
  std::vector<v1::ChannelResponse> held_ ABSL_GUARDED_BY(mu_);
  // Released, to read into (kSpareResponses at most).
  std::vector<v1::ChannelResponse> spare_ ABSL_GUARDED_BY(mu_);
  uint64_t taken_ ABSL_GUARDED_BY(mu_) = 0;  // datagrams handed out since the last grant
  absl::Status ended_ ABSL_GUARDED_BY(mu_);
  absl::Status last_send_error_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

absl::StatusOr<std::unique_ptr<DataChannel>> OpenStreamChannel(std::shared_ptr<Connection> c,
                                                               const AttachOptions& options) {
  if (options.stream_window == 0) {
    return absl::InvalidArgumentError("stream_window: the server may send nothing with 0");
  }
  auto ch = std::make_unique<StreamChannel>(std::move(c), options.stream_window);
  if (absl::Status s = ch->Start(options); !s.ok()) return s;
  return ch;
}

}  // namespace quadsock::client_internal
