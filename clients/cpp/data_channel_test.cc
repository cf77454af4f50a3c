// The data channel end to end: quadsockd's services over a MemoryLink stack (a second stack on
// the same wire plays the remote host), the client attaching through the real side socket and
// reading the shared memory.
#include "clients/cpp/data_channel.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <unistd.h>

#include <sys/wait.h>

#include <filesystem>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

#include "clients/cpp/client.h"
#include "service/server.h"
#include "service/testing/two_stacks.h"

namespace quadsock {
namespace {

using absl::StatusCode;

class DataChannelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    service::ServerOptions o;
    o.channels.default_slots = 64;
    o.log = [this](absl::string_view line) {
      std::lock_guard<std::mutex> lock(log_mu_);
      log_.emplace_back(line);
    };
    // Both sides know each other's MAC: no datagram waits for ARP (and is dropped there).
    auto t = service::testing::TwoStacks::Start(o, {.known_neighbors = true});
    ASSERT_TRUE(t.ok()) << t.status();
    t_ = std::move(*t);
    client_ = NewClient("channel_test");
  }
  void TearDown() override {
    client_.reset();
    other_.reset();
    if (t_ != nullptr) {
      EXPECT_EQ(t_->Stop(), absl::OkStatus());
    }
  }
  std::unique_ptr<Client> NewClient(const std::string& name) {
    absl::StatusOr<std::unique_ptr<Client>> c =
        Client::Create(t_->server->InProcessChannel(), {.client_name = name});
    EXPECT_TRUE(c.ok()) << c.status();
    return std::move(*c);
  }
  RemoteSocket Bound(Client& c, uint16_t port) {
    RemoteSocket s = c.Open(v1::FAMILY_IPV4).value();
    EXPECT_TRUE(s.Bind({"10.1.0.2", port}).ok());
    return s;
  }
  // Waits (bounded) until `n` datagrams came through the channel; returns them by socket index.
  std::multimap<uint32_t, std::string> ReceiveN(DataChannel& ch, size_t n) {
    std::multimap<uint32_t, std::string> got;
    channel::ReceivedView v[64];
    const absl::Time deadline = absl::Now() + absl::Seconds(20);
    while (got.size() < n && absl::Now() < deadline) {
      const size_t k = ch.Receive(v, absl::Milliseconds(100));
      for (size_t i = 0; i < k; ++i) {
        got.emplace(v[i].socket, std::string(v[i].payload.begin(), v[i].payload.end()));
      }
      ch.Release();
    }
    return got;
  }
  // Waits (bounded) for the socket's on_channel to become `want`.
  bool OnChannelBecomes(RemoteSocket& s, bool want) {
    return Eventually([&] { return s.Get()->on_channel() == want; });
  }
  // Waits (bounded) until `done`.
  template <typename F>
  static bool Eventually(F done) {
    const absl::Time deadline = absl::Now() + absl::Seconds(10);
    while (!done()) {
      if (absl::Now() > deadline) return false;
      absl::SleepFor(absl::Milliseconds(20));
    }
    return true;
  }
  bool Logged(absl::string_view text) {
    std::lock_guard<std::mutex> lock(log_mu_);
    for (const std::string& l : log_) {
      if (absl::StrContains(l, text)) return true;
    }
    return false;
  }

  std::unique_ptr<service::testing::TwoStacks> t_;
  std::unique_ptr<Client> client_, other_;
  std::mutex log_mu_;
  std::vector<std::string> log_;
};

TEST_F(DataChannelTest, EverySocketOfTheSessionDeliversThroughOneChannel) {
  RemoteSocket a = Bound(*client_, 4000);
  RemoteSocket b = Bound(*client_, 4001);
  EXPECT_EQ(a.index(), 1u);
  EXPECT_EQ(b.index(), 2u);
  std::unique_ptr<DataChannel> ch = client_->AttachChannel().value();
  ASSERT_TRUE(OnChannelBecomes(a, true));
  // Opened after the attach: on the channel too.
  RemoteSocket c = Bound(*client_, 4002);
  EXPECT_TRUE(c.Get()->on_channel());
  EXPECT_EQ(c.Get()->index(), 3u);
  const stack::SocketId peer = t_->PeerSocket(5000).value();
  for (int i = 0; i < 10; ++i) {
    for (uint16_t port : {4000, 4001, 4002}) {
      ASSERT_EQ(t_->PeerSend(peer, absl::StrCat(port, "#", i), port), absl::OkStatus());
    }
  }
  const std::multimap<uint32_t, std::string> got = ReceiveN(*ch, 30);
  ASSERT_EQ(got.size(), 30u);
  for (const auto& [index, payload] : got) {
    EXPECT_EQ(payload.substr(0, 4), std::to_string(3999 + index)) << payload;
  }
  // Every datagram accounted for: received here, none dropped, none left in a queue.
  for (RemoteSocket* s : {&a, &b, &c}) {
    const v1::SocketCounters n = s->Get()->counters();
    EXPECT_EQ(n.rx_datagrams(), 10u);
    EXPECT_EQ(n.rx_dropped(), 0u);
    EXPECT_EQ(n.queued(), 0u);
  }
}

TEST_F(DataChannelTest, NamedSocketsOnlyAndTheQueueAgainWhenTheChannelCloses) {
  RemoteSocket a = Bound(*client_, 4000);
  RemoteSocket b = Bound(*client_, 4001);
  std::unique_ptr<DataChannel> ch = client_->AttachChannel({.sockets = {a.handle()}}).value();
  ASSERT_TRUE(OnChannelBecomes(a, true));
  EXPECT_FALSE(b.Get()->on_channel());
  EXPECT_FALSE(Bound(*client_, 4002).Get()->on_channel());  // not "all": later ones are not
  ch.reset();  // the client closes its side: quadsockd takes the socket off
  ASSERT_TRUE(OnChannelBecomes(a, false));
  const stack::SocketId peer = t_->PeerSocket(5000).value();
  ASSERT_EQ(t_->PeerSend(peer, "queued", 4000), absl::OkStatus());
  absl::StatusOr<Datagram> d = a.Receive(absl::Seconds(10));
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->payload, "queued");
  EXPECT_TRUE(Logged("data channel ended (the client closed its side connection)"));
}

TEST_F(DataChannelTest, OneChannelPerSessionAndTokensAreOneTime) {
  RemoteSocket a = Bound(*client_, 4000);
  std::unique_ptr<DataChannel> ch = client_->AttachChannel().value();
  EXPECT_EQ(client_->AttachChannel().status().code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(DataChannel::Claim(t_->server->channel_path(), "not-a-token").status().code(),
            StatusCode::kUnavailable);
  // Another session's socket is not this one's to put on a channel.
  other_ = NewClient("other");
  EXPECT_EQ(other_->AttachChannel({.sockets = {a.handle()}}).status().code(),
            StatusCode::kPermissionDenied);
}

TEST_F(DataChannelTest, ASlowReaderDropsAndCountsWhileAnotherSessionKeepsItsDatagrams) {
  RemoteSocket slow_socket = Bound(*client_, 4000);
  std::unique_ptr<DataChannel> slow = client_->AttachChannel({.ring_slots = 16}).value();
  other_ = NewClient("other");
  RemoteSocket fast_socket = Bound(*other_, 4100);
  std::unique_ptr<DataChannel> fast = other_->AttachChannel({.ring_slots = 1024}).value();
  ASSERT_TRUE(OnChannelBecomes(slow_socket, true));
  ASSERT_TRUE(OnChannelBecomes(fast_socket, true));
  const stack::SocketId peer = t_->PeerSocket(5000).value();
  for (int i = 0; i < 100; ++i) {
    ASSERT_EQ(t_->PeerSend(peer, "s", 4000), absl::OkStatus());
    ASSERT_EQ(t_->PeerSend(peer, "f", 4100), absl::OkStatus());
  }
  // The fast session gets all of its 100 while the slow one reads nothing.
  EXPECT_EQ(ReceiveN(*fast, 100).size(), 100u);
  // The slow one's ring (16) is full; the rest were dropped and counted, never waited for.
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  v1::SocketCounters n;
  do {
    n = slow_socket.Get()->counters();
  } while (n.rx_datagrams() + n.rx_dropped() < 100 && absl::Now() < deadline);
  EXPECT_EQ(n.rx_datagrams(), 16u);
  EXPECT_EQ(n.rx_dropped(), 84u);
  EXPECT_EQ(ReceiveN(*slow, 16).size(), 16u);
}

TEST_F(DataChannelTest, AClientThatScribblesOverItsRingsEndsOnlyItsOwnChannel) {
  other_ = NewClient("other");
  RemoteSocket good_socket = Bound(*other_, 4100);
  std::unique_ptr<DataChannel> good = other_->AttachChannel().value();
  RemoteSocket bad_socket = Bound(*client_, 4000);
  std::unique_ptr<DataChannel> bad = client_->AttachChannel().value();
  ASSERT_TRUE(OnChannelBecomes(bad_socket, true));
  const int memfd = bad->memfd();
  std::mt19937 rng(42);
  std::vector<uint8_t> junk(4096 * 4);
  for (uint8_t& b : junk) b = static_cast<uint8_t>(rng());
  ASSERT_EQ(pwrite(memfd, junk.data(), junk.size(), 0), static_cast<ssize_t>(junk.size()));
  const stack::SocketId peer = t_->PeerSocket(5000).value();
  // Datagrams for the scribbler meet the garbage: its channel ends, its socket goes back to its
  // queue, and the log says why.
  ASSERT_EQ(t_->PeerSend(peer, "to the scribbler", 4000), absl::OkStatus());
  ASSERT_TRUE(OnChannelBecomes(bad_socket, false));
  EXPECT_TRUE(Logged("the client broke it"));
  // The other session notices nothing.
  ASSERT_EQ(t_->PeerSend(peer, "to the good one", 4100), absl::OkStatus());
  EXPECT_EQ(ReceiveN(*good, 1).size(), 1u);
  EXPECT_TRUE(good_socket.Get()->on_channel());
}

TEST_F(DataChannelTest, AnEchoServerAnswersThroughTheChannelBothWays) {
  RemoteSocket server = Bound(*client_, 4000);
  std::unique_ptr<DataChannel> ch = client_->AttachChannel().value();
  ASSERT_TRUE(OnChannelBecomes(server, true));
  const stack::SocketId peer = t_->PeerSocket(5000).value();
  // Each round: the peer sends, the application (waiting on the channel's eventfd) answers
  // through the TX ring, and the poll thread (asleep between rounds) sends the answer.
  for (int round = 0; round < 20; ++round) {
    ASSERT_EQ(t_->PeerSend(peer, absl::StrCat("ping ", round), 4000), absl::OkStatus());
    channel::ReceivedView v[4];
    size_t n = 0;
    const absl::Time deadline = absl::Now() + absl::Seconds(20);
    while (n == 0 && absl::Now() < deadline) n = ch->Receive(v, absl::Seconds(1));
    ASSERT_EQ(n, 1u);
    const std::string answer =
        "pong" + std::string(v[0].payload.begin() + 4, v[0].payload.end());
    ASSERT_TRUE(ch->Send(v[0].socket,
                         {reinterpret_cast<const uint8_t*>(answer.data()), answer.size()},
                         v[0].peer));
    ch->Release();
    std::optional<stack::ReceivedDatagram> back;
    while (!(back = t_->peer->Receive(peer).value()).has_value() && absl::Now() < deadline) {
      absl::SleepFor(absl::Milliseconds(1));
    }
    ASSERT_TRUE(back.has_value());
    EXPECT_EQ(back->payload, absl::StrCat("pong ", round));
  }
  // The poll thread counts a send just after the link took it, so the peer may have the last
  // answer a moment before the counter has it.
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (server.Get()->counters().tx_datagrams() < 20u && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  EXPECT_EQ(server.Get()->counters().tx_datagrams(), 20u);
}

// The same channel over the gRPC stream (a remote client's, or one that asks for it).
TEST_F(DataChannelTest, TheGrpcStreamCarriesTheSameDatagramsAndSends) {
  RemoteSocket a = Bound(*client_, 4000);
  RemoteSocket b = Bound(*client_, 4001);
  std::unique_ptr<DataChannel> ch =
      client_->AttachChannel({.transport = ChannelTransport::kGrpcStream, .stream_window = 8})
          .value();
  EXPECT_EQ(ch->transport(), ChannelTransport::kGrpcStream);
  ASSERT_TRUE(OnChannelBecomes(a, true));
  const stack::SocketId peer = t_->PeerSocket(5000).value();
  // More than the window: the credit comes back as the application releases.
  for (int i = 0; i < 20; ++i) {
    ASSERT_EQ(t_->PeerSend(peer, absl::StrCat("a", i), 4000), absl::OkStatus());
    ASSERT_EQ(t_->PeerSend(peer, absl::StrCat("b", i), 4001), absl::OkStatus());
  }
  // Until it does, the server has sent the window and no more. The witness: the application
  // takes the window's 8 and holds them (nothing granted), and with the rest in the rings a
  // request that grants nothing (a send) has the stream look again: it counts a wait for
  // credit, having written 8. (The in-process transport completes a write only once the client
  // has read it: hence the 8 taken first.)
  ASSERT_TRUE(Eventually([&] {
    return a.Get()->counters().rx_datagrams() + b.Get()->counters().rx_datagrams() == 40;
  }));
  channel::ReceivedView window[8];
  size_t taken = 0;
  ASSERT_TRUE(Eventually([&] {
    taken += ch->Receive(std::span(window).subspan(taken), absl::Milliseconds(20));
    return taken == 8;
  }));
  const uint64_t waits = client_->Counters()->stream_credit_waits();
  const uint8_t look[] = {'l', 'o', 'o', 'k'};
  // Again until it is counted: a socket counts a datagram a moment before its ring shows it.
  ASSERT_TRUE(Eventually([&] {
    EXPECT_TRUE(ch->Send(a.index(), look, *net::Endpoint::Parse("10.1.0.1:5000")));
    EXPECT_TRUE(Eventually([&] { return t_->peer->Receive(peer).value().has_value(); }));
    return client_->Counters()->stream_credit_waits() > waits;
  })) << "the stream never waited for credit";
  EXPECT_EQ(client_->Counters()->stream_datagrams(), 8u);
  std::multimap<uint32_t, std::string> got;
  for (const channel::ReceivedView& v : window) {
    got.emplace(v.socket, std::string(v.payload.begin(), v.payload.end()));
  }
  ch->Release();
  got.merge(ReceiveN(*ch, 32));
  ASSERT_EQ(got.size(), 40u);
  EXPECT_EQ(got.count(a.index()), 20u);
  EXPECT_EQ(got.count(b.index()), 20u);
  EXPECT_EQ(a.Get()->counters().rx_dropped(), 0u);
  // A send through the stream, and one the server refuses (no destination, not connected).
  const std::string hello = "hello";
  const std::span<const uint8_t> bytes(reinterpret_cast<const uint8_t*>(hello.data()),
                                       hello.size());
  ASSERT_TRUE(ch->Send(a.index(), bytes, *net::Endpoint::Parse("10.1.0.1:5000")));
  std::optional<stack::ReceivedDatagram> d;
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (!(d = t_->peer->Receive(peer).value()).has_value() && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(2));
  }
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->payload, "hello");
  ASSERT_TRUE(ch->Send(a.index(), bytes));
  while (ch->last_send_error().ok() && absl::Now() < deadline) {
    channel::ReceivedView v[1];
    (void)ch->Receive(v, absl::Milliseconds(20));
  }
  EXPECT_EQ(ch->last_send_error().code(), StatusCode::kFailedPrecondition)
      << ch->last_send_error();
}

// A batch of sends goes out in order through one publish (shared memory) or a few requests (the
// stream: 300 datagrams are two), and stops before the first datagram it cannot take.
TEST_F(DataChannelTest, ABatchOfSendsGoesOutInOrderOnBothTransports) {
  const struct {
    ChannelTransport transport;
    size_t count;  // shared memory: under the TX ring's 64 slots
    uint16_t port;
  } cases[] = {{ChannelTransport::kSharedMemory, 60, 4000},
               {ChannelTransport::kGrpcStream, 300, 4001}};
  for (const auto& c : cases) {
    SCOPED_TRACE(c.count);
    std::unique_ptr<Client> client = NewClient(absl::StrCat("batch", c.port));
    RemoteSocket s = Bound(*client, c.port);
    std::unique_ptr<DataChannel> ch = client->AttachChannel({.transport = c.transport}).value();
    ASSERT_EQ(ch->transport(), c.transport);
    ASSERT_TRUE(OnChannelBecomes(s, true));
    // The peer's socket holds the whole batch, however late this thread reads it.
    const stack::SocketId peer = t_->peer->Open(net::Family::kV4, {.receive_queue_depth = 1024})
                                     .value();
    const net::Endpoint peer_at = *net::Endpoint::Parse(absl::StrCat("10.1.0.1:", c.port + 1000));
    ASSERT_TRUE(t_->peer->Bind(peer, peer_at).ok());
    std::vector<std::string> payloads;
    for (size_t i = 0; i < c.count; ++i) payloads.push_back(absl::StrCat("batch ", i));
    const std::string too_big(ch->max_payload() + 1, 'x');
    payloads.push_back(too_big);
    payloads.push_back("after the refused one");
    std::vector<channel::SendView> batch;
    for (const std::string& p : payloads) {
      batch.push_back({s.index(), {reinterpret_cast<const uint8_t*>(p.data()), p.size()},
                       peer_at});
    }
    EXPECT_EQ(ch->SendBatch(batch), c.count);
    std::vector<std::string> got;
    const absl::Time deadline = absl::Now() + absl::Seconds(20);
    while (got.size() < c.count && absl::Now() < deadline) {
      if (std::optional<stack::ReceivedDatagram> d = t_->peer->Receive(peer).value()) {
        got.push_back(d->payload);
      } else {
        absl::SleepFor(absl::Milliseconds(1));
      }
    }
    EXPECT_EQ(got, std::vector<std::string>(payloads.begin(), payloads.begin() + c.count));
    // Nothing after the refused datagram: a marker sent now is the next to arrive (the channel
    // keeps the order of sends, so "after the refused one" would come before it).
    const std::string marker = "the marker";
    ASSERT_TRUE(ch->Send(s.index(), {reinterpret_cast<const uint8_t*>(marker.data()),
                                     marker.size()},
                         peer_at));
    std::optional<std::string> next;
    while (!next.has_value() && absl::Now() < deadline) {
      if (std::optional<stack::ReceivedDatagram> d = t_->peer->Receive(peer).value()) {
        next = d->payload;
      } else {
        absl::SleepFor(absl::Milliseconds(1));
      }
    }
    EXPECT_EQ(next, marker);
    EXPECT_TRUE(ch->last_send_error().ok()) << ch->last_send_error();
  }
}

// A source address (IP_PKTINFO's) goes over shared memory; the stream refuses a datagram that
// asks for one rather than send it from another address.
TEST_F(DataChannelTest, ASourceAddressGoesOverSharedMemoryAndTheStreamRefusesIt) {
  for (ChannelTransport transport :
       {ChannelTransport::kSharedMemory, ChannelTransport::kGrpcStream}) {
    const uint16_t port = transport == ChannelTransport::kSharedMemory ? 4010 : 4011;
    std::unique_ptr<Client> client = NewClient(absl::StrCat("source", port));
    RemoteSocket s = Bound(*client, port);
    std::unique_ptr<DataChannel> ch = client->AttachChannel({.transport = transport}).value();
    ASSERT_TRUE(OnChannelBecomes(s, true));
    const stack::SocketId peer = t_->peer->Open(net::Family::kV4).value();
    const net::Endpoint peer_at = *net::Endpoint::Parse(absl::StrCat("10.1.0.1:", port + 1000));
    ASSERT_TRUE(t_->peer->Bind(peer, peer_at).ok());
    const std::string p = "from the address asked for";
    const channel::SendView v{s.index(), {reinterpret_cast<const uint8_t*>(p.data()), p.size()},
                              peer_at, *net::IpAddress::Parse("10.1.0.2")};
    if (transport == ChannelTransport::kGrpcStream) {
      EXPECT_EQ(ch->SendBatch({&v, 1}), 0u);
      const channel::SendView without{v.socket, v.payload, peer_at};
      EXPECT_EQ(ch->SendBatch({&without, 1}), 1u);  // refused for its source alone
      continue;
    }
    ASSERT_EQ(ch->SendBatch({&v, 1}), 1u);
    std::optional<stack::ReceivedDatagram> d;
    const absl::Time deadline = absl::Now() + absl::Seconds(20);
    while (!(d = t_->peer->Receive(peer).value()).has_value() && absl::Now() < deadline) {
      absl::SleepFor(absl::Milliseconds(1));
    }
    ASSERT_TRUE(d.has_value());
    EXPECT_EQ(d->payload, p);
    EXPECT_EQ(d->source.address, *net::IpAddress::Parse("10.1.0.2"));
  }
}

// Busy polling the stream (Receive with a zero timeout) reads it too: no thread does it for
// the application.
TEST_F(DataChannelTest, TheGrpcStreamDeliversToBusyPolling) {
  RemoteSocket a = Bound(*client_, 4000);
  std::unique_ptr<DataChannel> ch =
      client_->AttachChannel({.transport = ChannelTransport::kGrpcStream, .stream_window = 8})
          .value();
  ASSERT_TRUE(OnChannelBecomes(a, true));
  const stack::SocketId peer = t_->PeerSocket(5000).value();
  for (int i = 0; i < 20; ++i) {
    ASSERT_EQ(t_->PeerSend(peer, absl::StrCat("a", i), 4000), absl::OkStatus());
  }
  size_t got = 0;
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  while (got < 20 && absl::Now() < deadline) {
    channel::ReceivedView v[4];
    got += ch->Receive(v);
    ch->Release();
  }
  EXPECT_EQ(got, 20u);
}

// An event loop's way with the stream: wait_fd() is readable when datagrams came (a thread
// reads for it from then on), and the stream ends cleanly with that thread running.
TEST_F(DataChannelTest, TheGrpcStreamWakesItsWaitFdForAnEventLoop) {
  RemoteSocket a = Bound(*client_, 4000);
  std::unique_ptr<DataChannel> ch =
      client_->AttachChannel({.transport = ChannelTransport::kGrpcStream, .stream_window = 8})
          .value();
  ASSERT_TRUE(OnChannelBecomes(a, true));
  const int fd = ch->wait_fd();
  pollfd p{.fd = fd, .events = POLLIN, .revents = 0};
  EXPECT_EQ(poll(&p, 1, 0), 0) << "readable with nothing sent";
  const stack::SocketId peer = t_->PeerSocket(5000).value();
  size_t got = 0;
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  for (int i = 0; i < 20; ++i) {
    ASSERT_EQ(t_->PeerSend(peer, absl::StrCat("a", i), 4000), absl::OkStatus());
  }
  while (got < 20 && absl::Now() < deadline) {
    p.revents = 0;
    if (poll(&p, 1, 100) != 1) continue;
    channel::ReceivedView v[4];
    size_t n;
    while ((n = ch->Receive(v)) > 0) {  // zero timeout: what the fd announced
      got += n;
      ch->Release();
    }
  }
  EXPECT_EQ(got, 20u);
  p.revents = 0;
  EXPECT_EQ(poll(&p, 1, 0), 0) << "still readable after everything was taken";
  const std::string hello = "hello";
  EXPECT_TRUE(ch->Send(a.index(), {reinterpret_cast<const uint8_t*>(hello.data()), hello.size()},
                       *net::Endpoint::Parse("10.1.0.1:5000")));
  std::optional<stack::ReceivedDatagram> d;
  while (!(d = t_->peer->Receive(peer).value()).has_value() && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(2));
  }
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->payload, "hello");
  ch.reset();
  EXPECT_TRUE(OnChannelBecomes(a, false));
}

TEST_F(DataChannelTest, SharedMemoryWhenOfferedAndTheStreamWhenAskedOnlyOnePerSession) {
  RemoteSocket a = Bound(*client_, 4000);
  std::unique_ptr<DataChannel> shm = client_->AttachChannel().value();
  EXPECT_EQ(shm->transport(), ChannelTransport::kSharedMemory);
  std::unique_ptr<DataChannel> stream =
      client_->AttachChannel({.transport = ChannelTransport::kGrpcStream}).value();
  // The server refuses the second channel: the stream ends ALREADY_EXISTS.
  channel::ReceivedView v[1];
  EXPECT_TRUE(Eventually([&] {
    (void)stream->Receive(v, absl::Milliseconds(20));
    return !stream->ended().ok();
  }));
  EXPECT_EQ(stream->ended().code(), StatusCode::kAlreadyExists);
}

// A channel in use counts as calls for the session's lease, as an open stream does.
TEST_F(DataChannelTest, AnAttachedChannelKeepsItsSessionAlive) {
  absl::StatusOr<std::unique_ptr<Client>> idle = Client::Create(
      t_->server->InProcessChannel(),
      {.client_name = "idle", .lease_seconds = 1, .keep = ClientOptions::KeepSession::kNone});
  ASSERT_TRUE(idle.ok()) << idle.status();
  RemoteSocket s = Bound(**idle, 4800);
  std::unique_ptr<DataChannel> ch = (*idle)->AttachChannel().value();
  ASSERT_TRUE(OnChannelBecomes(s, true));
  // A second session with the same lease and nothing to keep it: once the reaper has ended
  // that one, it has looked at ours too.
  absl::StatusOr<std::unique_ptr<Client>> witness = Client::Create(
      t_->server->InProcessChannel(),
      {.client_name = "witness", .lease_seconds = 1,
       .keep = ClientOptions::KeepSession::kNone});
  ASSERT_TRUE(witness.ok());
  RemoteSocket w = Bound(**witness, 4801);
  w.Release();
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  while (t_->stack->List().size() == 2 && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(50));
  }
  absl::SleepFor(absl::Seconds(1.5));  // past a whole lease more: ours would have gone too
  ASSERT_EQ(t_->stack->List().size(), 1u) << "the witness session did not expire";
  const stack::SocketId peer = t_->PeerSocket(5000).value();
  ASSERT_EQ(t_->PeerSend(peer, "still here", 4800), absl::OkStatus());
  EXPECT_EQ(ReceiveN(*ch, 1).size(), 1u);
}

// The channel memfds this process holds (quadsockd's side of every channel, in this test).
int ChannelMemfds() {
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) {
    std::error_code ec;
    const std::filesystem::path target = std::filesystem::read_symlink(e.path(), ec);
    if (!ec && target.string().find("memfd:quadsock-channel") != std::string::npos) ++n;
  }
  return n;
}

TEST_F(DataChannelTest, AClientKilledWithItsChannelOpenLeavesNothingBehind) {
  const int memfds_before = ChannelMemfds();
  const std::string holder = std::string(std::getenv("TEST_SRCDIR")) + "/" +
                             std::getenv("TEST_WORKSPACE") + "/clients/cpp/channel_holder";
  int out[2];
  ASSERT_EQ(pipe(out), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    dup2(out[1], 1);
    execl(holder.c_str(), holder.c_str(), t_->server->listening_on().c_str(), "4700", nullptr);
    _exit(127);
  }
  close(out[1]);
  std::string said;
  char c;
  while (said.find("attached") == std::string::npos && read(out[0], &c, 1) == 1) said += c;
  close(out[0]);
  ASSERT_NE(said.find("attached"), std::string::npos) << "the holder did not attach";
  ASSERT_EQ(t_->stack->List().size(), 1u);
  EXPECT_EQ(ChannelMemfds(), memfds_before + 1);
  ASSERT_EQ(kill(child, SIGKILL), 0);
  int status;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  // Its side connection and its session go with it: the channel, its memory and its socket.
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while ((ChannelMemfds() != memfds_before || !t_->stack->List().empty()) &&
         absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  EXPECT_EQ(ChannelMemfds(), memfds_before);
  EXPECT_TRUE(t_->stack->List().empty());
  EXPECT_TRUE(Logged("data channel ended (the client closed its side connection)"));
}

}  // namespace
}  // namespace quadsock
