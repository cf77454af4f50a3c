#include "clients/preload/internal/shared_socket.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>

#include "gtest/gtest.h"

namespace quadsock::preload {
namespace {

bool Readable(int fd) {
  pollfd p{fd, POLLIN, 0};
  return poll(&p, 1, 0) == 1;
}

channel::ReceivedView View(const std::string& payload) {
  channel::ReceivedView v{};
  v.payload = {reinterpret_cast<const uint8_t*>(payload.data()), payload.size()};
  v.peer = net::Endpoint::Parse("10.1.0.1:5000").value();
  v.local = net::Endpoint::Parse("10.1.0.2:53").value();
  v.arrival = absl::FromUnixSeconds(1000);
  return v;
}

std::shared_ptr<SharedSocket> Make(uint32_t max_payload = 1500) {
  return SharedSocket::Create(max_payload, eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC),
                              /*nonblocking=*/false)
      .value();
}

TEST(SharedSocketTest, TheEventfdIsReadableExactlyWhileADatagramWaits) {
  std::shared_ptr<SharedSocket> s = Make();
  SharedSocket::Guard g(*s);
  EXPECT_FALSE(Readable(s->event_fd()));
  const std::string a = "first", b = "second";
  ASSERT_TRUE(s->Push(View(a), 1 << 20));
  ASSERT_TRUE(s->Push(View(b), 1 << 20));
  EXPECT_FALSE(Readable(s->event_fd())) << "only Signal makes it readable";
  s->Signal();
  EXPECT_TRUE(Readable(s->event_fd()));
  SharedSocket::Slot* front = s->Front();
  ASSERT_NE(front, nullptr);
  EXPECT_EQ(std::string(reinterpret_cast<char*>(front->payload()), front->length), "first");
  EXPECT_EQ(front->peer, View(a).peer);
  EXPECT_EQ(front->arrival_ns, int64_t{1000} * 1'000'000'000);
  s->Pop();
  EXPECT_TRUE(Readable(s->event_fd())) << "one still waits";
  s->Pop();
  EXPECT_FALSE(Readable(s->event_fd()));
  EXPECT_EQ(s->Front(), nullptr);
}

TEST(SharedSocketTest, AFullQueueDropsAndCounts) {
  std::shared_ptr<SharedSocket> s = Make();
  SharedSocket::Guard g(*s);
  const std::string p(100, 'x');
  // The receive buffer counts payload and overhead; the first always fits.
  EXPECT_TRUE(s->Push(View(p), 1));
  EXPECT_FALSE(s->Push(View(p), 1));
  EXPECT_EQ(s->state().dropped, 1u);
  // With room, every slot fills, and then no more.
  s->Pop();
  uint32_t queued = 0;
  while (s->Push(View(p), 1 << 30)) ++queued;
  EXPECT_EQ(queued, s->state().slots);
  EXPECT_EQ(s->state().dropped, 2u);
}

TEST(SharedSocketTest, ShutdownForReadingKeepsItReadableAndDropsNewDatagrams) {
  std::shared_ptr<SharedSocket> s = Make();
  SharedSocket::Guard g(*s);
  s->state().shut_read = true;
  s->Signal();
  EXPECT_TRUE(Readable(s->event_fd()));
  s->ClearReadable();
  EXPECT_TRUE(Readable(s->event_fd())) << "end-of-file stays readable, as in Linux";
  EXPECT_FALSE(s->Push(View("late"), 1 << 20));
}

TEST(SharedSocketTest, AForkedChildTakesWhatTheParentQueues) {
  std::shared_ptr<SharedSocket> s = Make();
  const pid_t child = fork();
  if (child == 0) {
    pollfd p{s->event_fd(), POLLIN, 0};
    if (poll(&p, 1, 10000) != 1) _exit(2);
    SharedSocket::Guard g(*s);
    SharedSocket::Slot* d = s->Front();
    if (d == nullptr || std::string(reinterpret_cast<char*>(d->payload()), d->length) != "to the child") {
      _exit(3);
    }
    s->Pop();
    _exit(0);
  }
  {
    SharedSocket::Guard g(*s);
    ASSERT_TRUE(s->Push(View("to the child"), 1 << 20));
    s->Signal();
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  SharedSocket::Guard g(*s);
  EXPECT_EQ(s->Front(), nullptr) << "the child took it";
  EXPECT_FALSE(Readable(s->event_fd()));
}

TEST(SharedSocketTest, HoldersCountProcesses) {
  std::shared_ptr<SharedSocket> s = Make();
  s->AddHolder();
  EXPECT_FALSE(s->DropHolder());
  EXPECT_TRUE(s->DropHolder());
}

}  // namespace
}  // namespace quadsock::preload
