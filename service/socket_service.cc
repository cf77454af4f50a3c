#include "service/socket_service.h"

#include <condition_variable>
#include <deque>
#include <thread>

#include "absl/cleanup/cleanup.h"
#include "absl/hash/hash.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "service/channel_stream.h"
#include "service/convert.h"
#include "common/status.h"

namespace quadsock::service {
namespace {

std::span<const uint8_t> Bytes(const std::string& s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

}  // namespace

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
  const std::string peer = c_.PeerKey(ctx);
  auto created = c_.sessions.Create(req->client_name(), identity, req->lease_seconds(), peer);
  if (!created.ok()) return ToGrpc(created.status());
  // "created for fd:12 (uid:1000)" on the Unix listener, "created for ipv4:10.0.0.7:41234" ...
  const bool local = absl::StartsWith(peer, kLocalPeerPrefix);
  c_.Log(absl::StrFormat("session %s (\"%s\") created for %s%s%s, lease %d s",
                         ShortId(created->first), absl::CHexEscape(req->client_name()),
                         ctx->peer(), local ? " (" + peer + ")" : "",
                         identity.empty() ? "" : " as " + identity,
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
  const std::string peer = c_.sessions.Peer(token);
  o.receive_share = c_.ReceiveShare(peer);
  // The peer's sessions as one group (the neighbours they may have being resolved together).
  o.group = peer.empty() ? 0 : absl::HashOf(peer) | 1;
  o.v6only = req.v6only();
  o.reuse_port = req.reuse_port();
  o.owner = c_.sessions.Owner(token);  // its reuseport groups are the session's own
  o.receive_queue_depth = req.receive_queue_depth();
  switch (req.pmtu_discovery()) {
    case v1::PMTU_DISCOVERY_UNSPECIFIED:
    case v1::PMTU_DISCOVERY_WANT:
      o.pmtu_discovery = demux::PmtuDiscovery::kWant;
      break;
    case v1::PMTU_DISCOVERY_DO:
      o.pmtu_discovery = demux::PmtuDiscovery::kDo;
      break;
    case v1::PMTU_DISCOVERY_DONT:
      o.pmtu_discovery = demux::PmtuDiscovery::kDont;
      break;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("pmtu_discovery: no such value ", static_cast<int>(req.pmtu_discovery())));
  }
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
  absl::StatusOr<Sessions::AddedSocket> added = c_.sessions.AddSocket(token, *id);
  if (!added.ok()) {
    (void)c_.stack.Close(*id);
    return added.status();
  }
  // The session may have ended since (EndSession, the lease): it closed this socket with the
  // rest, and a channel it had is gone, which SocketOpened finds.
  if (c_.channels != nullptr) c_.channels->SocketOpened(token, added->index, *id);
  return added->handle;
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
  resp->set_index(c_.sessions.SocketIndex(*token, *handle).value_or(0));
  return grpc::Status::OK;
}

grpc::Status SocketServiceImpl::Bind(grpc::ServerContext* ctx, const v1::BindRequest* req,
                                     v1::BindResponse* resp) {
  auto r = Resolve(ctx, req->socket());
  if (!r.ok()) return ToGrpc(r.status());
  absl::StatusOr<net::Endpoint> local = BindSocket(r->second, *req);
  if (!local.ok()) return ToGrpc(NamedByHandle(local.status(), req->socket()));
  *resp->mutable_local() = ToProto(*local);
  return grpc::Status::OK;
}

grpc::Status SocketServiceImpl::Connect(grpc::ServerContext* ctx, const v1::ConnectRequest* req,
                                        v1::ConnectResponse* resp) {
  auto r = Resolve(ctx, req->socket());
  if (!r.ok()) return ToGrpc(r.status());
  absl::StatusOr<net::Endpoint> local = ConnectSocket(r->second, *req);
  if (!local.ok()) return ToGrpc(NamedByHandle(local.status(), req->socket()));
  *resp->mutable_local() = ToProto(*local);
  return grpc::Status::OK;
}

grpc::Status SocketServiceImpl::Rehash(grpc::ServerContext* ctx, const v1::RehashRequest* req,
                                       v1::RehashResponse* resp) {
  auto r = Resolve(ctx, req->socket());
  if (!r.ok()) return ToGrpc(r.status());
  absl::StatusOr<net::Endpoint> local = RehashSocket(r->second, *req);
  if (!local.ok()) return ToGrpc(NamedByHandle(local.status(), req->socket()));
  *resp->mutable_local() = ToProto(*local);
  return grpc::Status::OK;
}

grpc::Status SocketServiceImpl::Disconnect(grpc::ServerContext* ctx,
                                           const v1::DisconnectRequest* req,
                                           v1::DisconnectResponse*) {
  auto r = Resolve(ctx, req->socket());
  if (!r.ok()) return ToGrpc(r.status());
  return ToGrpc(NamedByHandle(c_.stack.Disconnect(r->second), req->socket()));
}

grpc::Status SocketServiceImpl::Close(grpc::ServerContext* ctx, const v1::CloseRequest* req,
                                      v1::CloseResponse*) {
  auto r = Resolve(ctx, req->socket());
  if (!r.ok()) return ToGrpc(r.status());
  return ToGrpc(
      NamedByHandle(CloseSocket(r->first, req->socket(), r->second), req->socket()));
}

absl::Status SocketServiceImpl::Describe(const std::string& token, const std::string& handle,
                                         SocketId id, v1::Socket* out) {
  absl::StatusOr<stack::SocketStatus> s = c_.stack.Get(id);
  if (!s.ok()) return s.status();
  out->set_index(c_.sessions.SocketIndex(token, handle).value_or(0));
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
  out->set_on_channel(s->on_channel);
  switch (info.options.pmtu_discovery) {
    case demux::PmtuDiscovery::kWant:
      out->set_pmtu_discovery(v1::PMTU_DISCOVERY_WANT);
      break;
    case demux::PmtuDiscovery::kDo:
      out->set_pmtu_discovery(v1::PMTU_DISCOVERY_DO);
      break;
    case demux::PmtuDiscovery::kDont:
      out->set_pmtu_discovery(v1::PMTU_DISCOVERY_DONT);
      break;
  }
  out->set_path_mtu(static_cast<uint32_t>(s->path_mtu));
  return absl::OkStatus();
}

grpc::Status SocketServiceImpl::Get(grpc::ServerContext* ctx, const v1::GetRequest* req,
                                    v1::Socket* resp) {
  auto r = Resolve(ctx, req->socket());
  if (!r.ok()) return ToGrpc(r.status());
  return ToGrpc(
      NamedByHandle(Describe(r->first, req->socket(), r->second, resp), req->socket()));
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
  // In chunks of the session's handles, in order, until the page is full and one more socket
  // matches (so there is a next page), or the handles end.
  std::string after = req->page_token();
  for (;;) {
    const std::vector<std::pair<std::string, SocketId>> chunk =
        c_.sessions.Sockets(*token, after, page + 1);
    if (chunk.empty()) return grpc::Status::OK;
    for (const auto& [handle, id] : chunk) {
      after = handle;
      v1::Socket s;
      if (!Describe(*token, handle, id, &s).ok()) continue;  // closed meanwhile
      if (req->state() != v1::SOCKET_STATE_UNSPECIFIED && s.state() != req->state()) continue;
      if (req->local_port() != 0 && s.local().port() != req->local_port()) continue;
      if (static_cast<uint32_t>(resp->sockets_size()) == page) {
        resp->set_next_page_token(resp->sockets(resp->sockets_size() - 1).socket());
        return grpc::Status::OK;
      }
      *resp->add_sockets() = std::move(s);
    }
  }
}

v1::SocketOpResult SocketServiceImpl::RunOp(const std::string& token, const v1::SocketOp& op,
                                           const std::vector<std::string>& opened) {
  v1::SocketOpResult result;
  auto finish = [&result](const absl::Status& s) {
    SetStatus(s, &result);
    return result;
  };
  if (op.op_case() == v1::SocketOp::kOpen) {
    absl::StatusOr<std::string> handle = OpenSocket(token, op.open());
    if (handle.ok()) {
      result.set_socket(*handle);
      result.set_index(c_.sessions.SocketIndex(token, *handle).value_or(0));
    }
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
  auto finish_named = [&](const absl::Status& s) { return finish(NamedByHandle(s, handle)); };
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
  return ToGrpc(NamedByHandle(SendOne(r->second, d), req->socket()));
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
    if (absl::Status s = NamedByHandle(SendOne(r->second, d), req->socket());
        !s.ok()) {
      // How many went, in the details too: a client retries only the rest.
      v1::ErrorStatus details;
      details.set_code(static_cast<int32_t>(s.code()));
      details.set_message(absl::StrCat("datagram ", resp->queued(), ": ", s.message()));
      details.add_details()->PackFrom(*resp);
      return grpc::Status(static_cast<grpc::StatusCode>(s.code()), details.message(),
                          details.SerializeAsString());
    }
    resp->set_queued(resp->queued() + 1);
  }
  return grpc::Status::OK;
}

grpc::Status SocketServiceImpl::AttachChannel(grpc::ServerContext* ctx,
                                              const v1::AttachChannelRequest* req,
                                              v1::AttachChannelResponse* resp) {
  absl::StatusOr<std::string> token = c_.Session(ctx);
  if (!token.ok()) return ToGrpc(token.status());
  if (c_.channels == nullptr) return ToGrpc(absl::UnavailableError("the server is shutting down"));
  bool all = false;
  absl::StatusOr<std::vector<std::pair<uint32_t, SocketId>>> sockets =
      c_.ChannelSockets(*token, req->sockets(), all);
  if (!sockets.ok()) return ToGrpc(sockets.status());
  absl::StatusOr<ChannelBroker::Offer> offer =
      c_.channels->MakeOffer(*token, std::move(*sockets), all, req->ring_slots(),
                             c_.LocalUid(ctx));
  if (!offer.ok()) return ToGrpc(offer.status());
  resp->set_token(offer->token);
  resp->set_path(offer->path);
  resp->set_rings(offer->rings);
  resp->set_bytes(offer->bytes);
  return grpc::Status::OK;
}

grpc::ServerBidiReactor<v1::ChannelRequest, v1::ChannelResponse>*
SocketServiceImpl::StreamChannel(grpc::CallbackServerContext* ctx) {
  return new ChannelStream(c_, ctx);  // deletes itself when done
}

}  // namespace quadsock::service
