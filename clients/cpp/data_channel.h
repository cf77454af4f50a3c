// The session's data channel in the C++ client: datagrams of all the session's sockets on it,
// a batch at a time, and sends, without an RPC per datagram. Each datagram names its socket by
// index (RemoteSocket::index()). Client::AttachChannel makes one, over either transport:
//   - shared memory (quadsockd's Unix listener, same host): rings quadsockd writes and this
//     process maps (stack/channel/layout.h); no copy but the one into the ring, no allocation;
//   - a gRPC stream (StreamChannel; TCP with TLS, or where shared memory is not wanted): the
//     same batches in messages, with credit-based flow control.
// kAuto takes shared memory when the server offers it and the gRPC stream otherwise.
//
//   std::unique_ptr<DataChannel> ch = client->AttachChannel().value();   // every socket
//   channel::ReceivedView batch[64];
//   for (;;) {
//     size_t n = ch->Receive(batch, absl::Milliseconds(100));  // zero timeout: busy polling
//     for (size_t i = 0; i < n; ++i) Handle(batch[i].socket, batch[i].peer, batch[i].payload);
//     ch->Release();                                          // the views end here
//   }
//   ch->Send(socket.index(), payload, peer);                  // sends go through it too
//   ch->SendBatch(replies);                                   // or a batch of them at once
//
// For an event loop: add wait_fd() to epoll; when it fires, Receive with a zero timeout (on the
// gRPC stream the first wait_fd() starts a thread that reads for it; otherwise the stream is
// read by the thread that calls Receive, Send or Release, with no hand-off between threads). The
// channel ends when this object is destroyed (quadsockd puts the sockets back on their queues)
// or when quadsockd ends it (the session ended, or it stopped): ended() says so, and Receive
// returns what is left and then nothing. One thread at a time.
#ifndef QUADSOCK_CLIENTS_CPP_DATA_CHANNEL_H_
#define QUADSOCK_CLIENTS_CPP_DATA_CHANNEL_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "stack/channel/reader.h"
#include "stack/net/address.h"

namespace quadsock {

enum class ChannelTransport { kAuto, kSharedMemory, kGrpcStream };

struct AttachOptions {
  // The handles of the sockets to put on the channel; empty: every socket of the session, and
  // every one it opens later.
  std::vector<std::string> sockets;
  uint32_t ring_slots = 0;  // datagrams each ring holds; 0: the server's default
  ChannelTransport transport = ChannelTransport::kAuto;
  // The gRPC stream: datagrams the server may send before the client has taken them (credit).
  uint32_t stream_window = 4096;
};

class DataChannel {
 public:
  virtual ~DataChannel() = default;

  // Up to out.size() datagrams; waits up to `timeout` when there are none (zero: never). The
  // views stay valid until Release().
  virtual size_t Receive(std::span<channel::ReceivedView> out,
                         absl::Duration timeout = absl::ZeroDuration()) = 0;
  // Ends the views Receive handed out and gives their memory back (to quadsockd's rings, or as
  // credit on the stream).
  virtual void Release() = 0;
  // Queues a datagram on the socket of session index `socket`, to `peer` (none: the connected
  // peer). False when it could not be queued: shared memory's TX ring is full (try again after
  // a moment) or the payload is over max_payload(); the stream has ended. quadsockd counts what
  // it cannot send: on shared memory the socket's tx_dropped (not bound, a bad destination)
  // and Counters.stack.tx_channel_no_socket; on the stream it reports it (last_send_error()).
  virtual bool Send(uint32_t socket, std::span<const uint8_t> payload,
                    const std::optional<net::Endpoint>& peer = std::nullopt) = 0;
  // Send for a batch, in order: on shared memory one publish and at most one wake-up of
  // quadsockd's poll thread; on the stream one request (or a few, for more than 256
  // datagrams or about 63 KiB) instead of one each. Returns how many were queued: all, or
  // those before the first that Send would refuse. The payloads may be views Receive handed
  // out (copied before Release). A source address (IP_PKTINFO's) goes over shared memory only:
  // the stream refuses a datagram that asks for one.
  virtual size_t SendBatch(std::span<const channel::SendView> datagrams) = 0;
  // Readable when datagrams may be there.
  virtual int wait_fd() const = 0;
  virtual ChannelTransport transport() const = 0;
  virtual uint32_t max_payload() const = 0;
  // OK while the channel runs; then why it ended.
  virtual absl::Status ended() const = 0;
  // Shared memory only: the memfd (e.g. to hand to another process of the application); -1 on
  // the stream.
  virtual int memfd() const { return -1; }
  // Shared memory only: the descriptors that came with the memfd (stack/channel/layout.h: the
  // RX rings' wake-ups, then the TX ring's eventfd); none on the stream.
  virtual std::vector<int> event_fds() const { return {}; }
  // The stream only: the last SendResult the server reported for a request that did not all go.
  virtual absl::Status last_send_error() const { return absl::OkStatus(); }

  // Shared memory: connects to quadsockd's side socket at `path`, presents `token` (from
  // AttachChannel) and maps what comes back. UNAVAILABLE when the socket cannot be reached, or
  // quadsockd refuses the token (its reason).
  static absl::StatusOr<std::unique_ptr<DataChannel>> Claim(const std::string& path,
                                                            const std::string& token);
};

}  // namespace quadsock

#endif  // QUADSOCK_CLIENTS_CPP_DATA_CHANNEL_H_
