// StreamChannel: a session's data channel carried on one gRPC stream, for remote clients and
// languages without shared memory. The same channel as in shared memory (stack/channel), read
// inside quadsockd: the poll threads put datagrams into its rings, and this reactor turns them
// into batches for the client, as far as the client's credit goes. No thread of its own: it runs
// on gRPC's callbacks, and the broker's thread tells it when a ring may have datagrams.
//
//   SocketServiceImpl::StreamChannel(ctx) { return new ChannelStream(context, ctx); }
#ifndef QUADSOCK_SERVICE_CHANNEL_STREAM_H_
#define QUADSOCK_SERVICE_CHANNEL_STREAM_H_

#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "quadsock/v1/socket.grpc.pb.h"
#include "service/service_context.h"
#include "stack/channel/channel.h"
#include "stack/channel/reader.h"

namespace quadsock::service {

class ChannelStream final
    : public grpc::ServerBidiReactor<v1::ChannelRequest, v1::ChannelResponse> {
 public:
  ChannelStream(ServiceContext& c, grpc::CallbackServerContext* ctx);

  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

 private:
  // The first request: the session's channel, attached.
  absl::Status Attach(const v1::ChannelRequest& first);
  // A request's datagrams, sent in order; a SendResult when not all went.
  void SendAll(const v1::ChannelRequest& req);
  // Writes the next batch if the client has credit, a ring has datagrams, and no write is in
  // flight. Any thread.
  void Pump();
  // The next batch in response_: false when there is nothing to write.
  bool NextResponse() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A write has two holders: the call that started it (gRPC serializes response_ inside
  // StartWrite, on that thread) and OnWriteDone (gRPC is done with it, on another). Each lets
  // go once; the last may touch response_ again, under mu_, so the order is the lock's (and
  // ThreadSanitizer's) to see. The last finishes the call if it is ending; true: nothing ends,
  // and the caller writes the next batch.
  bool WriteLetGo();
  // Ends the call once no write is in flight: returns the status to Finish with now (outside
  // the lock), or none (a write is in flight and its last holder finishes; or ending already).
  std::optional<grpc::Status> End(grpc::Status status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void EndNow(grpc::Status status);

  ServiceContext& c_;
  std::string token_;
  bool stream_counted_ = false;  // holds one of the session's streams
  v1::ChannelRequest request_;   // the read in flight
  uint64_t requests_ = 0;

  std::mutex mu_;  // std::mutex: TSan sees it unaided
  std::shared_ptr<channel::Channel> channel_ ABSL_GUARDED_BY(mu_);
  std::optional<channel::ChannelReader> reader_ ABSL_GUARDED_BY(mu_);
  bool packed_ ABSL_GUARDED_BY(mu_) = false;  // datagrams as descriptors and payloads
  uint64_t credit_ ABSL_GUARDED_BY(mu_) = 0;
  std::deque<v1::SendResult> results_ ABSL_GUARDED_BY(mu_);
  v1::ChannelResponse response_ ABSL_GUARDED_BY(mu_);  // the write in flight
  std::vector<channel::ReceivedView> views_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  int write_holds_ ABSL_GUARDED_BY(mu_) = 0;  // of the write in flight (WriteLetGo)
  bool finishing_ ABSL_GUARDED_BY(mu_) = false;  // Finish called, or due after the write
  std::optional<grpc::Status> finish_ ABSL_GUARDED_BY(mu_);
};

}  // namespace quadsock::service

#endif  // QUADSOCK_SERVICE_CHANNEL_STREAM_H_
