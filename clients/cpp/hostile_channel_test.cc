// What quadsockd shares with a client, abused by one while another's flow runs. A data channel
// hands the application a memfd, the RX rings' wake-up descriptors and the TX ring's eventfd
// (stack/channel/layout.h); the application holds the same open file descriptions as quadsockd,
// so it can change their flags, their counters and the memory at any moment. Each test lets a
// hostile session do its worst to one of them while a victim session echoes datagrams through
// its own channel: every one of the victim's rounds completes, none waits long (a poll thread
// blocked on the hostile's descriptor would stop them all: there is one), and quadsockd
// survives to its frame accounting.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "clients/cpp/client.h"
#include "clients/cpp/data_channel.h"
#include "service/server.h"
#include "service/testing/fd_limit.h"
#include "service/testing/two_stacks.h"
#include "stack/channel/layout.h"

namespace quadsock {
namespace {

constexpr uint16_t kVictimPort = 4000;
constexpr uint16_t kHostilePort = 4100;

class HostileChannelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    service::ServerOptions o;
    o.channels.default_slots = 64;
    auto t = service::testing::TwoStacks::Start(o, {.known_neighbors = true});
    ASSERT_TRUE(t.ok()) << t.status();
    t_ = std::move(*t);
    victim_ = Client::Create(t_->server->InProcessChannel(), {.client_name = "victim"}).value();
    hostile_ = Client::Create(t_->server->InProcessChannel(), {.client_name = "hostile"}).value();
    victim_socket_ = Bound(*victim_, kVictimPort);
    hostile_socket_ = Bound(*hostile_, kHostilePort);
    victim_ch_ = victim_->AttachChannel().value();
    hostile_ch_ = hostile_->AttachChannel().value();
    ASSERT_EQ(hostile_ch_->event_fds().size(), 2u) << "one RX ring and the TX ring";
    peer_ = t_->PeerSocket(5000).value();
    flood_peer_ = t_->PeerSocket(5001).value();
  }
  void TearDown() override {
    StopFlood();
    victim_ch_.reset();
    hostile_ch_.reset();
    victim_socket_.reset();
    hostile_socket_.reset();
    victim_.reset();
    hostile_.reset();
    if (t_ != nullptr) {
      EXPECT_EQ(t_->Stop(), absl::OkStatus());
    }
  }
  std::optional<RemoteSocket> Bound(Client& c, uint16_t port) {
    RemoteSocket s = c.Open(v1::FAMILY_IPV4).value();
    EXPECT_TRUE(s.Bind({"10.1.0.2", port}).ok());
    return s;
  }

  // The peer sends to the hostile's socket without pause until StopFlood: quadsockd keeps
  // delivering to (and waking) the hostile's channel while it misbehaves.
  void StartFlood() {
    flooding_ = true;
    flood_ = std::thread([this] {
      while (flooding_.load()) {
        (void)t_->PeerSend(flood_peer_, "flood", kHostilePort);
        absl::SleepFor(absl::Microseconds(50));
      }
    });
  }
  void StopFlood() {
    flooding_ = false;
    if (flood_.joinable()) flood_.join();
  }

  // `rounds` echoes through the victim's channel: the peer sends, the victim answers through
  // its TX ring. Fails the test for a round that does not complete within 10 s; returns the
  // slowest round. A round ends when the peer has the answer, or (`until_sent`) when quadsockd
  // has sent it: the victim's socket counts it (for a wire the test floods, where the peer's
  // side may drop what quadsockd sent in time).
  absl::Duration Echo(int rounds, bool until_sent = false) {
    absl::Duration slowest;
    for (int round = 0; round < rounds; ++round) {
      const absl::Time start = absl::Now();
      const absl::Time deadline = start + absl::Seconds(10);
      const std::string ping = absl::StrCat("ping ", round);
      EXPECT_EQ(t_->PeerSend(peer_, ping, kVictimPort), absl::OkStatus());
      channel::ReceivedView v[8];
      size_t n = 0;
      while (n == 0 && absl::Now() < deadline) n = victim_ch_->Receive(v, absl::Milliseconds(100));
      if (n == 0) {
        ADD_FAILURE() << "round " << round << ": the victim's datagram never came";
        return absl::InfiniteDuration();
      }
      const std::string answer = "pong" + std::string(v[0].payload.begin() + 4,
                                                      v[0].payload.end());
      EXPECT_TRUE(victim_ch_->Send(v[0].socket, {reinterpret_cast<const uint8_t*>(answer.data()),
                                                 answer.size()},
                                   v[0].peer));
      victim_ch_->Release();
      if (until_sent) {
        while (victim_socket_->Get()->counters().tx_datagrams() < sent_ + 1 &&
               absl::Now() < deadline) {
          absl::SleepFor(absl::Microseconds(200));
        }
        if (victim_socket_->Get()->counters().tx_datagrams() < ++sent_) {
          ADD_FAILURE() << "round " << round << ": quadsockd never sent the victim's answer";
          return absl::InfiniteDuration();
        }
        slowest = std::max(slowest, absl::Now() - start);
        continue;
      }
      std::optional<stack::ReceivedDatagram> back;
      while (!(back = t_->peer->Receive(peer_).value()).has_value() && absl::Now() < deadline) {
        absl::SleepFor(absl::Microseconds(200));
      }
      if (!back.has_value()) {
        ADD_FAILURE() << "round " << round << ": the victim's answer never left";
        return absl::InfiniteDuration();
      }
      EXPECT_EQ(back->payload, absl::StrCat("pong ", round));
      ++sent_;
      slowest = std::max(slowest, absl::Now() - start);
    }
    return slowest;
  }

  // The hostile's channel memory, mapped as the hostile would.
  struct Mapping {
    uint8_t* base = nullptr;
    size_t bytes = 0;
    channel::ChannelHeader header{};
  };
  Mapping MapHostile() {
    Mapping m;
    struct stat st;
    EXPECT_EQ(fstat(hostile_ch_->memfd(), &st), 0);
    m.bytes = static_cast<size_t>(st.st_size);
    void* p = mmap(nullptr, m.bytes, PROT_READ | PROT_WRITE, MAP_SHARED, hostile_ch_->memfd(), 0);
    EXPECT_NE(p, MAP_FAILED);
    m.base = static_cast<uint8_t*>(p);
    std::memcpy(&m.header, m.base, sizeof(m.header));
    return m;
  }

  std::unique_ptr<service::testing::TwoStacks> t_;
  std::unique_ptr<Client> victim_, hostile_;
  std::optional<RemoteSocket> victim_socket_, hostile_socket_;
  std::unique_ptr<DataChannel> victim_ch_, hostile_ch_;
  stack::SocketId peer_ = 0, flood_peer_ = 0;
  uint64_t sent_ = 0;  // the victim's answers quadsockd has sent
  std::atomic<bool> flooding_{false};
  std::thread flood_;
};

// A slow round is seconds (a blocked poll thread: never); a loaded machine's is milliseconds.
constexpr absl::Duration kSlowRound = absl::Seconds(5);

// quadsockd's end of the pipe whose read end is `read_end` (this process is quadsockd too).
int WriteEndOf(int read_end) {
  struct stat want;
  if (fstat(read_end, &want) != 0) return -1;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) {
    const int fd = std::stoi(e.path().filename().string());
    struct stat st;
    if (fd != read_end && fstat(fd, &st) == 0 && S_ISFIFO(st.st_mode) && st.st_ino == want.st_ino &&
        (fcntl(fd, F_GETFL) & O_ACCMODE) == O_WRONLY) {
      return fd;
    }
  }
  return -1;
}

// The RX ring's wake-up descriptor: made blocking, never read, full, and the ring's `sleeping`
// epoch moved on without pause, so that quadsockd writes a wake-up after every batch. (As an
// eventfd shared with us, a counter written to its maximum and O_NONBLOCK cleared made
// quadsockd's next write wait forever, in the poll thread.)
TEST_F(HostileChannelTest, AWakeupDescriptorNeverReadAndMadeBlockingStallsNobody) {
  const int wake = hostile_ch_->event_fds().front();
  ASSERT_EQ(fcntl(wake, F_SETFL, fcntl(wake, F_GETFL) & ~O_NONBLOCK), 0);
  const uint64_t most = 0xfffffffffffffffe;  // what an eventfd's counter holds at most
  (void)!write(wake, &most, sizeof(most));   // a pipe's read end refuses it (EBADF)
  // As full as thousands of unread wake-ups make it (a page), written from quadsockd's end.
  const int writer = WriteEndOf(wake);
  ASSERT_GE(writer, 0) << "no write end of the wake-up pipe in this process";
  const std::string page(channel::kWakePipeBytes, '\1');
  EXPECT_EQ(write(writer, page.data(), page.size()), static_cast<ssize_t>(page.size()));
  EXPECT_EQ(write(writer, "x", 1), -1) << "the pipe holds more than a page";
  Mapping m = MapHostile();
  channel::RingControl* control = channel::RingAt(m.base, m.header, 0).control;
  std::atomic<bool> attacking{true};
  std::thread sleeper([&] {
    for (uint32_t epoch = 1; attacking.load(); ++epoch) {
      control->sleeping.store(epoch == 0 ? 1 : epoch, std::memory_order_seq_cst);
    }
  });
  StartFlood();
  const absl::Duration slowest = Echo(100);
  StopFlood();
  attacking = false;
  sleeper.join();
  int pending = 0;
  ASSERT_EQ(ioctl(wake, FIONREAD, &pending), 0);
  EXPECT_EQ(pending, static_cast<int>(channel::kWakePipeBytes));
  EXPECT_LT(slowest, kSlowRound);
  EXPECT_LT(Echo(10), kSlowRound);  // and after
  munmap(m.base, m.bytes);
}

// The TX ring's eventfd: made blocking, written and emptied by the hostile without pause, so
// that every wake-up it causes finds the counter at zero. (The poll thread read it after each
// wake-up: a read of an empty, blocking eventfd waited until the hostile wrote again.)
TEST_F(HostileChannelTest, ATxEventfdMadeBlockingAndEmptiedStallsNobody) {
  const int tx = hostile_ch_->event_fds().back();
  ASSERT_EQ(fcntl(tx, F_SETFL, fcntl(tx, F_GETFL) & ~O_NONBLOCK), 0);
  Mapping m = MapHostile();
  channel::RingControl* tx_control = channel::RingAt(m.base, m.header, m.header.rings).control;
  std::atomic<bool> attacking{true};
  std::thread writer([&] {
    const uint64_t one = 1;
    while (attacking.load()) (void)!write(tx, &one, sizeof(one));
  });
  std::thread emptier([&] {
    uint64_t drain;
    while (attacking.load()) (void)!read(tx, &drain, sizeof(drain));
  });
  const absl::Duration slowest = Echo(100);
  attacking = false;
  writer.join();
  const uint64_t one = 1;
  (void)!write(tx, &one, sizeof(one));  // the emptier may wait in its read
  emptier.join();
  EXPECT_LT(slowest, kSlowRound);
  // The poll thread sleeps now (the attack is over) with the counter as the hostile left it;
  // the victim still wakes it.
  EXPECT_LT(Echo(10), kSlowRound);
  (void)tx_control;
  munmap(m.base, m.bytes);
}

// The memfd: it cannot be shrunk, grown or sealed against quadsockd's writes (quadsockd seals
// it before handing it over: a shrink would be a SIGBUS in a poll thread); what the hostile can
// do, punch holes in it and scribble over all of it while datagrams flow both ways, ends at
// most its own channel.
TEST_F(HostileChannelTest, AMemfdPunchedAndScribbledOverHurtsOnlyItsOwnChannel) {
  const int memfd = hostile_ch_->memfd();
  struct stat st;
  ASSERT_EQ(fstat(memfd, &st), 0);
  EXPECT_EQ(ftruncate(memfd, 0), -1);
  EXPECT_EQ(errno, EPERM);
  EXPECT_EQ(ftruncate(memfd, st.st_size * 2), -1);
  EXPECT_EQ(errno, EPERM);
  EXPECT_EQ(fcntl(memfd, F_ADD_SEALS, F_SEAL_WRITE), -1);
  EXPECT_EQ(errno, EPERM);
  Mapping m = MapHostile();
  std::atomic<bool> attacking{true};
  std::thread scribbler([&] {
    std::mt19937_64 random(7);
    while (attacking.load()) {
      (void)fallocate(memfd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, st.st_size);
      for (size_t i = 0; i + 8 <= m.bytes && attacking.load(); i += 8) {
        const uint64_t r = random();
        std::memcpy(m.base + i, &r, 8);
      }
      (void)!write(hostile_ch_->event_fds().back(), "\1\0\0\0\0\0\0\0", 8);  // look at it
    }
  });
  StartFlood();
  const absl::Duration slowest = Echo(100);
  StopFlood();
  attacking = false;
  scribbler.join();
  EXPECT_LT(slowest, kSlowRound);
  munmap(m.base, m.bytes);
}

// The TX ring: the hostile keeps its ring of sends full without pause, and the victim's answers
// still leave in their turn: channels are served round robin, a share a turn each (the
// stack-level test counts the turn; this one is the whole path). Counted as sent by quadsockd:
// the flood overruns the in-memory wire's far end, which drops what it cannot take.
TEST_F(HostileChannelTest, AChannelThatFloodsItsSendsLeavesTheOthersTheirTurn) {
  const absl::Duration quiet = Echo(50);
  std::atomic<bool> attacking{true};
  std::atomic<uint64_t> ring_full{0};  // batches the ring could not take whole
  std::thread flooder([&] {
    const std::string payload(512, 'f');
    std::vector<channel::SendView> batch(
        64, {hostile_socket_->index(),
             {reinterpret_cast<const uint8_t*>(payload.data()), payload.size()},
             *net::Endpoint::Parse("10.1.0.1:5001")});
    while (attacking.load()) {
      if (hostile_ch_->SendBatch(batch) < batch.size()) ++ring_full;
    }
  });
  // The echoes start once the hostile's ring is full: the poll thread has a flood to serve.
  ASSERT_TRUE(service::testing::Eventually([&] { return ring_full.load() > 0; }))
      << "the flood never filled its ring";
  const absl::Duration flooded = Echo(100, /*until_sent=*/true);
  attacking = false;
  flooder.join();
  EXPECT_LT(flooded, kSlowRound) << "slowest round without the flood: " << quiet;
  RecordProperty("slowest_round_quiet_us", static_cast<int>(quiet / absl::Microseconds(1)));
  RecordProperty("slowest_round_flooded_us", static_cast<int>(flooded / absl::Microseconds(1)));
}

}  // namespace
}  // namespace quadsock
