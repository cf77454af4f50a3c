// StreamChannel: a session's data channel on one gRPC stream, through the real services (the
// remote host is a second stack on the same in-memory wire).
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <thread>

#include "service/testing/fd_limit.h"
#include "service/testing/service_fixture.h"
#include "stack/channel/packed.h"

namespace quadsock::service {
namespace {

using ChannelStreamRw = grpc::ClientReaderWriter<v1::ChannelRequest, v1::ChannelResponse>;

class ChannelStreamTest : public ServiceTest {
 protected:
  // Opens a StreamChannel in `session`; the first request names `sockets` and grants `credit`.
  std::unique_ptr<ChannelStreamRw> Open(std::unique_ptr<ClientContext>& ctx,
                                        const std::string& session,
                                        std::vector<std::string> sockets, uint32_t credit,
                                        uint32_t ring_slots = 0, bool packed = false) {
    ctx = StreamContext(session, absl::Seconds(30));
    std::unique_ptr<ChannelStreamRw> s = sockets_->StreamChannel(ctx.get());
    v1::ChannelRequest first;
    for (const std::string& h : sockets) first.add_sockets(h);
    first.set_credit(credit);
    first.set_ring_slots(ring_slots);
    first.set_packed(packed);
    EXPECT_TRUE(s->Write(first));
    return s;
  }
  // Reads responses until `n` datagrams came; returns them (payload by socket index).
  std::multimap<uint32_t, std::string> ReadN(ChannelStreamRw& s, size_t n,
                                             std::vector<v1::SendResult>* results = nullptr) {
    std::multimap<uint32_t, std::string> got;
    v1::ChannelResponse r;
    while (got.size() < n && s.Read(&r)) {
      for (const v1::ChannelDatagram& d : r.datagrams()) got.emplace(d.socket(), d.payload());
      if (results != nullptr) {
        for (const v1::SendResult& x : r.send_results()) results->push_back(x);
      }
    }
    return got;
  }
  v1::Counters Counters() {
    ClientContext ctx;
    v1::Counters out;
    EXPECT_TRUE(administration_->GetCounters(&ctx, v1::GetCountersRequest(), &out).ok());
    return out;
  }
  // The witness that a stream sent what its credit allowed and no more: with the datagrams in
  // its rings, a request that grants nothing has it look again, and it counts a wait for
  // credit. Returns the datagrams it had written by then.
  uint64_t WrittenWhenOutOfCredit(ChannelStreamRw& s) {
    const uint64_t waits = Counters().stream_credit_waits();
    // Again until it is counted: a socket counts a datagram a moment before its ring shows it.
    EXPECT_TRUE(testing::Eventually([&] {
      EXPECT_TRUE(s.Write(v1::ChannelRequest()));
      return Counters().stream_credit_waits() > waits;
    })) << "the stream never waited for credit";
    return Counters().stream_datagrams();
  }
  bool OnChannel(const std::string& handle) {
    const absl::Time deadline = absl::Now() + absl::Seconds(10);
    while (absl::Now() < deadline) {
      if (Get(handle).on_channel()) return true;
      absl::SleepFor(absl::Milliseconds(10));
    }
    return false;
  }
};

TEST_F(ChannelStreamTest, DatagramsOfAllSocketsComeAsFarAsTheCreditGoes) {
  const std::string a = OpenBound(session_, "10.1.0.2", 4000);
  const std::string b = OpenBound(session_, "10.1.0.2", 4001);
  std::unique_ptr<ClientContext> ctx;
  auto s = Open(ctx, session_, {}, 5);
  ASSERT_TRUE(OnChannel(a) && OnChannel(b));
  const stack::SocketId peer = PeerSocket(5000);
  for (int i = 0; i < 5; ++i) {
    PeerSend(peer, absl::StrCat("a", i), 4000);
    PeerSend(peer, absl::StrCat("b", i), 4001);
  }
  // Exactly the credit: 5, then nothing more until the client grants it.
  std::multimap<uint32_t, std::string> got = ReadN(*s, 5);
  ASSERT_EQ(got.size(), 5u);
  ASSERT_TRUE(testing::Eventually([&] {
    return Get(a).counters().rx_datagrams() + Get(b).counters().rx_datagrams() == 10;
  }));
  EXPECT_EQ(WrittenWhenOutOfCredit(*s), 5u);
  v1::ChannelRequest more;
  more.set_credit(100);
  ASSERT_TRUE(s->Write(more));
  std::multimap<uint32_t, std::string> rest = ReadN(*s, 5);
  got.merge(rest);
  ASSERT_EQ(got.size(), 10u);
  EXPECT_EQ(got.count(Get(a).index()), 5u);
  EXPECT_EQ(got.count(Get(b).index()), 5u);
  // Every datagram accounted for: 5 each, none dropped or queued.
  for (const std::string& h : {a, b}) {
    EXPECT_EQ(Get(h).counters().rx_datagrams(), 5u);
    EXPECT_EQ(Get(h).counters().rx_dropped(), 0u);
  }
  ASSERT_TRUE(s->WritesDone());
  EXPECT_TRUE(s->Finish().ok());
  // The stream's end takes the sockets off the channel.
  EXPECT_TRUE(testing::Eventually([&] { return !Get(a).on_channel(); }));
}

// Asked for packed datagrams, the stream carries the rings' descriptors and the payloads: the
// same datagrams, with their sockets, endpoints and sequence numbers, and no messages.
TEST_F(ChannelStreamTest, PackedDatagramsSayWhatMessagesSay) {
  const std::string a = OpenBound(session_, "10.1.0.2", 4000);
  const std::string b = OpenBound(session_, "10.1.0.2", 4001);
  std::unique_ptr<ClientContext> ctx;
  auto s = Open(ctx, session_, {}, 100, /*ring_slots=*/0, /*packed=*/true);
  ASSERT_TRUE(OnChannel(a) && OnChannel(b));
  const stack::SocketId peer = PeerSocket(5000);
  for (int i = 0; i < 4; ++i) {
    PeerSend(peer, absl::StrCat("a", i), 4000);
    PeerSend(peer, std::string(i * 400, 'b'), 4001);  // the first one empty
  }
  std::map<uint32_t, std::vector<std::pair<uint64_t, std::string>>> got;
  size_t count = 0;
  v1::ChannelResponse r;
  while (count < 8 && s->Read(&r)) {
    EXPECT_EQ(r.datagrams_size(), 0);
    ASSERT_EQ(channel::CheckPacked(r.descriptors(), r.payloads()), absl::OkStatus());
    size_t offset = 0;
    for (size_t i = 0; i < channel::PackedCount(r.descriptors()); ++i, ++count) {
      const channel::ReceivedView v = channel::UnpackAt(r.descriptors(), r.payloads(), i, offset);
      offset += v.payload.size();
      EXPECT_EQ(v.peer.ToString(), "10.1.0.1:5000");
      const int port = v.socket == Get(a).index() ? 4000 : 4001;
      EXPECT_EQ(v.local.ToString(), absl::StrCat("10.1.0.2:", port));
      EXPECT_GT(v.arrival, absl::Now() - absl::Minutes(1));
      got[v.socket].emplace_back(v.sequence, std::string(v.payload.begin(), v.payload.end()));
    }
  }
  ASSERT_EQ(count, 8u);
  ASSERT_EQ(got[Get(a).index()].size(), 4u);
  ASSERT_EQ(got[Get(b).index()].size(), 4u);
  for (uint64_t i = 0; i < 4; ++i) {
    EXPECT_EQ(got[Get(a).index()][i], std::make_pair(i + 1, absl::StrCat("a", i)));
    EXPECT_EQ(got[Get(b).index()][i], std::make_pair(i + 1, std::string(i * 400, 'b')));
  }
  ctx->TryCancel();
}

TEST_F(ChannelStreamTest, SendsGoOutAndFailuresComeBackWithTheirRequest) {
  const std::string a = OpenBound(session_, "10.1.0.2", 4000);
  std::unique_ptr<ClientContext> ctx;
  auto s = Open(ctx, session_, {a}, 10);
  ASSERT_TRUE(OnChannel(a));
  const stack::SocketId peer = PeerSocket(5000);
  v1::ChannelRequest req;
  for (int i = 0; i < 3; ++i) {
    v1::ChannelDatagram* d = req.add_send();
    d->set_socket(Get(a).index());
    d->set_payload(absl::StrCat("out", i));
    *d->mutable_peer() = Ep("10.1.0.1", 5000);
  }
  ASSERT_TRUE(s->Write(req));  // request 2
  for (int i = 0; i < 3; ++i) {
    std::optional<stack::ReceivedDatagram> d;
    const absl::Time deadline = absl::Now() + absl::Seconds(10);
    while (!(d = peer_->Receive(peer).value()).has_value() && absl::Now() < deadline) {
      absl::SleepFor(absl::Milliseconds(5));
    }
    ASSERT_TRUE(d.has_value());
    EXPECT_EQ(d->payload, absl::StrCat("out", i));
  }
  v1::ChannelRequest bad;
  bad.add_send()->set_socket(Get(a).index());  // unconnected, no peer: FAILED_PRECONDITION
  v1::ChannelDatagram* unknown = bad.add_send();
  unknown->set_socket(999);
  ASSERT_TRUE(s->Write(bad));  // request 3
  v1::ChannelResponse r;
  ASSERT_TRUE(s->Read(&r));
  ASSERT_EQ(r.send_results_size(), 1);
  EXPECT_EQ(r.send_results(0).request(), 3u);
  EXPECT_EQ(r.send_results(0).queued(), 0u);
  EXPECT_EQ(r.send_results(0).code(), static_cast<int>(grpc::StatusCode::FAILED_PRECONDITION))
      << r.send_results(0).message();
  ctx->TryCancel();
}

TEST_F(ChannelStreamTest, NoCreditMeansTheRingFillsAndDropsAreCounted) {
  const std::string a = OpenBound(session_, "10.1.0.2", 4000);
  std::unique_ptr<ClientContext> ctx;
  auto s = Open(ctx, session_, {}, 0, /*ring_slots=*/16);
  ASSERT_TRUE(OnChannel(a));
  // The peer knows our MAC: its datagrams do not wait for ARP (in a queue of 16).
  ASSERT_EQ(peer_->SetNeighbor(*net::IpAddress::Parse("10.1.0.2"), testing::kServerMac),
            absl::OkStatus());
  const stack::SocketId peer = PeerSocket(5000);
  for (int i = 0; i < 40; ++i) PeerSend(peer, "x", 4000);
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (Get(a).counters().rx_datagrams() + Get(a).counters().rx_dropped() < 40 &&
         absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_EQ(Get(a).counters().rx_datagrams(), 16u);
  EXPECT_EQ(Get(a).counters().rx_dropped(), 24u);
  EXPECT_EQ(WrittenWhenOutOfCredit(*s), 0u);
  v1::ChannelRequest more;
  more.set_credit(100);
  ASSERT_TRUE(s->Write(more));
  EXPECT_EQ(ReadN(*s, 16).size(), 16u);
  ctx->TryCancel();
}

TEST_F(ChannelStreamTest, OneChannelPerSessionAndTheSessionsEndEndsTheStream) {
  const std::string a = OpenBound(session_, "10.1.0.2", 4000);
  std::unique_ptr<ClientContext> ctx;
  auto s = Open(ctx, session_, {}, 10);
  ASSERT_TRUE(OnChannel(a));
  // A second channel of either kind: ALREADY_EXISTS.
  std::unique_ptr<ClientContext> ctx2;
  auto s2 = Open(ctx2, session_, {}, 10);
  v1::ChannelResponse r;
  EXPECT_FALSE(s2->Read(&r));
  EXPECT_EQ(s2->Finish().error_code(), grpc::StatusCode::ALREADY_EXISTS);
  v1::AttachChannelRequest attach;
  v1::AttachChannelResponse offer;
  EXPECT_EQ(Call(&v1::SocketService::Stub::AttachChannel, attach, &offer).error_code(),
            grpc::StatusCode::ALREADY_EXISTS);
  // The session ends: so does the stream, NOT_FOUND.
  v1::EndSessionResponse ended;
  ASSERT_TRUE(Call(&v1::SocketService::Stub::EndSession, v1::EndSessionRequest(), &ended).ok());
  EXPECT_FALSE(s->Read(&r));
  EXPECT_EQ(s->Finish().error_code(), grpc::StatusCode::NOT_FOUND);
}

// A channel that ends takes its sockets off with one wait for the poll threads, not one per
// socket (under the broker's lock, which every other session's Open and wake-up needs).
TEST_F(ChannelStreamTest, AChannelThatEndsTakesItsSocketsOffWithOneWait) {
  std::vector<std::string> handles;
  for (int i = 0; i < 8; ++i) handles.push_back(OpenBound(session_, "10.1.0.2", 4000 + i));
  std::unique_ptr<ClientContext> ctx;
  auto s = Open(ctx, session_, {}, 10);
  for (const std::string& h : handles) ASSERT_TRUE(OnChannel(h));
  const uint64_t before = stack_->Counters().channel_waits;
  ctx->TryCancel();  // the client ends the stream
  s->Finish();
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (Get(handles[0]).on_channel() && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  for (const std::string& h : handles) EXPECT_FALSE(Get(h).on_channel());
  EXPECT_EQ(stack_->Counters().channel_waits, before + 1);
}

// The same at full size: a channel of 65,536 sockets ends (its client cancels)
// while another session opens sockets and echoes datagrams through a channel of its own. One
// wait for all (before, one grace period per socket under the broker's lock: the other
// session's Opens and wake-ups waited for every one), every socket off the channel, and every
// call of the other session answered.
class ManySocketsChannelTest : public ChannelStreamTest {
 protected:
  void Configure(ServerOptions& o) override { o.sessions.max_sockets_per_session = 65536 + 8; }
};

TEST_F(ManySocketsChannelTest, AChannelOf65536SocketsEndsWithOneWaitWhileAnotherSessionWorks) {
  constexpr int kSockets = 65536;
  std::vector<std::string> handles;
  for (int opened = 0; opened < kSockets;) {
    v1::BatchRequest batch;
    for (int i = 0; i < 1024 && opened + i < kSockets; ++i) {
      batch.add_ops()->mutable_open()->set_family(v1::FAMILY_IPV4);
    }
    v1::BatchResponse done;
    ASSERT_TRUE(Call(&v1::SocketService::Stub::Batch, batch, &done).ok());
    for (const v1::SocketOpResult& r : done.results()) {
      ASSERT_EQ(r.code(), 0) << r.message();
      handles.push_back(r.socket());
    }
    opened += done.results_size();
  }
  std::unique_ptr<ClientContext> ctx;
  auto s = Open(ctx, session_, {}, 10);
  ASSERT_TRUE(OnChannel(handles.back()));

  // The other session: a socket echoed through its own channel, and Opens, until told to stop.
  const std::string other = NewSession("other");
  const std::string echo = OpenBound(other, "10.1.0.2", 4000);
  std::unique_ptr<ClientContext> other_ctx;
  auto other_stream = Open(other_ctx, other, {echo}, 1 << 20);
  ASSERT_TRUE(testing::Eventually([&] {
    ClientContext c;
    Auth(c, other);
    v1::GetRequest req;
    req.set_socket(echo);
    v1::Socket got;
    return sockets_->Get(&c, req, &got).ok() && got.on_channel();
  }));
  const stack::SocketId peer = PeerSocket(5000);
  std::atomic<bool> stop{false};
  std::atomic<int> rounds{0}, opens{0}, failures{0};
  std::thread worker([&] {
    while (!stop.load()) {
      PeerSend(peer, "ping", 4000);
      if (ReadN(*other_stream, 1).size() != 1) {
        ++failures;
        return;
      }
      ++rounds;
      ClientContext c;
      c.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(20)));
      Auth(c, other);
      v1::OpenRequest req;
      req.set_family(v1::FAMILY_IPV4);
      v1::OpenResponse opened;
      if (!sockets_->Open(&c, req, &opened).ok()) ++failures;
      ClientContext c2;
      Auth(c2, other);
      v1::CloseRequest close;
      close.set_socket(opened.socket());
      v1::CloseResponse closed;
      if (!sockets_->Close(&c2, close, &closed).ok()) ++failures;
      ++opens;
    }
  });
  // EXPECT, not ASSERT, while the worker runs: it must be joined below whatever happens.
  EXPECT_TRUE(testing::Eventually([&] { return rounds.load() > 0 || failures.load() > 0; }));

  const uint64_t before = stack_->Counters().channel_waits;
  const int rounds_before = rounds.load();
  ctx->TryCancel();  // the client ends the big channel's stream
  s->Finish();
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  while (Get(handles.back()).on_channel() && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  // The other session went on meanwhile, and goes on after.
  EXPECT_TRUE(testing::Eventually([&] {
    return rounds.load() >= rounds_before + 10 || failures.load() > 0;
  }));
  stop = true;
  worker.join();
  EXPECT_EQ(failures.load(), 0);
  for (int i = 0; i < kSockets; i += 4099) EXPECT_FALSE(Get(handles[i]).on_channel()) << i;
  EXPECT_FALSE(Get(handles.back()).on_channel());
  EXPECT_EQ(stack_->Counters().channel_waits, before + 1);
  other_ctx->TryCancel();
  other_stream->Finish();
}

TEST_F(ChannelStreamTest, AnotherSessionsSocketIsNotOurs) {
  const std::string other = NewSession("other");
  const std::string theirs = OpenBound(other, "10.1.0.2", 4000);
  std::unique_ptr<ClientContext> ctx;
  auto s = Open(ctx, session_, {theirs}, 10);
  v1::ChannelResponse r;
  EXPECT_FALSE(s->Read(&r));
  EXPECT_EQ(s->Finish().error_code(), grpc::StatusCode::PERMISSION_DENIED);
}

class ChannelBudgetTest : public ChannelStreamTest {
 protected:
  void Configure(ServerOptions& o) override { o.channels.max_bytes_total = 5 << 20; }
};

// All sessions' channels together take at most max_bytes_total (each session's alone stays
// under --max_channel_mib): past it a new one is RESOURCE_EXHAUSTED, naming the flag, and a
// channel that goes gives its bytes back.
TEST_F(ChannelBudgetTest, AllSessionsChannelsTogetherHaveABudget) {
  v1::AttachChannelResponse first;
  ASSERT_TRUE(Call(&v1::SocketService::Stub::AttachChannel, v1::AttachChannelRequest(), &first)
                  .ok());
  ASSERT_LE(first.bytes(), 5u << 20);
  ASSERT_GT(2 * first.bytes(), 5u << 20) << "two channels fit: the test proves nothing";
  const std::string other = NewSession("other");
  std::unique_ptr<ClientContext> ctx;
  auto stream = Open(ctx, other, {}, 10);
  v1::ChannelResponse r;
  EXPECT_FALSE(stream->Read(&r));
  const grpc::Status refused = stream->Finish();
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(refused.error_message().find("--max_all_channels_mib"), std::string::npos)
      << refused.error_message();
  // The first session ends, and its channel (offered, never claimed) with it.
  v1::EndSessionResponse ended;
  ASSERT_TRUE(Call(&v1::SocketService::Stub::EndSession, v1::EndSessionRequest(), &ended).ok());
  ClientContext again;
  Auth(again, other);
  v1::AttachChannelResponse second;
  const grpc::Status s = sockets_->AttachChannel(&again, v1::AttachChannelRequest(), &second);
  EXPECT_TRUE(s.ok()) << s.error_message();
}

}  // namespace
}  // namespace quadsock::service
