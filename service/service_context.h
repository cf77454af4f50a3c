// What quadsockd's gRPC services share: the stack, the sessions, whether the server is going
// down, and the checks every call makes first (Admit, Session). SocketService and AdminService
// hold a reference to one ServiceContext.
//
//   ServiceContext ctx{stack, sessions};
//   absl::StatusOr<std::string> token = ctx.Session(server_context);  // the caller's session
#ifndef QUADSOCK_SERVICE_SERVICE_CONTEXT_H_
#define QUADSOCK_SERVICE_SERVICE_CONTEXT_H_

#include <grpcpp/grpcpp.h>
#include <sys/types.h>

#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "google/protobuf/repeated_ptr_field.h"
#include "service/channel_broker.h"
#include "service/peer_shares.h"
#include "service/sessions.h"
#include "service/unix_listener.h"
#include "stack/stack.h"

namespace quadsock::service {

// How often a stream wakes to check for cancellation, shutdown and its lease.
inline constexpr absl::Duration kWaitSlice = absl::Milliseconds(100);
// How long a new stream waits for a stream slot (of its session, or its socket's one reader)
// to free: a stream the client cancelled ends on the server at its next wait slice, and the
// client's next stream must not be refused for that.
inline constexpr absl::Duration kStreamGrace = absl::Milliseconds(300);  // 3 wait slices

// The stack's messages speak of "the socket"; a client knows it by its handle:
// `socket "3f2a": the socket is not bound`.
inline absl::Status NamedByHandle(const absl::Status& s, const std::string& handle) {
  if (s.ok()) return s;
  return absl::Status(s.code(), absl::StrCat("socket \"", handle, "\": ", s.message()));
}

// What the log calls a session: enough of its token to tell sessions apart, too little to use.
inline std::string ShortId(const std::string& token) { return token.substr(0, 8); }

// What the services share: the stack, the sessions, and whether the server is going down.
struct ServiceContext {
  ServiceContext(stack::Stack& stack, Sessions& sessions) : stack(stack), sessions(sessions) {}

  stack::Stack& stack;
  Sessions& sessions;
  // The data channels' broker: null without a Unix listener (no shared memory over TCP).
  ChannelBroker* channels = nullptr;
  // Who the Unix listener's clients are: null on TCP.
  const UnixListener* unix_peers = nullptr;
  std::atomic<bool> shutting_down{false};
  // Data channels carried on gRPC streams (ChannelStream): the datagrams written to clients,
  // and the times a stream found datagrams waiting and no credit to send them with.
  std::atomic<uint64_t> stream_datagrams{0};
  std::atomic<uint64_t> stream_credit_waits{0};
  size_t max_batch = 1024;  // datagrams per SendBatch / Exchange message
  size_t max_message_bytes = 4 << 20;  // gRPC's limit: Exchange fills responses up to it
  size_t receive_share_bytes = 0;  // each peer's share of the receive budget; 0: none
  // The share of the stack's receive budget that `peer`'s sockets take from (one per peer while
  // it has sockets); none for no peer ("": in-process) or no shares.
  std::shared_ptr<stack::ReceiveBudget> ReceiveShare(const std::string& peer);

  // Whether the server takes the call at all: UNAVAILABLE when shutting down,
  // DEADLINE_EXCEEDED when late. (The administration listener asks no more.)
  absl::Status Admit(grpc::ServerContextBase* ctx) const;
  // The caller's session token after Admit and checking it (and renewing its lease):
  // UNAUTHENTICATED when missing or unknown, PERMISSION_DENIED for another local user's
  // (Sessions::Touch).
  absl::StatusOr<std::string> Session(grpc::ServerContextBase* ctx);
  // The client certificate's identity under mTLS, "" otherwise.
  static std::string Identity(grpc::ServerContextBase* ctx);
  // Who the per-peer limits count a session against, and who owns it: the mTLS identity;
  // without one the client's user on the Unix listener ("uid:1000", UnixListener), or its host
  // on TCP (TcpPeerKey); "" for an in-process channel (no per-peer limit). A connection of the
  // Unix listener that it cannot name (none such is known) is kUnknownLocalPeer, which owns
  // nothing of anyone's.
  std::string PeerKey(grpc::ServerContextBase* ctx) const;
  // The peer a TCP client (gRPC's peer(): "ipv4:10.0.0.7:41234", "ipv6:%5Bfd00::7%5D:41234") is
  // counted as: its IPv4 host ("ipv4:10.0.0.7"), or its IPv6 /64 ("ipv6:fd00::/64"), which is
  // what one host or site is given, so that one /64 is one peer however many addresses it
  // uses (an IPv4-mapped address is its IPv4 host). "" for anything else.
  static std::string TcpPeerKey(absl::string_view grpc_peer);
  // The client's uid on the Unix listener (uid_t(-1), nobody's, when it cannot be named);
  // nullopt for a call that did not come by it.
  std::optional<uid_t> LocalUid(grpc::ServerContextBase* ctx) const;
  static constexpr absl::string_view kUnknownLocalPeer = "uid:unknown";

  // Closes an ended session's sockets and logs it: "session 1a2b3c4d ("quadctl") `how`:
  // closed 3 sockets".
  void CloseEnded(const EndedSession& ended, absl::string_view how);
  // Where session lifecycle goes (quadsockd: its log on stderr). Empty: nowhere.
  std::function<void(absl::string_view)> log;
  void Log(absl::string_view message) const {
    if (log) log(message);
  }
  // The sockets a data channel request names, as (index, id); none named: every socket of the
  // session (and `all` is set). The handles' errors, named by handle.
  absl::StatusOr<std::vector<std::pair<uint32_t, SocketId>>> ChannelSockets(
      const std::string& token, const google::protobuf::RepeatedPtrField<std::string>& handles,
      bool& all) const;
  // A Receive or Exchange stream starts reading socket `id`: FAILED_PRECONDITION when another
  // stream reads it (the stack wakes one waiter per socket, and the two would split its
  // datagrams between them). A stream the client just cancelled ends only at its next wait
  // slice, so the call waits a little for it first: a client's next receive is not refused.
  // Each success is paired with one EndReading.
  absl::Status StartReading(SocketId id);
  void EndReading(SocketId id);

  // ChannelStream reactors not yet done. gRPC may call a reactor's OnDone after its own
  // Shutdown has returned, and OnDone still calls the broker: the server waits for them
  // (WaitForChannelStreams) before it frees it. ChannelStreamDone is a reactor's last touch of
  // the context.
  void ChannelStreamStarted();
  void ChannelStreamDone();
  // False when some are still running after `timeout`.
  bool WaitForChannelStreams(absl::Duration timeout);

 private:
  PeerShares<stack::ReceiveBudget> shares_;
  std::mutex streams_mu_;
  std::condition_variable streams_done_;
  int channel_streams_ = 0;  // guarded by streams_mu_
};

}  // namespace quadsock::service

#endif  // QUADSOCK_SERVICE_SERVICE_CONTEXT_H_
