// The TCP listener: TLS is required, and with a client CA, mutual TLS ties each session to the
// client certificate's identity. Certificates are made for the test with openssl(1).
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

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
    dir_ = new std::string(std::string(getenv("TEST_TMPDIR")) + "/pki");
    const std::string d = *dir_;
    const std::string script =
        "set -e; mkdir -p " + d + "; cd " + d + ";"
        "openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 1 "
        "  -subj /CN=quadsock-test-ca 2>/dev/null;"
        "make() { openssl req -newkey rsa:2048 -nodes -keyout $1.key -out $1.csr -subj /CN=$1 "
        "  2>/dev/null; printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\\n' > $1.ext;"
        "  openssl x509 -req -in $1.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out $1.pem "
        "  -days 1 -extfile $1.ext 2>/dev/null; };"
        "make server; make alice; make bob";
    ASSERT_EQ(std::system(script.c_str()), 0) << "openssl failed";
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
    o.tls_cert = *dir_ + "/server.pem";
    o.tls_key = *dir_ + "/server.key";
    if (mutual) o.tls_client_ca = *dir_ + "/ca.pem";
    return o;
  }

  // A channel to `server` with `who`'s certificate ("": none).
  std::shared_ptr<grpc::Channel> Channel(const Server& server, const std::string& who) {
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = Read(*dir_ + "/ca.pem");
    if (!who.empty()) {
      ssl.pem_private_key = Read(*dir_ + "/" + who + ".key");
      ssl.pem_cert_chain = Read(*dir_ + "/" + who + ".pem");
    }
    const std::string port = server.listening_on().substr(server.listening_on().rfind(':') + 1);
    // An IP literal: "localhost" would go through c-ares, whose allocations LeakSanitizer flags.
    return grpc::CreateChannel("127.0.0.1:" + port, grpc::SslCredentials(ssl));
  }
  std::unique_ptr<v1::SocketService::Stub> Connect(const Server& server, const std::string& who) {
    return v1::SocketService::NewStub(Channel(server, who));
  }

  static std::string* dir_;
  std::unique_ptr<link::MemoryLink::TestEnd> wire_;
  std::unique_ptr<stack::Stack> stack_;
};
std::string* TlsTest::dir_ = nullptr;

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
  grpc::ClientContext c1;
  v1::CreateSessionResponse session;
  ASSERT_TRUE(alice->CreateSession(&c1, v1::CreateSessionRequest(), &session).ok());
  grpc::ClientContext c2;
  c2.AddMetadata(kSessionHeader, session.session());
  v1::OpenRequest open;
  open.set_family(v1::FAMILY_IPV4);
  v1::OpenResponse opened;
  ASSERT_TRUE(alice->Open(&c2, open, &opened).ok());

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

}  // namespace
}  // namespace quadsock::service

// Over TLS too, every frame the stack used (here: an ARP request for a datagram's peer) is back
// where it belongs: AdminService's frame accounting check, asked over the TLS listener.
namespace quadsock::service {
namespace {

TEST_F(TlsTest, FrameAccountingHoldsAfterTlsTraffic) {
  absl::StatusOr<std::unique_ptr<Server>> server = Server::Start(Tls(true), *stack_);
  ASSERT_TRUE(server.ok()) << server.status();
  auto alice = Connect(**server, "alice");
  grpc::ClientContext c1;
  v1::CreateSessionResponse session;
  ASSERT_TRUE(alice->CreateSession(&c1, v1::CreateSessionRequest(), &session).ok());
  grpc::ClientContext c2;
  c2.AddMetadata(kSessionHeader, session.session());
  v1::OpenRequest open;
  open.set_family(v1::FAMILY_IPV4);
  v1::OpenResponse opened;
  ASSERT_TRUE(alice->Open(&c2, open, &opened).ok());
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

}  // namespace
}  // namespace quadsock::service
