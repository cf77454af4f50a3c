// The session's data channel in the C++ client: datagrams of all the session's sockets on it,
// from shared memory quadsockd writes (stack/channel/layout.h), a batch at a time, with no RPC
// and no allocation per datagram. Client::AttachChannel makes one (quadsockd's Unix listener,
// same host). Each datagram names its socket by index (RemoteSocket::index()).
//
//   std::unique_ptr<DataChannel> ch = client->AttachChannel().value();   // every socket
//   channel::ReceivedView batch[64];
//   for (;;) {
//     size_t n = ch->Receive(batch, absl::Milliseconds(100));  // zero timeout: busy polling
//     for (size_t i = 0; i < n; ++i) Handle(batch[i].socket, batch[i].peer, batch[i].payload);
//     ch->Release();                                          // the views end here
//   }
//   ch->Send(socket.index(), payload, peer);                  // sends go through it too
//
// For an event loop: add wait_fd() to epoll; when it fires, Receive with a zero timeout. The
// channel ends when this object is destroyed (quadsockd puts the sockets back on their queues)
// or when quadsockd ends it (the session ended, or it stopped): side_fd() hangs up then, and
// Receive returns what is left and then nothing. One thread at a time.
#ifndef QUADSOCK_CLIENTS_CPP_DATA_CHANNEL_H_
#define QUADSOCK_CLIENTS_CPP_DATA_CHANNEL_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "stack/channel/reader.h"

namespace quadsock {

class DataChannel {
 public:
  // Connects to quadsockd's side socket at `path`, presents `token` and maps what comes back.
  // UNAVAILABLE when the socket cannot be reached, or quadsockd refuses the token (its reason).
  static absl::StatusOr<std::unique_ptr<DataChannel>> Claim(const std::string& path,
                                                            const std::string& token);
  ~DataChannel();
  DataChannel(const DataChannel&) = delete;
  DataChannel& operator=(const DataChannel&) = delete;

  // Up to out.size() datagrams; waits up to `timeout` when there are none (zero: never).
  size_t Receive(std::span<channel::ReceivedView> out,
                 absl::Duration timeout = absl::ZeroDuration()) {
    return reader_.Receive(out, timeout);
  }
  // Ends the views Receive handed out and gives their memory back to quadsockd.
  void Release() { reader_.Release(); }
  // Queues a datagram on the socket of session index `socket` (RemoteSocket::index()), to
  // `peer` (none: the connected peer); quadsockd's poll thread sends it without an RPC. False
  // when the channel's TX ring is full (try again after a moment) or the payload is over
  // max_payload(). quadsockd counts what it cannot send (the socket's tx_dropped: not bound, a
  // bad destination; Counters.stack.tx_channel_no_socket: an index not on the channel).
  bool Send(uint32_t socket, std::span<const uint8_t> payload,
            const std::optional<net::Endpoint>& peer = std::nullopt) {
    return reader_.Send(socket, payload, peer);
  }
  uint32_t max_payload() const { return reader_.buffer_bytes(); }
  int wait_fd() const { return reader_.wait_fd(); }
  int side_fd() const { return side_fd_; }
  uint32_t rings() const { return reader_.rings(); }
  // The shared memory itself (layout.h), e.g. to hand to a process of the application's own.
  int memfd() const { return reader_.memfd(); }

 private:
  DataChannel(channel::ChannelReader reader, int side_fd)
      : reader_(std::move(reader)), side_fd_(side_fd) {}
  channel::ChannelReader reader_;
  int side_fd_;
};

}  // namespace quadsock

#endif  // QUADSOCK_CLIENTS_CPP_DATA_CHANNEL_H_
