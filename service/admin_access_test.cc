// Who may change the neighbour table: on the ordinary listener nobody (PERMISSION_DENIED, with
// a message that names the administration listener), unless the caller's mTLS identity is an
// administrator's (tls_test); on the administration listener, a Unix socket of mode 0600, any
// caller, without a session, even when clients hold every session there is.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <string>

#include "common/protocol.h"
#include "service/testing/service_fixture.h"

namespace quadsock::service {
namespace {

// An AdminService call on `stub`, in `session` ("": none); the response is `*response`, if given.
template <typename Request, typename Response>
grpc::Status AdminCall(grpc::Status (v1::AdminService::Stub::*method)(ClientContext*,
                                                                     const Request&, Response*),
                       v1::AdminService::Stub& stub, const std::string& session,
                       const Request& request, Response* response = nullptr) {
  ClientContext ctx;
  if (!session.empty()) ctx.AddMetadata(kSessionHeader, session);
  Response ignored;
  return (stub.*method)(&ctx, request, response != nullptr ? response : &ignored);
}

grpc::Status SetNeighbor(v1::AdminService::Stub& stub, const std::string& session,
                         const std::string& address) {
  v1::SetNeighborRequest req;
  req.set_address(address);
  req.set_mac("02:00:00:00:00:99");
  return AdminCall(&v1::AdminService::Stub::SetNeighbor, stub, session, req);
}

grpc::Status RemoveNeighbor(v1::AdminService::Stub& stub, const std::string& session,
                            const std::string& address) {
  v1::RemoveNeighborRequest req;
  req.set_address(address);
  return AdminCall(&v1::AdminService::Stub::RemoveNeighbor, stub, session, req);
}

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

using AdminAccessTest = ServiceTest;

TEST_F(AdminAccessTest, TheOrdinaryListenerRefusesNeighbourChanges) {
  // Without a session, as every call there: UNAUTHENTICATED, before any question of identity.
  EXPECT_EQ(SetNeighbor(*admin_, "", "10.1.0.9").error_code(), StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(RemoveNeighbor(*admin_, "", "10.1.0.9").error_code(), StatusCode::UNAUTHENTICATED);
  const grpc::Status set = SetNeighbor(*admin_, session_, "10.1.0.9");
  EXPECT_EQ(set.error_code(), StatusCode::PERMISSION_DENIED) << set.error_message();
  EXPECT_TRUE(Contains(set.error_message(), "SetNeighbor")) << set.error_message();
  EXPECT_TRUE(Contains(set.error_message(), server_->admin_listening_on()))
      << set.error_message();
  EXPECT_TRUE(Contains(set.error_message(), "quadctl --admin")) << set.error_message();
  EXPECT_TRUE(Contains(set.error_message(), "--admin_identities")) << set.error_message();
  EXPECT_TRUE(Contains(set.error_message(), "no mTLS identity")) << set.error_message();
  EXPECT_EQ(RemoveNeighbor(*admin_, session_, "10.1.0.9").error_code(),
            StatusCode::PERMISSION_DENIED);
  EXPECT_TRUE(stack_->Neighbors().empty()) << "a refused change changed the table";
  // What the administration listener set, the ordinary one cannot remove.
  ASSERT_TRUE(SetNeighbor(*administration_, "", "10.1.0.9").ok());
  EXPECT_EQ(RemoveNeighbor(*admin_, session_, "10.1.0.9").error_code(),
            StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(stack_->Neighbors().size(), 1u);
}

TEST_F(AdminAccessTest, ReadingStaysOpenToSessionsOnTheOrdinaryListener) {
  ASSERT_TRUE(SetNeighbor(*administration_, "", "10.1.0.9").ok());
  v1::ListNeighborsResponse neighbors;
  ASSERT_TRUE(AdminCall(&v1::AdminService::Stub::ListNeighbors, *admin_, session_,
                        v1::ListNeighborsRequest(), &neighbors)
                  .ok());
  ASSERT_EQ(neighbors.neighbors_size(), 1);
  EXPECT_EQ(neighbors.neighbors(0).address(), "10.1.0.9");
  EXPECT_TRUE(AdminCall(&v1::AdminService::Stub::GetCounters, *admin_, session_,
                        v1::GetCountersRequest())
                  .ok());
  EXPECT_EQ(AdminCall(&v1::AdminService::Stub::GetCounters, *admin_, "",
                      v1::GetCountersRequest())
                .error_code(),
            StatusCode::UNAUTHENTICATED);
}

TEST_F(AdminAccessTest, TheAdministrationListenerNeedsNoSessionAndMayChange) {
  // Clients hold every session there is (4 here): administration goes on regardless.
  for (int i = 1; i < 4; ++i) NewSession("client");
  ASSERT_EQ(server_->sessions().size(), 4u);
  ASSERT_TRUE(SetNeighbor(*administration_, "", "10.1.0.9").ok());
  ASSERT_TRUE(SetNeighbor(*administration_, "", "fd00:1::9").ok());
  v1::ListNeighborsResponse neighbors;
  ASSERT_TRUE(AdminCall(&v1::AdminService::Stub::ListNeighbors, *administration_, "",
                        v1::ListNeighborsRequest(), &neighbors)
                  .ok());
  EXPECT_EQ(neighbors.neighbors_size(), 2);
  EXPECT_TRUE(RemoveNeighbor(*administration_, "", "10.1.0.9").ok());
  EXPECT_EQ(RemoveNeighbor(*administration_, "", "10.1.0.9").error_code(), StatusCode::NOT_FOUND);
  v1::Counters counters;
  ASSERT_TRUE(AdminCall(&v1::AdminService::Stub::GetCounters, *administration_, "",
                        v1::GetCountersRequest(), &counters)
                  .ok());
  EXPECT_EQ(counters.sessions(), 4u);
  EXPECT_EQ(server_->sessions().size(), 4u) << "administration took a session";
  // Sockets live on the ordinary listener only.
  auto sockets = v1::SocketService::NewStub(grpc::CreateChannel(
      server_->admin_listening_on(), grpc::InsecureChannelCredentials()));
  ClientContext create;
  v1::CreateSessionResponse session;
  EXPECT_EQ(sockets->CreateSession(&create, v1::CreateSessionRequest(), &session).error_code(),
            StatusCode::UNIMPLEMENTED);
}

TEST_F(AdminAccessTest, OnlyTheServersOwnUserMayConnect) {
  struct stat st;
  ASSERT_EQ(stat(server_->admin_listening_on().substr(5).c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

TEST_F(AdminAccessTest, ShutdownStopsTheAdministrationListener) {
  server_->Shutdown(absl::Seconds(1));
  ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(3));
  v1::Counters counters;
  EXPECT_EQ(administration_->GetCounters(&ctx, v1::GetCountersRequest(), &counters).error_code(),
            StatusCode::UNAVAILABLE);
}

class NoAdministrationListenerTest : public ServiceTest {
  void Configure(ServerOptions& o) override { o.admin_listen.clear(); }
};

TEST_F(NoAdministrationListenerTest, TheRefusalSaysThereIsNone) {
  EXPECT_EQ(server_->admin_listening_on(), "");
  const grpc::Status set = SetNeighbor(*admin_, session_, "10.1.0.9");
  EXPECT_EQ(set.error_code(), StatusCode::PERMISSION_DENIED);
  EXPECT_TRUE(Contains(set.error_message(), "no administration listener")) << set.error_message();
  EXPECT_TRUE(Contains(set.error_message(), "--admin_listen")) << set.error_message();
}

TEST(CheckAdminListenTest, TakesAUnixSocketOfItsOwnOrNone) {
  const std::string listen = "unix:/run/quadsock/quadsock.sock";
  EXPECT_EQ(CheckAdminListen("", listen), absl::OkStatus());
  EXPECT_EQ(CheckAdminListen("unix:/run/quadsock-admin/admin.sock", listen), absl::OkStatus());
  EXPECT_EQ(CheckAdminListen("unix:/run/quadsock-admin/admin.sock", "127.0.0.1:7000"),
            absl::OkStatus());
  for (const auto& [bad, why] : std::vector<std::pair<std::string, std::string>>{
           {"127.0.0.1:7001", "is not unix:PATH"},
           {"/run/quadsock-admin/admin.sock", "is not unix:PATH"},
           {"unix:", "bad Unix socket path"},
           {"unix:/" + std::string(120, 'a'), "bad Unix socket path"},
           {listen, "is --listen's socket"},
           {"unix:///run/quadsock/quadsock.sock", "is --listen's socket"}}) {
    const absl::Status s = CheckAdminListen(bad, listen);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_TRUE(Contains(std::string(s.message()), "--admin_listen")) << s;
    EXPECT_TRUE(Contains(std::string(s.message()), why)) << s;
  }
}

}  // namespace
}  // namespace quadsock::service
