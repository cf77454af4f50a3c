// What client.cc and exchange.cc share: the connection every Client and RemoteSocket of one
// session holds and its one way of making a unary call, the conversions between protobuf and
// the client's types, and the PullReader thread behind the Receive and Exchange streams.
// Not API.
#ifndef QUADSOCK_CLIENTS_CPP_INTERNAL_CONNECTION_H_
#define QUADSOCK_CLIENTS_CPP_INTERNAL_CONNECTION_H_

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <type_traits>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "clients/cpp/client.h"
#include "common/protocol.h"
#include "common/status.h"
#include "quadsock/v1/admin.grpc.pb.h"
#include "quadsock/v1/socket.grpc.pb.h"

namespace quadsock::client_internal {

inline std::chrono::system_clock::time_point Deadline(absl::Duration timeout) {
  return std::chrono::system_clock::now() +
         std::chrono::microseconds(absl::ToInt64Microseconds(timeout));
}

inline Datagram FromProto(const v1::Datagram& d) {
  Datagram out;
  out.payload = d.payload();
  out.peer = Endpoint::FromProto(d.peer());
  out.local = Endpoint::FromProto(d.local());
  out.arrival = absl::FromUnixNanos(d.arrival_unix_nanos());
  out.sequence = d.sequence();
  return out;
}

// A datagram to send: the peer only when given (empty: the connected peer).
inline void ToProto(const Datagram& d, v1::Datagram* out) {
  out->set_payload(d.payload);
  if (!d.peer.address.empty()) *out->mutable_peer() = d.peer.ToProto();
}

using SocketStub = v1::SocketService::Stub;
using AdminStub = v1::AdminService::Stub;

// What every Client and RemoteSocket of one connection shares.
struct Connection {
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<SocketStub> sockets;
  std::unique_ptr<AdminStub> admin;
  std::string session;
  uint32_t lease_seconds = 0;
  absl::Duration call_timeout;

  // A context for one call of this session.
  void Prepare(grpc::ClientContext& ctx, bool deadline = true) const {
    if (deadline) ctx.set_deadline(Deadline(call_timeout));
    if (!session.empty()) ctx.AddMetadata(kSessionHeader, session);
  }

  // One unary call of this session, within call_timeout: the response, or the server's error.
  //   absl::StatusOr<v1::OpenResponse> r = c->Call(&SocketStub::Open, request);
  template <typename Stub, typename Request, typename Response>
  absl::StatusOr<Response> Call(
      grpc::Status (Stub::*method)(grpc::ClientContext*, const Request&, Response*),
      const std::type_identity_t<Request>& request) const {
    Stub* stub;
    if constexpr (std::is_same_v<Stub, SocketStub>) {
      stub = sockets.get();
    } else {
      static_assert(std::is_same_v<Stub, AdminStub>);
      stub = admin.get();
    }
    grpc::ClientContext ctx;
    Prepare(ctx);
    Response response;
    if (absl::Status s = FromGrpc((stub->*method)(&ctx, request, &response)); !s.ok()) return s;
    return response;
  }
};

// Reads a server stream on a thread of its own, and only while a caller waits in Next: what
// the server has pushed meanwhile waits in gRPC's buffers, under its flow control. `read` is
// one Read of the stream (false at its end); `finish` gives the status Next returns once the
// stream has ended. Stop (before destruction) must be given what unblocks a Read in progress.
template <typename Response>
class PullReader {
 public:
  PullReader(std::function<bool(Response&)> read, std::function<absl::Status()> finish)
      : read_(std::move(read)), finish_(std::move(finish)), thread_([this] { Run(); }) {}
  ~PullReader() { Stop([] {}); }

  void Stop(const std::function<void()>& cancel) {
    if (!thread_.joinable()) return;
    {
      std::lock_guard<std::mutex> l(mu_);
      stop_ = true;
    }
    cancel();
    cv_.notify_all();
    thread_.join();
  }

  // The next response, waiting at most `timeout`: DEADLINE_EXCEEDED "nothing <what> within ..".
  absl::StatusOr<Response> Next(absl::Duration timeout, const char* what) {
    std::unique_lock<std::mutex> l(mu_);
    ++waiting_;
    cv_.notify_all();
    cv_.wait_until(l, Deadline(timeout), [this] { return !ready_.empty() || ended_.has_value(); });
    --waiting_;
    if (!ready_.empty()) {
      Response r = std::move(ready_.front());
      ready_.pop_front();
      return r;
    }
    if (ended_.has_value()) return *ended_;
    return absl::DeadlineExceededError(
        absl::StrCat("nothing ", what, " within ", absl::FormatDuration(timeout)));
  }

  // The status Next returns once the stream has ended; nullopt while it runs.
  std::optional<absl::Status> ended() {
    std::lock_guard<std::mutex> l(mu_);
    return ended_;
  }

 private:
  void Run() {
    for (;;) {
      {
        std::unique_lock<std::mutex> l(mu_);
        cv_.wait(l, [this] { return stop_ || (waiting_ > 0 && ready_.empty()); });
        if (stop_) break;
      }
      Response r;
      if (!read_(r)) break;
      std::lock_guard<std::mutex> l(mu_);
      ready_.push_back(std::move(r));
      cv_.notify_all();
    }
    absl::Status end = finish_();
    std::lock_guard<std::mutex> l(mu_);
    ended_ = std::move(end);
    cv_.notify_all();
  }

  std::function<bool(Response&)> read_;
  std::function<absl::Status()> finish_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Response> ready_;
  int waiting_ = 0;
  bool stop_ = false;
  std::optional<absl::Status> ended_;
  std::thread thread_;  // last: it starts in the constructor, using the members above
};

}  // namespace quadsock::client_internal

#endif  // QUADSOCK_CLIENTS_CPP_INTERNAL_CONNECTION_H_
