// The data channel on a gRPC stream (StreamChannel), the C++ client's side: the application's
// own thread reads the server's batches (as much as the credit lets the server send) while it
// waits in Receive, which hands out views into them; Release grants the credit back. A thread
// does the reading only for an application that sleeps on wait_fd(). Not API:
// Client::AttachChannel makes it.
//
//   std::unique_ptr<DataChannel> ch = OpenStreamChannel(connection, options).value();
#ifndef QUADSOCK_CLIENTS_CPP_INTERNAL_STREAM_CHANNEL_H_
#define QUADSOCK_CLIENTS_CPP_INTERNAL_STREAM_CHANNEL_H_

#include <memory>

#include "absl/status/statusor.h"
#include "clients/cpp/data_channel.h"
#include "clients/cpp/internal/connection.h"

namespace quadsock::client_internal {

// Opens the stream and sends its first request. The server's refusal (ALREADY_EXISTS, ...)
// comes as the stream's end: ended(), and Receive returns nothing.
absl::StatusOr<std::unique_ptr<DataChannel>> OpenStreamChannel(
    std::shared_ptr<Connection> connection, const AttachOptions& options);

}  // namespace quadsock::client_internal

#endif  // QUADSOCK_CLIENTS_CPP_INTERNAL_STREAM_CHANNEL_H_
