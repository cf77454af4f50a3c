// The TCP listener: TLS is required, and with a client CA, mutual TLS ties each session to the
// client certificate's identity. Certificates are the test PKI of clients/testing, made with
// openssl(1) when the test runs.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "clients/testing/test_pki.h"
#include "common/protocol.h"
#include "quadsock/v1/admin.grpc.pb.h"
#include "quadsock/v1/socket.grpc.pb.h"
#include "service/server.h"
#include "stack/link/memory_link.h"

namespace quadsock::service {
namespace {

std::string Read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class TlsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (pki_ != nullptr) return;  // made for an earlier suite of this fixture (PeerLimitTest)
    absl::StatusOr<quadsock::testing::TestPki> pki = quadsock::testing::MakeTestPki();
    ASSERT_TRUE(pki.ok()) << pki.status();
    pki_ = new quadsock::testing::TestPki(*std::move(pki));
  }

  void SetUp() override {
    link::MemoryLink::Pair p = link::MemoryLink::CreateWithTestEnd({.name = "mem0"});
    wire_ = std::move(p.test_end);
    std::vector<std::unique_ptr<link::Link>> links;
    links.push_back(std::move(p.link));
    stack::StackOptions so;
    so.addresses = {*net::IpPrefix::Parse("10.1.0.2/24")};
    stack_ = stack::Stack::Create(so, std::move(links)).value();
  }

  ServerOptions Tls(bool mutual) {
    ServerOptions o;
    o.listen = "127.0.0.1:0";
    o.tls_cert = pki_->Cert("server");
    o.tls_key = pki_->Key("server");
    if (mutual) o.tls_client_ca = pki_->Cert("ca");
    return o;
  }

  // A channel to `server` with `who`'s certificate ("": none).
  std::shared_ptr<grpc::Channel> Channel(const Server& server, const std::string& who) {
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = Read(pki_->Cert("ca"));
    if (!who.empty()) {
      ssl.pem_private_key = Read(pki_->Key(who));
      ssl.pem_cert_chain = Read(pki_->Cert(who));
    }
    const std::string port = server.listening_on().substr(server.listening_on().rfind(':') + 1);
    // An IP literal: "localhost" would go through c-ares, whose allocations LeakSanitizer flags.
    return grpc::CreateChannel("127.0.0.1:" + port, grpc::SslCredentials(ssl));
  }
  std::unique_ptr<v1::SocketService::Stub> Connect(const Server& server, const std::string& who) {
    return v1::SocketService::NewStub(Channel(server, who));
  }

  // A session of `client`, and an IPv4 socket opened in it.
  void OpenInNewSession(v1::SocketService::Stub& client, v1::CreateSessionResponse& session,
                        v1::OpenResponse& opened) {
    grpc::ClientContext create;
    ASSERT_TRUE(client.CreateSession(&create, v1::CreateSessionRequest(), &session).ok());
    grpc::ClientContext open_ctx;
    open_ctx.AddMetadata(kSessionHeader, session.session());
    v1::OpenRequest open;
    open.set_family(v1::FAMILY_IPV4);
    ASSERT_TRUE(client.Open(&open_ctx, open, &opened).ok());
  }

  static const quadsock::testing::TestPki* pki_;  // clients/testing's throwaway PKI
  std::unique_ptr<link::MemoryLink::TestEnd> wire_;
  std::unique_ptr<stack::Stack> stack_;
};
const quadsock::testing::TestPki* TlsTest::pki_ = nullptr;

TEST_F(TlsTest, TcpWithoutTlsIsRefused) {
  ServerOptions o;
  o.listen = "127.0.0.1:0";
  EXPECT_EQ(Server::Start(o, *stack_).status().code(), absl::StatusCode::kFailedPrecondition);
  o.tls_cert = "/nonexistent.pem";
  o.tls_key = "/nonexistent.key";
  EXPECT_EQ(Server::Start(o, *stack_).status().code(), absl::StatusCode::kFailedPrecondition);
  o.listen = "no-port-here";
  EXPECT_EQ(Server::Start(o, *stack_).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(TlsTest, MutualTlsTiesSessionsToTheCertificate) {
  absl::StatusOr<std::unique_ptr<Server>> server = Server::Start(Tls(true), *stack_);
  ASSERT_TRUE(server.ok()) << server.status();
  auto alice = Connect(**server, "alice");
  v1::CreateSessionResponse session;
  v1::OpenResponse opened;
  ASSERT_NO_FATAL_FAILURE(OpenInNewSession(*alice, session, opened));

  // Bob has a valid certificate, and Alice's token: not enough.
  auto bob = Connect(**server, "bob");
  grpc::ClientContext c3;
  c3.AddMetadata(kSessionHeader, session.session());
  v1::KeepAliveResponse ka;
  EXPECT_EQ(bob->KeepAlive(&c3, v1::KeepAliveRequest(), &ka).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);

  // No certificate: no connection at all.
  auto anonymous = Connect(**server, "");
  grpc::ClientContext c4;
  c4.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(3));
  v1::CreateSessionResponse none;
  EXPECT_EQ(anonymous->CreateSession(&c4, v1::CreateSessionRequest(), &none).error_code(),
            grpc::StatusCode::UNAVAILABLE);
  (*server)->Shutdown(absl::Seconds(1));
}

// An identity in admin_identities may change the neighbour table on the ordinary listener
// (in a session, like any call there); another identity may not, and is told who it is.
TEST_F(TlsTest, AdministratorsByIdentityMayChangeNeighbours) {
  ServerOptions o = Tls(true);
  o.admin_identities = {"CN=alice"};
  absl::StatusOr<std::unique_ptr<Server>> server = Server::Start(o, *stack_);
  ASSERT_TRUE(server.ok()) << server.status();
  const auto set_neighbor = [&](const std::string& who, bool with_session) {
    std::shared_ptr<grpc::Channel> channel = Channel(**server, who);
    std::string session;
    if (with_session) {
      grpc::ClientContext ctx;
      v1::CreateSessionResponse created;
      EXPECT_TRUE(v1::SocketService::NewStub(channel)
                      ->CreateSession(&ctx, v1::CreateSessionRequest(), &created)
                      .ok());
      session = created.session();
    }
    grpc::ClientContext ctx;
    if (!session.empty()) ctx.AddMetadata(kSessionHeader, session);
    v1::SetNeighborRequest req;
    req.set_address("10.1.0.9");
    req.set_mac("02:00:00:00:00:99");
    v1::SetNeighborResponse resp;
    return v1::AdminService::NewStub(channel)->SetNeighbor(&ctx, req, &resp);
  };
  const grpc::Status bob = set_neighbor("bob", true);
  EXPECT_EQ(bob.error_code(), grpc::StatusCode::PERMISSION_DENIED) << bob.error_message();
  EXPECT_NE(bob.error_message().find("the caller is \"CN=bob\""), std::string::npos)
      << bob.error_message();
  EXPECT_TRUE(stack_->Neighbors().empty());
  EXPECT_EQ(set_neighbor("alice", false).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  const grpc::Status alice = set_neighbor("alice", true);
  EXPECT_TRUE(alice.ok()) << alice.error_message();
  EXPECT_EQ(stack_->Neighbors().size(), 1u);
  (*server)->Shutdown(absl::Seconds(1));
}

TEST_F(TlsTest, ServerOnlyTlsServesAnyClient) {
  absl::StatusOr<std::unique_ptr<Server>> server = Server::Start(Tls(false), *stack_);
  ASSERT_TRUE(server.ok()) << server.status();
  auto client = Connect(**server, "");
  grpc::ClientContext ctx;
  v1::CreateSessionResponse session;
  EXPECT_TRUE(client->CreateSession(&ctx, v1::CreateSessionRequest(), &session).ok());
  (*server)->Shutdown(absl::Seconds(1));
}

// Over TLS too, every frame the stack used (here: an ARP request for a datagram's peer) is back
// where it belongs: AdminService's frame accounting check, asked over the TLS listener.
TEST_F(TlsTest, FrameAccountingHoldsAfterTlsTraffic) {
  absl::StatusOr<std::unique_ptr<Server>> server = Server::Start(Tls(true), *stack_);
  ASSERT_TRUE(server.ok()) << server.status();
  auto alice = Connect(**server, "alice");
  v1::CreateSessionResponse session;
  v1::OpenResponse opened;
  ASSERT_NO_FATAL_FAILURE(OpenInNewSession(*alice, session, opened));
  grpc::ClientContext c3;
  c3.AddMetadata(kSessionHeader, session.session());
  v1::SendRequest send;
  send.set_socket(opened.socket());
  send.set_payload("over tls");
  send.mutable_destination()->set_address("10.1.0.1");
  send.mutable_destination()->set_port(9);
  v1::SendResponse sent;
  grpc::Status s = alice->Send(&c3, send, &sent);
  ASSERT_TRUE(s.ok()) << s.error_message();
  stack_->PollOnce();
  EXPECT_FALSE(wire_->TakeSent().empty()) << "no frame left the stack";

  grpc::ClientContext c4;
  c4.AddMetadata(kSessionHeader, session.session());
  v1::CheckFrameAccountingResponse frames;
  s = v1::AdminService::NewStub(Channel(**server, "alice"))
          ->CheckFrameAccounting(&c4, v1::CheckFrameAccountingRequest(), &frames);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_TRUE(frames.ok());
  (*server)->Shutdown(absl::Seconds(1));
}

// Per-peer limits: one mTLS identity may hold only max_sessions_per_peer sessions and
// max_streams_per_peer streams over all its sessions, so that it cannot take every session and
// every server thread; another identity is not held back by it.
class PeerLimitTest : public TlsTest {
 protected:
  // A session of `client`: its token, or "" with `code` when refused.
  std::string NewSession(v1::SocketService::Stub& client, grpc::StatusCode code = grpc::StatusCode::OK,
                         const std::string& flag = "") {
    grpc::ClientContext ctx;
    v1::CreateSessionResponse session;
    const grpc::Status s = client.CreateSession(&ctx, v1::CreateSessionRequest(), &session);
    EXPECT_EQ(s.error_code(), code) << s.error_message();
    EXPECT_NE(s.error_message().find(flag), std::string::npos) << s.error_message();
    return session.session();
  }
  // A Session stream of `token`: open (its first event read), or refused with `code`.
  struct Held {
    grpc::ClientContext ctx;
    std::unique_ptr<grpc::ClientReader<v1::SessionEvent>> stream;
  };
  std::unique_ptr<Held> Hold(v1::SocketService::Stub& client, const std::string& token,
                             grpc::StatusCode code = grpc::StatusCode::OK,
                             const std::string& flag = "") {
    auto held = std::make_unique<Held>();
    held->ctx.AddMetadata(kSessionHeader, token);
    held->ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    held->stream = client.Session(&held->ctx, v1::SessionRequest());
    v1::SessionEvent hello;
    if (code == grpc::StatusCode::OK) {
      EXPECT_TRUE(held->stream->Read(&hello));
      return held;
    }
    EXPECT_FALSE(held->stream->Read(&hello));
    const grpc::Status s = held->stream->Finish();
    EXPECT_EQ(s.error_code(), code) << s.error_message();
    EXPECT_NE(s.error_message().find(flag), std::string::npos) << s.error_message();
    return nullptr;
  }
  // Opens a socket in session `token`: the call's code (its message names `flag`).
  grpc::StatusCode OpenSocket(v1::SocketService::Stub& client, const std::string& token,
                              const std::string& flag = "") {
    grpc::ClientContext ctx;
    ctx.AddMetadata(kSessionHeader, token);
    v1::OpenRequest open;
    open.set_family(v1::FAMILY_IPV4);
    v1::OpenResponse opened;
    const grpc::Status s = client.Open(&ctx, open, &opened);
    EXPECT_NE(s.error_message().find(flag), std::string::npos) << s.error_message();
    return s.error_code();
  }
  void Release(std::unique_ptr<Held> held) {
    held->ctx.TryCancel();
    held->stream->Finish();
  }
};

TEST_F(PeerLimitTest, OneIdentityCannotTakeEverySessionOrStream) {
  ServerOptions o = Tls(true);
  o.sessions.max_sessions = 8;
  o.sessions.max_sessions_per_peer = 2;
  o.sessions.max_streams_per_peer = 3;
  o.sessions.max_sockets_per_peer = 3;
  absl::StatusOr<std::unique_ptr<Server>> server = Server::Start(o, *stack_);
  ASSERT_TRUE(server.ok()) << server.status();
  auto alice = Connect(**server, "alice");
  auto bob = Connect(**server, "bob");
  const std::string a1 = NewSession(*alice);
  const std::string a2 = NewSession(*alice);
  NewSession(*alice, grpc::StatusCode::RESOURCE_EXHAUSTED, "--max_sessions_per_peer");
  const std::string b1 = NewSession(*bob);  // Alice's sessions are hers alone
  // Streams count over all of Alice's sessions.
  std::vector<std::unique_ptr<Held>> held;
  held.push_back(Hold(*alice, a1));
  held.push_back(Hold(*alice, a2));
  held.push_back(Hold(*alice, a2));
  Hold(*alice, a1, grpc::StatusCode::RESOURCE_EXHAUSTED, "--max_streams_per_peer");
  held.push_back(Hold(*bob, b1));
  // Sockets count over all of Alice's sessions too.
  EXPECT_EQ(OpenSocket(*alice, a1), grpc::StatusCode::OK);
  EXPECT_EQ(OpenSocket(*alice, a2), grpc::StatusCode::OK);
  EXPECT_EQ(OpenSocket(*alice, a2), grpc::StatusCode::OK);
  EXPECT_EQ(OpenSocket(*alice, a1, "--max_sockets_per_peer"), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(OpenSocket(*bob, b1), grpc::StatusCode::OK);
  // A stream that ends gives its place back.
  Release(std::move(held[2]));
  held.push_back(Hold(*alice, a1));
  // So does a session that ends, with its streams (once the server has seen the stream end).
  Release(std::move(held[1]));
  grpc::Status created;
  for (const absl::Time deadline = absl::Now() + absl::Seconds(10);;) {
    grpc::ClientContext ctx;
    v1::CreateSessionResponse session;
    created = alice->CreateSession(&ctx, v1::CreateSessionRequest(), &session);
    if (created.ok() || absl::Now() > deadline) break;
    absl::SleepFor(absl::Milliseconds(20));
  }
  EXPECT_TRUE(created.ok()) << created.error_message();
  EXPECT_EQ(OpenSocket(*alice, a1), grpc::StatusCode::OK);  // a2's two sockets went with it
  for (auto& h : held) {
    if (h != nullptr) Release(std::move(h));
  }
  (*server)->Shutdown(absl::Seconds(1));
}

// Without client certificates a peer is the client's host: two clients on 127.0.0.1 share it.
TEST_F(PeerLimitTest, WithoutMutualTlsAPeerIsItsHost) {
  ServerOptions o = Tls(false);
  o.sessions.max_sessions_per_peer = 1;
  absl::StatusOr<std::unique_ptr<Server>> server = Server::Start(o, *stack_);
  ASSERT_TRUE(server.ok()) << server.status();
  auto first = Connect(**server, "");
  auto second = Connect(**server, "");
  NewSession(*first);
  NewSession(*second, grpc::StatusCode::RESOURCE_EXHAUSTED, "client ipv4:127.0.0.1 has");
  (*server)->Shutdown(absl::Seconds(1));
}

}  // namespace
}  // namespace quadsock::service
