// ExchangeStream: one socket's Exchange call, written by Send and read by a PullReader that
// fetches the server's reports while a caller waits in Next (as the Receive stream does).
#include <mutex>

#include "absl/strings/str_cat.h"
#include "clients/cpp/client.h"
#include "clients/cpp/internal/connection.h"

namespace quadsock {

struct ExchangeStream::State {
  std::shared_ptr<client_internal::Connection> c;
  std::string handle;
  grpc::ClientContext ctx;
  std::unique_ptr<grpc::ClientReaderWriter<v1::ExchangeRequest, v1::ExchangeResponse>> stream;
  std::mutex write_mu;  // one Write at a time (reads happen on the reader's thread)
  std::optional<absl::Status> server_end;  // the reader's thread only
  std::unique_ptr<client_internal::PullReader<v1::ExchangeResponse>> reader;

  // One report of the server: skips a response that only says why the stream ends (the call
  // itself then ends CANCELLED) after noting the reason.
  bool Read(v1::ExchangeResponse& r) {
    while (stream->Read(&r)) {
      if (r.has_end()) {
        server_end = StatusOf(r.end());
        r.clear_end();
      }
      if (r.datagrams_size() > 0 || r.has_send_result()) return true;
    }
    return false;
  }
  absl::Status Finish() {
    const grpc::Status s = stream->Finish();
    if (server_end.has_value() && !server_end->ok()) return *server_end;
    return s.ok() ? absl::NotFoundError("the socket was closed (its Exchange stream ended)")
                  : FromGrpc(s);
  }
};

ExchangeStream::ExchangeStream(std::unique_ptr<State> state) : state_(std::move(state)) {
  State* s = state_.get();
  s->reader = std::make_unique<client_internal::PullReader<v1::ExchangeResponse>>(
      [s](v1::ExchangeResponse& r) { return s->Read(r); }, [s] { return s->Finish(); });
}

ExchangeStream::~ExchangeStream() {
  state_->reader->Stop([s = state_.get()] { s->ctx.TryCancel(); });
}

absl::Status ExchangeStream::Send(const std::vector<Datagram>& datagrams) {
  if (datagrams.empty()) return absl::InvalidArgumentError("no datagrams to send");
  if (std::optional<absl::Status> ended = state_->reader->ended()) {
    return absl::FailedPreconditionError(
        absl::StrCat("the Exchange stream has ended: ", ended->ToString()));
  }
  v1::ExchangeRequest req;
  for (const Datagram& d : datagrams) client_internal::ToProto(d, req.add_datagrams());
  std::lock_guard<std::mutex> l(state_->write_mu);
  if (!state_->stream->Write(req)) {
    return absl::FailedPreconditionError("the Exchange stream has ended (Next says why)");
  }
  return absl::OkStatus();
}

absl::StatusOr<ExchangeEvent> ExchangeStream::Next(absl::Duration timeout) {
  absl::StatusOr<v1::ExchangeResponse> r = state_->reader->Next(timeout, "on the Exchange stream");
  if (!r.ok()) return r.status();
  ExchangeEvent e;
  for (const v1::Datagram& d : r->datagrams()) e.received.push_back(client_internal::FromProto(d));
  if (r->has_send_result()) {
    e.send_failure =
        ExchangeEvent::SendFailure{r->send_result().queued(), StatusOf(r->send_result())};
  }
  return e;
}

absl::StatusOr<std::unique_ptr<ExchangeStream>> RemoteSocket::Exchange() {
  if (absl::Status s = CheckOpen(); !s.ok()) return s;
  auto state = std::make_unique<ExchangeStream::State>();
  state->c = c_;
  state->handle = handle_;
  c_->Prepare(state->ctx, /*deadline=*/false);
  state->stream = c_->sockets->Exchange(&state->ctx);
  // The server learns the socket from the first request: send an empty one now, so that it
  // starts reporting what arrives before the first Send (an unknown socket ends the stream,
  // which Next reports).
  v1::ExchangeRequest first;
  first.set_socket(handle_);
  if (!state->stream->Write(first)) return FromGrpc(state->stream->Finish());
  return std::unique_ptr<ExchangeStream>(new ExchangeStream(std::move(state)));
}

}  // namespace quadsock
