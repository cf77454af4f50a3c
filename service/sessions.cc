#include "service/sessions.h"

#include <sys/random.h>

#include <algorithm>
#include <cstdio>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace quadsock::service {

std::string RandomToken() {
  char bytes[16];
  size_t got = 0;
  while (got < sizeof(bytes)) {
    const ssize_t n = getrandom(bytes + got, sizeof(bytes) - got, 0);
    if (n > 0) got += static_cast<size_t>(n);
  }
  return absl::BytesToHexString(absl::string_view(bytes, sizeof(bytes)));
}

Sessions::Session* Sessions::Find(const std::string& token) {
  auto it = sessions_.find(token);
  return it == sessions_.end() ? nullptr : &it->second;
}
const Sessions::Session* Sessions::Find(const std::string& token) const {
  auto it = sessions_.find(token);
  return it == sessions_.end() ? nullptr : &it->second;
}

absl::StatusOr<std::pair<std::string, absl::Duration>> Sessions::Create(
    const std::string& name, const std::string& identity, uint32_t lease_seconds,
    const std::string& peer) {
  if (name.size() > 64) {
    return absl::InvalidArgumentError("client_name is longer than 64 characters");
  }
  absl::Duration lease = lease_seconds == 0 ? limits_.default_lease : absl::Seconds(lease_seconds);
  if (lease > limits_.max_lease) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "lease_seconds %u is over the maximum of %d", lease_seconds,
        absl::ToInt64Seconds(limits_.max_lease)));
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (sessions_.size() >= limits_.max_sessions) {
    return absl::ResourceExhaustedError(
        absl::StrFormat("the server has its maximum of %u sessions", limits_.max_sessions));
  }
  if (!peer.empty()) {
    auto it = peers_.find(peer);
    if (it != peers_.end() && it->second.sessions >= limits_.max_sessions_per_peer) {
      return absl::ResourceExhaustedError(absl::StrFormat(
          "client %s has its maximum of %u sessions (--max_sessions_per_peer)",
          absl::CHexEscape(peer.substr(0, 128)), limits_.max_sessions_per_peer));
    }
    ++peers_[peer].sessions;
  }
  std::string token = RandomToken();
  Session& s = sessions_[token];
  s.name = name;
  s.identity = identity;
  s.peer = peer;
  s.lease = lease;
  s.expires = clock_() + lease;
  s.owner = next_owner_++;
  return std::make_pair(token, lease);
}

absl::Status Sessions::Touch(const std::string& token, const std::string& identity,
                             const std::string& peer) {
  std::lock_guard<std::mutex> lock(mu_);
  Session* s = Find(token);
  if (s == nullptr || s->identity != identity) {
    return absl::UnauthenticatedError(
        token.empty() ? "no session: call CreateSession and send its token as quadsock-session"
                      : "unknown or expired session");
  }
  if (absl::StartsWith(s->peer, kLocalPeerPrefix) && peer != s->peer && peer != kRootPeer) {
    return absl::PermissionDeniedError(absl::StrCat(
        "the session belongs to another local user (", s->peer,
        "): only its own user, or root, may use its token"));
  }
  s->expires = clock_() + s->lease;
  return absl::OkStatus();
}

void Sessions::Renew(const std::string& token) {
  std::lock_guard<std::mutex> lock(mu_);
  if (Session* s = Find(token)) s->expires = clock_() + s->lease;
}

absl::StatusOr<Sessions::Session*> Sessions::WithRoom(const std::string& token) {
  Session* s = Find(token);
  if (s == nullptr) return absl::UnauthenticatedError("unknown or expired session");
  if (s->sockets.size() >= limits_.max_sockets_per_session) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "the session has its maximum of %u sockets", limits_.max_sockets_per_session));
  }
  if (!s->peer.empty() && peers_.at(s->peer).sockets >= limits_.max_sockets_per_peer) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "client %s has its maximum of %u sockets over its sessions (--max_sockets_per_peer)",
        absl::CHexEscape(s->peer.substr(0, 128)), limits_.max_sockets_per_peer));
  }
  return s;
}

absl::Status Sessions::CheckQuota(const std::string& token) {
  std::lock_guard<std::mutex> lock(mu_);
  return WithRoom(token).status();
}

absl::StatusOr<Sessions::AddedSocket> Sessions::AddSocket(const std::string& token,
                                                          SocketId id) {
  std::lock_guard<std::mutex> lock(mu_);
  absl::StatusOr<Session*> s = WithRoom(token);
  if (!s.ok()) return s.status();
  std::string handle = RandomToken();
  // 128 random bits do not collide; were they ever to, the first owner keeps its handle.
  while (!owners_.try_emplace(handle, *s).second) handle = RandomToken();
  const uint32_t index = (*s)->next_index++;
  (*s)->sockets[handle] = id;
  (*s)->by_index[index] = id;
  (*s)->indexes[handle] = index;
  if (!(*s)->peer.empty()) ++peers_.at((*s)->peer).sockets;
  return AddedSocket{std::move(handle), index};
}

absl::Status Sessions::NotInSession(const Session& s, const std::string& handle) const {
  const std::string shown = absl::CHexEscape(handle.substr(0, 64));
  auto owner = owners_.find(handle);
  if (owner != owners_.end() && owner->second != &s) {
    return absl::PermissionDeniedError(
        absl::StrCat("socket \"", shown, "\" belongs to another client"));
  }
  return absl::NotFoundError(absl::StrCat("no socket \"", shown, "\" in this session"));
}

absl::StatusOr<SocketId> Sessions::FindSocket(const std::string& token,
                                              const std::string& handle) const {
  std::lock_guard<std::mutex> lock(mu_);
  const Session* s = Find(token);
  if (s == nullptr) return absl::UnauthenticatedError("unknown or expired session");
  if (handle.empty()) return absl::InvalidArgumentError("socket: a handle is required");
  auto it = s->sockets.find(handle);
  if (it == s->sockets.end()) return NotInSession(*s, handle);
  return it->second;
}

absl::Status Sessions::RemoveSocket(const std::string& token, const std::string& handle) {
  std::lock_guard<std::mutex> lock(mu_);
  Session* s = Find(token);
  if (s == nullptr) return absl::UnauthenticatedError("unknown or expired session");
  if (s->sockets.erase(handle) == 0) return NotInSession(*s, handle);
  if (!s->peer.empty()) --peers_.at(s->peer).sockets;
  s->by_index.erase(s->indexes[handle]);
  s->indexes.erase(handle);
  owners_.erase(handle);
  return absl::OkStatus();
}

std::vector<std::pair<std::string, SocketId>> Sessions::Sockets(const std::string& token,
                                                               const std::string& after,
                                                               size_t max) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::pair<std::string, SocketId>> out;
  const Session* s = Find(token);
  if (s == nullptr) return out;
  for (auto it = s->sockets.upper_bound(after); it != s->sockets.end() && out.size() < max; ++it) {
    out.emplace_back(it->first, it->second);
  }
  return out;
}

absl::StatusOr<uint32_t> Sessions::SocketIndex(const std::string& token,
                                               const std::string& handle) const {
  std::lock_guard<std::mutex> lock(mu_);
  const Session* s = Find(token);
  if (s == nullptr) return absl::UnauthenticatedError("unknown or expired session");
  auto it = s->indexes.find(handle);
  if (it == s->indexes.end()) return NotInSession(*s, handle);
  return it->second;
}

uint64_t Sessions::Owner(const std::string& token) const {
  std::lock_guard<std::mutex> lock(mu_);
  const Session* s = Find(token);
  return s == nullptr ? 0 : s->owner;
}

std::string Sessions::Peer(const std::string& token) const {
  std::lock_guard<std::mutex> lock(mu_);
  const Session* s = Find(token);
  return s == nullptr ? "" : s->peer;
}

absl::StatusOr<SocketId> Sessions::FindSocketByIndex(const std::string& token,
                                                     uint32_t index) const {
  std::lock_guard<std::mutex> lock(mu_);
  const Session* s = Find(token);
  if (s == nullptr) return absl::UnauthenticatedError("unknown or expired session");
  auto it = s->by_index.find(index);
  if (it == s->by_index.end()) {
    return absl::NotFoundError(absl::StrCat("the session has no socket of index ", index));
  }
  return it->second;
}

std::vector<std::pair<uint32_t, SocketId>> Sessions::IndexedSockets(
    const std::string& token) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::pair<uint32_t, SocketId>> out;
  if (const Session* s = Find(token)) {
    for (const auto& [handle, id] : s->sockets) out.emplace_back(s->indexes.at(handle), id);
  }
  std::sort(out.begin(), out.end());
  return out;
}

absl::Status Sessions::AddStream(const std::string& token, absl::Duration grace) {
  std::unique_lock<std::mutex> lock(mu_);
  // Why the session may not open another stream now (mu_ held); OK when it may.
  const auto refusal = [&]() -> absl::Status {
    const Session* s = Find(token);
    if (s == nullptr) return absl::UnauthenticatedError("unknown or expired session");
    if (s->streams >= limits_.max_streams_per_session) {
      return absl::ResourceExhaustedError(absl::StrFormat(
          "the session has its maximum of %u streams open (Session, Receive, Exchange)",
          limits_.max_streams_per_session));
    }
    if (!s->peer.empty() && peers_.at(s->peer).streams >= limits_.max_streams_per_peer) {
      return absl::ResourceExhaustedError(absl::StrFormat(
          "client %s has its maximum of %u streams open over its sessions "
          "(--max_streams_per_peer)",
          absl::CHexEscape(s->peer.substr(0, 128)), limits_.max_streams_per_peer));
    }
    return absl::OkStatus();
  };
  const auto room = [&] { return refusal().code() != absl::StatusCode::kResourceExhausted; };
  if (!room()) stream_ended_.wait_for(lock, absl::ToChronoMilliseconds(grace), room);
  if (absl::Status st = refusal(); !st.ok()) return st;
  Session* s = Find(token);
  ++s->streams;
  if (!s->peer.empty()) ++peers_.at(s->peer).streams;
  return absl::OkStatus();
}

void Sessions::RemoveStream(const std::string& token) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    // The session may have ended under the stream: then there is nothing to count (Take
    // gave back its streams).
    if (Session* s = Find(token); s != nullptr && s->streams > 0) {
      --s->streams;
      if (!s->peer.empty()) --peers_.at(s->peer).streams;
      // The stream was a call: the lease runs from its end.
      s->expires = std::max(s->expires, clock_() + s->lease);
    }
  }
  stream_ended_.notify_all();
}

EndedSession Sessions::Take(absl::node_hash_map<std::string, Session>::iterator it) {
  if (const std::string& peer = it->second.peer; !peer.empty()) {
    PeerUse& use = peers_.at(peer);
    use.streams -= it->second.streams;
    use.sockets -= it->second.sockets.size();
    if (--use.sessions == 0) peers_.erase(peer);
  }
  EndedSession out{.token = it->first, .name = it->second.name, .lease = it->second.lease};
  for (const auto& [h, id] : it->second.sockets) {
    out.sockets.push_back(id);
    owners_.erase(h);
  }
  sessions_.erase(it);
  return out;
}

absl::StatusOr<EndedSession> Sessions::End(const std::string& token) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = sessions_.find(token);
  if (it == sessions_.end()) return absl::UnauthenticatedError("unknown or expired session");
  return Take(it);
}

absl::Status Sessions::Hold(const std::string& token) {
  std::lock_guard<std::mutex> lock(mu_);
  Session* s = Find(token);
  if (s == nullptr) return absl::UnauthenticatedError("unknown or expired session");
  ++s->holders;
  return absl::OkStatus();
}

std::optional<EndedSession> Sessions::Release(const std::string& token) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = sessions_.find(token);
  if (it == sessions_.end() || --it->second.holders > 0) return std::nullopt;
  // The last Session stream went away: so does the session.
  return Take(it);
}

std::vector<EndedSession> Sessions::Expire() {
  const absl::Time now = clock_();
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<EndedSession> ended;
  for (auto it = sessions_.begin(); it != sessions_.end();) {
    // An open stream is a call in progress, however long it lasts (RemoveStream renews).
    if (it->second.holders > 0 || it->second.streams > 0 || it->second.expires > now) {
      ++it;
      continue;
    }
    ended.push_back(Take(it++));
  }
  return ended;
}

size_t Sessions::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return sessions_.size();
}

}  // namespace quadsock::service
