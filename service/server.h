// The gRPC server of quadsockd: SocketService, AdminService, grpc.health.v1 and server
// reflection over one Stack, on a Unix socket (mode 0660; UnixListener: each client is known
// by its uid) or on TCP with TLS (and mTLS when a client CA is given), with the session reaper
// that closes sockets of clients that went away.
// An administration listener beside it (a Unix socket of mode 0600: only the server's own user
// may connect) serves AdminService, grpc.health.v1 and reflection without sessions; only there,
// or to an mTLS identity in admin_identities, may the neighbour table be changed.
//
//   ServerOptions o{.listen = "unix:/run/quadsock/quadsock.sock",
//                   .admin_listen = "unix:/run/quadsock-admin/admin.sock"};
//   std::unique_ptr<Server> server = Server::Start(o, stack).value();
//   server->SetServing(true);      // health says SERVING once the data plane is up
//   ...
//   server->Shutdown(absl::Seconds(3));   // streams end with UNAVAILABLE
#ifndef QUADSOCK_SERVICE_SERVER_H_
#define QUADSOCK_SERVICE_SERVER_H_

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "service/admin_service.h"
#include "service/sessions.h"
#include "service/socket_service.h"
#include "service/unix_listener.h"
#include "stack/monotonic_clock.h"
#include "stack/stack.h"

namespace quadsock::service {

// HTTP/2 keepalive of the server's connections. A client that vanishes without closing its TCP
// connection (a host that lost power, a cut link) would otherwise keep its streams, and so its
// session and sockets (streams renew the lease), for gRPC's default of 2 hours.
struct Keepalive {
  absl::Duration time;     // the server pings a connection quiet for this long
  absl::Duration timeout;  // and closes it (ending its streams) when the ping goes unanswered
  // The shortest interval between a client's pings (without data between them) that the server
  // takes; shorter ones get GOAWAY "too_many_pings". Below the C++ client library's keepalive.
  absl::Duration min_client_interval;

  // A third of `lease`, at least 10 s; unanswered after at most 20 s more: a vanished client's
  // streams end well within a lease, and then the lease runs out.
  static Keepalive ForLease(absl::Duration lease);
};

struct ServerOptions {
  // "unix:PATH" or "HOST:PORT" (TCP needs tls_cert and tls_key).
  std::string listen = "unix:/run/quadsock/quadsock.sock";
  std::string tls_cert;       // PEM files
  std::string tls_key;
  std::string tls_client_ca;  // set: clients must present a certificate it signed (mTLS)
  // The administration listener: "unix:PATH", made with mode 0600; "": none. See AdminAccess.
  std::string admin_listen;
  // mTLS identities (ServiceContext::Identity) that may change the neighbour table on `listen`.
  std::vector<std::string> admin_identities;
  SessionLimits sessions;
  size_t max_message_bytes = 4 << 20;
  size_t max_batch = 1024;
  // Each peer's share of the stack's receive budget (its sockets' queues and datagrams); 0: no
  // share, the whole budget is everyone's.
  size_t receive_share_bytes = 0;
  // gRPC's threads for calls (a ResourceQuota): each stream holds one while it is open.
  int max_threads = 1024;
  DataPlaneInfo data_plane;
  // Sessions created, ended and expired, a line each. Empty: not logged.
  std::function<void(absl::string_view)> log;
  // Unset: Keepalive::ForLease(sessions.default_lease).
  std::optional<Keepalive> keepalive;
  // The leases' clock: monotonic (stack/monotonic_clock.h), so that a step of the wall clock
  // does not expire every session at once. Tests pass a fake.
  std::function<absl::Time()> clock = stack::MonotonicNow;
  // Data channels (AttachChannel) on a Unix listener: their side socket is the listener's path
  // with ".channel" appended.
  ChannelLimits channels;
};

// INVALID_ARGUMENT unless `admin_listen` is "" or a usable "unix:PATH" other than `listen`'s,
// saying why (quadsockd checks its flags with it before it starts anything).
absl::Status CheckAdminListen(const std::string& admin_listen, const std::string& listen);

class Server {
 public:
  // Fails fast: INVALID_ARGUMENT for a malformed --listen or --admin_listen,
  // FAILED_PRECONDITION for TCP without TLS or unreadable TLS files, UNAVAILABLE when an
  // address cannot be listened on.
  static absl::StatusOr<std::unique_ptr<Server>> Start(ServerOptions options, stack::Stack& stack);
  ~Server();

  // A channel to this server without a socket (tests).
  std::shared_ptr<grpc::Channel> InProcessChannel();
  // What grpc.health.v1 says, for the whole server and each service.
  void SetServing(bool serving);
  // Stops taking calls, ends streams with UNAVAILABLE, closes every session's sockets. Waits at
  // most `grace` for calls in flight.
  void Shutdown(absl::Duration grace);
  void Wait();

  const std::string& listening_on() const { return listening_on_; }
  // "unix:PATH" of the administration listener; "" without one.
  const std::string& admin_listening_on() const { return admin_listening_on_; }
  SocketServiceImpl& sockets() { return *sockets_; }  // for calls without gRPC (the fuzzer)
  AdminServiceImpl& admin() { return *admin_; }
  Sessions& sessions() { return sessions_; }
  // The Unix listener, which knows each connection's uid; null on TCP.
  const UnixListener* unix_listener() const { return unix_listener_.get(); }
  // The data channels' side socket; "" without one (a TCP listener).
  std::string channel_path() const { return channels_ ? channels_->path() : ""; }
  // The data channels' broker (null only before Start finished).
  const ChannelBroker* channels() const { return channels_.get(); }

 private:
  Server(ServerOptions options, stack::Stack& stack);
  // Starts the administration listener, if options_ name one.
  absl::Status StartAdministration();

  ServerOptions options_;
  Sessions sessions_;
  ServiceContext context_;
  std::unique_ptr<SocketServiceImpl> sockets_;
  std::unique_ptr<AdminServiceImpl> admin_;        // on `listen`
  std::unique_ptr<AdminServiceImpl> admin_only_;   // on `admin_listen`
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<grpc::Server> admin_server_;     // null without `admin_listen`
  std::unique_ptr<UnixListener> unix_listener_;    // `listen`'s, on a Unix socket
  std::unique_ptr<ChannelBroker> channels_;
  std::string listening_on_;
  std::string admin_listening_on_;
  std::atomic<bool> stopping_{false};
  std::thread reaper_;
};

}  // namespace quadsock::service

#endif  // QUADSOCK_SERVICE_SERVER_H_
