// On the Unix listener a client is its user: quadsockd (UnixListener) reads each connection's
// SO_PEERCRED. A real server on a Unix socket, with root (this test) and another user (uid
// kOther, service/peer_client run through setpriv) as clients: the per-peer limits count per
// uid, a session's token is no use to another user (root may use any), a data channel offer is
// claimed only by the user who asked (and expires on the server's clock), the sockets are 0660,
// and an fd number that gRPC closed and something else reused names nobody. Needs root (tags:
// root, no-sandbox).
#include <fcntl.h>
#include <poll.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <future>
#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "common/protocol.h"
#include "quadsock/v1/socket.grpc.pb.h"
#include "service/server.h"
#include "service/testing/fd_limit.h"
#include "service/testing/two_stacks.h"

namespace quadsock::service {
namespace {

constexpr uid_t kOther = 65533;  // a spare uid, with a group of the same number
const std::string kOtherPeer = absl::StrCat("uid:", kOther);

// peer_client, run as kOther: its stdin (to end a "hold") and its stdout, a line per answer.
class OtherUser {
 public:
  OtherUser(const std::string& client, const std::vector<std::string>& args) {
    int in[2], out[2];
    EXPECT_EQ(pipe2(in, O_CLOEXEC), 0);
    EXPECT_EQ(pipe2(out, O_CLOEXEC), 0);
    std::vector<std::string> argv = {"setpriv", absl::StrCat("--reuid=", kOther),
                                     absl::StrCat("--regid=", kOther), "--clear-groups", client};
    argv.insert(argv.end(), args.begin(), args.end());
    std::vector<char*> c_argv;
    for (std::string& a : argv) c_argv.push_back(a.data());
    c_argv.push_back(nullptr);
    pid_ = fork();
    if (pid_ == 0) {
      dup2(in[0], 0);
      dup2(out[1], 1);
      execvp("setpriv", c_argv.data());
      _exit(127);
    }
    close(in[0]);
    close(out[1]);
    stdin_ = in[1];
    stdout_ = fdopen(out[0], "r");
  }
  ~OtherUser() {
    EndInput();
    if (pid_ > 0) waitpid(pid_, nullptr, 0);
    if (stdout_ != nullptr) fclose(stdout_);
  }
  // The next line it printed ("" at its end).
  std::string Line() {
    char buf[4096];
    if (fgets(buf, sizeof(buf), stdout_) == nullptr) return "";
    std::string line(buf);
    if (!line.empty() && line.back() == '\n') line.pop_back();
    return line;
  }
  void EndInput() {
    if (stdin_ >= 0) close(stdin_);
    stdin_ = -1;
  }
  // Every line until it exits.
  std::vector<std::string> Lines() {
    EndInput();
    std::vector<std::string> lines;
    for (std::string l = Line(); !l.empty(); l = Line()) lines.push_back(l);
    return lines;
  }

 private:
  pid_t pid_ = -1;
  int stdin_ = -1;
  FILE* stdout_ = nullptr;
};

using testing::Eventually;
using testing::FdLimit;

class UnixPeerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(geteuid(), 0u) << "needs root: it runs a client as another user";
    ServerOptions o;
    o.listen = testing::TwoStacks::UnixTarget();
    o.sessions.max_sessions_per_peer = 2;
    o.clock = [this] { return absl::Now() + clock_offset_.load() * absl::Seconds(1); };
    o.log = [this](absl::string_view line) {
      std::lock_guard<std::mutex> lock(log_mu_);
      log_.emplace_back(line);
    };
    absl::StatusOr<std::unique_ptr<testing::TwoStacks>> t = testing::TwoStacks::Start(o);
    ASSERT_TRUE(t.ok()) << t.status();
    t_ = std::move(*t);
    path_ = t_->server->listening_on().substr(5);
    // The deployment's "quadsock" group: kOther is in it, so the mode 0660 lets it in.
    ASSERT_EQ(chown(path_.c_str(), 0, kOther), 0) << std::strerror(errno);
    ASSERT_EQ(chown(t_->server->channel_path().c_str(), 0, kOther), 0) << std::strerror(errno);
    // Bazel's runfiles are under root's home, which other users cannot enter.
    char dir[] = "/tmp/unix-peer-test-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
    ASSERT_EQ(chmod(dir, 0755), 0);
    client_ = dir_ + "/peer_client";
    const std::string built = absl::StrCat(std::getenv("TEST_SRCDIR"), "/",
                                           std::getenv("TEST_WORKSPACE"), "/service/peer_client");
    std::filesystem::copy_file(built, client_);
    ASSERT_EQ(chmod(client_.c_str(), 0755), 0);
    stub_ = v1::SocketService::NewStub(
        grpc::CreateChannel(t_->server->listening_on(), grpc::InsecureChannelCredentials()));
  }
  void TearDown() override {
    if (t_ != nullptr) {
      EXPECT_EQ(t_->Stop(), absl::OkStatus());
    }
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }

  std::vector<std::string> AsOther(const std::vector<std::string>& args) {
    return OtherUser(client_, args).Lines();
  }
  // A session of root's (this process): its token, or the code's name when refused.
  grpc::Status CreateAsRoot(std::string& token) {
    grpc::ClientContext ctx;
    v1::CreateSessionResponse resp;
    grpc::Status s = stub_->CreateSession(&ctx, v1::CreateSessionRequest(), &resp);
    token = resp.session();
    return s;
  }
  grpc::StatusCode KeepAliveAsRoot(const std::string& token) {
    grpc::ClientContext ctx;
    ctx.AddMetadata(kSessionHeader, token);
    v1::KeepAliveResponse resp;
    return stub_->KeepAlive(&ctx, v1::KeepAliveRequest(), &resp).error_code();
  }
  // The side socket's answer to `token` for root (this process): "ok" or "error: ...".
  static std::string ClaimAsRoot(const v1::AttachChannelResponse& offer) {
    const int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    const timeval patience{.tv_sec = 20, .tv_usec = 0};  // an answer, or a failed test
    EXPECT_EQ(setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &patience, sizeof(patience)), 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::strncpy(a.sun_path, offer.path().c_str(), sizeof(a.sun_path) - 1);
    EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0) << std::strerror(errno);
    EXPECT_EQ(send(fd, offer.token().data(), offer.token().size(), 0),
              static_cast<ssize_t>(offer.token().size()));
    char reply[128];
    const ssize_t n = recv(fd, reply, sizeof(reply), 0);  // passed fds: closed by the kernel
    close(fd);
    return std::string(reply, n > 0 ? static_cast<size_t>(n) : 0);
  }
  v1::AttachChannelResponse OfferAsRoot() {
    std::string session;
    EXPECT_TRUE(CreateAsRoot(session).ok());
    grpc::ClientContext ctx;
    ctx.AddMetadata(kSessionHeader, session);
    v1::AttachChannelResponse offer;
    EXPECT_TRUE(stub_->AttachChannel(&ctx, v1::AttachChannelRequest(), &offer).ok());
    return offer;
  }
  std::vector<std::string> Log() {
    std::lock_guard<std::mutex> lock(log_mu_);
    return log_;
  }

  std::unique_ptr<testing::TwoStacks> t_;
  std::string path_;
  std::string dir_;
  std::string client_;
  std::unique_ptr<v1::SocketService::Stub> stub_;
  std::mutex log_mu_;
  std::vector<std::string> log_;
  std::atomic<int> clock_offset_{0};  // seconds on the server's clock (leases, offers)
};

TEST_F(UnixPeerTest, SessionLimitCountsPerUser) {
  std::string token;
  ASSERT_TRUE(CreateAsRoot(token).ok());
  ASSERT_TRUE(CreateAsRoot(token).ok());
  // Root has its two: the other user's quota is its own.
  const std::vector<std::string> lines = AsOther({"unix:" + path_, "create", "3"});
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_TRUE(absl::StartsWith(lines[0], "OK ")) << lines[0];
  EXPECT_TRUE(absl::StartsWith(lines[1], "OK ")) << lines[1];
  EXPECT_TRUE(absl::StartsWith(lines[2], "RESOURCE_EXHAUSTED")) << lines[2];
  EXPECT_TRUE(absl::StrContains(lines[2], kOtherPeer)) << lines[2];
  EXPECT_TRUE(absl::StrContains(lines[2], "--max_sessions_per_peer")) << lines[2];
  // And the other user's two take nothing from root's.
  const grpc::Status third = CreateAsRoot(token);
  EXPECT_EQ(third.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_TRUE(absl::StrContains(third.error_message(), "uid:0")) << third.error_message();
  // The log names the user.
  int by_other = 0;
  for (const std::string& l : Log()) by_other += absl::StrContains(l, "(" + kOtherPeer + ")");
  EXPECT_EQ(by_other, 2);
}

TEST_F(UnixPeerTest, TokenIsNoUseToAnotherUserButRootMayUseAny) {
  std::string root_session;
  ASSERT_TRUE(CreateAsRoot(root_session).ok());
  const std::vector<std::string> stolen = AsOther({"unix:" + path_, "keepalive", root_session});
  ASSERT_EQ(stolen.size(), 1u);
  EXPECT_TRUE(absl::StartsWith(stolen[0], "PERMISSION_DENIED")) << stolen[0];
  EXPECT_TRUE(absl::StrContains(stolen[0], "another local user")) << stolen[0];

  const std::vector<std::string> created = AsOther({"unix:" + path_, "create", "1"});
  ASSERT_EQ(created.size(), 1u);
  ASSERT_TRUE(absl::StartsWith(created[0], "OK ")) << created[0];
  const std::string other_session = created[0].substr(3);
  EXPECT_EQ(AsOther({"unix:" + path_, "keepalive", other_session}),
            std::vector<std::string>{"OK"});
  EXPECT_EQ(KeepAliveAsRoot(other_session), grpc::StatusCode::OK);  // root's is any
  EXPECT_EQ(KeepAliveAsRoot(root_session), grpc::StatusCode::OK);
}

TEST_F(UnixPeerTest, DataChannelIsClaimedOnlyByTheUserWhoAsked) {
  const v1::AttachChannelResponse offer = OfferAsRoot();
  const std::vector<std::string> claimed = AsOther({offer.path(), "claim", offer.token()});
  ASSERT_EQ(claimed.size(), 1u);
  EXPECT_TRUE(absl::StartsWith(claimed[0], "error: ")) << claimed[0];
  int refused = 0;
  for (const std::string& l : Log()) {
    refused += absl::StrContains(l, absl::StrCat("(uid ", kOther, ")")) &&
               absl::StrContains(l, "refused");
  }
  EXPECT_EQ(refused, 1);
  // The offer is still its owner's to claim.
  EXPECT_EQ(ClaimAsRoot(offer), "ok");
}

// Offers expire on the server's clock (quadsockd's: monotonic), not the wall clock.
TEST_F(UnixPeerTest, AnOfferExpiresOnTheServersClock) {
  const v1::AttachChannelResponse offer = OfferAsRoot();
  clock_offset_ = 11;  // past the offer's 10 s
  EXPECT_TRUE(absl::StartsWith(ClaimAsRoot(offer), "error: no such offer")) << "claimed";
}

// A side connection that never presents its token is closed at the claim deadline (5 s on the
// server's clock), and the side socket serves the next claim.
TEST_F(UnixPeerTest, ASideConnectionThatSaysNothingIsClosedAtTheClaimDeadline) {
  const v1::AttachChannelResponse offer = OfferAsRoot();
  const int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  ASSERT_GE(fd, 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::strncpy(a.sun_path, offer.path().c_str(), sizeof(a.sun_path) - 1);
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0) << std::strerror(errno);
  clock_offset_ = 6;  // past the deadline (of a connection accepted before this: else 5 s on)
  pollfd p{fd, POLLIN, 0};
  ASSERT_EQ(poll(&p, 1, 30'000), 1) << "still open 30 s after its deadline";
  char reply[64];
  EXPECT_EQ(recv(fd, reply, sizeof(reply), MSG_DONTWAIT), 0) << "closed without a word";
  close(fd);
  EXPECT_EQ(ClaimAsRoot(OfferAsRoot()), "ok");
}

TEST_F(UnixPeerTest, SocketsAreMode0660) {
  for (const std::string& p : {path_, t_->server->channel_path()}) {
    struct stat st;
    ASSERT_EQ(stat(p.c_str(), &st), 0) << p;
    EXPECT_TRUE(S_ISSOCK(st.st_mode)) << p;
    EXPECT_EQ(st.st_mode & 07777, 0660u) << p;
  }
}

TEST_F(UnixPeerTest, ReusedFdNumberNamesNobody) {
  const UnixListener& listener = *t_->server->unix_listener();
  OtherUser holder(client_, {"unix:" + path_, "hold"});
  ASSERT_TRUE(absl::StartsWith(holder.Line(), "OK ")) << "the session was refused";
  int fd = -1;
  for (const auto& [f, uid] : listener.Connections()) {
    if (uid == kOther) fd = f;
  }
  ASSERT_GE(fd, 0) << "no connection of uid " << kOther;
  const std::string peer = absl::StrCat("fd:", fd);
  EXPECT_EQ(listener.PeerOf(peer), kOtherPeer);
  struct stat held;
  ASSERT_EQ(fstat(fd, &held), 0);
  holder.EndInput();  // it exits: gRPC closes its connection's fd
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  struct stat now;
  while (fstat(fd, &now) == 0 && now.st_ino == held.st_ino) {
    ASSERT_LT(absl::Now(), deadline) << "gRPC kept the connection's fd " << fd;
    absl::SleepFor(absl::Milliseconds(10));
  }
  // Now the number is free, or something else of this process has it. Take it, if it is free
  // (the lowest free number comes first) with sockets of our own.
  std::vector<int> taken;
  while (fcntl(fd, F_GETFD) < 0 && taken.size() < 256) {
    taken.push_back(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  }
  ASSERT_EQ(fcntl(fd, F_GETFD) >= 0, true) << "fd " << fd << " could not be taken";
  EXPECT_EQ(listener.PeerOf(peer), std::nullopt);
  EXPECT_EQ(listener.UidOf(peer), std::nullopt);
  EXPECT_FALSE(listener.Connections().contains(fd));
  for (int t : taken) close(t);
}

// One user's bare connections to the clients' socket (300, with descriptors for 100 left) are
// closed past its share (--max_sessions_per_peer, 2 here): the other user still connects,
// creates a session and claims a data channel. Before the cap, the attacker's connections took
// every descriptor and nobody else could connect.
TEST_F(UnixPeerTest, OneUsersConnectionsLeaveTheOthersTheirs) {
  constexpr int kAttack = 300;
  const uint64_t refused_before = t_->server->admin().Collect().connections_refused();
  const UnixListener& listener = *t_->server->unix_listener();
  FdLimit limit(100);
  OtherUser attacker(client_, {path_, "connect", std::to_string(kAttack)});
  ASSERT_EQ(attacker.Line(), absl::StrCat("connected ", kAttack));
  ASSERT_TRUE(Eventually([&] { return listener.refused() >= kAttack - 2; }))
      << "refused " << listener.refused() << " of the attacker's " << kAttack;
  int others = 0;
  for (const auto& [fd, uid] : listener.Connections()) others += uid == kOther;
  EXPECT_LE(others, 2);
  // A connection of its own (no subchannel shared with stub_'s).
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  auto stub = v1::SocketService::NewStub(grpc::CreateCustomChannel(
      t_->server->listening_on(), grpc::InsecureChannelCredentials(), args));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  v1::CreateSessionResponse session;
  ASSERT_TRUE(stub->CreateSession(&ctx, v1::CreateSessionRequest(), &session).ok());
  EXPECT_EQ(ClaimAsRoot(OfferAsRoot()), "ok");
  EXPECT_GE(t_->server->admin().Collect().connections_refused() - refused_before,
            static_cast<uint64_t>(kAttack - 2));
  int logged = 0;
  for (const std::string& l : Log()) {
    logged += absl::StrContains(l, absl::StrCat("uid ", kOther, " has its maximum of 2 "
                                                "connections (--max_sessions_per_peer)"));
  }
  EXPECT_GE(logged, 1);
}

// The same on the side socket: a user's connections that never claim an offer wait at most
// kMaxUnclaimedPerUser at a time, the rest are told so and closed, and the other user's claim
// goes through.
TEST_F(UnixPeerTest, OneUsersUnclaimedSideConnectionsLeaveTheOthersTheirs) {
  constexpr int kAttack = 200;
  const ChannelBroker& broker = *t_->server->channels();
  const uint64_t refused_before = broker.refused();
  FdLimit limit(100);
  OtherUser attacker(client_, {t_->server->channel_path(), "connect-side",
                               std::to_string(kAttack)});
  ASSERT_EQ(attacker.Line(), absl::StrCat("connected ", kAttack));
  constexpr uint64_t kHeld = ChannelBroker::kMaxUnclaimedPerUser;
  ASSERT_TRUE(Eventually([&] { return broker.refused() - refused_before >= kAttack - kHeld; }))
      << "refused " << broker.refused() - refused_before << " of the attacker's " << kAttack;
  EXPECT_EQ(ClaimAsRoot(OfferAsRoot()), "ok");
}

// With no descriptor left, the side socket's accept fails: the broker says so, counts it, and
// looks again at its next tick (it spun on the readable socket before); once descriptors are
// free the waiting connection is accepted and its claim goes through.
TEST_F(UnixPeerTest, AcceptWithoutDescriptorsWaitsForTheNextTick) {
  const ChannelBroker& broker = *t_->server->channels();
  const v1::AttachChannelResponse offer = OfferAsRoot();
  const uint64_t failures_before = broker.accept_failures();
  const int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  ASSERT_GE(fd, 0);
  const timeval patience{.tv_sec = 20, .tv_usec = 0};
  ASSERT_EQ(setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &patience, sizeof(patience)), 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::strncpy(a.sun_path, offer.path().c_str(), sizeof(a.sun_path) - 1);
  {
    FdLimit limit(0);  // none to spare: the broker's accept fails
    ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0) << std::strerror(errno);
    ASSERT_TRUE(Eventually([&] { return broker.accept_failures() > failures_before; }));
    const absl::Time start = absl::Now();
    absl::SleepFor(absl::Seconds(1));
    const absl::Duration starved = absl::Now() - start;
    const uint64_t failures = broker.accept_failures() - failures_before;
    // At most one a tick (100 ms), whatever the machine's load.
    EXPECT_LE(failures, static_cast<uint64_t>(starved / absl::Milliseconds(100)) + 2)
        << failures << " failed accepts in " << starved;
  }
  // Descriptors again: the connection that waited is accepted and answered.
  ASSERT_EQ(send(fd, offer.token().data(), offer.token().size(), 0),
            static_cast<ssize_t>(offer.token().size()));
  char reply[64];
  const ssize_t n = recv(fd, reply, sizeof(reply), 0);
  close(fd);
  EXPECT_EQ(std::string(reply, n > 0 ? static_cast<size_t>(n) : 0), "ok");
  bool logged = false;
  for (const std::string& l : Log()) logged |= absl::StrContains(l, "cannot accept on");
  EXPECT_TRUE(logged);
}

// A client that passes a descriptor (SCM_RIGHTS) makes the thread that reads or closes its
// connection close that descriptor, and a close can block: peer_client's is a TCP connection
// that lingers 600 s behind a shut window. The other user passes one on the clients' socket
// (gRPC reads it), on the side socket in place of a token (the broker reads it), and on its
// attached channel's side connection just before closing it (the broker closes it). Each is
// refused in the sender (SO_PASSRIGHTS off on quadsockd's sockets), and root's session, channel
// offer and claim are answered meanwhile. Before, the broker's thread sat in the close: the
// claim was not answered while the attacker lived.
TEST_F(UnixPeerTest, ADescriptorWhoseCloseBlocksCannotBePassed) {
  const std::vector<std::vector<std::string>> attacks = {
      {path_, "pass-blocking"},
      {t_->server->channel_path(), "pass-blocking-side"},
      {"unix:" + path_, "attach-then-pass"},
  };
  for (const std::vector<std::string>& attack : attacks) {
    SCOPED_TRACE(attack[1]);
    OtherUser attacker(client_, attack);
    const std::string said = attacker.Line();
    EXPECT_TRUE(absl::StartsWith(said, "refused: ")) << said;
    EXPECT_TRUE(absl::StrContains(said, "not permitted")) << said;
    // Root's calls, on a thread of their own: while a thread of quadsockd sits in the close,
    // they may wait for it (here the server and this client share gRPC's threads).
    std::future<std::string> victim = std::async(std::launch::async, [&]() -> std::string {
      const auto patience = std::chrono::system_clock::now() + std::chrono::seconds(20);
      grpc::ClientContext create;
      create.set_deadline(patience);
      v1::CreateSessionResponse session;
      grpc::Status s = stub_->CreateSession(&create, v1::CreateSessionRequest(), &session);
      if (!s.ok()) return "CreateSession: " + s.error_message();
      grpc::ClientContext attach;
      attach.set_deadline(patience);
      attach.AddMetadata(kSessionHeader, session.session());
      v1::AttachChannelResponse offer;
      s = stub_->AttachChannel(&attach, v1::AttachChannelRequest(), &offer);
      if (!s.ok()) return "AttachChannel: " + s.error_message();
      if (const std::string claimed = ClaimAsRoot(offer); claimed != "ok") {
        return "claim: \"" + claimed + "\"";
      }
      grpc::ClientContext end;
      end.AddMetadata(kSessionHeader, session.session());
      v1::EndSessionResponse ended;
      s = stub_->EndSession(&end, v1::EndSessionRequest(), &ended);
      return s.ok() ? "" : "EndSession: " + s.error_message();
    });
    if (victim.wait_for(std::chrono::seconds(40)) != std::future_status::ready) {
      ADD_FAILURE() << "root's session, offer and claim were not answered in 40 s";
      attacker.EndInput();  // its exit resets the descriptor: the close that waits returns
    }
    EXPECT_EQ(victim.get(), "");
  }
}

}  // namespace
}  // namespace quadsock::service
