// Throughput of quadsockd's gRPC layer, in one run: socket operations per second (open, bind,
// connect, close) as unary calls and in Batch calls, and datagrams per second through one
// Receive stream, through the Exchange stream, and through the session's data channel on its
// gRPC stream (StreamChannel), packed and as messages. The server is the real one, over a Unix
// socket; its stack runs over MemoryLink, with a second stack on the wire as the remote host,
// so no root is needed and the network is not what is measured.
//
//   bazel run -c opt //service:service_benchmark [-- --seconds=3]
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "common/protocol.h"
#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "quadsock/v1/socket.grpc.pb.h"
#include "service/server.h"
#include "service/testing/two_stacks.h"
#include "stack/channel/packed.h"

ABSL_FLAG(double, seconds, 2.0, "How long each case runs.");
ABSL_FLAG(int, batch, 256, "Socket lifecycles (4 operations each) per Batch call.");

namespace quadsock {
namespace {

using grpc::ClientContext;

v1::Endpoint Ep(const std::string& a, uint32_t port) {
  v1::Endpoint e;
  e.set_address(a);
  e.set_port(port);
  return e;
}

struct Bench {
  std::unique_ptr<service::testing::TwoStacks> t;
  std::unique_ptr<v1::SocketService::Stub> stub;
  std::string session;

  void Auth(ClientContext& c) const { c.AddMetadata(kSessionHeader, session); }
};

std::string NewSession(v1::SocketService::Stub& stub) {
  ClientContext ctx;
  v1::CreateSessionResponse resp;
  (void)stub.CreateSession(&ctx, v1::CreateSessionRequest(), &resp);
  return resp.session();
}

Bench Make() {
  Bench b;
  service::ServerOptions o;
  o.sessions.max_sockets_per_session = 1 << 20;
  o.max_batch = 4096;
  b.t = service::testing::TwoStacks::Start(
            o, {.frames = 8192, .rx_queue = 8192, .receive_queue_depth = 4096,
                .known_neighbors = true})
            .value();
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(64 << 20);
  b.stub = v1::SocketService::NewStub(grpc::CreateCustomChannel(
      b.t->server->listening_on(), grpc::InsecureChannelCredentials(), args));
  b.session = NewSession(*b.stub);
  return b;
}

// A call of the benchmark that failed: the benchmark is broken, not slow. Says which, and ends
// the run with status 1 (the smoke test's failure).
void MustSucceed(const grpc::Status& s, const char* call) {
  if (s.ok()) return;
  std::fprintf(stderr, "service_benchmark: %s failed: %d %s\n", call,
               static_cast<int>(s.error_code()), s.error_message().c_str());
  std::exit(1);
}

// Open, bind (ephemeral), connect, close: four unary calls.
double UnaryOps(Bench& b, absl::Duration d) {
  uint64_t ops = 0;
  const absl::Time start = absl::Now();
  uint32_t peer_port = 10000;
  while (absl::Now() - start < d) {
    ClientContext c1;
    b.Auth(c1);
    v1::OpenRequest open;
    open.set_family(v1::FAMILY_IPV4);
    v1::OpenResponse opened;
    MustSucceed(b.stub->Open(&c1, open, &opened), "Open");
    ClientContext c2;
    b.Auth(c2);
    v1::BindRequest bind;
    bind.set_socket(opened.socket());
    *bind.mutable_local() = Ep("0.0.0.0", 0);
    v1::BindResponse bound;
    MustSucceed(b.stub->Bind(&c2, bind, &bound), "Bind");
    ClientContext c3;
    b.Auth(c3);
    v1::ConnectRequest connect;
    connect.set_socket(opened.socket());
    *connect.mutable_peer() = Ep("10.1.0.1", peer_port++ % 50000 + 1);
    v1::ConnectResponse connected;
    MustSucceed(b.stub->Connect(&c3, connect, &connected), "Connect");
    ClientContext c4;
    b.Auth(c4);
    v1::CloseRequest close;
    close.set_socket(opened.socket());
    v1::CloseResponse closed;
    MustSucceed(b.stub->Close(&c4, close, &closed), "Close");
    ops += 4;
  }
  return ops / absl::ToDoubleSeconds(absl::Now() - start);
}

double BatchedOps(Bench& b, absl::Duration d, int lifecycles) {
  uint64_t ops = 0;
  uint32_t peer_port = 10000;
  const absl::Time start = absl::Now();
  while (absl::Now() - start < d) {
    v1::BatchRequest req;
    for (int i = 0; i < lifecycles; ++i) {
      const std::string self = absl::StrCat("#", req.ops_size());
      req.add_ops()->mutable_open()->set_family(v1::FAMILY_IPV4);
      v1::BindRequest* bind = req.add_ops()->mutable_bind();
      bind->set_socket(self);
      *bind->mutable_local() = Ep("0.0.0.0", 0);
      v1::ConnectRequest* connect = req.add_ops()->mutable_connect();
      connect->set_socket(self);
      *connect->mutable_peer() = Ep("10.1.0.1", peer_port++ % 50000 + 1);
      req.add_ops()->mutable_close()->set_socket(self);
    }
    ClientContext ctx;
    b.Auth(ctx);
    v1::BatchResponse resp;
    MustSucceed(b.stub->Batch(&ctx, req, &resp), "Batch");
    for (const v1::SocketOpResult& r : resp.results()) {
      MustSucceed(grpc::Status(static_cast<grpc::StatusCode>(r.code()), r.message()),
                  "an operation of a Batch");
    }
    ops += resp.results_size();
  }
  return ops / absl::ToDoubleSeconds(absl::Now() - start);
}

// The peer blasts 64-byte datagrams at one socket while the client reads a stream.
struct StreamResult {
  double received_per_second;
  double offered_per_second;
};

enum class Stream { kReceive, kExchange, kChannelMessages, kChannelPacked };
bool IsChannel(Stream kind) {
  return kind == Stream::kChannelMessages || kind == Stream::kChannelPacked;
}

// Reads a StreamChannel until `d` has passed, granting back as credit what each response
// brought; returns the datagrams read.
uint64_t ReadChannel(Bench& b, ClientContext& ctx, const std::string& socket, bool packed,
                     absl::Time start, absl::Duration d) {
  constexpr uint32_t kWindow = 4096;
  auto stream = b.stub->StreamChannel(&ctx);
  v1::ChannelRequest first;
  first.add_sockets(socket);
  first.set_credit(kWindow);
  first.set_packed(packed);
  stream->Write(first);
  uint64_t received = 0;
  v1::ChannelResponse resp;
  while (absl::Now() - start < d && stream->Read(&resp)) {
    const size_t n = packed ? channel::PackedCount(resp.descriptors()) : resp.datagrams_size();
    received += n;
    v1::ChannelRequest more;
    more.set_credit(static_cast<uint32_t>(n));
    if (n > 0) stream->Write(more);
  }
  ctx.TryCancel();
  (void)stream->Finish();
  return received;
}

StreamResult Datagrams(Bench& b, absl::Duration d, Stream kind) {
  // A channel case in a session of its own: one channel a session, and the last one's end is
  // not waited for.
  if (IsChannel(kind)) {
    b.session = NewSession(*b.stub);
  }
  ClientContext oc;
  b.Auth(oc);
  v1::OpenRequest open;
  open.set_family(v1::FAMILY_IPV4);
  open.set_receive_queue_depth(4096);
  v1::OpenResponse opened;
  (void)b.stub->Open(&oc, open, &opened);
  ClientContext bc;
  b.Auth(bc);
  v1::BindRequest bind;
  bind.set_socket(opened.socket());
  const uint32_t port = 7000 + static_cast<uint32_t>(kind);
  *bind.mutable_local() = Ep("10.1.0.2", port);
  v1::BindResponse bound;
  (void)b.stub->Bind(&bc, bind, &bound);

  std::atomic<bool> stop{false};
  std::atomic<uint64_t> offered{0};
  stack::SocketId src = b.t->peer->Open(net::Family::kV4).value();
  std::thread blaster([&] {
    const std::string payload(64, 'x');
    const std::span<const uint8_t> bytes(reinterpret_cast<const uint8_t*>(payload.data()), payload.size());
    const net::Endpoint to{*net::IpAddress::Parse("10.1.0.2"), static_cast<uint16_t>(port)};
    while (!stop.load()) {
      if (b.t->peer->Send(src, bytes, to).ok()) offered.fetch_add(1, std::memory_order_relaxed);
      else std::this_thread::yield();
    }
  });
  uint64_t received = 0;
  ClientContext ctx;
  b.Auth(ctx);
  const absl::Time start = absl::Now();
  if (IsChannel(kind)) {
    received = ReadChannel(b, ctx, opened.socket(), kind == Stream::kChannelPacked, start, d);
  } else if (kind == Stream::kReceive) {
    v1::ReceiveRequest req;
    req.set_socket(opened.socket());
    auto reader = b.stub->Receive(&ctx, req);
    v1::Datagram dg;
    while (absl::Now() - start < d && reader->Read(&dg)) ++received;
    ctx.TryCancel();
    (void)reader->Finish();
  } else {
    auto stream = b.stub->Exchange(&ctx);
    v1::ExchangeRequest first;
    first.set_socket(opened.socket());
    stream->Write(first);
    v1::ExchangeResponse resp;
    while (absl::Now() - start < d && stream->Read(&resp)) received += resp.datagrams_size();
    ctx.TryCancel();
    (void)stream->Finish();
  }
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
  stop = true;
  blaster.join();
  return {received / seconds, offered.load() / seconds};
}

int Main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const absl::Duration d = absl::Seconds(absl::GetFlag(FLAGS_seconds));
  Bench b = Make();
  const double unary = UnaryOps(b, d);
  const double batched = BatchedOps(b, d, absl::GetFlag(FLAGS_batch));
  const StreamResult receive = Datagrams(b, d, Stream::kReceive);
  const StreamResult exchange = Datagrams(b, d, Stream::kExchange);
  const StreamResult messages = Datagrams(b, d, Stream::kChannelMessages);
  const StreamResult packed = Datagrams(b, d, Stream::kChannelPacked);
  std::printf("| case | per second |\n|---|---|\n");
  std::printf("| socket operations, unary (open, bind, connect, close) | %.0f |\n", unary);
  std::printf("| socket operations, Batch of %d lifecycles | %.0f |\n", absl::GetFlag(FLAGS_batch), batched);
  std::printf("| datagrams through one Receive stream (offered %.0f/s) | %.0f |\n",
              receive.offered_per_second, receive.received_per_second);
  std::printf("| datagrams through one Exchange stream (offered %.0f/s) | %.0f |\n",
              exchange.offered_per_second, exchange.received_per_second);
  std::printf("| datagrams through the data channel's stream, messages (offered %.0f/s) | %.0f |\n",
              messages.offered_per_second, messages.received_per_second);
  std::printf("| datagrams through the data channel's stream, packed (offered %.0f/s) | %.0f |\n",
              packed.offered_per_second, packed.received_per_second);
  std::printf("\ntarget: >= 50000 socket operations per second batched: %s (%.1fx)\n",
              batched >= 50000 ? "met" : "NOT met", batched / 50000);
  (void)b.t->Stop();
  // A stream that carried nothing is broken, not slow (the smoke test runs this briefly).
  for (const StreamResult* r : {&receive, &exchange, &messages, &packed}) {
    if (r->received_per_second <= 0) {
      std::fprintf(stderr, "service_benchmark: a stream case received no datagram\n");
      return 1;
    }
  }
  return 0;
}

}  // namespace
}  // namespace quadsock

int main(int argc, char** argv) { return quadsock::Main(argc, argv); }
