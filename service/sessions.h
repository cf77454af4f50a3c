// Client sessions of quadsockd: who owns which sockets, and for how long.
//
// A session is made by CreateSession and named by an unguessable token. It owns the sockets it
// opened, under handles that are unguessable too. Sessions knows every live handle, so a handle
// of another session is PERMISSION_DENIED ("socket H belongs to another client") and only one
// that no session has is NOT_FOUND; saying so gives nothing away, since nobody can guess a
// handle they were not given. It lives while its lease is renewed (by every call), while any
// of its streams is open (whatever the stream is doing: a Receive blocked on a slow reader
// too), or while a Session stream holds it; when it lapses, Expire hands back its sockets for
// closing. With mTLS a session is also tied to the client certificate's identity: another
// identity presenting the token is UNAUTHENTICATED.
//
// Each session belongs to a peer (its mTLS identity, the client's user on the Unix listener, or
// the client's host on TCP; ServiceContext::PeerKey): one peer may hold at most
// max_sessions_per_peer sessions, max_streams_per_peer streams and max_sockets_per_peer
// sockets, so that it cannot take every session, server thread or socket.
// A session of no known peer ("") has no per-peer limit. A session of a local user (peer
// "uid:N", the Unix listener's) is that user's: another peer presenting its token is
// PERMISSION_DENIED, unless it is root ("uid:0"); a token that leaked is no use to other users.
//
//   Sessions sessions(limits, clock);
//   auto [token, lease] = sessions.Create("demo", identity, 0, peer).value();
//   std::string handle = sessions.AddSocket(token, id).value().handle;
//   for (SocketId s : sessions.Expire(now)) stack.Close(s);
#ifndef QUADSOCK_SERVICE_SESSIONS_H_
#define QUADSOCK_SERVICE_SESSIONS_H_

#include <cstdint>
#include <functional>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/btree_map.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/node_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "stack/stack.h"

namespace quadsock::service {

using stack::SocketId;

// The peer of a local user's client (ServiceContext::PeerKey): "uid:" and the uid.
inline constexpr absl::string_view kLocalPeerPrefix = "uid:";
inline constexpr absl::string_view kRootPeer = "uid:0";

struct SessionLimits {
  size_t max_sessions = 1024;
  size_t max_sockets_per_session = 65536;
  // Session, Receive and Exchange streams open at once: each holds one of the server's threads.
  size_t max_streams_per_session = 16;
  // The same, over all sessions of one peer (Create's `peer`): --max_sessions_per_peer,
  // --max_streams_per_peer and --max_sockets_per_peer of quadsockd, which the messages name.
  size_t max_sessions_per_peer = 512;
  size_t max_streams_per_peer = 512;
  size_t max_sockets_per_peer = 1 << 19;
  absl::Duration default_lease = absl::Seconds(30);
  absl::Duration max_lease = absl::Hours(1);
};

// A session that ended: its sockets to close, and what the log says about it.
struct EndedSession {
  std::string token;
  std::string name;  // the client_name it was created with
  absl::Duration lease;
  std::vector<SocketId> sockets;
};

class Sessions {
 public:
  // `clock` times the leases: a monotonic one (stack::MonotonicNow, ServerOptions' default),
  // never the wall clock, whose steps would expire every session at once or keep dead ones.
  Sessions(SessionLimits limits, std::function<absl::Time()> clock)
      : limits_(limits), clock_(std::move(clock)) {}

  // RESOURCE_EXHAUSTED at max_sessions, or at max_sessions_per_peer sessions of `peer` ("": no
  // per-peer limit); INVALID_ARGUMENT for a lease over the maximum or a name over 64
  // characters.
  absl::StatusOr<std::pair<std::string, absl::Duration>> Create(const std::string& name,
                                                                const std::string& identity,
                                                                uint32_t lease_seconds,
                                                                const std::string& peer = "");
  // Checks the token (and identity) and renews the lease. UNAUTHENTICATED otherwise;
  // PERMISSION_DENIED when the session is a local user's and `peer` (as Create's) is another
  // one's, not root's.
  absl::Status Touch(const std::string& token, const std::string& identity,
                     const std::string& peer);
  // Renews the lease of a session that something of its own keeps busy (its data channel's
  // side connection); nothing when it has ended.
  void Renew(const std::string& token);

  // A new handle for a socket of the session, and its index (SocketIndex), read together: the
  // session may end the moment after. RESOURCE_EXHAUSTED over the per-session quota, or its
  // peer's.
  struct AddedSocket {
    std::string handle;
    uint32_t index = 0;
  };
  absl::StatusOr<AddedSocket> AddSocket(const std::string& token, SocketId id);
  // The quota check alone, before the socket is made.
  absl::Status CheckQuota(const std::string& token);
  // PERMISSION_DENIED for a handle of another session, NOT_FOUND for one no session has.
  absl::StatusOr<SocketId> FindSocket(const std::string& token, const std::string& handle) const;
  // The same errors as FindSocket.
  absl::Status RemoveSocket(const std::string& token, const std::string& handle);
  // (handle, id) of the session's sockets in handle order, those after `after` ("": from the
  // first), at most `max`: a page of List costs its own size, not the session's.
  std::vector<std::pair<std::string, SocketId>> Sockets(const std::string& token,
                                                        const std::string& after,
                                                        size_t max) const;
  // A socket's index in its session: from 1 in the order of AddSocket, never reused (it tags
  // the socket's datagrams on the session's data channel). The same errors as FindSocket.
  absl::StatusOr<uint32_t> SocketIndex(const std::string& token, const std::string& handle) const;
  // The session's owner id for its sockets (stack::OpenOptions::owner): its reuseport groups
  // are its own. 0 for no such session.
  uint64_t Owner(const std::string& token) const;
  // The peer the session is counted against ("" for none, or no such session).
  std::string Peer(const std::string& token) const;
  // The socket with that index in the session: NOT_FOUND when it has none (closed, or never).
  absl::StatusOr<SocketId> FindSocketByIndex(const std::string& token, uint32_t index) const;
  // (index, id) of the session's sockets.
  std::vector<std::pair<uint32_t, SocketId>> IndexedSockets(const std::string& token) const;

  // A Session, Receive or Exchange stream of the session starts: RESOURCE_EXHAUSTED when it has
  // max_streams_per_session open (or its peer max_streams_per_peer), and none of them ends
  // within `grace` (a cancelled stream's handler ends a moment after the client let go of it).
  // Each success is paired with one RemoveStream. While a stream is open the session does not
  // lapse; its lease runs again from the stream's end.
  absl::Status AddStream(const std::string& token, absl::Duration grace = absl::ZeroDuration());
  void RemoveStream(const std::string& token);

  // Ends the session; returns it, with its sockets for closing.
  absl::StatusOr<EndedSession> End(const std::string& token);
  // A Session stream holds the session open; Release ends it when the last such stream goes
  // (and returns it then).
  absl::Status Hold(const std::string& token);
  std::optional<EndedSession> Release(const std::string& token);
  // Ends lapsed sessions and returns them.
  std::vector<EndedSession> Expire();
  size_t size() const;

 private:
  struct Session {
    std::string name;
    std::string identity;
    absl::Duration lease;
    absl::Time expires;
    std::string peer;  // "" for none (no per-peer limit)
    int holders = 0;
    size_t streams = 0;  // Session, Receive and Exchange streams open
    absl::btree_map<std::string, SocketId> sockets;  // ordered: List pages through it
    absl::flat_hash_map<std::string, uint32_t> indexes;  // of the same handles
    absl::flat_hash_map<uint32_t, SocketId> by_index;
    uint32_t next_index = 1;
    uint64_t owner = 0;  // from 1, in the order of Create
  };
  Session* Find(const std::string& token);
  // The session, if it has room for one more socket (mu_ held).
  absl::StatusOr<Session*> WithRoom(const std::string& token);
  const Session* Find(const std::string& token) const;
  // Why `handle` is not a socket of `s`: PERMISSION_DENIED or NOT_FOUND (mu_ held).
  absl::Status NotInSession(const Session& s, const std::string& handle) const;
  // Removes the session and its handles (mu_ held).
  EndedSession Take(absl::node_hash_map<std::string, Session>::iterator it);

  const SessionLimits limits_;
  const std::function<absl::Time()> clock_;
  mutable std::mutex mu_;
  std::condition_variable stream_ended_;  // signalled by RemoveStream
  // Nodes: owners_ points into it.
  absl::node_hash_map<std::string, Session> sessions_;
  // Every live handle and its session: as many as the sessions hold sockets, so bounded by
  // max_sessions * max_sockets_per_session (and by the stack's socket limit).
  absl::flat_hash_map<std::string, const Session*> owners_;
  uint64_t next_owner_ = 1;  // guarded by mu_
  // What each peer holds (those with a session only).
  struct PeerUse {
    size_t sessions = 0;
    size_t streams = 0;
    size_t sockets = 0;
  };
  absl::flat_hash_map<std::string, PeerUse> peers_;
};

// 128 random bits from the kernel, as 32 hex digits.
std::string RandomToken();

}  // namespace quadsock::service

#endif  // QUADSOCK_SERVICE_SESSIONS_H_
