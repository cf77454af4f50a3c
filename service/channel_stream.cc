#include "service/channel_stream.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "sanitizers/annotate.h"
#include "service/convert.h"
#include "stack/channel/packed.h"

namespace quadsock::service {
namespace {

// Credit a client may hold at once (more is capped, not an error).
constexpr uint64_t kMaxCredit = uint64_t{1} << 24;
// Send results kept for a client that sends failing datagrams faster than it reads: the
// oldest are dropped past this (each says its request number, so the client sees the gap).
constexpr size_t kMaxPendingResults = 64;
// Bytes of a response kept for its send results and framing.
constexpr size_t kResponseReserve = 16384;

void ToProto(const channel::ReceivedView& v, v1::ChannelDatagram* out) {
  out->set_socket(v.socket);
  out->set_payload(v.payload.data(), v.payload.size());
  service::ToProto(v.peer, out->mutable_peer());
  service::ToProto(v.local, out->mutable_local());
  out->set_arrival_unix_nanos(absl::ToUnixNanos(v.arrival));
  out->set_sequence(v.sequence);
}

}  // namespace

ChannelStream::ChannelStream(ServiceContext& c, grpc::CallbackServerContext* ctx)
    : c_(c) {
  const sanitizers::HandOffAtExit before_on_done(this);
  c_.ChannelStreamStarted();
  absl::StatusOr<std::string> token = c_.Session(ctx);
  absl::Status admitted = token.status();
  if (admitted.ok() && c_.channels == nullptr) {
    admitted = absl::UnavailableError("the server is shutting down");
  }
  if (admitted.ok()) admitted = c_.sessions.AddStream(*token);
  if (!admitted.ok()) {
    EndNow(ToGrpc(admitted));
    return;
  }
  token_ = *token;
  stream_counted_ = true;
  sanitizers::HandOff(&request_);  // before the read's OnReadDone
  StartRead(&request_);
}

absl::Status ChannelStream::Attach(const v1::ChannelRequest& first) {
  bool all = false;
  absl::StatusOr<std::vector<std::pair<uint32_t, SocketId>>> sockets =
      c_.ChannelSockets(token_, first.sockets(), all);
  if (!sockets.ok()) return sockets.status();
  ChannelBroker::StreamHooks hooks{
      .wake = [this] { Pump(); },
      .ended = [this](absl::Status why) { EndNow(ToGrpc(why)); },
  };
  absl::StatusOr<std::shared_ptr<channel::Channel>> ch = c_.channels->AttachStream(
      token_, std::move(*sockets), all, first.ring_slots(), std::move(hooks));
  if (!ch.ok()) return ch.status();
  std::vector<int> events;
  for (int fd : (*ch)->event_fds()) events.push_back(dup(fd));
  absl::StatusOr<channel::ChannelReader> reader =
      channel::ChannelReader::Map(dup((*ch)->memfd()), std::move(events));
  std::lock_guard<std::mutex> lock(mu_);
  channel_ = *ch;  // OnDone detaches it, whatever happens next
  if (!reader.ok()) return reader.status();
  reader_.emplace(std::move(*reader));
  packed_ = first.packed();
  return absl::OkStatus();
}

void ChannelStream::SendAll(const v1::ChannelRequest& req) {
  v1::SendResult result;
  result.set_request(requests_);
  absl::Status failed;
  if (static_cast<size_t>(req.send_size()) > c_.max_batch) {
    failed = absl::InvalidArgumentError(
        absl::StrCat("send: at most ", c_.max_batch, " datagrams in one request"));
  }
  for (int i = 0; failed.ok() && i < req.send_size(); ++i) {
    const v1::ChannelDatagram& d = req.send(i);
    absl::StatusOr<SocketId> id = c_.sessions.FindSocketByIndex(token_, d.socket());
    if (!id.ok()) {
      failed = id.status();
      break;
    }
    std::optional<net::Endpoint> to;
    if (d.has_peer()) {
      absl::StatusOr<net::Endpoint> e = ParseEndpoint(d.peer(), absl::StrCat("send[", i, "].peer"));
      if (!e.ok()) {
        failed = e.status();
        break;
      }
      to = *e;
    }
    failed = c_.stack.Send(
        *id, {reinterpret_cast<const uint8_t*>(d.payload().data()), d.payload().size()}, to);
    if (!failed.ok()) {
      failed = absl::Status(failed.code(),
                            absl::StrCat("socket ", d.socket(), ": ", failed.message()));
      break;
    }
    result.set_queued(result.queued() + 1);
  }
  if (failed.ok()) return;
  SetStatus(failed, &result);
  std::lock_guard<std::mutex> lock(mu_);
  if (results_.size() >= kMaxPendingResults) results_.pop_front();
  results_.push_back(std::move(result));
}

void ChannelStream::OnReadDone(bool ok) {
  sanitizers::TakeOver(&request_);
  const sanitizers::HandOffAtExit before_on_done(this);
  if (!ok) {  // the client half-closed (or the call is going): the stream ends
    EndNow(grpc::Status::OK);
    return;
  }
  ++requests_;
  if (requests_ == 1) {
    if (absl::Status s = Attach(request_); !s.ok()) {
      EndNow(ToGrpc(s));
      return;
    }
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    credit_ = std::min(kMaxCredit, credit_ + request_.credit());
  }
  SendAll(request_);
  Pump();
  bool more;
  {
    std::lock_guard<std::mutex> lock(mu_);
    more = !finishing_;
  }
  if (!more) return;
  sanitizers::HandOff(&request_);  // before the read's OnReadDone
  StartRead(&request_);
}

void ChannelStream::Pump() {
  do {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (writing_ || finishing_ || !reader_.has_value() || !NextResponse()) return;
      writing_ = true;
      write_holds_ = 2;  // this call (gRPC serializes inside StartWrite), and OnWriteDone
    }
    sanitizers::HandOff(&response_);  // before the write's OnWriteDone
    StartWrite(&response_);
  } while (WriteLetGo());
}

bool ChannelStream::NextResponse() {
  response_.Clear();  // keeps the strings' memory
  size_t datagrams = 0;
  while (!results_.empty()) {
    *response_.add_send_results() = std::move(results_.front());
    results_.pop_front();
  }
  if (credit_ > 0) {
    // As many as the credit, the batch limit and the message limit allow (every datagram
    // fits a buffer of the channel).
    const size_t budget =
        c_.max_message_bytes > kResponseReserve ? c_.max_message_bytes - kResponseReserve : 0;
    const size_t fit = budget / (channel_->buffer_bytes() + 64);
    const size_t most = std::min<uint64_t>({credit_, c_.max_batch, fit});
    if (packed_) {  // the ring's descriptors as they are: nothing decoded, nothing rebuilt
      std::string& descriptors = *response_.mutable_descriptors();
      std::string& payloads = *response_.mutable_payloads();
      datagrams = reader_->ForwardOrArm(
          most, [&](const channel::ChannelDescriptor& d, std::span<const uint8_t> payload) {
            channel::AppendPacked(d, payload, descriptors, payloads);
          });
    } else {
      views_.resize(std::max(views_.size(), most));
      datagrams = reader_->ReceiveOrArm(std::span(views_.data(), most));
      for (size_t i = 0; i < datagrams; ++i) ToProto(views_[i], response_.add_datagrams());
    }
    reader_->Release();
    credit_ -= datagrams;
    c_.stream_datagrams.fetch_add(datagrams, std::memory_order_relaxed);
  } else if (reader_->Waiting()) {
    // Release: who sees this wait sees the datagrams written before it.
    c_.stream_credit_waits.fetch_add(1, std::memory_order_release);
  }
  return datagrams > 0 || response_.send_results_size() > 0;
}

void ChannelStream::OnWriteDone(bool ok) {
  sanitizers::TakeOver(&response_);
  const sanitizers::HandOffAtExit before_on_done(this);
  if (!ok) {
    std::lock_guard<std::mutex> lock(mu_);
    // The write holds writing_: End keeps the status for the last holder below.
    (void)End(grpc::Status(grpc::StatusCode::CANCELLED, "the client went away"));
  }
  if (WriteLetGo()) Pump();
}

bool ChannelStream::WriteLetGo() {
  std::optional<grpc::Status> now;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (--write_holds_ > 0) return false;
    writing_ = false;
    if (!finishing_) return true;
    if (finish_.has_value()) {
      now = std::move(*finish_);
      finish_.reset();
    }
  }
  if (!now.has_value()) return false;
  sanitizers::HandOff(this);  // before OnDone
  Finish(*now);
  return false;
}

std::optional<grpc::Status> ChannelStream::End(grpc::Status status) {
  if (finishing_) return std::nullopt;
  finishing_ = true;
  if (writing_) {
    finish_ = std::move(status);  // the write's last holder finishes
    return std::nullopt;
  }
  return status;
}

void ChannelStream::EndNow(grpc::Status status) {
  std::optional<grpc::Status> now;
  {
    std::lock_guard<std::mutex> lock(mu_);
    now = End(std::move(status));
  }
  if (!now.has_value()) return;
  sanitizers::HandOff(this);  // before OnDone
  Finish(*now);
}

void ChannelStream::OnCancel() {
  const sanitizers::HandOffAtExit before_on_done(this);
  EndNow(grpc::Status(grpc::StatusCode::CANCELLED, "cancelled"));
}

void ChannelStream::OnDone() {
  // gRPC runs a reaction after the call that started its operation, and OnDone after every
  // reaction (the constructor's too), on any of its threads: handed over inside libgrpc++,
  // where ThreadSanitizer cannot see it. The reactions say so (HandOff, TakeOver).
  sanitizers::TakeOver(this);
  std::shared_ptr<channel::Channel> channel;
  {
    std::lock_guard<std::mutex> lock(mu_);
    channel = channel_;
  }
  // After this no wake comes from the broker: it holds its lock while it calls one.
  if (channel != nullptr && c_.channels != nullptr) {
    c_.channels->DetachStream(token_, channel.get());
  }
  if (stream_counted_) c_.sessions.RemoveStream(token_);
  c_.ChannelStreamDone();
  delete this;
}

}  // namespace quadsock::service
