// Fuzz target: quadsockd's gRPC handlers, every request field in the input's hands. One server
// (service/testing/two_stacks.h: the real services over an in-memory wire) for the whole run;
// each input is a session of its own, a sequence of calls (Open, Bind, Connect, Rehash,
// Disconnect, Close, Get, List, Batch, Send, SendBatch, AttachChannel, KeepAlive, and the
// administration calls a session may make), and the session's end. The calls go straight to
// the service objects, as gRPC's threads make them, with the session's token in the call's
// metadata (gRPC's own transport, which cost the run seven times as much, is not what is
// fuzzed here; the service tests cover it). A handle is one this input opened, another
// session's, or bytes; an address is one of the stack's, a peer's, a wildcard, a martian, or
// bytes; a port any 32 bits; an enum any number. Checked for every call: the answer is a
// documented code (never UNKNOWN nor INTERNAL; an exception a handler throws, as `.value()` on
// an error does, is a crash here), with a message when it is not OK, and it comes (a handler
// that hangs is a libFuzzer timeout); no call reaches the other session's socket; a session
// cannot change the neighbour table; at the end of each input the session's end leaves only the
// other session's socket. The server's own checks (ASan, UBSan) apply throughout.
#include <grpcpp/grpcpp.h>
#include <grpcpp/test/server_context_test_spouse.h>

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "common/protocol.h"
#include "fuzz/check.h"
#include "fuzz/input.h"
#include "quadsock/v1/admin.grpc.pb.h"
#include "quadsock/v1/socket.grpc.pb.h"
#include "service/admin_service.h"
#include "service/socket_service.h"
#include "service/testing/two_stacks.h"
#include "stack/stack.h"

namespace {

using namespace quadsock;  // NOLINT: a fuzz target's few names

struct Server {
  std::unique_ptr<service::testing::TwoStacks> t;
  service::SocketServiceImpl* sockets = nullptr;
  service::AdminServiceImpl* admin = nullptr;  // on the sessions' listener
  std::string other_session;  // another session, held for the whole run (a lease of a year)
  std::string other_handle;   // its socket, which no input may reach
  stack::SocketId other_id;   // that socket in the stack
};

Server& TheServer() {
  static Server* s = [] {
    auto* s = new Server();
    service::ServerOptions o;
    o.sessions.max_sockets_per_session = 64;
    o.sessions.max_lease = absl::Hours(24 * 365);  // the other session's; an input's is 30 s
    o.log = [](absl::string_view) {};  // quiet: the run's output is libFuzzer's
    absl::StatusOr<std::unique_ptr<service::testing::TwoStacks>> t =
        service::testing::TwoStacks::Start(o, {.known_neighbors = true});
    FUZZ_CHECK(t.ok(), "the server did not start");
    s->t = std::move(*t);
    s->sockets = &s->t->server->sockets();
    s->admin = &s->t->server->admin();
    // Another session's socket, held for the whole run.
    grpc::ServerContext c;
    v1::CreateSessionRequest create;
    create.set_lease_seconds(absl::ToInt64Seconds(o.sessions.max_lease));
    v1::CreateSessionResponse session;
    FUZZ_CHECK(s->sockets->CreateSession(&c, &create, &session).ok(),
               "no session for the other socket");
    grpc::ServerContext o2;
    grpc::testing::ServerContextTestSpouse metadata(&o2);  // holds what o2's metadata names
    metadata.AddClientMetadata(kSessionHeader, session.session());
    v1::OpenRequest open;
    open.set_family(v1::FAMILY_IPV4);
    v1::OpenResponse opened;
    FUZZ_CHECK(s->sockets->Open(&o2, &open, &opened).ok(), "no other socket");
    s->other_session = session.session();
    s->other_handle = opened.socket();
    const std::vector<stack::SocketId> all = s->t->stack->List();
    FUZZ_CHECK(all.size() == 1, "the stack has sockets of its own");
    s->other_id = all[0];
    return s;
  }();
  return *s;
}

// Text for a string field: valid UTF-8, as protobuf requires of one (invalid UTF-8 fails the
// request's parsing in gRPC, before any handler: INTERNAL without a message). Bytes above 0x7f
// become "é", so that multi-byte characters come too.
std::string Text(fuzz::Input& in) {
  std::string out;
  for (uint8_t b : in.Bytes(in.Byte() % 24)) {
    if (b < 0x80) {
      out.push_back(static_cast<char>(b));
    } else {
      out += "\xc3\xa9";
    }
  }
  return out;
}

std::string Address(fuzz::Input& in) {
  static const char* const kAddresses[] = {
      "10.1.0.2", "10.1.0.1", "0.0.0.0", "fd00:1::2", "fd00:1::1", "::", "::ffff:10.1.0.1",
      "127.0.0.1", "255.255.255.255", "10.1.0.255", "224.0.0.1", "::1", "ff02::1", "10.9.9.9",
      "", "10.1.0.2%eth0", "[fd00:1::2]", "1.2.3", "fe80::1"};
  const uint8_t pick = in.Byte();
  if (pick < 2 * std::size(kAddresses)) return kAddresses[pick % std::size(kAddresses)];
  return Text(in);
}

v1::Family Family(fuzz::Input& in) {
  const uint8_t pick = in.Byte();
  if (pick < 240) return pick % 2 != 0 ? v1::FAMILY_IPV6 : v1::FAMILY_IPV4;
  return static_cast<v1::Family>(pick % 8);  // unspecified, and numbers no family has
}

uint32_t Port(fuzz::Input& in) {
  const uint8_t pick = in.Byte();
  if (pick < 128) return 4000 + pick % 4;
  if (pick < 192) return 5000 + pick % 2;
  return pick < 224 ? 0 : in.U32();
}

void Endpoint(fuzz::Input& in, v1::Endpoint* e) {
  e->set_address(Address(in));
  e->set_port(Port(in));
}

struct Session {
  std::string token;
  std::vector<std::string> handles;

  std::string Handle(fuzz::Input& in) const {
    const uint8_t pick = in.Byte();
    if (!handles.empty() && pick < 200) return handles[pick % handles.size()];
    if (pick < 220) return TheServer().other_handle;
    return Text(in);
  }
};

// Every answer is one of the codes the API documents, with words when it is not OK.
void CheckAnswer(const grpc::Status& s, const char* call) {
  const grpc::StatusCode code = s.error_code();
  if (code == grpc::StatusCode::UNKNOWN || code == grpc::StatusCode::INTERNAL ||
      code == grpc::StatusCode::UNIMPLEMENTED || code == grpc::StatusCode::DATA_LOSS ||
      code == grpc::StatusCode::DEADLINE_EXCEEDED || code == grpc::StatusCode::CANCELLED ||
      (code != grpc::StatusCode::OK && s.error_message().empty())) {
    std::fprintf(stderr, "%s answered %d: \"%s\"\n", call, static_cast<int>(code),
                 s.error_message().c_str());
    FUZZ_CHECK(false, "a call answered an undocumented code, or an error without words");
  }
}

// A call as gRPC's thread makes it: a server context whose metadata carries the session.
template <typename Request, typename Response, typename Service>
grpc::Status Call(Service* service,
                  grpc::Status (Service::*method)(grpc::ServerContext*, const Request*,
                                                  Response*),
                  const std::string& token, const Request& request, Response* response,
                  const char* name) {
  grpc::ServerContext ctx;
  grpc::testing::ServerContextTestSpouse metadata(&ctx);
  metadata.AddClientMetadata(kSessionHeader, token);
  grpc::Status s = (service->*method)(&ctx, &request, response);
  CheckAnswer(s, name);
  // Another session's socket is never this session's to use.
  if constexpr (requires { request.socket(); }) {
    if (request.socket() == TheServer().other_handle && s.ok()) {
      std::fprintf(stderr, "%s on another session's socket answered OK\n", name);
      FUZZ_CHECK(false, "a call reached another session's socket");
    }
  }
  return s;
}

void OneCall(fuzz::Input& in, Session& session) {
  Server& srv = TheServer();
  service::SocketServiceImpl* st = srv.sockets;
  const std::string& tok = session.token;
  switch (in.Byte() % 16) {
    case 0:
    case 1: {
      v1::OpenRequest r;
      r.set_family(Family(in));
      const uint8_t flags = in.Byte();
      r.set_v6only(flags & 1);
      r.set_reuse_port(flags & 2);
      if (flags & 4) r.set_bound_device(Text(in));
      if (flags & 8) r.set_receive_queue_depth(in.U32());
      if (flags & 16) r.set_pmtu_discovery(static_cast<v1::PmtuDiscovery>(in.Byte() % 6));
      v1::OpenResponse resp;
      if (Call(st, &service::SocketServiceImpl::Open, tok, r, &resp, "Open").ok()) {
        session.handles.push_back(resp.socket());
      }
      break;
    }
    case 2: {
      v1::BindRequest r;
      r.set_socket(session.Handle(in));
      Endpoint(in, r.mutable_local());
      v1::BindResponse resp;
      Call(st, &service::SocketServiceImpl::Bind, tok, r, &resp, "Bind");
      break;
    }
    case 3: {
      v1::ConnectRequest r;
      r.set_socket(session.Handle(in));
      Endpoint(in, r.mutable_peer());
      v1::ConnectResponse resp;
      Call(st, &service::SocketServiceImpl::Connect, tok, r, &resp, "Connect");
      break;
    }
    case 4: {
      v1::RehashRequest r;
      r.set_socket(session.Handle(in));
      if (in.Byte() & 1) r.set_local_address(Address(in));
      r.set_change_port(in.Byte() & 1);
      r.set_local_port(Port(in));
      v1::RehashResponse resp;
      Call(st, &service::SocketServiceImpl::Rehash, tok, r, &resp, "Rehash");
      break;
    }
    case 5: {
      v1::DisconnectRequest r;
      r.set_socket(session.Handle(in));
      v1::DisconnectResponse resp;
      Call(st, &service::SocketServiceImpl::Disconnect, tok, r, &resp, "Disconnect");
      break;
    }
    case 6: {
      v1::CloseRequest r;
      r.set_socket(session.Handle(in));
      v1::CloseResponse resp;
      Call(st, &service::SocketServiceImpl::Close, tok, r, &resp, "Close");
      break;
    }
    case 7: {
      v1::GetRequest r;
      r.set_socket(session.Handle(in));
      v1::Socket resp;
      Call(st, &service::SocketServiceImpl::Get, tok, r, &resp, "Get");
      break;
    }
    case 8: {
      v1::ListRequest r;
      r.set_state(static_cast<v1::SocketState>(in.Byte() % 6));
      r.set_local_port(Port(in));
      r.set_page_size(in.Byte());
      if (in.Byte() & 1) r.set_page_token(Text(in));
      v1::ListResponse resp;
      Call(st, &service::SocketServiceImpl::List, tok, r, &resp, "List");
      break;
    }
    case 9: {
      v1::BatchRequest r;
      for (int n = in.Byte() % 8; n > 0; --n) {
        v1::SocketOp* op = r.add_ops();
        switch (in.Byte() % 6) {
          case 0: op->mutable_open()->set_family(Family(in)); break;
          case 1:
            op->mutable_bind()->set_socket(session.Handle(in));
            Endpoint(in, op->mutable_bind()->mutable_local());
            break;
          case 2:
            op->mutable_connect()->set_socket(session.Handle(in));
            Endpoint(in, op->mutable_connect()->mutable_peer());
            break;
          case 3: op->mutable_rehash()->set_socket(session.Handle(in)); break;
          case 4: op->mutable_disconnect()->set_socket(session.Handle(in)); break;
          case 5: op->mutable_close()->set_socket(session.Handle(in)); break;
        }
      }
      v1::BatchResponse resp;
      if (Call(st, &service::SocketServiceImpl::Batch, tok, r, &resp, "Batch").ok()) {
        for (const v1::SocketOpResult& x : resp.results()) {
          CheckAnswer(grpc::Status(static_cast<grpc::StatusCode>(x.code()), x.message()),
                      "Batch's op");
          if (x.code() == 0 && !x.socket().empty()) session.handles.push_back(x.socket());
        }
      }
      break;
    }
    case 10: {
      v1::SendRequest r;
      r.set_socket(session.Handle(in));
      std::span<const uint8_t> p = in.Bytes(in.Byte() % 64);
      r.set_payload(std::string(p.begin(), p.end()) +
                    std::string((in.Byte() & 3) == 3 ? 1600 : 0, 'x'));
      if (in.Byte() & 1) Endpoint(in, r.mutable_destination());
      v1::SendResponse resp;
      Call(st, &service::SocketServiceImpl::Send, tok, r, &resp, "Send");
      break;
    }
    case 11: {
      v1::SendBatchRequest r;
      r.set_socket(session.Handle(in));
      for (int n = in.Byte() % 4; n > 0; --n) {
        v1::Datagram* d = r.add_datagrams();
        d->set_payload(Text(in));
        if (in.Byte() & 1) Endpoint(in, d->mutable_peer());
      }
      v1::SendBatchResponse resp;
      Call(st, &service::SocketServiceImpl::SendBatch, tok, r, &resp, "SendBatch");
      break;
    }
    case 12: {
      v1::AttachChannelRequest r;
      for (int n = in.Byte() % 3; n > 0; --n) r.add_sockets(session.Handle(in));
      r.set_ring_slots(in.Byte() & 1 ? in.U32() : 0);
      v1::AttachChannelResponse resp;
      Call(st, &service::SocketServiceImpl::AttachChannel, tok, r, &resp, "AttachChannel");
      break;
    }
    case 13: {
      v1::KeepAliveResponse resp;
      Call(st, &service::SocketServiceImpl::KeepAlive, tok, v1::KeepAliveRequest(), &resp,
           "KeepAlive");
      break;
    }
    case 14: {
      v1::SetNeighborRequest r;
      r.set_address(Address(in));
      r.set_mac(Text(in));
      v1::SetNeighborResponse resp;
      // Only the administration listener changes the neighbour table.
      FUZZ_CHECK(Call(srv.admin, &service::AdminServiceImpl::SetNeighbor, tok, r, &resp,
                      "SetNeighbor")
                         .error_code() == grpc::StatusCode::PERMISSION_DENIED,
                 "a session changed the neighbour table");
      break;
    }
    case 15: {
      v1::Counters resp;
      Call(srv.admin, &service::AdminServiceImpl::GetCounters, tok,
           v1::GetCountersRequest(), &resp, "GetCounters");
      break;
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::Input in(data, size);
  Server& srv = TheServer();
  Session session;
  {
    grpc::ServerContext c;
    v1::CreateSessionRequest r;
    r.set_client_name("fuzz");
    v1::CreateSessionResponse resp;
    const grpc::Status s = srv.sockets->CreateSession(&c, &r, &resp);
    CheckAnswer(s, "CreateSession");
    FUZZ_CHECK(s.ok(), "no session for the input");
    session.token = resp.session();
  }
  for (int calls = 0; in.more() && calls < 48; ++calls) OneCall(in, session);
  v1::EndSessionResponse ended;
  const grpc::Status s = Call(srv.sockets, &service::SocketServiceImpl::EndSession,
                              session.token, v1::EndSessionRequest(), &ended, "EndSession");
  FUZZ_CHECK(s.ok(), "the input's session could not be ended");
  // Its sockets went with it; the other session's one is still there (the stack's own list,
  // not GetCounters, which builds every counter the server has: some 5% of the run).
  const std::vector<stack::SocketId> left = srv.t->stack->List();
  if (left.size() != 1 || left[0] != srv.other_id) {
    std::fprintf(stderr, "after the session's end: %zu sockets\n", left.size());
    FUZZ_CHECK(false, "the session's end left sockets behind, or took another session's");
  }
  return 0;
}
