#include "service/server.h"

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/impl/server_builder_option.h>
#include <grpcpp/resource_quota.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "stack/link/errno_status.h"

namespace quadsock::service {
namespace {

absl::StatusOr<std::string> ReadFile(const std::string& path, const std::string& what) {
  std::ifstream in(path);
  if (!in) {
    // FAILED_PRECONDITION whatever the errno: the host's files are not as the flags say.
    return absl::FailedPreconditionError(
        link::ErrnoStatus(errno, absl::StrCat("cannot read ", what, " \"", path, "\"")).message());
  }
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The path of "unix:PATH" ("unix://PATH" too). INVALID_ARGUMENT, naming `flag`, for another
// form or a path that does not fit a socket address.
absl::StatusOr<std::string> UnixPath(const std::string& listen, absl::string_view flag) {
  if (!absl::StartsWith(listen, "unix:")) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, ": \"", listen, "\" is not unix:PATH"));
  }
  std::string path = listen.substr(5);
  if (absl::StartsWith(path, "//")) path = path.substr(2);
  if (path.empty() || path.size() >= sizeof(sockaddr_un::sun_path)) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, ": bad Unix socket path \"", path, "\" (1 to ",
                     sizeof(sockaddr_un::sun_path) - 1, " characters)"));
  }
  return path;
}

// Makes the socket's folder with `folder_mode` if it is missing (an existing one is left as it
// is). A Unix socket file left by a crashed server blocks bind(): remove it when nobody listens.
absl::Status PrepareUnixPath(const std::string& path, absl::string_view flag,
                             mode_t folder_mode) {
  // The folder, where the path names one ("unix:q.sock" names none: the working directory).
  const size_t slash = path.rfind('/');
  if (slash != std::string::npos && slash > 0) mkdir(path.substr(0, slash).c_str(), folder_mode);
  struct stat st;
  if (lstat(path.c_str(), &st) != 0) return absl::OkStatus();
  if (!S_ISSOCK(st.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrCat(flag, ": \"", path, "\" exists and is not a socket"));
  }
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  const bool alive = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  close(fd);
  if (alive) {
    return absl::UnavailableError(
        absl::StrCat(flag, ": another server is listening on \"", path, "\""));
  }
  unlink(path.c_str());
  return absl::OkStatus();
}

// What both listeners share: message sizes and HTTP/2 keepalive.
void Configure(const ServerOptions& o, grpc::ServerBuilder& builder) {
  builder.SetMaxReceiveMessageSize(static_cast<int>(o.max_message_bytes));
  builder.SetMaxSendMessageSize(static_cast<int>(o.max_message_bytes));
  const Keepalive keepalive = o.keepalive.value_or(Keepalive::ForLease(o.sessions.default_lease));
  const auto ms = [](absl::Duration d) { return static_cast<int>(absl::ToInt64Milliseconds(d)); };
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, ms(keepalive.time));
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, ms(keepalive.timeout));
  // Also on a connection whose only stream is quiet (a Session stream, a Receive stream on an
  // idle socket): gRPC stops pinging after 2 pings without data unless told otherwise.
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  // Clients' own keepalive pings, with or without calls in flight, up to one per
  // min_client_interval (gRPC's default takes one per 5 minutes, and none without calls).
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS,
                             ms(keepalive.min_client_interval));
}

// gRPC's threads for the administration listener's calls: unary and few, and apart from the
// clients' (max_threads), so that clients holding every thread cannot lock the administrator out.
constexpr int kAdminThreads = 16;

// Server reflection on one server (the administration listener), not on the other: on
// --listen a reflection stream needs no session and holds one of gRPC's threads while it is
// open, so idle ones from any client would take them all. (Linking grpc++_reflection puts its
// plugin on every server; this option takes it off, or puts exactly one on.)
class ReflectionOption : public grpc::ServerBuilderOption {
 public:
  explicit ReflectionOption(bool serve) : serve_(serve) {}
  void UpdateArguments(grpc::ChannelArguments*) override {}
  void UpdatePlugins(std::vector<std::unique_ptr<grpc::ServerBuilderPlugin>>* plugins) override {
    auto reflection = std::make_unique<grpc::reflection::ProtoServerReflectionPlugin>();
    const std::string name = reflection->name();
    std::erase_if(*plugins, [&](const auto& p) { return p->name() == name; });
    if (serve_) plugins->push_back(std::move(reflection));
  }

 private:
  bool serve_;
};

}  // namespace

Keepalive Keepalive::ForLease(absl::Duration lease) {
  Keepalive k;
  k.time = std::max(lease / 3, absl::Seconds(10));
  k.timeout = std::min(k.time, absl::Seconds(20));
  k.min_client_interval = absl::Seconds(5);
  return k;
}

Server::Server(ServerOptions options, stack::Stack& stack)
    : options_(std::move(options)),
      sessions_(options_.sessions, options_.clock),
      context_{stack, sessions_} {
  context_.max_batch = options_.max_batch;
  context_.max_message_bytes = options_.max_message_bytes;
  context_.receive_share_bytes = options_.receive_share_bytes;
  context_.log = options_.log;
}

absl::Status CheckAdminListen(const std::string& admin_listen, const std::string& listen) {
  if (admin_listen.empty()) return absl::OkStatus();
  absl::StatusOr<std::string> path = UnixPath(admin_listen, "--admin_listen");
  if (!path.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        path.status().message(), ": the administration listener is a Unix socket of mode 0600, "
        "so that only quadsockd's own user may connect (empty: none)"));
  }
  absl::StatusOr<std::string> listen_path = UnixPath(listen, "--listen");
  if (listen_path.ok() && *listen_path == *path) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--admin_listen: \"", admin_listen, "\" is --listen's socket: give it a path of its own"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Server>> Server::Start(ServerOptions options, stack::Stack& stack) {
  if (absl::Status st = CheckAdminListen(options.admin_listen, options.listen); !st.ok()) {
    return st;
  }
  std::unique_ptr<Server> s(new Server(std::move(options), stack));
  const ServerOptions& o = s->options_;
  std::shared_ptr<grpc::ServerCredentials> credentials;
  std::string address;
  std::string unix_path;
  if (absl::StartsWith(o.listen, "unix:")) {
    absl::StatusOr<std::string> path = UnixPath(o.listen, "--listen");
    if (!path.ok()) return path.status();
    unix_path = *path;
    if (absl::Status st = PrepareUnixPath(unix_path, "--listen", 0755); !st.ok()) return st;
  } else {
    if (o.listen.find(':') == std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--listen: \"", o.listen, "\" is neither unix:PATH nor HOST:PORT"));
    }
    if (o.tls_cert.empty() || o.tls_key.empty()) {
      return absl::FailedPreconditionError(
          "--listen on TCP needs TLS: give --tls_cert and --tls_key (and --tls_client_ca for mTLS)");
    }
    absl::StatusOr<std::string> cert = ReadFile(o.tls_cert, "--tls_cert");
    if (!cert.ok()) return cert.status();
    absl::StatusOr<std::string> key = ReadFile(o.tls_key, "--tls_key");
    if (!key.ok()) return key.status();
    grpc::SslServerCredentialsOptions ssl;
    ssl.pem_key_cert_pairs.push_back({*key, *cert});
    if (!o.tls_client_ca.empty()) {
      absl::StatusOr<std::string> ca = ReadFile(o.tls_client_ca, "--tls_client_ca");
      if (!ca.ok()) return ca.status();
      ssl.pem_root_certs = *ca;
      ssl.client_certificate_request = GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY;
    }
    credentials = grpc::SslServerCredentials(ssl);
    address = o.listen;
  }

  // Everything the handlers read is in place before the server starts: a call may come the
  // moment it does (on TCP, or in process), and nothing may change under it then.
  if (!unix_path.empty()) {
    absl::StatusOr<std::unique_ptr<UnixListener>> listener =
        UnixListener::Listen(unix_path, o.log,
                             {.max_connections = o.sessions.max_sessions,
                              .max_per_user = o.sessions.max_sessions_per_peer});
    if (!listener.ok()) {
      return absl::UnavailableError(
          absl::StrCat("--listen: ", listener.status().message()));
    }
    s->unix_listener_ = std::move(*listener);
    s->context_.unix_peers = s->unix_listener_.get();
  }
  // Data channels: in shared memory beside a Unix listener, on gRPC streams on any.
  Sessions* sessions = &s->sessions_;
  ChannelLimits channel_limits = o.channels;
  if (!channel_limits.peer_of) {
    channel_limits.peer_of = [sessions](const std::string& session) {
      return sessions->Peer(session);
    };
  }
  absl::StatusOr<std::unique_ptr<ChannelBroker>> broker = ChannelBroker::Start(
      unix_path.empty() ? "" : unix_path + ".channel", stack, channel_limits, o.log,
      [sessions](const std::string& session) { sessions->Renew(session); }, o.clock);
  if (!broker.ok()) return broker.status();
  s->channels_ = std::move(*broker);
  s->context_.channels = s->channels_.get();

  s->sockets_ = std::make_unique<SocketServiceImpl>(s->context_);
  s->admin_ = std::make_unique<AdminServiceImpl>(
      s->context_, o.data_plane,
      AdminAccess{.identities = o.admin_identities, .admin_listen = o.admin_listen});
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  int port = 0;
  // A Unix listener is no port of gRPC's: UnixListener accepts its connections (to learn each
  // client's uid) and hands them to the server.
  if (unix_path.empty()) builder.AddListeningPort(address, credentials, &port);
  Configure(o, builder);
  // The synchronous server starts a thread per call in flight; without a cap, many clients with
  // streams open (each session may hold max_streams_per_session) could start them unbounded.
  grpc::ResourceQuota quota("quadsockd");
  quota.SetMaxThreads(o.max_threads);
  builder.SetResourceQuota(quota);
  builder.SetOption(std::make_unique<ReflectionOption>(/*serve=*/false));
  builder.RegisterService(s->sockets_.get());
  builder.RegisterService(s->admin_.get());
  s->server_ = builder.BuildAndStart();
  if (s->server_ == nullptr || (unix_path.empty() && port == 0)) {
    return absl::UnavailableError(absl::StrCat(
        "cannot listen on \"", o.listen, "\" (address in use, or not permitted)"));
  }
  if (s->unix_listener_ != nullptr) s->unix_listener_->Serve(s->server_.get());
  // With port 0 the kernel chose one: say which.
  s->listening_on_ = unix_path.empty()
                         ? absl::StrCat(o.listen.substr(0, o.listen.rfind(':')), ":", port)
                         : "unix:" + unix_path;
  if (absl::Status st = s->StartAdministration(); !st.ok()) return st;
  s->SetServing(false);
  Server* self = s.get();
  s->reaper_ = std::thread([self] {
    while (!self->stopping_.load()) {
      for (const EndedSession& ended : self->sessions_.Expire()) {
        self->context_.CloseEnded(
            ended, absl::StrCat("expired (no call for ", absl::FormatDuration(ended.lease), ")"));
      }
      for (int i = 0; i < 10 && !self->stopping_.load(); ++i) absl::SleepFor(absl::Milliseconds(100));
    }
  });
  return s;
}

absl::Status Server::StartAdministration() {
  const ServerOptions& o = options_;
  if (o.admin_listen.empty()) return absl::OkStatus();
  const std::string path = UnixPath(o.admin_listen, "--admin_listen").value();  // checked
  if (absl::Status st = PrepareUnixPath(path, "--admin_listen", 0700); !st.ok()) return st;
  admin_only_ = std::make_unique<AdminServiceImpl>(context_, o.data_plane,
                                                   AdminAccess{.administration_listener = true});
  grpc::ServerBuilder builder;
  builder.AddListeningPort("unix:" + path, grpc::InsecureServerCredentials());
  builder.SetOption(std::make_unique<ReflectionOption>(/*serve=*/true));
  Configure(o, builder);
  grpc::ResourceQuota quota("quadsockd-admin");
  quota.SetMaxThreads(kAdminThreads);
  builder.SetResourceQuota(quota);
  builder.RegisterService(admin_only_.get());
  // bind() makes the socket file inside BuildAndStart: under umask 0177 it is born 0600, with
  // no moment in which others could connect (as a chmod afterwards would leave). The umask is
  // the process's: a file another thread makes meanwhile is born owner-only too, never wider.
  const mode_t umask_before = umask(0177);
  admin_server_ = builder.BuildAndStart();
  umask(umask_before);
  if (admin_server_ == nullptr) {
    return absl::UnavailableError(absl::StrCat("--admin_listen: cannot listen on \"", path,
                                               "\" (not permitted, or no such folder)"));
  }
  admin_listening_on_ = "unix:" + path;
  return absl::OkStatus();
}

Server::~Server() {
  // A server that failed to start has nothing to shut down.
  if (server_ != nullptr && !stopping_.load()) Shutdown(absl::Seconds(1));
}

std::shared_ptr<grpc::Channel> Server::InProcessChannel() {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(static_cast<int>(options_.max_message_bytes));
  return server_->InProcessChannel(args);
}

void Server::SetServing(bool serving) {
  if (grpc::HealthCheckServiceInterface* health = server_->GetHealthCheckService()) {
    health->SetServingStatus(serving);
    health->SetServingStatus("quadsock.v1.SocketService", serving);
    health->SetServingStatus("quadsock.v1.AdminService", serving);
  }
  if (admin_server_ == nullptr) return;
  if (grpc::HealthCheckServiceInterface* health = admin_server_->GetHealthCheckService()) {
    health->SetServingStatus(serving);
    health->SetServingStatus("quadsock.v1.AdminService", serving);
  }
}

void Server::Shutdown(absl::Duration grace) {
  if (stopping_.exchange(true)) return;
  context_.shutting_down.store(true);
  SetServing(false);
  const auto deadline = std::chrono::system_clock::now() +
                        std::chrono::milliseconds(absl::ToInt64Milliseconds(grace));
  // No connection arrives once the server stops taking them.
  if (unix_listener_ != nullptr) unix_listener_->Stop();
  server_->Shutdown(deadline);
  if (admin_server_ != nullptr) admin_server_->Shutdown(deadline);
  if (reaper_.joinable()) reaper_.join();
  // The data channels end first: their sockets go back to their queues, their memory is freed;
  // once the streams that carry them are done (their OnDone may come after gRPC's Shutdown).
  if (!context_.WaitForChannelStreams(grace + absl::Seconds(5))) {
    context_.Log("channel streams still ending 5 s past the grace; freeing the broker anyway");
  }
  context_.channels = nullptr;
  channels_.reset();
  // Every session ends with the server: close all sockets it handed out.
  const std::vector<stack::SocketId> all = context_.stack.List();
  (void)context_.stack.Close(std::span<const stack::SocketId>(all));
}

void Server::Wait() {
  server_->Wait();
  if (admin_server_ != nullptr) admin_server_->Wait();
}

}  // namespace quadsock::service
