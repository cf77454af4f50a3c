// SocketService over a Stack: a thin layer that checks the request, finds the caller's
// session and socket, calls the stack, and maps its absl::Status to the same gRPC code.
//
//   ServiceContext ctx{stack, sessions};
//   SocketServiceImpl service(ctx);
//   builder.RegisterService(&service);
#ifndef QUADSOCK_SERVICE_SOCKET_SERVICE_H_
#define QUADSOCK_SERVICE_SOCKET_SERVICE_H_

#include <grpcpp/grpcpp.h>

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "quadsock/v1/socket.grpc.pb.h"
#include "service/service_context.h"
#include "service/sessions.h"
#include "stack/stack.h"

namespace quadsock::service {

// StreamChannel runs on gRPC's callback API (a reactor, no thread of its own); the other calls
// on the synchronous one.
class SocketServiceImpl final
    : public v1::SocketService::WithCallbackMethod_StreamChannel<v1::SocketService::Service> {
 public:
  explicit SocketServiceImpl(ServiceContext& context) : c_(context) {}

  grpc::Status CreateSession(grpc::ServerContext* ctx, const v1::CreateSessionRequest* req,
                             v1::CreateSessionResponse* resp) override;
  grpc::Status KeepAlive(grpc::ServerContext* ctx, const v1::KeepAliveRequest* req,
                         v1::KeepAliveResponse* resp) override;
  grpc::Status Session(grpc::ServerContext* ctx, const v1::SessionRequest* req,
                       grpc::ServerWriter<v1::SessionEvent>* writer) override;
  grpc::Status EndSession(grpc::ServerContext* ctx, const v1::EndSessionRequest* req,
                          v1::EndSessionResponse* resp) override;
  grpc::Status Open(grpc::ServerContext* ctx, const v1::OpenRequest* req,
                    v1::OpenResponse* resp) override;
  grpc::Status Bind(grpc::ServerContext* ctx, const v1::BindRequest* req,
                    v1::BindResponse* resp) override;
  grpc::Status Connect(grpc::ServerContext* ctx, const v1::ConnectRequest* req,
                       v1::ConnectResponse* resp) override;
  grpc::Status Rehash(grpc::ServerContext* ctx, const v1::RehashRequest* req,
                      v1::RehashResponse* resp) override;
  grpc::Status Disconnect(grpc::ServerContext* ctx, const v1::DisconnectRequest* req,
                          v1::DisconnectResponse* resp) override;
  grpc::Status Close(grpc::ServerContext* ctx, const v1::CloseRequest* req,
                     v1::CloseResponse* resp) override;
  grpc::Status Get(grpc::ServerContext* ctx, const v1::GetRequest* req,
                   v1::Socket* resp) override;
  grpc::Status List(grpc::ServerContext* ctx, const v1::ListRequest* req,
                    v1::ListResponse* resp) override;
  grpc::Status Batch(grpc::ServerContext* ctx, const v1::BatchRequest* req,
                     v1::BatchResponse* resp) override;
  grpc::Status Send(grpc::ServerContext* ctx, const v1::SendRequest* req,
                    v1::SendResponse* resp) override;
  grpc::Status SendBatch(grpc::ServerContext* ctx, const v1::SendBatchRequest* req,
                         v1::SendBatchResponse* resp) override;
  grpc::Status Receive(grpc::ServerContext* ctx, const v1::ReceiveRequest* req,
                       grpc::ServerWriter<v1::Datagram>* writer) override;
  grpc::Status Exchange(
      grpc::ServerContext* ctx,
      grpc::ServerReaderWriter<v1::ExchangeResponse, v1::ExchangeRequest>* stream) override;
  grpc::Status AttachChannel(grpc::ServerContext* ctx, const v1::AttachChannelRequest* req,
                             v1::AttachChannelResponse* resp) override;
  grpc::ServerBidiReactor<v1::ChannelRequest, v1::ChannelResponse>* StreamChannel(
      grpc::CallbackServerContext* ctx) override;

 private:
  // The session and the socket a request names.
  absl::StatusOr<std::pair<std::string, SocketId>> Resolve(grpc::ServerContext* ctx,
                                                           const std::string& handle);
  absl::Status Describe(const std::string& token, const std::string& handle, SocketId id,
                        v1::Socket* out);
  // Each socket operation once, for its unary RPC and for Batch alike. The socket is found.
  absl::StatusOr<std::string> OpenSocket(const std::string& token, const v1::OpenRequest& req);
  absl::StatusOr<net::Endpoint> BindSocket(SocketId id, const v1::BindRequest& req);
  absl::StatusOr<net::Endpoint> ConnectSocket(SocketId id, const v1::ConnectRequest& req);
  absl::StatusOr<net::Endpoint> RehashSocket(SocketId id, const v1::RehashRequest& req);
  absl::Status CloseSocket(const std::string& token, const std::string& handle, SocketId id);
  // One operation of a Batch; `opened` holds the handles of sockets opened earlier in it.
  v1::SocketOpResult RunOp(const std::string& token, const v1::SocketOp& op,
                           const std::vector<std::string>& opened);
  // Sends `d` (payload and, unless connected, peer) on `id`.
  absl::Status SendOne(SocketId id, const v1::Datagram& d);

  ServiceContext& c_;
};

}  // namespace quadsock::service

#endif  // QUADSOCK_SERVICE_SOCKET_SERVICE_H_
