#include "service/service_context.h"

#include <chrono>
#include <memory>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"
#include "common/protocol.h"
#include "stack/net/address.h"

namespace quadsock::service {

std::string ServiceContext::Identity(grpc::ServerContextBase* ctx) {
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

std::string ServiceContext::PeerKey(grpc::ServerContextBase* ctx) const {
  if (std::string identity = Identity(ctx); !identity.empty()) return identity;
  // "fd:12" (the Unix listener's), "ipv4:10.0.0.7:41234", "ipv6:[fd00::7]:41234"
  const std::string peer = ctx->peer();
  if (unix_peers != nullptr && absl::StartsWith(peer, "fd:")) {
    return unix_peers->PeerOf(peer).value_or(std::string(kUnknownLocalPeer));
  }
  return TcpPeerKey(peer);
}

std::string ServiceContext::TcpPeerKey(absl::string_view grpc_peer) {
  // gRPC escapes an IPv6 address's brackets as in a URI: "ipv6:%5Bfd00::7%5D:41234".
  const std::string unescaped = absl::StrReplaceAll(
      grpc_peer, {{"%5B", "["}, {"%5b", "["}, {"%5D", "]"}, {"%5d", "]"}});
  absl::string_view peer = unescaped;
  if (!absl::ConsumePrefix(&peer, "ipv4:") && !absl::ConsumePrefix(&peer, "ipv6:")) return "";
  const size_t port = peer.rfind(':');
  if (port == absl::string_view::npos) return "";
  absl::string_view host = peer.substr(0, port);
  absl::ConsumePrefix(&host, "[");
  absl::ConsumeSuffix(&host, "]");
  absl::StatusOr<net::IpAddress> address = net::IpAddress::Parse(host);
  if (!address.ok()) return "";
  const net::IpAddress a = address->Unmapped();
  if (a.is_v4()) return "ipv4:" + a.ToString();
  absl::StatusOr<net::IpPrefix> site = net::IpPrefix::Make(a, 64);
  return site.ok() ? "ipv6:" + site->Network().ToString() : "";
}

std::shared_ptr<stack::ReceiveBudget> ServiceContext::ReceiveShare(const std::string& peer) {
  if (peer.empty() || receive_share_bytes == 0) return nullptr;
  return shares_.Get(peer, [&] { return stack.NewReceiveShare(receive_share_bytes); });
}

std::optional<uid_t> ServiceContext::LocalUid(grpc::ServerContextBase* ctx) const {
  const std::string peer = ctx->peer();
  if (unix_peers == nullptr || !absl::StartsWith(peer, "fd:")) return std::nullopt;
  return unix_peers->UidOf(peer).value_or(static_cast<uid_t>(-1));
}

absl::Status ServiceContext::Admit(grpc::ServerContextBase* ctx) const {
  if (shutting_down.load()) return absl::UnavailableError("the server is shutting down");
  if (ctx->deadline() < std::chrono::system_clock::now()) {
    return absl::DeadlineExceededError("the call's deadline had passed on arrival");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ServiceContext::Session(grpc::ServerContextBase* ctx) {
  if (absl::Status s = Admit(ctx); !s.ok()) return s;
  auto it = ctx->client_metadata().find(kSessionHeader);
  std::string token;
  if (it != ctx->client_metadata().end()) token.assign(it->second.data(), it->second.size());
  if (absl::Status s = sessions.Touch(token, Identity(ctx), PeerKey(ctx)); !s.ok()) return s;
  return token;
}

void ServiceContext::CloseEnded(const EndedSession& ended, absl::string_view how) {
  if (channels != nullptr) channels->SessionEnded(ended.token);
  (void)stack.Close(std::span<const SocketId>(ended.sockets));
  Log(absl::StrFormat("session %s (\"%s\") %s: closed %d sockets", ShortId(ended.token),
                      absl::CHexEscape(ended.name), how, ended.sockets.size()));
}

absl::StatusOr<std::vector<std::pair<uint32_t, SocketId>>> ServiceContext::ChannelSockets(
    const std::string& token, const google::protobuf::RepeatedPtrField<std::string>& handles,
    bool& all) const {
  all = handles.empty();
  if (all) return sessions.IndexedSockets(token);
  std::vector<std::pair<uint32_t, SocketId>> out;
  for (const std::string& handle : handles) {
    absl::StatusOr<SocketId> id = sessions.FindSocket(token, handle);
    if (!id.ok()) return NamedByHandle(id.status(), handle);
    out.emplace_back(sessions.SocketIndex(token, handle).value_or(0), *id);
  }
  return out;
}

absl::Status ServiceContext::StartReading(SocketId id) {
  absl::Status s = stack.StartReading(id, kStreamGrace);
  if (s.code() == absl::StatusCode::kFailedPrecondition) {
    return absl::FailedPreconditionError(
        "the socket already has a Receive or Exchange stream: one reader at a time");
  }
  return s;
}

void ServiceContext::EndReading(SocketId id) { stack.EndReading(id); }

void ServiceContext::ChannelStreamStarted() {
  std::lock_guard<std::mutex> lock(streams_mu_);
  ++channel_streams_;
}

void ServiceContext::ChannelStreamDone() {
  std::lock_guard<std::mutex> lock(streams_mu_);
  --channel_streams_;
  streams_done_.notify_all();  // under the lock: the waiter cannot free us before we are out
}

bool ServiceContext::WaitForChannelStreams(absl::Duration timeout) {
  std::unique_lock<std::mutex> lock(streams_mu_);
  return streams_done_.wait_for(lock, absl::ToChronoMilliseconds(timeout),
                                [this] { return channel_streams_ == 0; });
}

}  // namespace quadsock::service
