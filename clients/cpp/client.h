// The C++ client of quadsockd: a session with the daemon and the remote UDP sockets it owns.
//
// Client::Connect dials quadsockd (a Unix socket, or TCP with TLS and optionally a client
// certificate), creates a session and keeps it alive in the background. RemoteSocket is one of
// the daemon's UDP sockets: every method is one RPC, returning the server's error with the
// same absl::StatusCode and message; the socket is closed when the RemoteSocket is destroyed.
//
//   std::unique_ptr<Client> client =
//       Client::Connect("unix:/run/quadsock/quadsock.sock", {.client_name = "echo"}).value();
//   RemoteSocket s = client->Open(v1::FAMILY_IPV4).value();
//   s.Bind({"0.0.0.0", 4000}).value();
//   absl::StatusOr<Datagram> d = s.Receive(absl::Seconds(1));   // DEADLINE_EXCEEDED if none
//   if (d.ok()) s.Send(d->payload, d->peer).IgnoreError();       // echo it back
//
// Sessions: by default the client holds a Session stream, so the session (and its sockets) ends
// when the Client is destroyed or the process dies. ClientOptions can instead attach to an
// existing session by token (quadctl keeps one across invocations that way) and renew its lease
// with KeepAlive calls, or not at all (every call renews it).
//
// Thread safety: Client methods may be called from several threads at once, and so may a
// RemoteSocket's, except Receive (one thread at a time) and moving, closing or destroying the
// RemoteSocket while another thread uses it.
// A RemoteSocket may outlive its Client; its calls then fail (the session has ended).
//
// Speed: the session's Session stream waits without a thread of its own, so the threads that
// wait in gRPC are the application's. Debian's Abseil checks every absl::Mutex (gRPC's locks
// too) for deadlocks; an application that moves many datagrams over the gRPC data channel may
// turn that off as quadsockd does:
//   absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
#ifndef QUADSOCK_CLIENTS_CPP_CLIENT_H_
#define QUADSOCK_CLIENTS_CPP_CLIENT_H_

#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "clients/cpp/data_channel.h"
#include "common/protocol.h"
#include "quadsock/v1/admin.grpc.pb.h"
#include "quadsock/v1/socket.grpc.pb.h"

namespace quadsock {

namespace client_internal {
struct Connection;
class ReceiveStream;
}  // namespace client_internal
class ExchangeStream;

// A UDP endpoint as text and port: {"10.1.0.2", 4000}, {"fd00:1::2", 53}.
struct Endpoint {
  std::string address;
  uint16_t port = 0;

  // "10.1.0.2:4000", "[fd00:1::2]:53". INVALID_ARGUMENT for anything else (the address itself
  // is checked by the server).
  static absl::StatusOr<Endpoint> Parse(absl::string_view text);
  static Endpoint FromProto(const v1::Endpoint& e);
  v1::Endpoint ToProto() const;
  // "10.1.0.2:4000", "[fd00:1::2]:53".
  std::string ToString() const;

  friend bool operator==(const Endpoint&, const Endpoint&) = default;
};

struct Datagram {
  std::string payload;
  Endpoint peer;   // the source (received) or destination (sent; empty address: the connected peer)
  Endpoint local;  // received: the address it was sent to
  absl::Time arrival;
  uint64_t sequence = 0;  // per socket, from 1; a gap shows datagrams dropped by a full queue
};

struct ClientOptions {
  // A name for the daemon's logs and listings (at most 64 characters).
  std::string client_name = "quadsock-cpp";
  // The session's lease; 0: the server's default.
  uint32_t lease_seconds = 0;

  // Use this existing session (a token from CreateSession) instead of creating one. Connect
  // checks it (UNAUTHENTICATED if it is unknown or lapsed) and never ends it.
  std::string session;
  enum class KeepSession {
    kHold,       // a Session stream: the session ends with the Client (or the process)
    kKeepAlive,  // a KeepAlive call every third of the lease; the lease runs out after the Client
    kNone,       // nothing: only the calls themselves renew the lease
  };
  // Default: kHold for a new session, kNone for an attached one.
  std::optional<KeepSession> keep;
  // false (and no `session`): no session at all. For health probes, which should not take a
  // session slot, and for quadsockd's administration listener (--admin_listen), whose
  // AdminService needs none. Elsewhere only Health works then; the rest is UNAUTHENTICATED.
  bool create_session = true;

  // TCP targets ("host:port") always use TLS. PEM files; all optional: the CA defaults to the
  // system's roots; a client certificate and key (both or neither) make it mTLS.
  std::string tls_ca;
  std::string tls_cert;
  std::string tls_key;
  // The name the server certificate must carry, if not the target's host (tests).
  std::string tls_server_name;

  // Deadline of each unary call (and of Connect's first call).
  absl::Duration call_timeout = absl::Seconds(10);
  // Connect's channel pings a connection quiet this long while a call (a stream) is open, and
  // drops it when the ping is not answered within keepalive_timeout: a stream to a server that
  // vanished fails with UNAVAILABLE instead of waiting for hours. quadsockd takes pings down to
  // every 5 s. Zero: gRPC's default (no keepalive). Not for Create, whose channel is made
  // elsewhere. The Python client (clients/python) uses the same values.
  absl::Duration keepalive = kClientKeepalive;
  absl::Duration keepalive_timeout = kClientKeepaliveTimeout;
};

// What grpc.health.v1 says about the server or one of its services.
enum class HealthStatus { kUnknown = 0, kServing = 1, kNotServing = 2, kServiceUnknown = 3 };
// "SERVING", "NOT_SERVING", ... as grpc.health.v1 spells them.
absl::string_view HealthStatusName(HealthStatus s);

class Client;

struct OpenOptions {
  v1::Family family = v1::FAMILY_IPV4;
  bool v6only = false;
  bool reuse_port = false;
  std::string bound_device;          // "": any
  uint32_t receive_queue_depth = 0;  // 0: the server's default
  v1::PmtuDiscovery pmtu_discovery = v1::PMTU_DISCOVERY_UNSPECIFIED;  // WANT, as Linux
};

struct ListOptions {
  v1::SocketState state = v1::SOCKET_STATE_UNSPECIFIED;  // any
  uint16_t local_port = 0;                               // any
  uint32_t page_size = 0;  // sockets per call (List follows the pages); 0: the server's default
};

// How many datagrams a failed SendBatch queued before its failure (from the call's details):
// a retry sends only the rest. nullopt for another status, or a server that did not say.
std::optional<uint32_t> SendBatchQueued(const absl::Status& failed);

// One UDP socket of the daemon, owned by a session. Move-only; closes the socket when destroyed
// (unless Release()d).
class RemoteSocket {
 public:
  RemoteSocket(RemoteSocket&& other) noexcept;
  RemoteSocket& operator=(RemoteSocket&& other) noexcept;
  ~RemoteSocket();

  // The opaque handle the server gave (quadctl's SOCKET argument).
  const std::string& handle() const { return handle_; }
  // The socket's index in the session, which tags its datagrams on the data channel (0 for a
  // socket taken by Client::Attach, whose index this client was not told; Get() has it).
  uint32_t index() const { return index_; }

  // Port 0: an ephemeral port. Returns the local endpoint as bound.
  absl::StatusOr<Endpoint> Bind(const Endpoint& local);
  // Enters the socket into hash4; returns the local endpoint (an unbound socket gets an
  // ephemeral port, a wildcard one the route's source address).
  absl::StatusOr<Endpoint> Connect(const Endpoint& peer);
  // Moves the live socket: a new address ("" keeps it) and/or port (nullopt keeps it, 0 picks
  // an ephemeral one). Returns the new local endpoint.
  absl::StatusOr<Endpoint> Rehash(const std::string& local_address,
                                  std::optional<uint16_t> local_port = std::nullopt);
  absl::Status Disconnect();

  // Queues one datagram; `to` is required unless the socket is connected.
  absl::Status Send(absl::string_view payload, std::optional<Endpoint> to = std::nullopt);
  // Queues several in one call (Datagram::peer with an empty address: the connected peer).
  // Stops at the first failure, whose message says which datagram, and SendBatchQueued of
  // which says how many went before it (retry only the rest). Returns how many queued.
  absl::StatusOr<uint32_t> SendBatch(const std::vector<Datagram>& datagrams);
  // The next datagram, waiting at most `timeout` (DEADLINE_EXCEEDED then). The first call
  // opens the Receive stream, which stays open until Close or Release. The server pushes
  // datagrams into it as they arrive (up to gRPC's flow-control window), so datagrams already
  // streamed but not yet returned here are lost when the stream ends. When the socket is closed
  // (by anyone) the stream ends: NOT_FOUND; the server's error otherwise (UNAVAILABLE when it
  // shuts down).
  absl::StatusOr<Datagram> Receive(absl::Duration timeout);
  // Up to `count` datagrams, on a stream of its own that the server ends after `count`: none
  // beyond them leaves the socket's queue. Fewer when `timeout` passes first (none: an empty
  // vector). Errors only when the stream fails before the first datagram (NOT_FOUND: closed).
  absl::StatusOr<std::vector<Datagram>> ReceiveUpTo(uint32_t count, absl::Duration timeout);
  // Opens an Exchange stream on the socket: high rates both ways on one call (see
  // ExchangeStream). Independent of Receive: a datagram goes to one of them, not both.
  absl::StatusOr<std::unique_ptr<ExchangeStream>> Exchange();

  absl::StatusOr<v1::Socket> Get();
  // Closes the socket on the server. Idempotent; the destructor does it too. Every other
  // method fails with FAILED_PRECONDITION afterwards (also after Release or a move).
  absl::Status Close();
  // Forgets the socket without closing it (it stays in the session); returns its handle.
  std::string Release();

 private:
  friend class Client;
  RemoteSocket(std::shared_ptr<client_internal::Connection> c, std::string handle,
               uint32_t index = 0);
  // FAILED_PRECONDITION once closed, released or moved from.
  absl::Status CheckOpen() const;
  // One unary call about this socket: `request` with this socket's handle (client.cc).
  template <typename Request, typename Response>
  absl::StatusOr<Response> Call(
      grpc::Status (v1::SocketService::Stub::*method)(grpc::ClientContext*, const Request&,
                                                      Response*),
      Request request);

  std::shared_ptr<client_internal::Connection> c_;
  std::string handle_;
  uint32_t index_ = 0;
  std::unique_ptr<client_internal::ReceiveStream> receive_;
};

// What an Exchange stream reports: datagrams received, and the failure of a Send whose
// datagrams did not all go (how many did, and the first error).
struct ExchangeEvent {
  std::vector<Datagram> received;
  struct SendFailure {
    uint32_t queued = 0;
    absl::Status status;
  };
  std::optional<SendFailure> send_failure;
};

// One socket's Exchange stream. Send writes one request (any number of datagrams); Next
// returns the server's next report, waiting at most `timeout` (DEADLINE_EXCEEDED then). The
// stream ends when this object is destroyed; when the socket is closed (by anyone) Next
// returns NOT_FOUND, and the server's error otherwise (UNAVAILABLE when it shuts down). Send
// and Next may be called from two threads at once; each from one thread at a time.
//
//   std::unique_ptr<ExchangeStream> x = socket.Exchange().value();
//   x->Send({{.payload = "ping", .peer = {"10.1.0.1", 5000}}}).IgnoreError();
//   absl::StatusOr<ExchangeEvent> e = x->Next(absl::Seconds(1));
class ExchangeStream {
 public:
  ~ExchangeStream();
  // FAILED_PRECONDITION once the stream has ended; an empty batch is INVALID_ARGUMENT.
  absl::Status Send(const std::vector<Datagram>& datagrams);
  absl::StatusOr<ExchangeEvent> Next(absl::Duration timeout);

 private:
  friend class RemoteSocket;
  struct State;
  explicit ExchangeStream(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

class Client {
 public:
  // Dials `target` ("unix:PATH" or "host:port" over TLS) and sets up the session. Fails fast:
  // INVALID_ARGUMENT for a malformed target or half a client certificate, FAILED_PRECONDITION
  // for an unreadable TLS file, UNAVAILABLE when the daemon cannot be reached, and the server's
  // error for CreateSession (or for the attached session's KeepAlive).
  static absl::StatusOr<std::unique_ptr<Client>> Connect(const std::string& target,
                                                         ClientOptions options = {});
  // The same over a channel made elsewhere (an in-process channel in tests).
  static absl::StatusOr<std::unique_ptr<Client>> Create(std::shared_ptr<grpc::Channel> channel,
                                                        ClientOptions options = {});
  // Stops keeping the session alive; a session this Client created and holds ends (its sockets
  // close), one it attached to is left to its lease.
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // The session token (for ClientOptions::session or quadctl --session) and its lease.
  const std::string& session() const;
  uint32_t lease_seconds() const;

  // --- Sessions.
  absl::Status KeepAlive();
  // Ends the session now, closing its sockets; returns how many. Later calls fail.
  absl::StatusOr<uint32_t> EndSession();

  // --- Sockets of this session.
  absl::StatusOr<RemoteSocket> Open(OpenOptions options);
  absl::StatusOr<RemoteSocket> Open(v1::Family family) {
    OpenOptions options;
    options.family = family;
    return Open(options);
  }
  // A socket of this session by handle, without a call (a wrong handle fails on first use with
  // NOT_FOUND). It closes on destruction like any RemoteSocket unless released.
  RemoteSocket Attach(const std::string& handle);
  // Every matching socket of the session, following the pages.
  absl::StatusOr<std::vector<v1::Socket>> List(ListOptions options = {});

  // --- The session's data channel (data_channel.h): the datagrams of many sockets, both ways,
  // without an RPC per datagram; over shared memory with quadsockd on this host (its Unix
  // listener), or a gRPC stream. The server's error for AttachChannel or StreamChannel
  // (ALREADY_EXISTS: the session has one); UNAVAILABLE when the side socket cannot be reached
  // or refuses the token. kAuto falls back to the stream where shared memory is not offered.
  absl::StatusOr<std::unique_ptr<DataChannel>> AttachChannel(AttachOptions options = {});
  // The same channel over gRPC, for remote clients: the session's StreamChannel call (see
  // socket.proto for the protocol: the first request names the sockets and grants credit), with
  // this session's metadata and no deadline (set one on `ctx`, which outlives the stream).
  std::unique_ptr<grpc::ClientReaderWriter<v1::ChannelRequest, v1::ChannelResponse>>
  StreamChannel(grpc::ClientContext* ctx);

  // --- Administration (AdminService) and health. SetNeighbor and RemoveNeighbor need an
  // administrator: a Client of the administration listener (unix:/run/quadsock-admin/admin.sock by
  // default, create_session = false), or an mTLS identity in quadsockd --admin_identities;
  // PERMISSION_DENIED otherwise.
  absl::StatusOr<v1::Counters> Counters();
  absl::StatusOr<std::vector<v1::Interface>> Interfaces();
  absl::StatusOr<std::vector<std::string>> Addresses();
  absl::StatusOr<std::vector<v1::Route>> Routes();
  absl::StatusOr<std::vector<v1::Neighbor>> Neighbors();
  absl::Status SetNeighbor(const std::string& address, const std::string& mac);
  absl::Status RemoveNeighbor(const std::string& address);
  absl::Status CheckFrameAccounting();
  // grpc.health.v1.Health/Check for `service` ("": the whole server). Needs no session.
  // NOT_FOUND for a service the server does not know.
  absl::StatusOr<HealthStatus> Health(const std::string& service = "");

 private:
  explicit Client(std::shared_ptr<client_internal::Connection> c);
  absl::Status StartSession(const ClientOptions& options);

  std::shared_ptr<client_internal::Connection> c_;
  class Keeper;
  std::unique_ptr<Keeper> keeper_;
  bool ends_session_ = false;  // a session this Client created and holds
};

}  // namespace quadsock

#endif  // QUADSOCK_CLIENTS_CPP_CLIENT_H_
