#include "clients/cpp/client.h"

#include "clients/cpp/data_channel.h"
#include "clients/cpp/internal/stream_channel.h"

#include <grpcpp/generic/generic_stub.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <fstream>
#include <future>
#include <mutex>
#include <sstream>
#include <thread>
#include <type_traits>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "clients/cpp/internal/connection.h"
#include "clients/cpp/internal/health_codec.h"

namespace quadsock {

using client_internal::AdminStub;
using client_internal::Deadline;
using client_internal::FromProto;
using client_internal::SocketStub;

namespace {

absl::StatusOr<std::string> ReadPem(const std::string& path, absl::string_view what) {
  std::ifstream in(path);
  if (!in) {
    return absl::FailedPreconditionError(absl::StrCat("cannot read ", what, " \"", path, "\""));
  }
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// `f` of a call's response, or the call's error.
template <typename Response, typename F>
auto Then(absl::StatusOr<Response> response, F f)
    -> absl::StatusOr<std::invoke_result_t<F, Response&>> {
  if (!response.ok()) return response.status();
  return f(*response);
}

// A repeated field of a response as a vector.
template <typename Repeated>
auto AsVector(const Repeated& items) {
  return std::vector<typename Repeated::value_type>(items.begin(), items.end());
}

}  // namespace

namespace client_internal {

// The Receive stream of one socket.
class ReceiveStream {
 public:
  ReceiveStream(std::shared_ptr<Connection> c, const std::string& handle,
                uint32_t max_datagrams = 0)
      : c_(std::move(c)) {
    c_->Prepare(ctx_, /*deadline=*/false);
    v1::ReceiveRequest req;
    req.set_socket(handle);
    req.set_max_datagrams(max_datagrams);
    stream_ = c_->sockets->Receive(&ctx_, req);
    reader_ = std::make_unique<PullReader<v1::Datagram>>(
        [this](v1::Datagram& d) { return stream_->Read(&d); },
        [this]() -> absl::Status {
          const grpc::Status s = stream_->Finish();
          // The server ends the stream with OK when the socket closes.
          return s.ok() ? absl::NotFoundError("the socket was closed (its Receive stream ended)")
                        : FromGrpc(s);
        });
  }
  ~ReceiveStream() { reader_->Stop([this] { ctx_.TryCancel(); }); }

  absl::StatusOr<Datagram> Next(absl::Duration timeout) {
    absl::StatusOr<v1::Datagram> d = reader_->Next(timeout, "received");
    if (!d.ok()) return d.status();
    return FromProto(*d);
  }

 private:
  std::shared_ptr<Connection> c_;
  grpc::ClientContext ctx_;
  std::unique_ptr<grpc::ClientReader<v1::Datagram>> stream_;
  std::unique_ptr<PullReader<v1::Datagram>> reader_;
};

}  // namespace client_internal

using client_internal::Connection;

// ---------------------------------------------------------------------------------- Endpoint

absl::StatusOr<Endpoint> Endpoint::Parse(absl::string_view text) {
  absl::string_view address, port;
  if (absl::StartsWith(text, "[")) {
    const size_t close = text.find("]:");
    if (close == absl::string_view::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("endpoint \"", text, "\": expected [IPv6]:PORT"));
    }
    address = text.substr(1, close - 1);
    port = text.substr(close + 2);
  } else {
    const size_t colon = text.rfind(':');
    if (colon == absl::string_view::npos || text.substr(0, colon).find(':') != absl::string_view::npos) {
      return absl::InvalidArgumentError(absl::StrCat(
          "endpoint \"", text, "\": expected ADDRESS:PORT (IPv6 as [ADDRESS]:PORT)"));
    }
    address = text.substr(0, colon);
    port = text.substr(colon + 1);
  }
  uint32_t p = 0;
  if (address.empty() || !absl::SimpleAtoi(port, &p) || p > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("endpoint \"", text, "\": expected ADDRESS:PORT with a port 0..65535"));
  }
  return Endpoint{std::string(address), static_cast<uint16_t>(p)};
}

Endpoint Endpoint::FromProto(const v1::Endpoint& e) {
  return Endpoint{e.address(), static_cast<uint16_t>(e.port())};
}

v1::Endpoint Endpoint::ToProto() const {
  v1::Endpoint e;
  e.set_address(address);
  e.set_port(port);
  return e;
}

std::string Endpoint::ToString() const {
  if (address.find(':') != std::string::npos) return absl::StrCat("[", address, "]:", port);
  return absl::StrCat(address, ":", port);
}

absl::string_view HealthStatusName(HealthStatus s) {
  switch (s) {
    case HealthStatus::kUnknown:
      return "UNKNOWN";
    case HealthStatus::kServing:
      return "SERVING";
    case HealthStatus::kNotServing:
      return "NOT_SERVING";
    case HealthStatus::kServiceUnknown:
      return "SERVICE_UNKNOWN";
  }
  return "UNKNOWN";
}

// ------------------------------------------------------------------------------------ Client

// Keeps the session alive: a Session stream (Hold) or a KeepAlive call every third of the
// lease (KeepAlive).
class Client::Keeper {
 public:
  // Starts holding the session; returns once the server has confirmed it. The stream then
  // waits with a read pending and no thread of its own: a thread blocked in gRPC would do the
  // process's polling and hand every other call's messages (a data channel's batches) across
  // threads.
  static absl::StatusOr<std::unique_ptr<Keeper>> Hold(std::shared_ptr<Connection> c) {
    std::unique_ptr<Keeper> k(new Keeper(std::move(c)));
    k->c_->Prepare(k->ctx_, /*deadline=*/false);
    k->stream_ = k->c_->sockets->AsyncSession(&k->ctx_, v1::SessionRequest(), &k->cq_, kStarted);
    // The first event says the server holds the session. Reading it can block: bound the wait.
    k->stream_->Read(&k->event_, kRead);
    bool ok = false;
    if (!k->Await(kRead, Deadline(k->c_->call_timeout), ok)) {
      k->ctx_.TryCancel();
      k->Await(kRead, std::chrono::system_clock::time_point::max(), ok);
    }
    if (!ok) {
      absl::Status s = FromGrpc(k->End());
      if (s.ok()) s = absl::UnavailableError("the Session stream ended at once");
      return s;
    }
    k->stream_->Read(&k->event_, kRead);
    return k;
  }
  static std::unique_ptr<Keeper> KeepAlive(std::shared_ptr<Connection> c) {
    std::unique_ptr<Keeper> k(new Keeper(std::move(c)));
    Keeper* self = k.get();
    const absl::Duration period =
        std::max(absl::Seconds(self->c_->lease_seconds) / 3, absl::Milliseconds(100));
    k->thread_ = std::thread([self, period] {
      std::unique_lock<std::mutex> l(self->mu_);
      while (!self->cv_.wait_for(l, std::chrono::microseconds(absl::ToInt64Microseconds(period)),
                                 [self] { return self->stop_; })) {
        l.unlock();
        (void)self->c_->Call(&SocketStub::KeepAlive, {});
        l.lock();
      }
    });
    return k;
  }

  ~Keeper() {
    {
      std::lock_guard<std::mutex> l(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
    if (stream_ == nullptr) return;
    ctx_.TryCancel();
    bool ok = true;
    while (ok) {  // the pending read; events the server sent meanwhile are read past
      Await(kRead, std::chrono::system_clock::time_point::max(), ok);
      if (ok) stream_->Read(&event_, kRead);
    }
    (void)End();
  }

 private:
  // The Session stream's operations, as completion queue tags.
  static inline void* const kStarted = reinterpret_cast<void*>(1);
  static inline void* const kRead = reinterpret_cast<void*>(2);
  static inline void* const kFinished = reinterpret_cast<void*>(3);

  explicit Keeper(std::shared_ptr<Connection> c) : c_(std::move(c)) {}

  // Waits until `deadline` for the operation `tag` (others that complete first are done with);
  // false on timeout.
  bool Await(void* tag, std::chrono::system_clock::time_point deadline, bool& ok) {
    void* got;
    while (cq_.AsyncNext(&got, &ok, deadline) == grpc::CompletionQueue::GOT_EVENT) {
      if (got == tag) return true;
    }
    return false;
  }

  // The stream's status, once its reads have ended; the queue is drained and shut down.
  grpc::Status End() {
    grpc::Status status;
    stream_->Finish(&status, kFinished);
    bool ok;
    Await(kFinished, std::chrono::system_clock::time_point::max(), ok);
    cq_.Shutdown();
    void* tag;
    while (cq_.Next(&tag, &ok)) {
    }
    stream_.reset();
    return status;
  }

  std::shared_ptr<Connection> c_;
  grpc::ClientContext ctx_;
  grpc::CompletionQueue cq_;
  std::unique_ptr<grpc::ClientAsyncReader<v1::SessionEvent>> stream_;
  v1::SessionEvent event_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

Client::Client(std::shared_ptr<Connection> c) : c_(std::move(c)) {}

Client::~Client() {
  // A session this Client holds ends now rather than when the server notices the stream went.
  if (keeper_ != nullptr && ends_session_) (void)EndSession();
  keeper_.reset();
}

absl::StatusOr<std::unique_ptr<Client>> Client::Connect(const std::string& target,
                                                        ClientOptions options) {
  std::shared_ptr<grpc::ChannelCredentials> credentials;
  grpc::ChannelArguments args;
  if (options.keepalive > absl::ZeroDuration()) {
    const int ms = static_cast<int>(absl::ToInt64Milliseconds(options.keepalive));
    args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, ms);
    args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS,
                static_cast<int>(absl::ToInt64Milliseconds(options.keepalive_timeout)));
    // gRPC would otherwise stop after 2 pings on a quiet stream, and space them 5 min apart.
    args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
    args.SetInt(GRPC_ARG_HTTP2_MIN_SENT_PING_INTERVAL_WITHOUT_DATA_MS, ms);
  }
  if (absl::StartsWith(target, "unix:")) {
    if (target.size() == 5) {
      return absl::InvalidArgumentError("target \"unix:\": no socket path");
    }
    credentials = grpc::InsecureChannelCredentials();
  } else {
    if (target.find(':') == std::string::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("target \"", target, "\" is neither unix:PATH nor HOST:PORT"));
    }
    if (options.tls_cert.empty() != options.tls_key.empty()) {
      return absl::InvalidArgumentError(
          "a client certificate needs both tls_cert and tls_key (or neither)");
    }
    grpc::SslCredentialsOptions ssl;
    if (!options.tls_ca.empty()) {
      absl::StatusOr<std::string> ca = ReadPem(options.tls_ca, "tls_ca");
      if (!ca.ok()) return ca.status();
      ssl.pem_root_certs = *ca;
    }
    if (!options.tls_cert.empty()) {
      absl::StatusOr<std::string> cert = ReadPem(options.tls_cert, "tls_cert");
      if (!cert.ok()) return cert.status();
      absl::StatusOr<std::string> key = ReadPem(options.tls_key, "tls_key");
      if (!key.ok()) return key.status();
      ssl.pem_cert_chain = *cert;
      ssl.pem_private_key = *key;
    }
    credentials = grpc::SslCredentials(ssl);
    if (!options.tls_server_name.empty()) args.SetSslTargetNameOverride(options.tls_server_name);
  }
  return Create(grpc::CreateCustomChannel(target, credentials, args), std::move(options));
}

absl::StatusOr<std::unique_ptr<Client>> Client::Create(std::shared_ptr<grpc::Channel> channel,
                                                       ClientOptions options) {
  auto c = std::make_shared<Connection>();
  c->sockets = v1::SocketService::NewStub(channel);
  c->admin = v1::AdminService::NewStub(channel);
  c->channel = std::move(channel);
  c->call_timeout = options.call_timeout;
  std::unique_ptr<Client> client(new Client(std::move(c)));
  if (absl::Status s = client->StartSession(options); !s.ok()) return s;
  return client;
}

absl::Status Client::StartSession(const ClientOptions& options) {
  using Keep = ClientOptions::KeepSession;
  const bool attach = !options.session.empty();
  if (!attach && !options.create_session) return absl::OkStatus();
  if (attach) {
    c_->session = options.session;
    c_->lease_seconds = options.lease_seconds;
    if (absl::Status s = KeepAlive(); !s.ok()) return s;
  } else {
    v1::CreateSessionRequest req;
    req.set_client_name(options.client_name);
    req.set_lease_seconds(options.lease_seconds);
    absl::StatusOr<v1::CreateSessionResponse> resp = c_->Call(&SocketStub::CreateSession, req);
    if (!resp.ok()) return resp.status();
    c_->session = resp->session();
    c_->lease_seconds = resp->lease_seconds();
  }
  const Keep keep = options.keep.value_or(attach ? Keep::kNone : Keep::kHold);
  if (keep == Keep::kHold) {
    absl::StatusOr<std::unique_ptr<Keeper>> k = Keeper::Hold(c_);
    if (!k.ok()) return k.status();
    keeper_ = std::move(*k);
    ends_session_ = !attach;
  } else if (keep == Keep::kKeepAlive) {
    if (c_->lease_seconds == 0) {
      return absl::InvalidArgumentError(
          "keeping an attached session alive needs its lease_seconds");
    }
    keeper_ = Keeper::KeepAlive(c_);
  }
  return absl::OkStatus();
}

const std::string& Client::session() const { return c_->session; }
uint32_t Client::lease_seconds() const { return c_->lease_seconds; }

absl::Status Client::KeepAlive() { return c_->Call(&SocketStub::KeepAlive, {}).status(); }

absl::StatusOr<uint32_t> Client::EndSession() {
  absl::StatusOr<v1::EndSessionResponse> resp = c_->Call(&SocketStub::EndSession, {});
  if (!resp.ok()) return resp.status();
  ends_session_ = false;
  return resp->sockets_closed();
}

absl::StatusOr<RemoteSocket> Client::Open(OpenOptions options) {
  v1::OpenRequest req;
  req.set_family(options.family);
  req.set_v6only(options.v6only);
  req.set_reuse_port(options.reuse_port);
  req.set_bound_device(options.bound_device);
  req.set_receive_queue_depth(options.receive_queue_depth);
  req.set_pmtu_discovery(options.pmtu_discovery);
  return Then(c_->Call(&SocketStub::Open, req),
              [this](v1::OpenResponse& r) { return RemoteSocket(c_, r.socket(), r.index()); });
}

RemoteSocket Client::Attach(const std::string& handle) { return RemoteSocket(c_, handle); }

absl::StatusOr<std::unique_ptr<DataChannel>> Client::AttachChannel(AttachOptions options) {
  if (options.transport != ChannelTransport::kGrpcStream) {
    v1::AttachChannelRequest req;
    for (const std::string& s : options.sockets) req.add_sockets(s);
    req.set_ring_slots(options.ring_slots);
    absl::StatusOr<v1::AttachChannelResponse> offer = c_->Call(&SocketStub::AttachChannel, req);
    if (offer.ok()) return DataChannel::Claim(offer->path(), offer->token());
    // Shared memory is not offered (a TCP listener): the stream, unless it was asked for.
    if (options.transport == ChannelTransport::kSharedMemory ||
        offer.status().code() != absl::StatusCode::kFailedPrecondition) {
      return offer.status();
    }
  }
  return client_internal::OpenStreamChannel(c_, options);
}
std::unique_ptr<grpc::ClientReaderWriter<v1::ChannelRequest, v1::ChannelResponse>>
Client::StreamChannel(grpc::ClientContext* ctx) {
  c_->Prepare(*ctx, /*deadline=*/false);
  return c_->sockets->StreamChannel(ctx);
}

absl::StatusOr<std::vector<v1::Socket>> Client::List(ListOptions options) {
  std::vector<v1::Socket> out;
  v1::ListRequest req;
  req.set_state(options.state);
  req.set_local_port(options.local_port);
  req.set_page_size(options.page_size);
  do {
    absl::StatusOr<v1::ListResponse> resp = c_->Call(&SocketStub::List, req);
    if (!resp.ok()) return resp.status();
    for (v1::Socket& s : *resp->mutable_sockets()) out.push_back(std::move(s));
    req.set_page_token(resp->next_page_token());
  } while (!req.page_token().empty());
  return out;
}

absl::StatusOr<v1::Counters> Client::Counters() { return c_->Call(&AdminStub::GetCounters, {}); }

absl::StatusOr<std::vector<v1::Interface>> Client::Interfaces() {
  return Then(c_->Call(&AdminStub::ListInterfaces, {}),
              [](v1::ListInterfacesResponse& r) { return AsVector(r.interfaces()); });
}

absl::StatusOr<std::vector<std::string>> Client::Addresses() {
  return Then(c_->Call(&AdminStub::ListAddresses, {}),
              [](v1::ListAddressesResponse& r) { return AsVector(r.prefixes()); });
}

absl::StatusOr<std::vector<v1::Route>> Client::Routes() {
  return Then(c_->Call(&AdminStub::ListRoutes, {}),
              [](v1::ListRoutesResponse& r) { return AsVector(r.routes()); });
}

absl::StatusOr<std::vector<v1::Neighbor>> Client::Neighbors() {
  return Then(c_->Call(&AdminStub::ListNeighbors, {}),
              [](v1::ListNeighborsResponse& r) { return AsVector(r.neighbors()); });
}

absl::Status Client::SetNeighbor(const std::string& address, const std::string& mac) {
  v1::SetNeighborRequest req;
  req.set_address(address);
  req.set_mac(mac);
  return c_->Call(&AdminStub::SetNeighbor, req).status();
}

absl::Status Client::RemoveNeighbor(const std::string& address) {
  v1::RemoveNeighborRequest req;
  req.set_address(address);
  return c_->Call(&AdminStub::RemoveNeighbor, req).status();
}

absl::Status Client::CheckFrameAccounting() {
  absl::StatusOr<v1::CheckFrameAccountingResponse> resp =
      c_->Call(&AdminStub::CheckFrameAccounting, {});
  if (!resp.ok()) return resp.status();
  if (!resp->ok()) return absl::InternalError("frame accounting does not add up");
  return absl::OkStatus();
}

absl::StatusOr<HealthStatus> Client::Health(const std::string& service) {
  grpc::GenericStub stub(c_->channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(Deadline(c_->call_timeout));
  const std::string request = client_internal::EncodeHealthCheckRequest(service);
  grpc::Slice slice(request);
  const grpc::ByteBuffer request_buffer(&slice, 1);
  grpc::ByteBuffer response_buffer;
  std::promise<grpc::Status> done;
  stub.UnaryCall(&ctx, client_internal::kHealthCheckMethod, grpc::StubOptions(), &request_buffer, &response_buffer,
                 [&done](grpc::Status s) { done.set_value(std::move(s)); });
  if (absl::Status s = FromGrpc(done.get_future().get()); !s.ok()) return s;
  std::vector<grpc::Slice> slices;
  if (!response_buffer.Dump(&slices).ok()) {
    return absl::InternalError("unreadable grpc.health.v1.HealthCheckResponse");
  }
  std::string response;
  for (const grpc::Slice& s : slices) {
    response.append(reinterpret_cast<const char*>(s.begin()), s.size());
  }
  return client_internal::DecodeHealthCheckResponse(response);
}

// ------------------------------------------------------------------------------ RemoteSocket

RemoteSocket::RemoteSocket(std::shared_ptr<Connection> c, std::string handle, uint32_t index)
    : c_(std::move(c)), handle_(std::move(handle)), index_(index) {}

RemoteSocket::RemoteSocket(RemoteSocket&& other) noexcept
    : c_(std::move(other.c_)),
      handle_(std::exchange(other.handle_, "")),
      index_(other.index_),
      receive_(std::move(other.receive_)) {}

RemoteSocket& RemoteSocket::operator=(RemoteSocket&& other) noexcept {
  if (this != &other) {
    (void)Close();
    c_ = std::move(other.c_);
    handle_ = std::exchange(other.handle_, "");
    index_ = other.index_;
    receive_ = std::move(other.receive_);
  }
  return *this;
}

RemoteSocket::~RemoteSocket() { (void)Close(); }

absl::Status RemoteSocket::CheckOpen() const {
  if (handle_.empty() || c_ == nullptr) {
    return absl::FailedPreconditionError("the socket was closed, released or moved");
  }
  return absl::OkStatus();
}

template <typename Request, typename Response>
absl::StatusOr<Response> RemoteSocket::Call(
    grpc::Status (SocketStub::*method)(grpc::ClientContext*, const Request&, Response*),
    Request request) {
  if (absl::Status s = CheckOpen(); !s.ok()) return s;
  request.set_socket(handle_);
  return c_->Call(method, request);
}

namespace {
// The local endpoint that Bind, Connect and Rehash answer with.
template <typename Response>
absl::StatusOr<Endpoint> LocalOf(absl::StatusOr<Response> response) {
  return Then(std::move(response), [](Response& r) { return Endpoint::FromProto(r.local()); });
}
}  // namespace

absl::StatusOr<Endpoint> RemoteSocket::Bind(const Endpoint& local) {
  v1::BindRequest req;
  *req.mutable_local() = local.ToProto();
  return LocalOf(Call(&SocketStub::Bind, std::move(req)));
}

absl::StatusOr<Endpoint> RemoteSocket::Connect(const Endpoint& peer) {
  v1::ConnectRequest req;
  *req.mutable_peer() = peer.ToProto();
  return LocalOf(Call(&SocketStub::Connect, std::move(req)));
}

absl::StatusOr<Endpoint> RemoteSocket::Rehash(const std::string& local_address,
                                              std::optional<uint16_t> local_port) {
  v1::RehashRequest req;
  req.set_local_address(local_address);
  req.set_change_port(local_port.has_value());
  req.set_local_port(local_port.value_or(0));
  return LocalOf(Call(&SocketStub::Rehash, std::move(req)));
}

absl::Status RemoteSocket::Disconnect() {
  return Call(&SocketStub::Disconnect, v1::DisconnectRequest()).status();
}

absl::Status RemoteSocket::Send(absl::string_view payload, std::optional<Endpoint> to) {
  v1::SendRequest req;
  req.set_payload(std::string(payload));
  if (to.has_value()) *req.mutable_destination() = to->ToProto();
  return Call(&SocketStub::Send, std::move(req)).status();
}

std::optional<uint32_t> SendBatchQueued(const absl::Status& failed) {
  absl::optional<absl::Cord> details = failed.GetPayload(kGrpcDetailsPayload);
  v1::ErrorStatus status;
  if (!details.has_value() || !status.ParseFromString(std::string(*details))) return std::nullopt;
  for (const google::protobuf::Any& any : status.details()) {
    v1::SendBatchResponse r;
    if (any.UnpackTo(&r)) return r.queued();
  }
  return std::nullopt;
}

absl::StatusOr<uint32_t> RemoteSocket::SendBatch(const std::vector<Datagram>& datagrams) {
  v1::SendBatchRequest req;
  for (const Datagram& d : datagrams) client_internal::ToProto(d, req.add_datagrams());
  return Then(Call(&SocketStub::SendBatch, std::move(req)),
              [](v1::SendBatchResponse& r) { return r.queued(); });
}

absl::StatusOr<Datagram> RemoteSocket::Receive(absl::Duration timeout) {
  if (absl::Status s = CheckOpen(); !s.ok()) return s;
  if (receive_ == nullptr) receive_ = std::make_unique<client_internal::ReceiveStream>(c_, handle_);
  return receive_->Next(timeout);
}

absl::StatusOr<std::vector<Datagram>> RemoteSocket::ReceiveUpTo(uint32_t count,
                                                                absl::Duration timeout) {
  if (absl::Status s = CheckOpen(); !s.ok()) return s;
  if (count == 0) return absl::InvalidArgumentError("count must be at least 1");
  const absl::Time deadline = absl::Now() + timeout;
  client_internal::ReceiveStream stream(c_, handle_, count);  // the server sends at most count
  std::vector<Datagram> out;
  while (out.size() < count) {
    absl::StatusOr<Datagram> d = stream.Next(std::max(deadline - absl::Now(), absl::ZeroDuration()));
    if (!d.ok()) {
      if (d.status().code() == absl::StatusCode::kDeadlineExceeded || !out.empty()) break;
      return d.status();
    }
    out.push_back(*std::move(d));
  }
  return out;
}

absl::StatusOr<v1::Socket> RemoteSocket::Get() { return Call(&SocketStub::Get, v1::GetRequest()); }

absl::Status RemoteSocket::Close() {
  if (handle_.empty() || c_ == nullptr) return absl::OkStatus();
  v1::CloseRequest req;
  req.set_socket(std::exchange(handle_, ""));
  const absl::Status s = c_->Call(&SocketStub::Close, req).status();
  receive_.reset();  // the stream has ended (or ends now)
  return s;
}

std::string RemoteSocket::Release() {
  receive_.reset();
  return std::exchange(handle_, "");
}

}  // namespace quadsock
