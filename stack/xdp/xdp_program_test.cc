// Tests of XdpProgram itself: attach and detach on a veth in a private network namespace (the
// program leaves with the object), removal of a stale program, refusal of a foreign one, the
// map API's errors, and a kernel UDP datagram that crosses the veth and lands in an AF_XDP
// socket's RX ring. Root.
#include "stack/xdp/xdp_program.h"

#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/bpf.h>
#include <linux/if_link.h>
#include <netinet/in.h>
#include <linux/capability.h>
#include <poll.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "stack/link/xsk_link.h"
#include "stack/net/address.h"
#include "stack/testing/netns.h"
#include "stack/xdp/steer_common.h"

namespace quadsock::xdp {
namespace {

using net::IpAddress;
using testing::TestVeth;

const ::testing::Environment* const kNetns =
    ::testing::AddGlobalTestEnvironment(new testing::PrivateNamespaceEnvironment);

IpAddress Ip(const char* text) { return *IpAddress::Parse(text); }

std::unique_ptr<XdpProgram> LoadOrDie(std::vector<std::string>* log = nullptr) {
  XdpProgram::Options options;
  if (log != nullptr) options.log = [log](absl::string_view m) { log->emplace_back(m); };
  absl::StatusOr<std::unique_ptr<XdpProgram>> s = XdpProgram::Load(std::move(options));
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? *std::move(s) : nullptr;
}

bpf_xdp_query_opts Query(int ifindex) {
  LIBBPF_OPTS(bpf_xdp_query_opts, query);
  EXPECT_EQ(bpf_xdp_query(ifindex, 0, &query), 0);
  return query;
}

TEST(XdpProgramTest, AutoAttachesNativeOnVethAndLeavesWithTheObject) {
  TestVeth veth("qsa0", "qsa1");
  std::vector<std::string> log;
  std::unique_ptr<XdpProgram> program = LoadOrDie(&log);
  ASSERT_NE(program, nullptr);
  absl::StatusOr<XdpMode> mode = program->Attach(veth.ifindex(), XdpMode::kAuto);
  ASSERT_TRUE(mode.ok()) << mode.status();
  EXPECT_EQ(*mode, XdpMode::kAuto);  // native: veth has native XDP
  EXPECT_TRUE(program->IsAttached());
  EXPECT_EQ(Query(veth.ifindex()).drv_prog_id, program->program_id());
  EXPECT_EQ(Query(veth.ifindex()).attach_mode, XDP_ATTACHED_DRV);
  ASSERT_FALSE(log.empty());
  EXPECT_TRUE(absl::StrContains(log.back(), "native")) << log.back();

  program.reset();
  EXPECT_EQ(Query(veth.ifindex()).prog_id, 0u);
  EXPECT_EQ(Query(veth.ifindex()).attach_mode, XDP_ATTACHED_NONE);
}

TEST(XdpProgramTest, GenericModeAndDetach) {
  TestVeth veth("qsb0", "qsb1");
  std::unique_ptr<XdpProgram> program = LoadOrDie();
  ASSERT_NE(program, nullptr);
  absl::StatusOr<XdpMode> mode = program->Attach(veth.ifindex(), XdpMode::kSkb);
  ASSERT_TRUE(mode.ok()) << mode.status();
  EXPECT_EQ(*mode, XdpMode::kSkb);
  EXPECT_EQ(Query(veth.ifindex()).skb_prog_id, program->program_id());
  EXPECT_EQ(Query(veth.ifindex()).drv_prog_id, 0u);

  EXPECT_EQ(program->Attach(veth.ifindex()).status().code(),
            absl::StatusCode::kFailedPrecondition);  // once is enough
  ASSERT_TRUE(program->Detach().ok());
  EXPECT_FALSE(program->IsAttached());
  EXPECT_EQ(Query(veth.ifindex()).prog_id, 0u);
  EXPECT_EQ(program->Detach().code(), absl::StatusCode::kFailedPrecondition);
  // And on again, natively this time.
  mode = program->Attach(veth.ifindex(), XdpMode::kCopy);
  ASSERT_TRUE(mode.ok()) << mode.status();
  EXPECT_EQ(*mode, XdpMode::kCopy);
  EXPECT_EQ(Query(veth.ifindex()).drv_prog_id, program->program_id());
}

// veth refuses native XDP when the peer's MTU is too large for a page; auto falls back.
TEST(XdpProgramTest, AutoFallsBackToGeneric) {
  TestVeth veth("qsg0", "qsg1");
  ASSERT_EQ(std::system("ip link set qsg1 mtu 9000"), 0);
  std::vector<std::string> log;
  std::unique_ptr<XdpProgram> program = LoadOrDie(&log);
  ASSERT_NE(program, nullptr);
  absl::Status native = program->Attach(veth.ifindex(), XdpMode::kCopy).status();
  EXPECT_EQ(native.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(native.message(), "native: ")) << native;
  absl::StatusOr<XdpMode> mode = program->Attach(veth.ifindex(), XdpMode::kAuto);
  ASSERT_TRUE(mode.ok()) << mode.status();
  EXPECT_EQ(*mode, XdpMode::kSkb);
  EXPECT_EQ(Query(veth.ifindex()).skb_prog_id, program->program_id());
  ASSERT_FALSE(log.empty());
  EXPECT_TRUE(absl::StrContains(log.back(), "generic mode")) << log.back();
  EXPECT_TRUE(absl::StrContains(log.back(), "native: ")) << log.back();  // says why
}

TEST(XdpProgramTest, NoSuchInterface) {
  std::unique_ptr<XdpProgram> program = LoadOrDie();
  ASSERT_NE(program, nullptr);
  absl::Status s = program->Attach(999999).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(s.message(), "no such interface")) << s;
  EXPECT_EQ(program->Attach(-1).status().code(), absl::StatusCode::kFailedPrecondition);
}

// A crashed run that attached the legacy way (netlink, as `ip link set dev X xdp obj` does)
// leaves its program on the interface; the next XdpProgram takes it off before attaching.
TEST(XdpProgramTest, RemovesStaleLegacyProgramOfOurs) {
  TestVeth veth("qsc0", "qsc1");
  for (uint32_t flag : {XDP_FLAGS_DRV_MODE, XDP_FLAGS_SKB_MODE}) {
    SCOPED_TRACE(flag);
    std::unique_ptr<XdpProgram> crashed = LoadOrDie();
    ASSERT_NE(crashed, nullptr);
    ASSERT_EQ(bpf_xdp_attach(veth.ifindex(), crashed->program_fd(), flag, nullptr), 0);
    uint32_t stale_id = crashed->program_id();
    crashed.reset();  // the program stays: the interface holds it
    EXPECT_EQ(Query(veth.ifindex()).prog_id, stale_id);

    std::vector<std::string> log;
    std::unique_ptr<XdpProgram> program = LoadOrDie(&log);
    ASSERT_NE(program, nullptr);
    absl::StatusOr<XdpMode> mode = program->Attach(veth.ifindex(), XdpMode::kAuto);
    ASSERT_TRUE(mode.ok()) << mode.status();
    EXPECT_EQ(Query(veth.ifindex()).prog_id, program->program_id());
    ASSERT_GE(log.size(), 2u);
    EXPECT_TRUE(absl::StrContains(log[0], "removed stale")) << log[0];
    EXPECT_TRUE(absl::StrContains(log[0], std::to_string(stale_id))) << log[0];
    program.reset();
    EXPECT_EQ(Query(veth.ifindex()).prog_id, 0u);
  }
}

// Attaches a program that passes everything, named `name`, to `ifindex` in generic mode (as
// `ip link set dev X xdpgeneric obj` would); returns its fd, for the caller to close.
int AttachPassProgram(int ifindex, const char* name) {
  // r0 = XDP_PASS; exit
  const bpf_insn insns[] = {
      {.code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = XDP_PASS},
      {.code = BPF_JMP | BPF_EXIT},
  };
  int fd = bpf_prog_load(BPF_PROG_TYPE_XDP, name, "GPL", insns, 2, nullptr);
  EXPECT_GE(fd, 0) << std::strerror(-fd);
  EXPECT_EQ(bpf_xdp_attach(ifindex, fd, XDP_FLAGS_SKB_MODE, nullptr), 0);
  return fd;
}

TEST(XdpProgramTest, LeavesAForeignProgramAlone) {
  TestVeth veth("qsd0", "qsd1");
  int foreign = AttachPassProgram(veth.ifindex(), "someone_else");
  ASSERT_GE(foreign, 0);
  uint32_t foreign_id = Query(veth.ifindex()).skb_prog_id;

  std::unique_ptr<XdpProgram> program = LoadOrDie();
  ASSERT_NE(program, nullptr);
  absl::Status s = program->Attach(veth.ifindex()).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(s.message(), "someone_else")) << s;
  EXPECT_EQ(Query(veth.ifindex()).skb_prog_id, foreign_id);
  EXPECT_EQ(bpf_xdp_detach(veth.ifindex(), XDP_FLAGS_SKB_MODE, nullptr), 0);
  close(foreign);
}

// A live quadsock (its bpf_link) is not stale: a second one must not take the interface.
TEST(XdpProgramTest, DoesNotRemoveALiveLink) {
  TestVeth veth("qse0", "qse1");
  std::unique_ptr<XdpProgram> first = LoadOrDie();
  std::unique_ptr<XdpProgram> second = LoadOrDie();
  ASSERT_NE(first, nullptr);
  ASSERT_NE(second, nullptr);
  ASSERT_TRUE(first->Attach(veth.ifindex()).ok());
  absl::Status s = second->Attach(veth.ifindex()).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(s.message(), "live bpf_link")) << s;
  EXPECT_EQ(Query(veth.ifindex()).prog_id, first->program_id());
}

TEST(XdpProgramTest, MapErrors) {
  std::unique_ptr<XdpProgram> program = LoadOrDie();
  ASSERT_NE(program, nullptr);
  EXPECT_EQ(program->AddAddress(IpAddress::AnyV4(), true).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(program->AddAddress(Ip("ff02::1"), true).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(program->RemoveAddress(Ip("10.0.0.1")).code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(program->AddAddress(Ip("10.0.0.1"), false).ok());
  ASSERT_TRUE(program->AddAddress(Ip("10.0.0.1"), true).ok());  // updates
  ASSERT_TRUE(program->RemoveAddress(Ip("10.0.0.1")).ok());
  EXPECT_EQ(program->RemoveAddress(Ip("10.0.0.1")).code(), absl::StatusCode::kNotFound);

  EXPECT_EQ(program->AddPort(Ip("10.0.0.1"), 0).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(program->RemovePort(Ip("10.0.0.1"), 53).code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(program->AddPort(Ip("10.0.0.1"), 53).ok());
  ASSERT_TRUE(program->AddPort(Ip("10.0.0.1"), 53).ok());
  EXPECT_EQ(program->RemovePort(Ip("10.0.0.2"), 53).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(program->RemovePort(IpAddress::AnyV4(), 53).code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(program->RemovePort(Ip("10.0.0.1"), 53).ok());
  ASSERT_TRUE(program->RemovePort(Ip("10.0.0.1"), 53).ok());
  EXPECT_EQ(program->RemovePort(Ip("10.0.0.1"), 53).code(), absl::StatusCode::kNotFound);

  EXPECT_EQ(program->SetXsk(QS_MAX_QUEUES, 0).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(program->ClearXsk(QS_MAX_QUEUES).code(), absl::StatusCode::kInvalidArgument);
  int udp = socket(AF_INET, SOCK_DGRAM, 0);
  ASSERT_GE(udp, 0);
  absl::Status s = program->SetXsk(0, udp);  // not an AF_XDP socket
  EXPECT_FALSE(s.ok());
  EXPECT_TRUE(absl::StrContains(s.message(), "AF_XDP")) << s;
  close(udp);

  absl::StatusOr<XdpProgramCounters> counters = program->Counters();
  ASSERT_TRUE(counters.ok()) << counters.status();
  EXPECT_EQ(*counters, XdpProgramCounters{});
}

// Runs `body` in a child process that keeps only the capabilities in `keep` (bit n for
// capability n); returns the child's exit status, 2 when it could not drop them. In a child, so
// that the test process keeps its own.
int WithCapabilities(uint64_t keep, const std::function<int()>& body) {
  pid_t child = fork();
  if (child == 0) {
    __user_cap_header_struct header{.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
    __user_cap_data_struct caps[_LINUX_CAPABILITY_U32S_3] = {};
    if (syscall(SYS_capget, &header, caps) != 0) _exit(2);
    for (int i = 0; i < 2; ++i) {
      const uint32_t mask = static_cast<uint32_t>(keep >> (32 * i));
      caps[i].effective &= mask;
      caps[i].permitted &= mask;
      caps[i].inheritable &= mask;
    }
    if (syscall(SYS_capset, &header, caps) != 0) _exit(2);
    _exit(body());
  }
  int status = 0;
  if (child < 0 || waitpid(child, &status, 0) != child || !WIFEXITED(status)) return -1;
  return WEXITSTATUS(status);
}

// Without capabilities (root, but all of them dropped) loading is PERMISSION_DENIED.
TEST(XdpProgramTest, PermissionDeniedWithoutCapabilities) {
  const int result = WithCapabilities(0, [] {
    absl::StatusOr<std::unique_ptr<XdpProgram>> s = XdpProgram::Load();
    return !s.ok() && s.status().code() == absl::StatusCode::kPermissionDenied ? 0 : 1;
  });
  EXPECT_EQ(result, 0) << "1: Load did not fail with PERMISSION_DENIED; 2: capset";
}

// In a container without CAP_SYS_ADMIN a program on the interface cannot be opened by id, so
// whether it is a stale one of ours cannot be told: the error names it and how to remove it.
TEST(XdpProgramTest, AProgramThatCannotBeInspectedIsNamedWithItsRemoval) {
  TestVeth veth("qsf0", "qsf1");
  int stale = AttachPassProgram(veth.ifindex(), "qs_stale");
  ASSERT_GE(stale, 0);
  const uint32_t id = Query(veth.ifindex()).skb_prog_id;
  const int result = WithCapabilities(~(uint64_t{1} << CAP_SYS_ADMIN), [&] {
    absl::StatusOr<std::unique_ptr<XdpProgram>> program = XdpProgram::Load();
    if (!program.ok()) return 3;
    const absl::Status s = (*program)->Attach(veth.ifindex()).status();
    const bool named = s.code() == absl::StatusCode::kPermissionDenied &&
                       absl::StrContains(s.message(), absl::StrCat("(id ", id, ")")) &&
                       absl::StrContains(s.message(), "ip link set dev qsf0 xdpgeneric off") &&
                       absl::StrContains(s.message(), "CAP_SYS_ADMIN");
    if (!named) std::fprintf(stderr, "%s\n", s.ToString().c_str());
    return named ? 0 : 1;
  });
  EXPECT_EQ(result, 0) << "1: not the expected error; 2: capset; 3: Load";
  EXPECT_EQ(Query(veth.ifindex()).skb_prog_id, id);
  EXPECT_EQ(bpf_xdp_detach(veth.ifindex(), XDP_FLAGS_SKB_MODE, nullptr), 0);
  close(stale);
}

// The names are quadsockd's --xdp_mode values; the attach names are what the admin API reports.
TEST(XdpProgramTest, ModeNames) {
  for (XdpMode mode : {XdpMode::kAuto, XdpMode::kZeroCopy, XdpMode::kCopy, XdpMode::kSkb}) {
    EXPECT_EQ(ParseXdpMode(XdpModeName(mode)).value(), mode);
  }
  EXPECT_EQ(XdpModeName(XdpMode::kZeroCopy), "zerocopy");
  const absl::Status native = ParseXdpMode("native").status();
  EXPECT_EQ(native.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(native.message(), "XDP mode \"native\": expected auto, zerocopy, copy or skb");
  EXPECT_EQ(XdpAttachName(XdpMode::kSkb), "generic");
  for (XdpMode mode : {XdpMode::kAuto, XdpMode::kZeroCopy, XdpMode::kCopy}) {
    EXPECT_EQ(XdpAttachName(mode), "native");
  }
}

// The whole path: the kernel sends UDP out of one veth end, the program on the other end
// steers it into the AF_XDP socket of queue 0, and the datagram is in the socket's RX ring.
TEST(XdpProgramTest, KernelUdpReachesTheAfXdpSocket) {
  TestVeth veth("qsf0", "qsf1");  // qsf0: quadsock's; qsf1: the kernel's, 10.9.0.1
  ASSERT_EQ(std::system("ip addr add 10.9.0.1/24 dev qsf1 && "
                        "ip neigh add 10.9.0.2 lladdr 02:00:00:00:09:02 dev qsf1"),
            0);

  absl::StatusOr<std::unique_ptr<link::XskPort>> port = link::XskPort::Create(
      {.interface = veth.name(), .frames = 128, .ring_size = 64,
       .bind_mode = link::XskBindMode::kCopy});
  ASSERT_TRUE(port.ok()) << port.status();
  absl::StatusOr<std::unique_ptr<link::XskLink>> xsk = (*port)->OpenQueue(0);
  ASSERT_TRUE(xsk.ok()) << xsk.status();

  std::unique_ptr<XdpProgram> program = LoadOrDie();
  ASSERT_NE(program, nullptr);
  ASSERT_TRUE(program->AddAddress(Ip("10.9.0.2"), /*exclusive=*/true).ok());
  ASSERT_TRUE(program->SetXsk(0, (*xsk)->socket_fd()).ok());
  ASSERT_TRUE(program->Attach(veth.ifindex(), XdpMode::kAuto).ok());

  int udp = socket(AF_INET, SOCK_DGRAM, 0);
  ASSERT_GE(udp, 0);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(5000);
  inet_pton(AF_INET, "10.9.0.2", &to.sin_addr);
  const char message[] = "to quadsock";
  ASSERT_EQ(sendto(udp, message, sizeof(message), 0, reinterpret_cast<sockaddr*>(&to),
                   sizeof(to)),
            static_cast<ssize_t>(sizeof(message)));

  pollfd p{.fd = (*xsk)->wait_fd(), .events = POLLIN, .revents = 0};
  ASSERT_EQ(poll(&p, 1, 2000), 1) << "nothing arrived on the AF_XDP socket";
  link::FrameBuffer received;
  ASSERT_EQ((*xsk)->Receive({&received, 1}), 1u);
  const uint8_t* frame = received.data;
  ASSERT_GE(received.length, 14u + 20 + 8 + sizeof(message));
  EXPECT_EQ(frame[12], 0x08);  // IPv4
  EXPECT_EQ(frame[13], 0x00);
  EXPECT_EQ(std::memcmp(frame + 14 + 20 + 8, message, sizeof(message)), 0);
  (*xsk)->Release({&received, 1});

  absl::StatusOr<XdpProgramCounters> counters = program->Counters();
  ASSERT_TRUE(counters.ok()) << counters.status();
  EXPECT_GE(counters->redirect_udp, 1u);
  EXPECT_EQ(counters->redirect_no_xsk, 0u);

  close(udp);
  program.reset();
}

}  // namespace
}  // namespace quadsock::xdp
