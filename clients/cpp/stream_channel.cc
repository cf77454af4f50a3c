#include "clients/cpp/internal/stream_channel.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include "absl/strings/str_cat.h"
#include "stack/channel/packed.h"

namespace quadsock::client_internal {
namespace {

// Released responses kept for the reader to parse the next ones into: a response read into a
// used one reuses its datagrams, their endpoints and strings (a fresh one allocates about six
// objects a datagram).
constexpr size_t kSpareResponses = 8;

// An endpoint the server wrote: it is trusted, and a malformed one reads as unset.
net::Endpoint EndpointOf(const v1::Endpoint& e) {
  absl::StatusOr<net::IpAddress> a = net::IpAddress::Parse(e.address());
  return a.ok() ? net::Endpoint{*a, static_cast<uint16_t>(e.port())} : net::Endpoint{};
}

class StreamChannel final : public DataChannel {
 public:
  StreamChannel(std::shared_ptr<Connection> c, uint32_t window)
      : c_(std::move(c)), window_(window), event_fd_(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {}

  absl::Status Start(const AttachOptions& o) {
    c_->Prepare(ctx_, /*deadline=*/false);
    stream_ = c_->sockets->StreamChannel(&ctx_);
    v1::ChannelRequest first;
    for (const std::string& s : o.sockets) first.add_sockets(s);
    first.set_ring_slots(o.ring_slots);
    first.set_credit(window_);
    first.set_packed(true);
    if (!stream_->Write(first)) {
      return absl::UnavailableError("the data channel stream could not be opened");
    }
    reader_ = std::thread([this] { Read(); });
    return absl::OkStatus();
  }

  ~StreamChannel() override {
    {
      std::lock_guard<std::mutex> lock(write_mu_);
      (void)stream_->WritesDone();
    }
    ctx_.TryCancel();
    if (reader_.joinable()) reader_.join();
    close(event_fd_);
  }

  size_t Receive(std::span<channel::ReceivedView> out, absl::Duration timeout) override {
    std::unique_lock<std::mutex> lock(mu_);
    if (timeout > absl::ZeroDuration()) {
      ready_.wait_for(lock, absl::ToChronoMilliseconds(timeout),
                      [this] { return !queue_.empty() || !ended_.ok(); });
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
    if (queue_.empty()) {
      uint64_t drain;
      (void)!read(event_fd_, &drain, sizeof(drain));
    }
    return n;
  }

  void Release() override {
    uint64_t grant;
    {
      std::lock_guard<std::mutex> lock(mu_);
      // A partly taken response stays queued; only whole ones are held.
      for (v1::ChannelResponse& r : held_) {
        if (spare_.size() < kSpareResponses) spare_.push_back(std::move(r));
      }
      held_.clear();
      if (taken_ < window_ / 2) return;  // grant in chunks, not per datagram
      grant = taken_;
      taken_ = 0;
    }
    v1::ChannelRequest more;
    more.set_credit(static_cast<uint32_t>(grant));
    std::lock_guard<std::mutex> lock(write_mu_);
    (void)stream_->Write(more);
  }

  bool Send(uint32_t socket, std::span<const uint8_t> payload,
            const std::optional<net::Endpoint>& peer) override {
    v1::ChannelRequest req;
    v1::ChannelDatagram* d = req.add_send();
    d->set_socket(socket);
    d->set_payload(payload.data(), payload.size());
    if (peer.has_value()) {
      d->mutable_peer()->set_address(peer->address.ToString());
      d->mutable_peer()->set_port(peer->port);
    }
    std::lock_guard<std::mutex> lock(write_mu_);
    return stream_->Write(req);
  }

  int wait_fd() const override { return event_fd_; }
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

  void Read() {
    v1::ChannelResponse r;
    while (stream_->Read(&r)) {
      std::lock_guard<std::mutex> lock(mu_);
      for (const v1::SendResult& s : r.send_results()) {
        last_send_error_ = absl::Status(
            static_cast<absl::StatusCode>(s.code()),
            absl::StrCat("request ", s.request(), " (", s.queued(), " queued): ", s.message()));
      }
      if (absl::Status s = channel::CheckPacked(r.descriptors(), r.payloads()); !s.ok()) {
        // The server's bytes do not add up: nothing of the batch is handed out.
        ended_ = absl::InternalError(absl::StrCat("the data channel stream: ", s.message()));
        ctx_.TryCancel();
        break;
      }
      if (Count(r) == 0) continue;
      queue_.push_back(std::move(r));
      // The parse clears what it reads into, keeping the allocations.
      if (spare_.empty()) {
        r = v1::ChannelResponse();
      } else {
        r = std::move(spare_.back());
        spare_.pop_back();
      }
      const uint64_t one = 1;
      (void)!write(event_fd_, &one, sizeof(one));
      ready_.notify_all();
    }
    const grpc::Status finish = stream_->Finish();
    std::lock_guard<std::mutex> lock(mu_);
    if (ended_.ok()) {  // not ended above, by a batch that did not add up
      ended_ = finish.ok() ? absl::CancelledError("the data channel stream ended")
                           : absl::Status(static_cast<absl::StatusCode>(finish.error_code()),
                                          finish.error_message());
    }
    const uint64_t one = 1;
    (void)!write(event_fd_, &one, sizeof(one));
    ready_.notify_all();
  }

  const std::shared_ptr<Connection> c_;
  const uint32_t window_;
  const int event_fd_;
  grpc::ClientContext ctx_;
  std::unique_ptr<grpc::ClientReaderWriter<v1::ChannelRequest, v1::ChannelResponse>> stream_;
  std::mutex write_mu_;  // one Write at a time (sends and credit)
  std::thread reader_;
  mutable std::mutex mu_;
  std::condition_variable ready_;
  std::deque<v1::ChannelResponse> queue_;  // received, not yet handed out
  size_t next_ = 0;                        // the front response's next datagram
  size_t next_offset_ = 0;                 // where its payload starts, when packed
  std::vector<v1::ChannelResponse> held_;  // handed out, until Release
  // Released, to read into (kSpareResponses at most).
  std::vector<v1::ChannelResponse> spare_;
  uint64_t taken_ = 0;                     // datagrams handed out since the last grant
  absl::Status ended_;
  absl::Status last_send_error_;
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
