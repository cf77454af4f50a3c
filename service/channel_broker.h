// Hands sessions their data channels (stack/channel) over a side Unix socket, the one place in
// quadsockd that passes file descriptors.
//
// AttachChannel (a gRPC call) makes the channel and an offer: a one-time token, valid for
// `offer_ttl`. The client connects to the side socket (SOCK_SEQPACKET, next to the Unix
// listener, with its mode) and sends the token; the broker reads the peer's credentials
// (SO_PEERCRED, logged with the session), and when the offer was made for a uid and the peer is
// another user (not root) answers "error: ..." (a token that leaked to another local user is of
// no use to them); otherwise "ok" with the memfd and the rings' eventfds (SCM_RIGHTS), and puts
// the offered sockets on the channel. From then on the side connection is the channel's life:
// when the client closes it or dies, the sockets go back to their queues and the channel's
// memory is freed; when the session ends, the broker closes it. A channel the client broke
// (stack/channel: a consumer index it could not have written) is ended the same way, with a log
// line that says why; no other session notices.
//
// One thread serves the side socket (accepts, tokens, hang-ups, and every 100 ms: expired
// offers and broken channels). Every channel counts against `max_bytes_per_session`.
//
//   auto broker = ChannelBroker::Start("/run/quadsock/quadsock.sock.channel", stack, {}, log);
//   Offer o = broker->MakeOffer(session, {{1, id}}, /*all=*/false, /*slots=*/0, uid).value();
//   broker->SocketOpened(session, index, id);   // a session whose channel takes all sockets
//   broker->SessionEnded(session);
#ifndef QUADSOCK_SERVICE_CHANNEL_BROKER_H_
#define QUADSOCK_SERVICE_CHANNEL_BROKER_H_

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "service/peer_shares.h"
#include "service/throttled_log.h"
#include "stack/channel/channel.h"
#include "stack/monotonic_clock.h"
#include "stack/stack.h"

namespace quadsock::service {

struct ChannelLimits {
  uint32_t default_slots = 1024;  // per ring
  uint32_t max_slots = 65536;
  size_t max_bytes_per_session = size_t{256} << 20;
  // All sessions' channels together (offered or attached), until the last reference to each
  // goes: --max_all_channels_mib.
  size_t max_bytes_total = size_t{1} << 30;
  // One peer's sessions' channels together (the same count); 0: no per-peer limit.
  size_t max_bytes_per_peer = 0;
  // Who a session is counted against for max_bytes_per_peer ("" for no one); none: no one.
  std::function<std::string(const std::string& session)> peer_of;
  absl::Duration offer_ttl = absl::Seconds(10);
};

class ChannelBroker {
 public:
  // Listens on `path` (made with mode 0660, as the Unix listener); "" for none (a TCP listener:
  // StreamChannel only). UNAVAILABLE when it cannot.
  // `renew` is called every 100 ms for each session with an attached channel: a channel in
  // use counts as calls, as an open stream does, for the session's lease. `clock` times offers
  // and claims: monotonic, so that a step of the wall clock neither expires every offer nor
  // keeps stale ones (tests pass a fake).
  static absl::StatusOr<std::unique_ptr<ChannelBroker>> Start(
      std::string path, stack::Stack& stack, ChannelLimits limits,
      std::function<void(absl::string_view)> log,
      std::function<void(const std::string& session)> renew = nullptr,
      std::function<absl::Time()> clock = stack::MonotonicNow);
  ~ChannelBroker();  // ends every channel (the sockets go back to their queues)

  struct Offer {
    std::string token;
    std::string path;
    uint32_t rings = 0;
    uint64_t bytes = 0;
  };
  // A channel for `session` carrying `sockets` ((index, id) pairs) and, with `all`, every
  // socket the session opens later. ALREADY_EXISTS when the session has a channel or an offer;
  // INVALID_ARGUMENT for slots that are no power of two or over the limit; RESOURCE_EXHAUSTED
  // over max_bytes_per_session. Only `uid` (the asking client's, UnixListener::UidOf) or root
  // may claim the offer; nullopt: anyone who can reach the side socket.
  absl::StatusOr<Offer> MakeOffer(const std::string& session,
                                  std::vector<std::pair<uint32_t, stack::SocketId>> sockets,
                                  bool all, uint32_t slots, std::optional<uid_t> uid);
  // What a StreamChannel call (a channel read inside quadsockd) is told: `wake` when a ring
  // may have datagrams (from the broker's thread: the channel's eventfds are in its epoll set),
  // `ended` when the broker ends the channel (the session ended, quadsockd stops). Neither may
  // call the broker.
  struct StreamHooks {
    std::function<void()> wake;
    std::function<void(absl::Status why)> ended;
  };
  // A channel for a stream, made and attached at once (the same errors as MakeOffer). It ends
  // with DetachStream, or by the broker (then `ended`).
  absl::StatusOr<std::shared_ptr<channel::Channel>> AttachStream(
      const std::string& session, std::vector<std::pair<uint32_t, stack::SocketId>> sockets,
      bool all, uint32_t slots, StreamHooks hooks);
  void DetachStream(const std::string& session, const channel::Channel* channel);
  bool has_side_socket() const { return listen_fd_ >= 0; }

  // A socket the session opened: on its channel, if that takes all the session's sockets.
  void SocketOpened(const std::string& session, uint32_t index, stack::SocketId id);
  // The session ended: its channel (or offer) ends.
  void SessionEnded(const std::string& session);
  const std::string& path() const { return path_; }
  // Side connections closed at once (too many waiting to claim, in all or of one user), and
  // accept()s that failed (no descriptor or memory: the broker stops accepting until its next
  // tick, 100 ms, rather than spin on the readable socket).
  uint64_t refused() const { return refused_.load(std::memory_order_relaxed); }
  uint64_t accept_failures() const { return accept_failures_.load(std::memory_order_relaxed); }
  // Connections waiting to claim an offer: at most this many, and this many of one user.
  static constexpr size_t kMaxUnclaimed = 128;
  static constexpr size_t kMaxUnclaimedPerUser = 16;

 private:
  struct Pending {  // an offer not yet claimed
    std::string session;
    std::shared_ptr<channel::Channel> channel;
    std::vector<std::pair<uint32_t, stack::SocketId>> sockets;
    bool all = false;
    absl::Time expires;  // on clock_
    std::optional<uid_t> uid;  // who may claim it (and root); nullopt: anyone
  };
  struct Attached {  // a claimed channel, alive while its side connection (or stream) is
    std::shared_ptr<channel::Channel> channel;
    std::vector<std::pair<uint32_t, stack::SocketId>> sockets;
    bool all = false;
    int fd = -1;                          // the side connection; -1 for a stream's
    std::shared_ptr<StreamHooks> hooks;  // a stream's
  };
  // The channel's size for `slots`, checked against the limits (mu_ held: the totals); `peer`:
  // what the session's peer's channels hold now (null: no per-peer limit).
  absl::StatusOr<channel::ChannelOptions> Size(uint32_t slots,
                                               const std::atomic<size_t>* peer) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A channel of `slots` for a session that has none (the errors of MakeOffer).
  absl::StatusOr<std::shared_ptr<channel::Channel>> NewChannel(const std::string& session,
                                                              uint32_t slots)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether the session may have a new channel: ALREADY_EXISTS otherwise.
  absl::Status CheckNone(const std::string& session) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  ChannelBroker(std::string path, stack::Stack& stack, ChannelLimits limits,
                std::function<void(absl::string_view)> log,
                std::function<void(const std::string& session)> renew,
                std::function<absl::Time()> clock);
  void Run();
  void Accept() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A connection sent something: its token (the first message) or nothing more allowed.
  void Claim(int fd) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Ends a session's attached channel: sockets off, side connection closed, logged.
  // A stream's `ended` gets `code` with `why`.
  void Detach(const std::string& session, absl::string_view why,
              absl::StatusCode code = absl::StatusCode::kUnavailable)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Tick() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Drop(int fd) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Why a new side connection of `uid` may not wait to claim ("" when it may).
  std::string OverLimit(uid_t uid) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Log(absl::string_view message) const {
    if (log_) log_(message);
  }

  const std::string path_;
  stack::Stack& stack_;
  const ChannelLimits limits_;
  const std::function<void(absl::string_view)> log_;
  const std::function<void(const std::string& session)> renew_;
  const std::function<absl::Time()> clock_;
  int listen_fd_ = -1;
  int epoll_fd_ = -1;
  std::atomic<bool> stopping_{false};
  std::atomic<uint64_t> refused_{0};
  std::atomic<uint64_t> accept_failures_{0};
  std::thread thread_;
  // The bytes of every channel made and not yet freed: each is charged when NewChannel makes it
  // (under mu_) and given back when its last reference goes (on any thread).
  const std::shared_ptr<std::atomic<size_t>> channel_bytes_ =
      std::make_shared<std::atomic<size_t>>(0);
  // The same per peer, while a channel of the peer's lives.
  PeerShares<std::atomic<size_t>> peer_bytes_;
  // std::mutex, not absl::Mutex: ThreadSanitizer sees it unaided (sanitizers/tsan.cc).
  std::mutex mu_;
  absl::flat_hash_map<std::string, Pending> offers_ ABSL_GUARDED_BY(mu_);      // by token
  absl::flat_hash_map<std::string, Attached> attached_ ABSL_GUARDED_BY(mu_);   // by session
  struct Unclaimed {
    absl::Time deadline;  // on clock_
    uid_t uid;
  };
  absl::flat_hash_map<int, Unclaimed> unclaimed_ ABSL_GUARDED_BY(mu_);  // by fd
  // After a failed accept, the side socket is not watched until then (a tick: kTickMs).
  std::optional<absl::Time> accept_paused_until_ ABSL_GUARDED_BY(mu_);
  // Failed accepts and refused side connections: a line a second at most.
  ThrottledLog throttled_log_ ABSL_GUARDED_BY(mu_){log_};
  absl::flat_hash_map<int, std::string> sessions_by_fd_ ABSL_GUARDED_BY(mu_);  // attached fds
  absl::flat_hash_map<int, std::string> stream_events_ ABSL_GUARDED_BY(mu_);   // streams' eventfds
};

}  // namespace quadsock::service

#endif  // QUADSOCK_SERVICE_CHANNEL_BROKER_H_
