// SocketService's streams: Receive (a socket's datagrams, one message each) and Exchange
// (datagrams both ways in batches, with send results). The unary calls are socket_service.cc.
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "service/convert.h"
#include "service/socket_service.h"
#include "common/status.h"

namespace quadsock::service {
namespace {

// Send results an Exchange stream holds for a client that does not read its responses.
constexpr size_t kMaxPendingResults = 64;

// Bytes of an Exchange response kept for its SendResult (a code and a short message).
constexpr size_t kResponseReserve = 4096;

// A datagram's bytes inside a response: the message, its field tag and its length varint.
size_t FramedSize(const v1::Datagram& d) {
  const size_t n = d.ByteSizeLong();
  size_t varint = 1;
  for (size_t v = n; v >= 0x80; v >>= 7) ++varint;
  return 1 + varint + n;
}

}  // namespace

grpc::Status SocketServiceImpl::Receive(grpc::ServerContext* ctx, const v1::ReceiveRequest* req,
                                        grpc::ServerWriter<v1::Datagram>* writer) {
  auto r = Resolve(ctx, req->socket());
  if (!r.ok()) return ToGrpc(r.status());
  if (absl::Status st = c_.sessions.AddStream(r->first, kStreamGrace); !st.ok()) {
    return ToGrpc(st);
  }
  absl::Cleanup stream_ends = [&] { c_.sessions.RemoveStream(r->first); };
  const SocketId id = r->second;
  if (absl::Status st = c_.StartReading(id); !st.ok()) return ToGrpc(st);
  absl::Cleanup reading_ends = [&] { c_.EndReading(id); };
  for (uint32_t sent = 0; !ctx->IsCancelled() &&
                          (req->max_datagrams() == 0 || sent < req->max_datagrams());) {
    if (c_.shutting_down.load()) return ToGrpc(absl::UnavailableError("the server is shutting down"));
    absl::StatusOr<std::optional<stack::ReceivedDatagram>> d = c_.stack.Receive(id);
    if (!d.ok()) return grpc::Status::OK;  // the socket closed: the stream ends
    if (!d->has_value()) {
      absl::StatusOr<bool> ready = c_.stack.WaitForData(id, kWaitSlice);
      if (ready.status().code() == absl::StatusCode::kResourceExhausted) {
        c_.Log(absl::StrCat("a Receive stream ends: ", ready.status().message()));
        return ToGrpc(ready.status());
      }
      if (!ready.ok()) return grpc::Status::OK;  // the socket closed: the stream ends
      continue;
    }
    v1::Datagram out;
    ToProto(**d, &out);
    // Write blocks while the client is slow: the socket's bounded queue absorbs (and counts)
    // what arrives meanwhile, so a slow reader costs bounded memory. (The session's lease does
    // not run while the stream is open, however long the Write blocks.)
    if (!writer->Write(out)) {
      c_.stack.CountReceivedButLost(id, 1);  // off the socket, and the client is gone
      break;
    }
    ++sent;
  }
  return grpc::Status::OK;
}

grpc::Status SocketServiceImpl::Exchange(
    grpc::ServerContext* ctx,
    grpc::ServerReaderWriter<v1::ExchangeResponse, v1::ExchangeRequest>* stream) {
  // The session first, from the call's metadata: a caller without one must not hold a thread
  // waiting for its first request.
  absl::StatusOr<std::string> token = c_.Session(ctx);
  if (!token.ok()) return ToGrpc(token.status());
  if (absl::Status st = c_.sessions.AddStream(*token, kStreamGrace); !st.ok()) return ToGrpc(st);
  absl::Cleanup stream_ends = [&] { c_.sessions.RemoveStream(*token); };
  v1::ExchangeRequest first;
  if (!stream->Read(&first)) return grpc::Status::OK;
  absl::StatusOr<SocketId> found = c_.sessions.FindSocket(*token, first.socket());
  if (!found.ok()) return ToGrpc(found.status());
  const SocketId id = *found;
  if (absl::Status st = c_.StartReading(id); !st.ok()) return ToGrpc(st);
  absl::Cleanup reading_ends = [&] { c_.EndReading(id); };
  // Results of failed sends wait here for the next response. While kMaxPendingResults wait, the
  // reader stops taking requests: a client that writes but never reads then meets gRPC's flow
  // control instead of growing this list without bound.
  std::mutex mu;  // guards `results` and `stopping`
  std::condition_variable room;
  std::deque<v1::SendResult> results;
  bool stopping = false;
  std::atomic<bool> reading{true};
  auto send_all = [&](const v1::ExchangeRequest& req) {
    v1::SendResult result;
    absl::Status refused;  // the whole request, before any of it is sent
    if (static_cast<size_t>(req.datagrams_size()) > c_.max_batch) {
      refused = absl::InvalidArgumentError(
          absl::StrCat("datagrams: at most ", c_.max_batch, " in one request"));
    } else if (!req.socket().empty() && req.socket() != first.socket()) {
      // The stream sends from its first request's socket only; sending this request from it
      // would put the datagrams on a socket the client did not name.
      refused = absl::InvalidArgumentError(
          "socket: a later request names another socket than the stream's first (leave it "
          "empty, or open an Exchange for that socket)");
    }
    SetStatus(refused, &result);
    for (int i = 0; result.code() == 0 && i < req.datagrams_size(); ++i) {
      if (absl::Status s = NamedByHandle(SendOne(id, req.datagrams(i)), first.socket());
          !s.ok()) {
        SetStatus(s, &result);
        break;
      }
      result.set_queued(result.queued() + 1);
    }
    if (result.code() != 0) {
      std::lock_guard<std::mutex> lock(mu);
      results.push_back(std::move(result));
    }
  };
  send_all(first);
  std::thread reader([&] {
    v1::ExchangeRequest req;
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(mu);
        room.wait(lock, [&] { return stopping || results.size() < kMaxPendingResults; });
        if (stopping) break;
      }
      if (!stream->Read(&req)) break;
      send_all(req);
    }
    reading = false;
  });
  grpc::Status status = grpc::Status::OK;
  absl::Status end;  // why the server ends the stream, if it does
  std::optional<v1::Datagram> carried;  // received, for the next response
  bool write_failed = false;
  uint64_t lost = 0;  // datagrams taken off the socket that no response delivered
  // Room for the datagrams: what is left of the limit after a SendResult's worth of bytes.
  const size_t budget =
      c_.max_message_bytes > kResponseReserve ? c_.max_message_bytes - kResponseReserve : 0;
  while (reading.load() && !ctx->IsCancelled()) {
    if (c_.shutting_down.load()) {
      end = absl::UnavailableError("the server is shutting down");
      status = ToGrpc(end);
      break;
    }
    // Up to max_batch datagrams, and no more than fit the message limit: a larger response's
    // Write fails, and the datagrams already taken off the socket were lost uncounted. The one
    // that does not fit is carried over to the next response.
    v1::ExchangeResponse out;
    size_t bytes = 0;
    while (static_cast<size_t>(out.datagrams_size()) < c_.max_batch) {
      if (!carried.has_value()) {
        absl::StatusOr<std::optional<stack::ReceivedDatagram>> d = c_.stack.Receive(id);
        if (!d.ok() || !d->has_value()) break;
        ToProto(**d, &carried.emplace());
      }
      const size_t size = FramedSize(*carried);
      if (out.datagrams_size() > 0 && bytes + size > budget) break;
      bytes += size;
      *out.add_datagrams() = std::move(*carried);
      carried.reset();
    }
    {
      std::lock_guard<std::mutex> lock(mu);
      if (!results.empty()) {
        *out.mutable_send_result() = std::move(results.front());
        results.pop_front();
        room.notify_one();
      }
    }
    if (out.datagrams_size() == 0 && !out.has_send_result()) {
      if (absl::StatusOr<bool> ready = c_.stack.WaitForData(id, absl::Milliseconds(20));
          !ready.ok()) {
        if (ready.status().code() == absl::StatusCode::kResourceExhausted) {
          c_.Log(absl::StrCat("an Exchange stream ends: ", ready.status().message()));
          end = ready.status();
        } else {
          end = absl::NotFoundError("the socket was closed");
        }
        break;
      }
      continue;
    }
    if (!stream->Write(out)) {
      write_failed = true;
      lost += out.datagrams_size();
      break;
    }
  }
  if (end.ok() && !write_failed && !reading.load() && !ctx->IsCancelled()) {
    // The client half-closed (no more requests): what the stream still holds for it, send
    // results not yet delivered and a datagram already taken off the socket, goes out before
    // the stream ends. (The reader has ended: `results` is final.)
    std::deque<v1::SendResult> left;
    {
      std::lock_guard<std::mutex> lock(mu);
      left.swap(results);
    }
    v1::ExchangeResponse out;
    if (carried.has_value()) *out.add_datagrams() = std::move(*carried);
    carried.reset();
    while (out.datagrams_size() > 0 || !left.empty()) {
      if (!left.empty()) {
        *out.mutable_send_result() = std::move(left.front());
        left.pop_front();
      }
      if (!stream->Write(out)) {
        lost += out.datagrams_size();
        break;
      }
      out.Clear();
    }
  }
  // A datagram carried for a next response that will not come is lost too: counted.
  c_.stack.CountReceivedButLost(id, lost + (carried.has_value() ? 1 : 0));
  if (!end.ok() && reading.load()) {
    // The cancel below is all the client would see: say why first.
    v1::ExchangeResponse last;
    SetStatus(end, last.mutable_end());
    stream->Write(last);
  }
  {
    std::lock_guard<std::mutex> lock(mu);
    stopping = true;
  }
  room.notify_one();
  // Unblocks the reader if the client still has its side open; a client that half-closed has
  // had everything, and its call ends OK.
  if (reading.load()) ctx->TryCancel();
  reader.join();
  return status;
}

}  // namespace quadsock::service
