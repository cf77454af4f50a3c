// Calls of one session racing each other through the real services: every call answers a
// documented code.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "service/testing/service_fixture.h"

namespace quadsock::service {
namespace {

// EndSession while another call of the session opens sockets: every Open answers OK or
// UNAUTHENTICATED (the session is gone), never UNKNOWN, and no socket outlives the session.
TEST_F(ServiceTest, EndSessionRacingWithOpenAnswersEveryCallWithADocumentedCode) {
  for (int round = 0; round < 100; ++round) {
    const std::string session = NewSession("racing");
    std::atomic<bool> go{false};
    std::thread opener([&] {
      while (!go.load()) {
      }
      for (;;) {
        ClientContext ctx;
        Auth(ctx, session);
        v1::OpenRequest req;
        req.set_family(v1::FAMILY_IPV4);
        v1::OpenResponse resp;
        const grpc::Status st = sockets_->Open(&ctx, req, &resp);
        if (!st.ok()) {
          EXPECT_EQ(st.error_code(), StatusCode::UNAUTHENTICATED) << st.error_message();
          return;
        }
        ClientContext close_ctx;  // under the session's quota of sockets
        Auth(close_ctx, session);
        v1::CloseRequest close;
        close.set_socket(resp.socket());
        v1::CloseResponse closed;
        const grpc::Status cst = sockets_->Close(&close_ctx, close, &closed);
        EXPECT_TRUE(cst.ok() || cst.error_code() == StatusCode::UNAUTHENTICATED ||
                    cst.error_code() == StatusCode::NOT_FOUND)
            << cst.error_code() << " " << cst.error_message();
      }
    });
    go = true;
    absl::SleepFor(absl::Microseconds(round * 20));
    ClientContext ctx;
    Auth(ctx, session);
    v1::EndSessionResponse ended;
    ASSERT_TRUE(sockets_->EndSession(&ctx, v1::EndSessionRequest(), &ended).ok());
    opener.join();
    EXPECT_EQ(stack_->List().size(), 0u) << "round " << round;
  }
}

}  // namespace
}  // namespace quadsock::service
