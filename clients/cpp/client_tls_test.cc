// Client::Connect over TCP: TLS against the CA given, and mTLS with a client certificate, to the
// real server on 127.0.0.1, with the test PKI of clients/testing.
#include <gtest/gtest.h>

#include "clients/cpp/client.h"
#include "clients/testing/test_pki.h"
#include "service/server.h"
#include "stack/link/memory_link.h"

namespace quadsock {
namespace {

using absl::StatusCode;

class ClientTlsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    absl::StatusOr<testing::TestPki> pki = testing::MakeTestPki();
    ASSERT_TRUE(pki.ok()) << pki.status();
    pki_ = *std::move(pki);
  }

  void SetUp() override {
    auto [link, unused_peer] = link::MemoryLink::CreatePair({.name = "mem0"}, {.name = "peer0"});
    peer_link_ = std::move(unused_peer);
    std::vector<std::unique_ptr<link::Link>> links;
    links.push_back(std::move(link));
    stack::StackOptions so;
    so.addresses = {*net::IpPrefix::Parse("10.1.0.2/24")};
    stack_ = stack::Stack::Create(so, std::move(links)).value();
  }
  void TearDown() override {
    if (server_ != nullptr) server_->Shutdown(absl::Seconds(1));
  }

  // Starts the server on an ephemeral port; returns the target "127.0.0.1:PORT" (an IP literal:
  // "localhost" would go through c-ares, whose allocations LeakSanitizer flags).
  std::string Start(bool mutual) {
    service::ServerOptions o;
    o.listen = "127.0.0.1:0";
    o.tls_cert = pki_.Cert("server");
    o.tls_key = pki_.Key("server");
    if (mutual) o.tls_client_ca = pki_.Cert("ca");
    absl::StatusOr<std::unique_ptr<service::Server>> s = service::Server::Start(o, *stack_);
    EXPECT_TRUE(s.ok()) << s.status();
    if (!s.ok()) return "";
    server_ = std::move(*s);
    server_->SetServing(true);
    const std::string& on = server_->listening_on();
    return "127.0.0.1:" + on.substr(on.rfind(':') + 1);
  }
  ClientOptions As(const std::string& who, const std::string& ca = "ca") {
    ClientOptions o;
    o.tls_ca = pki_.Cert(ca);
    if (!who.empty()) {
      o.tls_cert = pki_.Cert(who);
      o.tls_key = pki_.Key(who);
    }
    o.call_timeout = absl::Seconds(5);
    return o;
  }

  static inline testing::TestPki pki_;
  std::unique_ptr<link::Link> peer_link_;
  std::unique_ptr<stack::Stack> stack_;
  std::unique_ptr<service::Server> server_;
};

TEST_F(ClientTlsTest, TlsWithTheServersCa) {
  const std::string target = Start(/*mutual=*/false);
  absl::StatusOr<std::unique_ptr<Client>> c = Client::Connect(target, As(""));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ((*c)->Health().value(), HealthStatus::kServing);
  absl::StatusOr<RemoteSocket> s = (*c)->Open(v1::FAMILY_IPV4);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_TRUE(s->Bind({"10.1.0.2", 4000}).ok());
  // A server certificate from a CA the client does not trust: the handshake fails.
  EXPECT_EQ(Client::Connect(target, As("", "stranger")).status().code(), StatusCode::kUnavailable);
}

TEST_F(ClientTlsTest, MutualTlsTiesTheSessionToTheCertificate) {
  const std::string target = Start(/*mutual=*/true);
  EXPECT_EQ(Client::Connect(target, As("")).status().code(), StatusCode::kUnavailable);
  absl::StatusOr<std::unique_ptr<Client>> alice = Client::Connect(target, As("alice"));
  ASSERT_TRUE(alice.ok()) << alice.status();
  ASSERT_TRUE((*alice)->Open(v1::FAMILY_IPV4).ok());
  ClientOptions bob = As("bob");
  bob.session = (*alice)->session();
  EXPECT_EQ(Client::Connect(target, bob).status().code(), StatusCode::kUnauthenticated);
  ClientOptions alice_again = As("alice");
  alice_again.session = (*alice)->session();
  EXPECT_TRUE(Client::Connect(target, alice_again).ok());
}

}  // namespace
}  // namespace quadsock
