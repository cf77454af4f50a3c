#include "service/socket_service.h"

#include <condition_variable>
#include <deque>
#include <thread>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "service/convert.h"
#include "service/status.h"

namespace quadsock::service {
namespace {

constexpr char kSessionHeader[] = "quadsock-session";
constexpr absl::Duration kWaitSlice = absl::Milliseconds(100);
// How long a new stream waits for a stream slot (of its session, or its socket's one reader)
// to free: a stream the client cancelled ends on the server at its next wait slice, and the
// client's next stream must not be refused for that.
constexpr absl::Duration kStreamGrace = absl::Milliseconds(300);  // 3 wait slices
// Send results an Exchange stream holds for a client that does not read its responses.
constexpr size_t kMaxPendingResults = 64;

// Renews a session's lease while one of its streams is open: the lease counts time without a
// call, and a stream is one call however long it lasts. Without this a `quadctl recv` longer
// than the lease lost the session and every socket in it, the streamed one too.
class LeaseRenewal {
 public:
  LeaseRenewal(Sessions& sessions, std::string token, std::string identity)
      : sessions_(sessions), token_(std::move(token)), identity_(std::move(identity)) {}
  // Cheap when called often: renews at most once a wait slice (leases are whole seconds).
  void Tick() {
    const absl::Time now = absl::Now();
    if (now < next_) return;
    next_ = now + kWaitSlice;
    (void)sessions_.Touch(token_, identity_);  // a session ended meanwhile stays ended
  }

 private:
  Sessions& sessions_;
  const std::string token_;
  const std::string identity_;
  absl::Time next_ = absl::InfinitePast();
};

// Bytes of an Exchange response kept for its SendResult (a code and a short message).
constexpr size_t kResponseReserve = 4096;

// A datagram's bytes inside a response: the message, its field tag and its length varint.
size_t FramedSize(const v1::Datagram& d) {
  const size_t n = d.ByteSizeLong();
  size_t varint = 1;
  for (size_t v = n; v >= 0x80; v >>= 7) ++varint;
  return 1 + varint + n;
}

// The stack names a socket by its own number ("no socket 17", "socket 17 is not bound"), which
// clients never see: they know the socket's handle. The service says the handle instead.
absl::Status NamedByHandle(const absl::Status& s, SocketId id, const std::string& handle) {
  if (s.ok()) return s;
  const std::string number = absl::StrCat("socket ", id);
  const absl::string_view message = s.message();
  std::string out;
  size_t from = 0;
  for (size_t at = message.find(number); at != absl::string_view::npos;
       at = message.find(number, at + 1)) {
    const size_t end = at + number.size();
    if (end < message.size() && absl::ascii_isdigit(message[end])) continue;  // socket 170
    absl::StrAppend(&out, message.substr(from, at - from), "socket \"", handle, "\"");
    from = end;
  }
  absl::StrAppend(&out, message.substr(from));
  return absl::Status(s.code(), out);
}

// What the log calls a session: enough of its token to tell sessions apart, too little to use.
std::string ShortId(const std::string& token) { return token.substr(0, 8); }

std::span<const uint8_t> Bytes(const std::string& s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

}  // namespace

std::string ServiceContext::Identity(grpc::ServerContext* ctx) {
  std::shared_ptr<const grpc::AuthContext> auth = ctx->auth_context();
  if (auth == nullptr || !auth->IsPeerAuthenticated()) return "";
  // The certificate's whole subject: SANs alone can be shared by many client certificates.
  std::vector<std::string> parts;
  for (const grpc::string_ref& r : auth->FindPropertyValues("x509_subject")) {
    parts.emplace_back(r.data(), r.size());
  }
  if (parts.empty()) {
    for (const grpc::string_ref& r : auth->GetPeerIdentity()) parts.emplace_back(r.data(), r.size());
  }
  return absl::StrJoin(parts, ",");
}

absl::Status ServiceContext::Admit(grpc::ServerContext* ctx) const {
  if (shutting_down.load()) return absl::UnavailableError("the server is shutting down");
  if (ctx->deadline() < std::chrono::system_clock::now()) {
    return absl::DeadlineExceededError("the call's deadline had passed on arrival");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ServiceContext::Session(grpc::ServerContext* ctx) {
  if (absl::Status s = Admit(ctx); !s.ok()) return s;
  auto it = ctx->client_metadata().find(kSessionHeader);
  std::string token;
  if (it != ctx->client_metadata().end()) token.assign(it->second.data(), it->second.size());
  if (absl::Status s = sessions.Touch(token, Identity(ctx)); !s.ok()) return s;
  return token;
}

void ServiceContext::CloseEnded(const EndedSession& ended, absl::string_view how) {
  for (SocketId id : ended.sockets) (void)stack.Close(id);
  Log(absl::StrFormat("session %s (\"%s\") %s: closed %d sockets", ShortId(ended.token),
                      absl::CHexEscape(ended.name), how, ended.sockets.size()));
}

absl::Status ServiceContext::StartReading(SocketId id) {
  std::unique_lock<std::mutex> lock(readers_mu_);
  reader_left_.wait_for(lock, absl::ToChronoMilliseconds(kStreamGrace),
                        [&] { return !readers_.contains(id); });
  if (!readers_.insert(id).second) {
    return absl::FailedPreconditionError(
        "the socket already has a Receive or Exchange stream: one reader at a time");
  }
  return absl::OkStatus();
}

void ServiceContext::EndReading(SocketId id) {
  {
    std::lock_guard<std::mutex> lock(readers_mu_);
    readers_.erase(id);
  }
  reader_left_.notify_all();
}

absl::StatusOr<std::pair<std::string, SocketId>> SocketServiceImpl::Resolve(
    grpc::ServerContext* ctx, const std::string& handle) {
  absl::StatusOr<std::string> token = c_.Session(ctx);
  if (!token.ok()) return token.status();
  absl::StatusOr<SocketId> id = c_.sessions.FindSocket(*token, handle);
  if (!id.ok()) return id.status();
  return std::make_pair(*token, *id);
}

grpc::Status SocketServiceImpl::CreateSession(grpc::ServerContext* ctx,
                                              const v1::CreateSessionRequest* req,
                                              v1::CreateSessionResponse* resp) {
  if (c_.shutting_down.load()) return ToGrpc(absl::UnavailableError("the server is shutting down"));
  const std::string identity = ServiceContext::Identity(ctx);
  auto created = c_.sessions.Create(req->client_name(), identity, req->lease_seconds());
  if (!created.ok()) return ToGrpc(created.status());
  c_.Log(absl::StrFormat("session %s (\"%s\") created for %s%s, lease %d s",
                         ShortId(created->first), absl::CHexEscape(req->client_name()),
                         ctx->peer(), identity.empty() ? "" : " as " + identity,
                         absl::ToInt64Seconds(created->second)));
  resp->set_session(created->first);
  resp->set_lease_seconds(static_cast<uint32_t>(absl::ToInt64Seconds(created->second)));
  return grpc::Status::OK;
}

grpc::Status SocketServiceImpl::KeepAlive(grpc::ServerContext* ctx, const v1::KeepAliveRequest*,
                                          v1::KeepAliveResponse*) {
  return ToGrpc(c_.Session(ctx).status());
}

grpc::Status SocketServiceImpl::Session(grpc::ServerContext* ctx, const v1::SessionRequest*,
                                        grpc::ServerWriter<v1::SessionEvent>* writer) {
  absl::StatusOr<std::string> token = c_.Session(ctx);
  if (!token.ok()) return ToGrpc(token.status());
  // It holds a thread of the server as long as it is open, as Receive and Exchange do.
  if (absl::Status s = c_.sessions.AddStream(*token, kStreamGrace); !s.ok()) return ToGrpc(s);
  absl::Cleanup stream_ends = [&] { c_.sessions.RemoveStream(*token); };
  if (absl::Status s = c_.sessions.Hold(*token); !s.ok()) return ToGrpc(s);
  v1::SessionEvent hello;
  hello.set_message("session held; closing this stream ends it");
  writer->Write(hello);
  while (!ctx->IsCancelled() && !c_.shutting_down.load()) absl::SleepFor(kWaitSlice);
  if (std::optional<EndedSession> ended = c_.sessions.Release(*token); ended.has_value()) {
    c_.CloseEnded(*ended, "ended with its Session stream");
  }
  if (c_.shutting_down.load()) return ToGrpc(absl::UnavailableError("the server is shutting down"));
  return grpc::Status::OK;
}

grpc::Status SocketServiceImpl::EndSession(grpc::ServerContext* ctx, const v1::EndSessionRequest*,
                                           v1::EndSessionResponse* resp) {
  absl::StatusOr<std::string> token = c_.Session(ctx);
  if (!token.ok()) return ToGrpc(token.status());
  absl::StatusOr<EndedSession> ended = c_.sessions.End(*token);
  if (!ended.ok()) return ToGrpc(ended.status());
  c_.CloseEnded(*ended, "ended by EndSession");
  resp->set_sockets_closed(static_cast<uint32_t>(ended->sockets.size()));
  return grpc::Status::OK;
}

absl::StatusOr<std::string> SocketServiceImpl::OpenSocket(const std::string& token,
                                                         const v1::OpenRequest& req) {
  absl::StatusOr<net::Family> family = ParseFamily(req.family());
  if (!family.ok()) return family.status();
  if (req.v6only() && *family == net::Family::kV4) {
    return absl::InvalidArgumentError("v6only: only for FAMILY_IPV6 sockets");
  }
  stack::OpenOptions o;
  o.v6only = req.v6only();
  o.reuse_port = req.reuse_port();
  o.receive_queue_depth = req.receive_queue_depth();
  if (!req.bound_device().empty()) {
    for (const link::LinkInfo& l : c_.stack.Links()) {
      if (l.name == req.bound_device()) o.bound_device = l.ifindex;
    }
    if (o.bound_device == 0) {
      return absl::InvalidArgumentError(absl::StrCat("bound_device: \"",
                                                     req.bound_device().substr(0, 64),
                                                     "\" is not an interface of this server"));
    }
  }
  if (absl::Status s = c_.sessions.CheckQuota(token); !s.ok()) return s;
  absl::StatusOr<SocketId> id = c_.stack.Open(*family, o);
  if (!id.ok()) return id.status();
  absl::StatusOr<std::string> handle = c_.sessions.AddSocket(token, *id);
  if (!handle.ok()) (void)c_.stack.Close(*id);
  return handle;
}

absl::StatusOr<net::Endpoint> SocketServiceImpl::BindSocket(SocketId id,
                                                            const v1::BindRequest& req) {
  absl::StatusOr<net::Endpoint> local = ParseEndpoint(req.local(), "local");
  if (!local.ok()) return local.status();
  return c_.stack.Bind(id, *local);
}

absl::StatusOr<net::Endpoint> SocketServiceImpl::ConnectSocket(SocketId id,
                                                               const v1::ConnectRequest& req) {
  absl::StatusOr<net::Endpoint> peer = ParseEndpoint(req.peer(), "peer");
  if (!peer.ok()) return peer.status();
  return c_.stack.Connect(id, *peer);
}

absl::StatusOr<net::Endpoint> SocketServiceImpl::RehashSocket(SocketId id,
                                                              const v1::RehashRequest& req) {
  std::optional<net::IpAddress> address;
  if (!req.local_address().empty()) {
    absl::StatusOr<net::IpAddress> a = ParseAddress(req.local_address(), "local_address");
    if (!a.ok()) return a.status();
    address = *a;
  }
  std::optional<uint16_t> port;
  if (req.change_port()) {
    if (req.local_port() > 65535) {
      return absl::InvalidArgumentError(
          absl::StrCat("local_port: ", req.local_port(), " is not a port (0..65535)"));
    }
    port = static_cast<uint16_t>(req.local_port());
  }
  if (!address.has_value() && !port.has_value()) {
    return absl::InvalidArgumentError(
        "nothing to change: give local_address, or change_port with local_port");
  }
  return c_.stack.Rehash(id, address, port);
}

absl::Status SocketServiceImpl::CloseSocket(const std::string& token, const std::string& handle,
                                            SocketId id) {
  if (absl::Status s = c_.sessions.RemoveSocket(token, handle); !s.ok()) return s;
  return c_.stack.Close(id);
}

grpc::Status SocketServiceImpl::Open(grpc::ServerContext* ctx, const v1::OpenRequest* req,
                                     v1::OpenResponse* resp) {
  absl::StatusOr<std::string> token = c_.Session(ctx);
  if (!token.ok()) return ToGrpc(token.status());
  absl::StatusOr<std::string> handle = OpenSocket(*token, *req);
  if (!handle.ok()) return ToGrpc(handle.status());
  resp->set_socket(*handle);
  return grpc::Status::OK;
}

grpc::Status SocketServiceImpl::Bind(grpc::ServerContext* ctx, const v1::BindRequest* req,
                                     v1::BindResponse* resp) {
  auto r = Resolve(ctx, req->socket());
  if (!r.ok()) return ToGrpc(r.status());
  absl::StatusOr<net::Endpoint> local = BindSocket(r->second, *req);
  if (!local.ok()) return ToGrpc(NamedByHandle(local.status(), r->second, req->socket()));
  *resp->mutable_local() = ToProto(*local);
  return grpc::Status::OK;
}

grpc::Status SocketServiceImpl::Connect(grpc::ServerContext* ctx, const v1::ConnectRequest* req,
                                        v1::ConnectResponse* resp) {
  auto r = Resolve(ctx, req->socket());
  if (!r.ok()) return ToGrpc(r.status());
  absl::StatusOr<net::Endpoint> local = ConnectSocket(r->second, *req);
  if (!local.ok()) return ToGrpc(NamedByHandle(local.status(), r->second, req->socket()));
  *resp->mutable_local() = ToProto(*local);
  return grpc::Status::OK;
}

grpc::Status SocketServiceImpl::Rehash(grpc::ServerContext* ctx, const v1::RehashRequest* req,
                                       v1::RehashResponse* resp) {
  auto r = Resolve(ctx, req->socket());
  if (!r.ok()) return ToGrpc(r.status());
  absl::StatusOr<net::Endpoint> local = RehashSocket(r->second, *req);
  if (!local.ok()) return ToGrpc(NamedByHandle(local.status(), r->second, req->socket()));
  *resp->mutable_local() = ToProto(*local);
  return grpc::Status::OK;
}

grpc::Status SocketServiceImpl::Disconnect(grpc::ServerContext* ctx,
                                           const v1::DisconnectRequest* req,
                                           v1::DisconnectResponse*) {
  auto r = Resolve(ctx, req->socket());
  if (!r.ok()) return ToGrpc(r.status());
  return ToGrpc(NamedByHandle(c_.stack.Disconnect(r->second), r->second, req->socket()));
}

grpc::Status SocketServiceImpl::Close(grpc::ServerContext* ctx, const v1::CloseRequest* req,
                                      v1::CloseResponse*) {
  auto r = Resolve(ctx, req->socket());
  if (!r.ok()) return ToGrpc(r.status());
  return ToGrpc(
      NamedByHandle(CloseSocket(r->first, req->socket(), r->second), r->second, req->socket()));
}

absl::Status SocketServiceImpl::Describe(const std::string& handle, SocketId id, v1::Socket* out) {
  absl::StatusOr<stack::SocketStatus> s = c_.stack.Get(id);
  if (!s.ok()) return s.status();
  const demux::SocketInfo& info = s->info;
  out->set_socket(handle);
  out->set_family(ToProto(info.options.family));
  out->set_state(ToProto(info.state));
  if (info.state != demux::SocketState::kOpen) *out->mutable_local() = ToProto(info.local);
  if (info.state == demux::SocketState::kConnected) *out->mutable_peer() = ToProto(info.remote);
  out->set_in_hash4(info.in_hash4);
  out->set_v6only(info.options.v6only);
  out->set_reuse_port(info.options.reuse_port);
  for (const link::LinkInfo& l : c_.stack.Links()) {
    if (info.options.bound_device != 0 && l.ifindex == info.options.bound_device) {
      out->set_bound_device(l.name);
    }
  }
  ToProto(s->counters, out->mutable_counters());
  if (s->pending_error.has_value()) out->set_pending_error(s->pending_error->ToString());
  return absl::OkStatus();
}

grpc::Status SocketServiceImpl::Get(grpc::ServerContext* ctx, const v1::GetRequest* req,
                                    v1::Socket* resp) {
  auto r = Resolve(ctx, req->socket());
  if (!r.ok()) return ToGrpc(r.status());
  return ToGrpc(
      NamedByHandle(Describe(req->socket(), r->second, resp), r->second, req->socket()));
}

grpc::Status SocketServiceImpl::List(grpc::ServerContext* ctx, const v1::ListRequest* req,
                                     v1::ListResponse* resp) {
  absl::StatusOr<std::string> token = c_.Session(ctx);
  if (!token.ok()) return ToGrpc(token.status());
  if (req->local_port() > 65535) {
    return ToGrpc(absl::InvalidArgumentError("local_port: not a port (0..65535)"));
  }
  if (req->page_size() > 1000) {
    return ToGrpc(absl::InvalidArgumentError("page_size: at most 1000"));
  }
  const uint32_t page = req->page_size() == 0 ? 100 : req->page_size();
  for (const auto& [handle, id] : c_.sessions.Sockets(*token)) {
    if (!req->page_token().empty() && handle <= req->page_token()) continue;
    v1::Socket s;
    if (!Describe(handle, id, &s).ok()) continue;  // closed meanwhile
    if (req->state() != v1::SOCKET_STATE_UNSPECIFIED && s.state() != req->state()) continue;
    if (req->local_port() != 0 && s.local().port() != req->local_port()) continue;
    if (static_cast<uint32_t>(resp->sockets_size()) == page) {
      resp->set_next_page_token(resp->sockets(resp->sockets_size() - 1).socket());
      break;
    }
    *resp->add_sockets() = std::move(s);
  }
  return grpc::Status::OK;
}

v1::SocketOpResult SocketServiceImpl::RunOp(const std::string& token, const v1::SocketOp& op,
                                           const std::vector<std::string>& opened) {
  v1::SocketOpResult result;
  auto finish = [&result](const absl::Status& s) {
    result.set_code(static_cast<int32_t>(s.code()));
    result.set_message(std::string(s.message()));
    return result;
  };
  if (op.op_case() == v1::SocketOp::kOpen) {
    absl::StatusOr<std::string> handle = OpenSocket(token, op.open());
    if (handle.ok()) result.set_socket(*handle);
    return finish(handle.status());
  }
  // Every other operation names a socket: a handle, or "#N" for the batch's N-th operation.
  std::string handle;
  switch (op.op_case()) {
    case v1::SocketOp::kBind: handle = op.bind().socket(); break;
    case v1::SocketOp::kConnect: handle = op.connect().socket(); break;
    case v1::SocketOp::kRehash: handle = op.rehash().socket(); break;
    case v1::SocketOp::kDisconnect: handle = op.disconnect().socket(); break;
    case v1::SocketOp::kClose: handle = op.close().socket(); break;
    default: return finish(absl::InvalidArgumentError("ops: an operation is empty"));
  }
  if (!handle.empty() && handle[0] == '#') {
    size_t index = 0;
    if (!absl::SimpleAtoi(handle.substr(1), &index) || index >= opened.size() ||
        opened[index].empty()) {
      return finish(absl::InvalidArgumentError(absl::StrCat(
          "socket \"", handle.substr(0, 16), "\" names no socket opened earlier in the batch")));
    }
    handle = opened[index];
  }
  result.set_socket(handle);
  absl::StatusOr<SocketId> id = c_.sessions.FindSocket(token, handle);
  if (!id.ok()) return finish(id.status());
  auto finish_named = [&](const absl::Status& s) { return finish(NamedByHandle(s, *id, handle)); };
  absl::StatusOr<net::Endpoint> local;
  switch (op.op_case()) {
    case v1::SocketOp::kBind: local = BindSocket(*id, op.bind()); break;
    case v1::SocketOp::kConnect: local = ConnectSocket(*id, op.connect()); break;
    case v1::SocketOp::kRehash: local = RehashSocket(*id, op.rehash()); break;
    case v1::SocketOp::kDisconnect: return finish_named(c_.stack.Disconnect(*id));
    default: return finish_named(CloseSocket(token, handle, *id));  // kClose
  }
  if (local.ok()) *result.mutable_local() = ToProto(*local);
  return finish_named(local.status());
}

grpc::Status SocketServiceImpl::Batch(grpc::ServerContext* ctx, const v1::BatchRequest* req,
                                      v1::BatchResponse* resp) {
  absl::StatusOr<std::string> token = c_.Session(ctx);
  if (!token.ok()) return ToGrpc(token.status());
  if (static_cast<size_t>(req->ops_size()) > c_.max_batch) {
    return ToGrpc(absl::InvalidArgumentError(
        absl::StrCat("ops: at most ", c_.max_batch, " in one batch")));
  }
  std::vector<std::string> opened;
  opened.reserve(req->ops_size());
  for (const v1::SocketOp& op : req->ops()) {
    v1::SocketOpResult r = RunOp(*token, op, opened);
    opened.push_back(op.op_case() == v1::SocketOp::kOpen && r.code() == 0 ? r.socket() : "");
    *resp->add_results() = std::move(r);
  }
  return grpc::Status::OK;
}

absl::Status SocketServiceImpl::SendOne(SocketId id, const v1::Datagram& d) {
  std::optional<net::Endpoint> to;
  if (d.has_peer()) {
    absl::StatusOr<net::Endpoint> peer = ParseEndpoint(d.peer(), "destination");
    if (!peer.ok()) return peer.status();
    to = *peer;
  }
  return c_.stack.Send(id, Bytes(d.payload()), to);
}

grpc::Status SocketServiceImpl::Send(grpc::ServerContext* ctx, const v1::SendRequest* req,
                                     v1::SendResponse*) {
  auto r = Resolve(ctx, req->socket());
  if (!r.ok()) return ToGrpc(r.status());
  v1::Datagram d;
  d.set_payload(req->payload());
  if (req->has_destination()) *d.mutable_peer() = req->destination();
  return ToGrpc(NamedByHandle(SendOne(r->second, d), r->second, req->socket()));
}

grpc::Status SocketServiceImpl::SendBatch(grpc::ServerContext* ctx,
                                          const v1::SendBatchRequest* req,
                                          v1::SendBatchResponse* resp) {
  auto r = Resolve(ctx, req->socket());
  if (!r.ok()) return ToGrpc(r.status());
  if (static_cast<size_t>(req->datagrams_size()) > c_.max_batch) {
    return ToGrpc(absl::InvalidArgumentError(
        absl::StrCat("datagrams: at most ", c_.max_batch, " in one batch")));
  }
  for (const v1::Datagram& d : req->datagrams()) {
    if (absl::Status s = NamedByHandle(SendOne(r->second, d), r->second, req->socket());
        !s.ok()) {
      return grpc::Status(static_cast<grpc::StatusCode>(s.code()),
                          absl::StrCat("datagram ", resp->queued(), ": ", s.message()));
    }
    resp->set_queued(resp->queued() + 1);
  }
  return grpc::Status::OK;
}

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
  LeaseRenewal lease(c_.sessions, r->first, ServiceContext::Identity(ctx));
  for (uint32_t sent = 0; !ctx->IsCancelled() &&
                          (req->max_datagrams() == 0 || sent < req->max_datagrams());) {
    if (c_.shutting_down.load()) return ToGrpc(absl::UnavailableError("the server is shutting down"));
    lease.Tick();
    absl::StatusOr<std::optional<stack::ReceivedDatagram>> d = c_.stack.Receive(id);
    if (!d.ok()) return grpc::Status::OK;  // the socket closed: the stream ends
    if (!d->has_value()) {
      absl::StatusOr<bool> ready = c_.stack.WaitForData(id, kWaitSlice);
      if (!ready.ok()) return grpc::Status::OK;
      continue;
    }
    v1::Datagram out;
    ToProto(**d, &out);
    // Write blocks while the client is slow: the socket's bounded queue absorbs (and counts)
    // what arrives meanwhile, so a slow reader costs bounded memory.
    if (!writer->Write(out)) break;
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
    result.set_code(static_cast<int32_t>(refused.code()));
    result.set_message(std::string(refused.message()));
    for (int i = 0; result.code() == 0 && i < req.datagrams_size(); ++i) {
      if (absl::Status s = NamedByHandle(SendOne(id, req.datagrams(i)), id, first.socket());
          !s.ok()) {
        result.set_code(static_cast<int32_t>(s.code()));
        result.set_message(std::string(s.message()));
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
  LeaseRenewal lease(c_.sessions, *token, ServiceContext::Identity(ctx));
  std::optional<v1::Datagram> carried;  // received, for the next response
  bool write_failed = false;
  // Room for the datagrams: what is left of the limit after a SendResult's worth of bytes.
  const size_t budget =
      c_.max_message_bytes > kResponseReserve ? c_.max_message_bytes - kResponseReserve : 0;
  while (reading.load() && !ctx->IsCancelled()) {
    if (c_.shutting_down.load()) {
      end = absl::UnavailableError("the server is shutting down");
      status = ToGrpc(end);
      break;
    }
    lease.Tick();
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
      if (!c_.stack.WaitForData(id, absl::Milliseconds(20)).ok()) {
        end = absl::NotFoundError("the socket was closed");
        break;
      }
      continue;
    }
    if (!stream->Write(out)) {
      write_failed = true;
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
    while (out.datagrams_size() > 0 || !left.empty()) {
      if (!left.empty()) {
        *out.mutable_send_result() = std::move(left.front());
        left.pop_front();
      }
      if (!stream->Write(out)) break;
      out.Clear();
    }
  }
  if (!end.ok() && reading.load()) {
    // The cancel below is all the client would see: say why first.
    v1::ExchangeResponse last;
    last.mutable_end()->set_code(static_cast<int32_t>(end.code()));
    last.mutable_end()->set_message(std::string(end.message()));
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
