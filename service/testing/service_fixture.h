// The fixture of the service tests: a server over a MemoryLink stack with a second stack on the
// same in-memory wire as the remote host, stubs (AdminService on both listeners), a session,
// and helpers to open sockets and send from the remote host. A test changes the server's
// settings by overriding Configure.
//
//   class LeaseTest : public ServiceTest {
//     void Configure(ServerOptions& o) override { o.sessions.max_lease = absl::Seconds(2); }
//   };
#ifndef QUADSOCK_SERVICE_TESTING_SERVICE_FIXTURE_H_
#define QUADSOCK_SERVICE_TESTING_SERVICE_FIXTURE_H_

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <string>

#include "common/protocol.h"
#include "quadsock/v1/admin.grpc.pb.h"
#include "quadsock/v1/socket.grpc.pb.h"
#include "service/server.h"
#include "service/testing/two_stacks.h"

namespace quadsock::service {

using grpc::ClientContext;
using grpc::StatusCode;

using ReceiveStream = grpc::ClientReader<v1::Datagram>;
using ExchangeStream = grpc::ClientReaderWriter<v1::ExchangeRequest, v1::ExchangeResponse>;
using SessionStream = grpc::ClientReader<v1::SessionEvent>;

// A test's stream and its context; cancelled and finished when it goes, unless the test
// finished it (gRPC allows one Finish).
template <typename Stream>
struct TestStream {
  TestStream(std::unique_ptr<ClientContext> c, std::unique_ptr<Stream> s)
      : ctx(std::move(c)), stream(std::move(s)) {}
  TestStream(TestStream&&) = default;
  ~TestStream() {
    if (stream != nullptr && !finished) {
      ctx->TryCancel();
      stream->Finish();
    }
  }
  Stream* operator->() { return stream.get(); }
  grpc::Status Finish() {
    finished = true;
    return stream->Finish();
  }
  // Cancels the call and waits for its end.
  void Cancel() {
    ctx->TryCancel();
    Finish();
  }

  std::unique_ptr<ClientContext> ctx;
  std::unique_ptr<Stream> stream;
  bool finished = false;
};

inline v1::Endpoint Ep(const std::string& address, uint32_t port) {
  v1::Endpoint e;
  e.set_address(address);
  e.set_port(port);
  return e;
}

class ServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ServerOptions o;
    o.sessions.max_sockets_per_session = 8;
    o.sessions.max_sessions = 4;
    o.clock = [this] { return absl::Now() + clock_offset_.load() * absl::Seconds(1); };
    o.admin_listen = testing::TwoStacks::UnixTarget();
    Configure(o);
    absl::StatusOr<std::unique_ptr<testing::TwoStacks>> t = testing::TwoStacks::Start(o);
    ASSERT_TRUE(t.ok()) << t.status();
    t_ = std::move(*t);
    stack_ = t_->stack.get();
    peer_ = t_->peer.get();
    server_ = t_->server.get();
    channel_ = server_->InProcessChannel();
    sockets_ = v1::SocketService::NewStub(channel_);
    admin_ = v1::AdminService::NewStub(channel_);
    if (!server_->admin_listening_on().empty()) {
      administration_ = v1::AdminService::NewStub(grpc::CreateChannel(
          server_->admin_listening_on(), grpc::InsecureChannelCredentials()));
    }
    session_ = NewSession("test");
  }
  // A test's own server settings, over the defaults above.
  virtual void Configure(ServerOptions& o) {}
  void TearDown() override {
    if (t_ != nullptr) {
      EXPECT_EQ(t_->Stop(), absl::OkStatus());
    }
  }

  std::string NewSession(const std::string& name, uint32_t lease = 0) {
    ClientContext ctx;
    v1::CreateSessionRequest req;
    req.set_client_name(name);
    req.set_lease_seconds(lease);
    v1::CreateSessionResponse resp;
    EXPECT_TRUE(sockets_->CreateSession(&ctx, req, &resp).ok());
    return resp.session();
  }
  void Auth(ClientContext& ctx, const std::string& session) {
    ctx.AddMetadata(kSessionHeader, session);
  }
  // Opens and binds a socket in `session` (receive_queue_depth 0: the server's default).
  std::string OpenBound(const std::string& session, const std::string& addr, uint32_t port,
                        v1::Family family = v1::FAMILY_IPV4, uint32_t receive_queue_depth = 0) {
    std::string handle;
    {
      ClientContext ctx;
      Auth(ctx, session);
      v1::OpenRequest req;
      req.set_family(family);
      req.set_receive_queue_depth(receive_queue_depth);
      v1::OpenResponse resp;
      EXPECT_TRUE(sockets_->Open(&ctx, req, &resp).ok());
      handle = resp.socket();
    }
    ClientContext ctx;
    Auth(ctx, session);
    v1::BindRequest req;
    req.set_socket(handle);
    *req.mutable_local() = Ep(addr, port);
    v1::BindResponse resp;
    EXPECT_TRUE(sockets_->Bind(&ctx, req, &resp).ok());
    return handle;
  }
  // A unary SocketService call in the test's session:
  //   Call(&v1::SocketService::Stub::Bind, request, &response)
  template <typename Request, typename Response>
  grpc::Status Call(grpc::Status (v1::SocketService::Stub::*method)(ClientContext*,
                                                                    const Request&, Response*),
                    const Request& request, Response* response) {
    ClientContext ctx;
    Auth(ctx, session_);
    return (sockets_.get()->*method)(&ctx, request, response);
  }
  // A stream's context in `session`, with a deadline so that a failing test ends.
  std::unique_ptr<ClientContext> StreamContext(const std::string& session,
                                               absl::Duration deadline) {
    auto ctx = std::make_unique<ClientContext>();
    Auth(*ctx, session);
    ctx->set_deadline(absl::ToChronoTime(absl::Now() + deadline));
    return ctx;
  }
  // A Receive stream of socket `handle` in `session`.
  TestStream<ReceiveStream> OpenReceive(const std::string& session, const std::string& handle,
                                        absl::Duration deadline = absl::Seconds(10)) {
    std::unique_ptr<ClientContext> ctx = StreamContext(session, deadline);
    v1::ReceiveRequest req;
    req.set_socket(handle);
    std::unique_ptr<ReceiveStream> stream = sockets_->Receive(ctx.get(), req);
    return TestStream<ReceiveStream>(std::move(ctx), std::move(stream));
  }
  // A Session stream holding `session` (over `stub`, or the in-process one).
  TestStream<SessionStream> OpenSession(const std::string& session,
                                        absl::Duration deadline = absl::Seconds(30),
                                        v1::SocketService::Stub* stub = nullptr) {
    std::unique_ptr<ClientContext> ctx = StreamContext(session, deadline);
    std::unique_ptr<SessionStream> stream =
        (stub != nullptr ? stub : sockets_.get())->Session(ctx.get(), v1::SessionRequest());
    return TestStream<SessionStream>(std::move(ctx), std::move(stream));
  }
  // An Exchange stream in `session` whose first request names `handle` and sends nothing.
  TestStream<ExchangeStream> OpenExchange(const std::string& session, const std::string& handle,
                                          absl::Duration deadline = absl::Seconds(10),
                                          v1::SocketService::Stub* stub = nullptr) {
    std::unique_ptr<ClientContext> ctx = StreamContext(session, deadline);
    std::unique_ptr<ExchangeStream> stream =
        (stub != nullptr ? stub : sockets_.get())->Exchange(ctx.get());
    v1::ExchangeRequest first;
    first.set_socket(handle);
    stream->Write(first);
    return TestStream<ExchangeStream>(std::move(ctx), std::move(stream));
  }

  // The peer host's socket, sending to the server stack.
  stack::SocketId PeerSocket(uint16_t port) { return t_->PeerSocket(port).value(); }
  void PeerSend(stack::SocketId s, const std::string& payload, uint16_t port) {
    EXPECT_EQ(t_->PeerSend(s, payload, port), absl::OkStatus());
  }
  v1::Socket Get(const std::string& handle) {
    v1::GetRequest req;
    req.set_socket(handle);
    v1::Socket resp;
    EXPECT_TRUE(Call(&v1::SocketService::Stub::Get, req, &resp).ok());
    return resp;
  }

  // A stub over the server's Unix socket, as a real client: the in-process transport differs
  // in flow control and does not survive its server's shutdown.
  std::unique_ptr<v1::SocketService::Stub> UnixStub(
      const grpc::ChannelArguments& args = grpc::ChannelArguments()) {
    return v1::SocketService::NewStub(grpc::CreateCustomChannel(
        server_->listening_on(), grpc::InsecureChannelCredentials(), args));
  }

  std::unique_ptr<testing::TwoStacks> t_;
  stack::Stack* stack_ = nullptr;  // the server's stack
  stack::Stack* peer_ = nullptr;   // the remote host
  Server* server_ = nullptr;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::SocketService::Stub> sockets_;
  std::unique_ptr<v1::AdminService::Stub> admin_;           // on the ordinary listener
  std::unique_ptr<v1::AdminService::Stub> administration_;  // the administration listener's
  std::string session_;
  std::atomic<int> clock_offset_{0};
};

}  // namespace quadsock::service

#endif  // QUADSOCK_SERVICE_TESTING_SERVICE_FIXTURE_H_
