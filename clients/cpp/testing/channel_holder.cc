// Holds a data channel until killed: the test of what a client killed mid-stream leaves behind.
//
//   channel_holder TARGET PORT      e.g. channel_holder unix:/tmp/q.sock 4000
// Opens a socket bound to 10.1.0.2:PORT, attaches the session's channel over shared memory,
// prints "attached" and waits to be killed.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "clients/cpp/client.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s TARGET PORT\n", argv[0]);
    return 2;
  }
  absl::StatusOr<std::unique_ptr<quadsock::Client>> client =
      quadsock::Client::Connect(argv[1], {.client_name = "channel_holder"});
  if (!client.ok()) {
    std::fprintf(stderr, "%s\n", client.status().ToString().c_str());
    return 1;
  }
  absl::StatusOr<quadsock::RemoteSocket> s = (*client)->Open(quadsock::v1::FAMILY_IPV4);
  if (!s.ok() || !s->Bind({"10.1.0.2", static_cast<uint16_t>(std::atoi(argv[2]))}).ok()) {
    std::fprintf(stderr, "cannot open and bind a socket\n");
    return 1;
  }
  absl::StatusOr<std::unique_ptr<quadsock::DataChannel>> ch = (*client)->AttachChannel(
      {.transport = quadsock::ChannelTransport::kSharedMemory});
  if (!ch.ok()) {
    std::fprintf(stderr, "%s\n", ch.status().ToString().c_str());
    return 1;
  }
  std::printf("attached\n");
  std::fflush(stdout);
  for (;;) pause();
}
