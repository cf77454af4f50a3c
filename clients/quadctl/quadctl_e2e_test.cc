// quadctl end to end: the real quadsockd on one end of a veth pair (AF_XDP, in this process's
// private network namespace), kernel UDP sockets on the other end (a peer namespace), and every
// quadctl subcommand between them, with --json output parsed back into the API's messages.
// Needs root.
#include <arpa/inet.h>
#include <bpf/libbpf.h>
#include <net/if.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "google/protobuf/util/json_util.h"
#include "quadsock/v1/admin.pb.h"
#include "quadsock/v1/socket.pb.h"
#include "stack/testing/netns.h"

namespace quadsock {
namespace {

using testing::PeerNetwork;
using testing::Runfile;
using testing::Shell;
using testing::SockAddr;

constexpr char kLocalDev[] = "qctl0";
constexpr char kPeerDev[] = "qctl1";
constexpr char kStackV4[] = "10.8.0.2";
constexpr char kPeerV4[] = "10.8.0.1";
constexpr char kStackV6[] = "fd00:8::2";
constexpr char kPeerV6[] = "fd00:8::1";

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

struct Outcome {
  int rc = -1;
  std::string out;
  std::string err;
};

template <typename Message>
Message ParseJson(const std::string& text) {
  Message m;
  const auto s = google::protobuf::util::JsonStringToMessage(text, &m);
  EXPECT_TRUE(s.ok()) << s.ToString() << " in: " << text;
  return m;
}

// The whole suite shares one network and one quadsockd: starting them is most of the runtime.
class QuadctlTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    PeerNetwork::EnterPrivateNamespace();
    net_ = new PeerNetwork(kLocalDev, kPeerDev);
    ASSERT_EQ(PeerShell(absl::StrCat("ip addr add ", kPeerV4, "/24 dev ", kPeerDev,
                                     " && ip addr add ", kPeerV6, "/64 dev ", kPeerDev, " nodad")),
              0);

    socket_path_ = absl::StrCat("/tmp/quadctl-e2e-", getpid(), ".sock");
    admin_path_ = absl::StrCat("/tmp/quadctl-e2e-", getpid(), "-admin.sock");
    const char* tmp = std::getenv("TEST_TMPDIR");
    log_path_ = absl::StrCat(tmp ? tmp : "/tmp", "/quadsockd.log");
    setenv("QUADSOCK_TARGET", ("unix:" + socket_path_).c_str(), 1);
    setenv("QUADSOCK_ADMIN_TARGET", ("unix:" + admin_path_).c_str(), 1);
    unsetenv("QUADSOCK_SESSION");
    const std::string daemon = Runfile("service/quadsockd");
    const std::vector<std::string> args = {
        daemon, absl::StrCat("--interface=", kLocalDev),
        absl::StrCat("--address=", kStackV4, "/24,", kStackV6, "/64"),
        "--listen=unix:" + socket_path_, "--admin_listen=unix:" + admin_path_,
        "--umem_frames=2048", "--ring_size=512"};
    daemon_ = fork();
    ASSERT_GE(daemon_, 0);
    if (daemon_ == 0) {
      const int fd = open(log_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      dup2(fd, STDOUT_FILENO);
      dup2(fd, STDERR_FILENO);
      std::vector<char*> argv;
      for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
    // Up when health says SERVING.
    const absl::Time deadline = absl::Now() + absl::Seconds(15);
    Outcome h;
    while (absl::Now() < deadline) {
      h = Quadctl({"health"});
      if (h.rc == 0) break;
      int status = 0;
      ASSERT_EQ(waitpid(daemon_, &status, WNOHANG), 0) << "quadsockd exited:\n" << ReadAll(log_path_);
      absl::SleepFor(absl::Milliseconds(100));
    }
    ASSERT_EQ(h.rc, 0) << h.err << "\nquadsockd log:\n" << ReadAll(log_path_);
  }

  // The end of the suite, checked: quadsockd still runs, every UMEM frame is accounted for,
  // SIGTERM ends it with 0 within 20 s, its log holds no sanitizer report, and the kernel says
  // no XDP program is left on the interface.
  static void TearDownTestSuite() {
    if (daemon_ > 0) {
      ExpectAlive("at the end of the suite");
      EXPECT_EQ(Ok({"check"}), "frame accounting ok");
      kill(daemon_, SIGTERM);
      int status = 0;
      pid_t ended = 0;
      const absl::Time deadline = absl::Now() + absl::Seconds(20);
      while ((ended = waitpid(daemon_, &status, WNOHANG)) == 0 && absl::Now() < deadline) {
        absl::SleepFor(absl::Milliseconds(20));
      }
      if (ended == 0) {
        ADD_FAILURE() << "quadsockd did not exit within 20 s of SIGTERM:\n" << ReadAll(log_path_);
        kill(daemon_, SIGKILL);
        waitpid(daemon_, &status, 0);
      } else {
        EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
            << "SIGTERM did not end quadsockd with 0 (status " << status << "):\n"
            << ReadAll(log_path_);
      }
      daemon_ = -1;
      const std::string log = ReadAll(log_path_);
      for (const char* mark : {"ERROR: AddressSanitizer", "ERROR: LeakSanitizer",
                               "WARNING: ThreadSanitizer", "runtime error:"}) {
        EXPECT_EQ(log.find(mark), std::string::npos) << "a sanitizer reported:\n" << log;
      }
      bpf_xdp_query_opts q{};
      q.sz = sizeof(q);
      const int ifindex = static_cast<int>(if_nametoindex(kLocalDev));
      ASSERT_GT(ifindex, 0) << kLocalDev << " is gone";
      ASSERT_EQ(bpf_xdp_query(ifindex, 0, &q), 0);
      EXPECT_EQ(q.prog_id, 0u) << "an XDP program outlived quadsockd";
    }
    delete net_;
    net_ = nullptr;
  }

  // quadsockd has not exited (a crash is pinned on the test it happened in).
  static void ExpectAlive(absl::string_view when) {
    int status = 0;
    EXPECT_EQ(waitpid(daemon_, &status, WNOHANG), 0)
        << "quadsockd exited " << when << " (status " << status << "):\n" << ReadAll(log_path_);
  }

  static int PeerShell(const std::string& command) { return net_->PeerShell(command, false); }

  // Runs quadctl with `args`; stdout and stderr apart (in files named after `name`: another
  // name for a quadctl that runs beside others).
  static Outcome Quadctl(const std::vector<std::string>& args,
                         const std::string& name = "quadctl") {
    const char* tmp = std::getenv("TEST_TMPDIR");
    const std::string base = absl::StrCat(tmp ? tmp : "/tmp", "/", name);
    std::string command = Runfile("clients/quadctl/quadctl");
    for (const std::string& a : args) absl::StrAppend(&command, " '", a, "'");
    Outcome r;
    r.rc = Shell(absl::StrCat(command, " >", base, ".out 2>", base, ".err"));
    r.out = ReadAll(base + ".out");
    r.err = ReadAll(base + ".err");
    return r;
  }
  // Runs quadctl, expects success, returns stdout without its last newline.
  static std::string Ok(const std::vector<std::string>& args) {
    Outcome r = Quadctl(args);
    EXPECT_EQ(r.rc, 0) << "quadctl " << absl::StrJoin(args, " ") << ":\n" << r.err;
    return std::string(absl::StripSuffix(r.out, "\n"));
  }

  // A kernel UDP socket in the peer namespace, bound, with a receive timeout.
  int PeerUdp(const char* ip, uint16_t port) {
    const int family = std::strchr(ip, ':') ? AF_INET6 : AF_INET;
    const int fd = net_->PeerSocket(family, SOCK_DGRAM);
    timeval tv{3, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    SockAddr a(ip, port);
    EXPECT_EQ(bind(fd, a.get(), a.len), 0) << std::strerror(errno);
    fds_.push_back(fd);
    return fd;
  }
  void PeerSend(int fd, const std::string& payload, const char* ip, uint16_t port) {
    SockAddr to(ip, port);
    EXPECT_EQ(sendto(fd, payload.data(), payload.size(), 0, to.get(), to.len),
              static_cast<ssize_t>(payload.size()))
        << std::strerror(errno);
  }
  std::string PeerRecv(int fd) {
    char buf[2048];
    const ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n < 0) return "error: " + std::string(std::strerror(errno));
    return std::string(buf, static_cast<size_t>(n));
  }

  void TearDown() override {
    for (int fd : fds_) close(fd);
    unsetenv("QUADSOCK_SESSION");
    ExpectAlive("during this test");
  }

  static inline PeerNetwork* net_ = nullptr;
  static inline pid_t daemon_ = -1;
  static inline std::string socket_path_;
  static inline std::string admin_path_;
  static inline std::string log_path_;
  std::vector<int> fds_;
};

TEST_F(QuadctlTest, SocketsAgainstAKernelPeer) {
  const std::string token = Ok({"session", "new", "--lease=60", "--name=e2e"});
  ASSERT_EQ(token.size(), 32u) << token;
  setenv("QUADSOCK_SESSION", token.c_str(), 1);

  const std::string s =
      ParseJson<v1::OpenResponse>(Ok({"--json", "open", "--family=4"})).socket();
  ASSERT_FALSE(s.empty());
  EXPECT_EQ(Ok({"bind", s, "0.0.0.0:4000"}), "0.0.0.0:4000");

  // Kernel -> quadsock, read back with recv --json.
  const int peer = PeerUdp(kPeerV4, 5000);
  PeerSend(peer, "ping1", kStackV4, 4000);
  const v1::Datagram d =
      ParseJson<v1::Datagram>(Ok({"recv", s, "--json", "--count=1", "--wait=5s"}));
  EXPECT_EQ(d.payload(), "ping1");
  EXPECT_EQ(d.peer().address(), kPeerV4);
  EXPECT_EQ(d.peer().port(), 5000u);
  EXPECT_EQ(d.local().address(), kStackV4);
  EXPECT_EQ(d.sequence(), 1u);
  PeerSend(peer, "ping2", kStackV4, 4000);
  const std::string line = Ok({"recv", s});
  EXPECT_TRUE(absl::StartsWith(line, "10.8.0.1:5000 -> 10.8.0.2:4000 #2 5 bytes: ping2")) << line;
  // Three queued, read one at a time: each recv takes only what it prints, the rest stay.
  for (const char* p : {"q3", "q4", "q5"}) PeerSend(peer, p, kStackV4, 4000);
  absl::SleepFor(absl::Milliseconds(200));  // all three in the socket's queue
  for (const char* p : {"q3", "q4", "q5"}) {
    EXPECT_EQ(ParseJson<v1::Datagram>(Ok({"--json", "recv", s, "--wait=2s"})).payload(), p);
  }

  // quadsock -> kernel: unconnected, connected, a batch.
  EXPECT_EQ(Ok({"send", s, "--to=10.8.0.1:5000", "hello"}), "queued 1");
  EXPECT_EQ(PeerRecv(peer), "hello");
  EXPECT_EQ(Ok({"connect", s, "10.8.0.1:5000"}), "10.8.0.2:4000");
  EXPECT_EQ(Ok({"send", s, "a", "b", "c"}), "queued 3");
  for (const char* p : {"a", "b", "c"}) EXPECT_EQ(PeerRecv(peer), p);
  EXPECT_EQ(ParseJson<v1::SendBatchResponse>(Ok({"--json", "send", s, "--hex", "6869"})).queued(),
            1u);
  EXPECT_EQ(PeerRecv(peer), "hi");
  // A batch that fails part-way says how much of it went: a retry sends only the rest.
  const Outcome partial = Quadctl({"send", s, "ok", std::string(65508, 'x')});  // too big
  EXPECT_EQ(partial.rc, 1);
  EXPECT_NE(partial.err.find("(1 of 2 datagrams queued before it)"), std::string::npos)
      << partial.err;
  EXPECT_EQ(PeerRecv(peer), "ok");

  v1::Socket info = ParseJson<v1::Socket>(Ok({"get", s, "--json"}));
  EXPECT_EQ(info.state(), v1::SOCKET_STATE_CONNECTED);
  EXPECT_TRUE(info.in_hash4());
  EXPECT_EQ(info.peer().port(), 5000u);
  EXPECT_EQ(info.counters().tx_datagrams(), 6u);
  EXPECT_EQ(info.counters().rx_datagrams(), 5u);
  const std::string table = Ok({"get", s});
  EXPECT_NE(table.find("counters.tx_datagrams"), std::string::npos) << table;

  // Rehash live: the kernel's datagrams to the new port arrive.
  EXPECT_EQ(Ok({"rehash", s, "--port=4001"}), "10.8.0.2:4001");
  PeerSend(peer, "moved", kStackV4, 4001);
  EXPECT_EQ(ParseJson<v1::Datagram>(Ok({"--json", "recv", s})).payload(), "moved");
  EXPECT_EQ(Ok({"disconnect", s}), "");
  EXPECT_EQ(ParseJson<v1::Socket>(Ok({"--json", "get", s})).state(), v1::SOCKET_STATE_BOUND);

  // IPv6.
  const std::string s6 = Ok({"open", "--family=6"});
  EXPECT_EQ(Ok({"bind", s6, "[fd00:8::2]:4100"}), "[fd00:8::2]:4100");
  const int peer6 = PeerUdp(kPeerV6, 5100);
  PeerSend(peer6, "six", kStackV6, 4100);
  const v1::Datagram d6 = ParseJson<v1::Datagram>(Ok({"--json", "recv", s6}));
  EXPECT_EQ(d6.payload(), "six");
  EXPECT_EQ(d6.peer().address(), kPeerV6);
  EXPECT_EQ(Ok({"send", s6, "--to=[fd00:8::1]:5100", "back"}), "queued 1");
  EXPECT_EQ(PeerRecv(peer6), "back");

  const v1::ListResponse list = ParseJson<v1::ListResponse>(Ok({"list", "--json"}));
  EXPECT_EQ(list.sockets_size(), 2);
  EXPECT_EQ(ParseJson<v1::ListResponse>(Ok({"list", "--json", "--port=4100"})).sockets_size(), 1);
  const std::string human = Ok({"list", "--state=bound"});
  EXPECT_NE(human.find(s6), std::string::npos) << human;
  EXPECT_NE(human.find("[fd00:8::2]:4100"), std::string::npos) << human;

  // Errors carry the gRPC code and the server's message; exit status 1.
  // recv waits for its --wait; the global --timeout (each call's deadline) does not shorten it.
  const absl::Time recv_start = absl::Now();
  Outcome r = Quadctl({"--timeout=100ms", "recv", s6, "--wait=1s"});
  EXPECT_GE(absl::Now() - recv_start, absl::Seconds(1));
  EXPECT_EQ(r.rc, 1);
  EXPECT_TRUE(absl::StartsWith(r.err, "quadctl: DEADLINE_EXCEEDED: ")) << r.err;
  const std::string s2 = Ok({"open"});
  r = Quadctl({"bind", s2, "10.8.0.2:4001"});  // s has it
  EXPECT_EQ(r.rc, 1);
  EXPECT_TRUE(absl::StartsWith(r.err, "quadctl: ALREADY_EXISTS: ")) << r.err;
  r = Quadctl({"send", s6, "nowhere"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_TRUE(absl::StartsWith(r.err, "quadctl: FAILED_PRECONDITION: ")) << r.err;
  EXPECT_EQ(Ok({"close", s}), "");
  r = Quadctl({"get", s});
  EXPECT_EQ(r.rc, 1);
  EXPECT_TRUE(absl::StartsWith(r.err, "quadctl: NOT_FOUND: ")) << r.err;

  EXPECT_EQ(Ok({"session", "keepalive"}), "");
  EXPECT_EQ(ParseJson<v1::EndSessionResponse>(Ok({"--json", "session", "end"})).sockets_closed(),
            2u);  // s6 and s2
  r = Quadctl({"list"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_TRUE(absl::StartsWith(r.err, "quadctl: UNAUTHENTICATED: ")) << r.err;
}

// quadctl watch: every socket of the session at once, on one StreamChannel stream.
TEST_F(QuadctlTest, WatchPrintsTheDatagramsOfEverySocketAtOnce) {
  setenv("QUADSOCK_SESSION", Ok({"session", "new", "--lease=60"}).c_str(), 1);
  std::vector<v1::OpenResponse> socks;
  for (int i = 0; i < 3; ++i) {
    socks.push_back(ParseJson<v1::OpenResponse>(Ok({"--json", "open"})));
    ASSERT_EQ(Ok({"bind", socks.back().socket(), absl::StrCat(kStackV4, ":", 4200 + i)}),
              absl::StrCat(kStackV4, ":", 4200 + i));
  }
  auto on_channel = [](const v1::OpenResponse& s) {
    return ParseJson<v1::Socket>(Ok({"--json", "get", s.socket()})).on_channel();
  };
  // Until every socket in `which` is on the channel (or, with false, off it again).
  auto wait_for = [&](const std::vector<v1::OpenResponse>& which, bool on) {
    const absl::Time deadline = absl::Now() + absl::Seconds(10);
    auto done = [&] {
      return std::all_of(which.begin(), which.end(),
                         [&](const v1::OpenResponse& s) { return on_channel(s) == on; });
    };
    while (!done() && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(20));
    return done();
  };
  const int peer = PeerUdp(kPeerV4, 5200);

  // Every socket (none named), --json: two datagrams each, six in all, on one stream.
  Outcome watched;
  std::thread watch([&] {
    watched = Quadctl({"--json", "watch", "--count=6", "--wait=20s"}, "watch");
  });
  ASSERT_TRUE(wait_for(socks, true));
  for (int round = 0; round < 2; ++round) {
    for (int i = 0; i < 3; ++i) PeerSend(peer, absl::StrCat(i, ".", round), kStackV4, 4200 + i);
  }
  watch.join();
  ASSERT_EQ(watched.rc, 0) << watched.err;
  std::vector<std::string> lines =
      absl::StrSplit(absl::StripSuffix(watched.out, "\n"), '\n');
  ASSERT_EQ(lines.size(), 6u) << watched.out;
  std::map<uint32_t, std::vector<std::string>> by_socket;
  for (const std::string& line : lines) {
    const v1::ChannelDatagram d = ParseJson<v1::ChannelDatagram>(line);
    EXPECT_EQ(d.peer().address(), kPeerV4);
    EXPECT_EQ(d.local().port(), 4200 + (d.payload()[0] - '0'));
    by_socket[d.socket()].push_back(d.payload());
  }
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(by_socket[socks[i].index()],
              (std::vector<std::string>{absl::StrCat(i, ".0"), absl::StrCat(i, ".1")}))
        << watched.out;
  }
  // The watch ended its stream: the sockets are off the channel.
  ASSERT_TRUE(wait_for(socks, false));

  // One socket named, for people: only it is on the channel.
  std::thread one([&] {
    watched = Quadctl({"watch", socks[1].socket(), "--count=1", "--wait=20s"}, "watch");
  });
  ASSERT_TRUE(wait_for({socks[1]}, true));
  EXPECT_FALSE(on_channel(socks[0]));
  PeerSend(peer, "only", kStackV4, 4201);
  one.join();
  ASSERT_EQ(watched.rc, 0) << watched.err;
  EXPECT_EQ(watched.out,
            absl::StrCat("socket ", socks[1].index(), ": 10.8.0.1:5200 -> 10.8.0.2:4201 #3 4 ",
                         "bytes: only\n"));
  ASSERT_TRUE(wait_for(socks, false));

  // --wait alone: watches that long, then ends well; with a --count that did not come, fails.
  const absl::Time start = absl::Now();
  EXPECT_EQ(Ok({"watch", "--wait=1s"}), "");
  EXPECT_GE(absl::Now() - start, absl::Seconds(1));
  ASSERT_TRUE(wait_for(socks, false));
  Outcome r = Quadctl({"watch", "--count=1", "--wait=1s"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_TRUE(absl::StartsWith(r.err, "quadctl: DEADLINE_EXCEEDED: received 0 of 1")) << r.err;
  ASSERT_TRUE(wait_for(socks, false));

  // Another session's socket: refused.
  const std::string other = Ok({"session", "new", "--lease=60"});
  r = Quadctl({"watch", "--session=" + other, socks[0].socket(), "--wait=5s"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_TRUE(absl::StartsWith(r.err, "quadctl: PERMISSION_DENIED: ")) << r.err;

  // The session's end ends the watch: NOT_FOUND.
  std::thread ending([&] { watched = Quadctl({"watch", "--wait=20s"}, "watch"); });
  ASSERT_TRUE(wait_for(socks, true));
  Ok({"session", "end"});
  ending.join();
  EXPECT_EQ(watched.rc, 1);
  EXPECT_TRUE(absl::StartsWith(watched.err, "quadctl: NOT_FOUND: ")) << watched.err;
  Ok({"session", "end", "--session=" + other});
}

// quadctl watch --shm --echo: the session's data channel in shared memory, each datagram
// answered through it (the application container of docker/README.md).
TEST_F(QuadctlTest, WatchOverSharedMemoryAnswersThroughTheChannel) {
  setenv("QUADSOCK_SESSION", Ok({"session", "new", "--lease=60"}).c_str(), 1);
  const v1::OpenResponse s = ParseJson<v1::OpenResponse>(Ok({"--json", "open"}));
  ASSERT_EQ(Ok({"bind", s.socket(), absl::StrCat(kStackV4, ":4300")}),
            absl::StrCat(kStackV4, ":4300"));
  Outcome watched;
  std::thread watch([&] {
    watched = Quadctl({"--json", "watch", "--shm", "--echo", "--count=2", "--wait=20s"}, "watch");
  });
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  bool on = false;
  while (!(on = ParseJson<v1::Socket>(Ok({"--json", "get", s.socket()})).on_channel()) &&
         absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  EXPECT_TRUE(on);
  const int peer = PeerUdp(kPeerV4, 5300);
  for (const char* p : {"one", "two"}) {
    PeerSend(peer, p, kStackV4, 4300);
    EXPECT_EQ(PeerRecv(peer), p);  // the answer, from the socket's address
  }
  watch.join();
  ASSERT_EQ(watched.rc, 0) << watched.err;
  EXPECT_EQ(watched.err, "quadctl: attached the data channel over shared memory\n");
  std::vector<std::string> lines = absl::StrSplit(absl::StripSuffix(watched.out, "\n"), '\n');
  ASSERT_EQ(lines.size(), 2u) << watched.out;
  for (size_t i = 0; i < lines.size(); ++i) {
    const v1::ChannelDatagram d = ParseJson<v1::ChannelDatagram>(lines[i]);
    EXPECT_EQ(d.socket(), s.index());
    EXPECT_EQ(d.payload(), i == 0 ? "one" : "two");
    EXPECT_EQ(d.peer().address(), kPeerV4);
    EXPECT_EQ(d.peer().port(), 5300u);
    EXPECT_EQ(d.local().port(), 4300u);
  }
  const v1::Socket after = ParseJson<v1::Socket>(Ok({"--json", "get", s.socket()}));
  EXPECT_EQ(after.counters().tx_datagrams(), 2u);

  Outcome r = Quadctl({"watch", "--echo"});
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("--echo needs --shm"), std::string::npos) << r.err;
  Ok({"session", "end"});
}

TEST_F(QuadctlTest, AdministrationAndHealth) {
  EXPECT_EQ(Ok({"health"}), "SERVING");
  EXPECT_EQ(Ok({"health", "--json", "--service=quadsock.v1.SocketService"}),
            "{\"status\":\"SERVING\"}");
  Outcome r = Quadctl({"health", "--service=no.such.Service"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_TRUE(absl::StartsWith(r.err, "quadctl: NOT_FOUND: ")) << r.err;

  const v1::ListAddressesResponse addrs =
      ParseJson<v1::ListAddressesResponse>(Ok({"addr", "--json"}));
  ASSERT_EQ(addrs.prefixes_size(), 2);
  EXPECT_EQ(addrs.prefixes(0), "10.8.0.2/24");
  EXPECT_EQ(addrs.prefixes(1), "fd00:8::2/64");
  EXPECT_EQ(Ok({"addr"}), "10.8.0.2/24\nfd00:8::2/64");

  const v1::ListInterfacesResponse ifs =
      ParseJson<v1::ListInterfacesResponse>(Ok({"iface", "--json"}));
  ASSERT_EQ(ifs.interfaces_size(), 1);
  EXPECT_EQ(ifs.interfaces(0).name(), kLocalDev);
  EXPECT_TRUE(ifs.interfaces(0).xdp_mode() == "native" || ifs.interfaces(0).xdp_mode() == "generic")
      << ifs.interfaces(0).xdp_mode();
  EXPECT_GE(ifs.interfaces(0).queues_size(), 1);
  const std::string iface_table = Ok({"iface"});
  EXPECT_NE(iface_table.find(kLocalDev), std::string::npos);
  EXPECT_NE(iface_table.find("BUSY_POLLS"), std::string::npos) << iface_table;
  EXPECT_NE(iface_table.find(" off"), std::string::npos) << iface_table;  // not asked for

  const v1::ListRoutesResponse routes = ParseJson<v1::ListRoutesResponse>(Ok({"route", "--json"}));
  EXPECT_GE(routes.routes_size(), 2);
  EXPECT_NE(Ok({"route"}).find("connected"), std::string::npos);

  // Neighbours: set and delete on the administration listener only; list on both.
  r = Quadctl({"neigh", "set", "10.8.0.77", "02:00:00:00:00:77"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_TRUE(absl::StartsWith(r.err, "quadctl: PERMISSION_DENIED: ")) << r.err;
  EXPECT_NE(r.err.find("unix:" + admin_path_ + " (quadctl --admin)"), std::string::npos) << r.err;
  EXPECT_EQ(Ok({"--admin", "neigh", "set", "10.8.0.77", "02:00:00:00:00:77"}), "");
  v1::ListNeighborsResponse n = ParseJson<v1::ListNeighborsResponse>(Ok({"neigh", "--json"}));
  bool found = false;
  for (const v1::Neighbor& x : n.neighbors()) {
    if (x.address() == "10.8.0.77") {
      found = true;
      EXPECT_EQ(x.mac(), "02:00:00:00:00:77");
      EXPECT_EQ(x.state(), "permanent");
    }
  }
  EXPECT_TRUE(found) << n.DebugString();
  EXPECT_NE(Ok({"neigh", "list"}).find("02:00:00:00:00:77"), std::string::npos);
  EXPECT_NE(Ok({"--admin", "neigh", "list"}).find("02:00:00:00:00:77"), std::string::npos);
  r = Quadctl({"neigh", "del", "10.8.0.77"});
  EXPECT_TRUE(absl::StartsWith(r.err, "quadctl: PERMISSION_DENIED: ")) << r.err;
  EXPECT_EQ(Ok({"--admin", "neigh", "del", "10.8.0.77"}), "");
  r = Quadctl({"--admin", "neigh", "del", "10.8.0.77"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_TRUE(absl::StartsWith(r.err, "quadctl: NOT_FOUND: ")) << r.err;
  r = Quadctl({"--admin", "neigh", "set", "10.8.0.78", "not-a-mac"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_TRUE(absl::StartsWith(r.err, "quadctl: INVALID_ARGUMENT: ")) << r.err;

  // Counters: traffic from the kernel to a port nobody has shows up in udp_no_socket.
  const v1::Counters before = ParseJson<v1::Counters>(Ok({"stats", "--json"}));
  const int peer = PeerUdp(kPeerV4, 5200);
  PeerSend(peer, "to nobody", kStackV4, 4999);
  absl::SleepFor(absl::Milliseconds(300));
  const v1::Counters after = ParseJson<v1::Counters>(Ok({"stats", "--json"}));
  EXPECT_GT(after.stack().rx_frames(), before.stack().rx_frames());
  EXPECT_EQ(after.stack().udp_no_socket(), before.stack().udp_no_socket() + 1);
  EXPECT_TRUE(after.has_xdp());
  EXPECT_NE(Ok({"stats"}).find("stack.rx_frames"), std::string::npos);

  // top: bounded by --count (TopShowsWhatMovedWithRates below); --json gives one Counters per
  // refresh.
  const std::string top = Ok({"top", "--count=2", "--interval=200ms"});
  EXPECT_NE(top.find("hash4 hit ratio"), std::string::npos) << top;
  const std::vector<std::string> lines =
      absl::StrSplit(Ok({"top", "--json", "--count=3", "--interval=100ms"}), '\n');
  ASSERT_EQ(lines.size(), 3u);
  for (const std::string& l : lines) EXPECT_TRUE(ParseJson<v1::Counters>(l).has_stack());

  EXPECT_EQ(Ok({"check"}), "frame accounting ok");
}

// top lists the counters that moved between two refreshes, with their rates, and nothing that
// held still: here datagrams from the kernel to a port with no socket keep arriving while it
// runs, and the socket table's size (a constant) and the neighbour table's refusals (a counter
// that never moves here) stay out.
TEST_F(QuadctlTest, TopShowsWhatMovedWithRates) {
  const int peer = PeerUdp(kPeerV4, 5300);
  std::atomic<bool> done{false};
  std::thread traffic([&] {
    const absl::Time end = absl::Now() + absl::Seconds(120);  // bounded, whatever happens
    while (!done.load() && absl::Now() < end) {
      PeerSend(peer, "to nobody", kStackV4, 4998);
      absl::SleepFor(absl::Milliseconds(10));
    }
  });
  const Outcome r = Quadctl({"top", "--count=3", "--interval=1s"});
  done = true;
  traffic.join();
  ASSERT_EQ(r.rc, 0) << r.err;
  // Plain output (not a terminal): a block per refresh, the first without rates.
  const std::vector<std::string> blocks = absl::StrSplit(r.out, "\n\n", absl::SkipEmpty());
  ASSERT_EQ(blocks.size(), 3u) << r.out;
  EXPECT_NE(blocks[0].find("counters that move show from the next refresh"), std::string::npos)
      << r.out;
  bool rate_shown = false;
  for (absl::string_view line : absl::StrSplit(r.out, '\n')) {
    const std::vector<std::string> cells = absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (cells.empty()) continue;
    EXPECT_NE(cells[0], "table.slots") << r.out;
    EXPECT_NE(cells[0], "stack.neighbor_table_full") << r.out;
    EXPECT_NE(cells[0], "stack.tx_no_route") << r.out;
    double per_second = 0;
    if (cells[0] == "stack.udp_no_socket") {
      ASSERT_EQ(cells.size(), 4u) << line;  // COUNTER TOTAL DELTA PER SECOND
      ASSERT_TRUE(absl::SimpleAtod(cells[3], &per_second)) << line;
      EXPECT_GT(per_second, 0) << line;
      rate_shown = true;
    }
  }
  EXPECT_TRUE(rate_shown) << "stack.udp_no_socket moved, but top did not show it:\n" << r.out;
  const Outcome bad = Quadctl({"top", "--interval=0s"});
  EXPECT_EQ(bad.rc, 2) << bad.err;
  EXPECT_NE(bad.err.find("--interval=0s"), std::string::npos) << bad.err;
}

// quadctl --admin: the administration listener, without a session (so it answers when clients
// hold every session there is), for administration commands only.
TEST_F(QuadctlTest, TheAdministrationListenerTakesNoSession) {
  // Without --admin, stats holds a session of its own for the call; with it, none.
  const v1::Counters with = ParseJson<v1::Counters>(Ok({"stats", "--json"}));
  const v1::Counters without = ParseJson<v1::Counters>(Ok({"--admin", "stats", "--json"}));
  EXPECT_EQ(without.sessions() + 1, with.sessions());
  EXPECT_EQ(Ok({"--admin", "health"}), "SERVING");
  EXPECT_EQ(Ok({"--admin", "check"}), "frame accounting ok");
  EXPECT_EQ(Ok({"--admin", "addr"}), "10.8.0.2/24\nfd00:8::2/64");
  // Only quadsockd's user may connect.
  EXPECT_EQ(Shell(absl::StrCat("test \"$(stat -c %a ", admin_path_, ")\" = 600")), 0);
  for (const std::vector<std::string>& bad : std::vector<std::vector<std::string>>{
           {"--admin", "open"},
           {"--admin", "session", "new"},
           {"--admin", "stats", "--session=abc"}}) {
    const Outcome r = Quadctl(bad);
    EXPECT_EQ(r.rc, 2) << absl::StrJoin(bad, " ") << ": " << r.err;
    EXPECT_TRUE(absl::StartsWith(r.err, "quadctl: ")) << r.err;
  }
  const Outcome help = Quadctl({"--help"});
  EXPECT_NE(help.out.find("--admin"), std::string::npos) << help.out;
  EXPECT_NE(help.out.find("quadctl --admin neigh set"), std::string::npos) << help.out;
}

TEST_F(QuadctlTest, UsageErrorsAndHelp) {
  for (const char* command :
       {"session new", "session keepalive", "session end", "open", "bind", "connect", "rehash",
        "disconnect", "send", "recv", "watch", "close", "list", "get", "stats", "top", "neigh list",
        "neigh set", "neigh del", "route", "addr", "iface", "check", "health"}) {
    std::vector<std::string> args = absl::StrSplit(command, ' ');
    args.push_back("--help");
    Outcome r = Quadctl(args);
    EXPECT_EQ(r.rc, 0) << command;
    EXPECT_TRUE(absl::StartsWith(r.out, absl::StrCat("quadctl ", command))) << r.out;
  }
  Outcome r = Quadctl({"--help"});
  EXPECT_EQ(r.rc, 0);
  EXPECT_NE(r.out.find("neigh set ADDRESS MAC"), std::string::npos) << r.out;
  for (const std::vector<std::string>& bad : std::vector<std::vector<std::string>>{
           {"frobnicate"},
           {"bind", "x"},
           {"open"},  // no session
           {"open", "--session=abc", "--family=5"},
           {"bind", "--session=abc", "S", "10.8.0.2"},
           {"stats", "--bogus"},
           {"top", "--interval=soon"},
           {"recv", "--session=abc", "S", "--wait=soon"},
           {"watch", "--session=abc", "--count=-1"},
           // 1200 datagrams: over the server's 1024 in one call, refused before connecting.
           {"send", "--session=abc", "S", "--repeat=600", "a", "b"}}) {
    r = Quadctl(bad);
    EXPECT_EQ(r.rc, 2) << absl::StrJoin(bad, " ") << ": " << r.err;
    EXPECT_TRUE(absl::StartsWith(r.err, "quadctl: ")) << r.err;
  }
  r = Quadctl({"send", "--session=abc", "S", "--repeat=600", "a", "b"});
  EXPECT_NE(r.err.find("at most 1024"), std::string::npos) << r.err;
  // recv's wait has its own name: --timeout is the global call deadline, listed once.
  r = Quadctl({"recv", "--help"});
  EXPECT_NE(r.out.find("--wait"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("--timeout"), r.out.rfind("--timeout")) << r.out;
  // A session the server does not know: the call fails (1), it is no usage error.
  r = Quadctl({"list", "--session=00000000000000000000000000000000"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_TRUE(absl::StartsWith(r.err, "quadctl: UNAUTHENTICATED: ")) << r.err;
  // Nobody listening.
  r = Quadctl({"health", "--target=unix:/tmp/quadctl-e2e-nobody.sock"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_TRUE(absl::StartsWith(r.err, "quadctl: UNAVAILABLE: ")) << r.err;
}

}  // namespace
}  // namespace quadsock
