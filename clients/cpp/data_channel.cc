#include "clients/cpp/data_channel.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "stack/channel/layout.h"
#include "stack/link/errno_status.h"

namespace quadsock {
namespace {

constexpr int kMaxFds = 1 + channel::kMaxRings;
constexpr int kAnswerTimeoutMs = 10000;

void CloseAll(const std::vector<int>& fds) {
  for (int fd : fds) close(fd);
}

// Shared memory: the rings themselves, and the side connection that is the channel's life.
class SharedMemoryChannel final : public DataChannel {
 public:
  SharedMemoryChannel(channel::ChannelReader reader, int side_fd)
      : reader_(std::move(reader)), side_fd_(side_fd) {}
  ~SharedMemoryChannel() override { close(side_fd_); }

  size_t Receive(std::span<channel::ReceivedView> out, absl::Duration timeout) override {
    return reader_.Receive(out, timeout);
  }
  void Release() override { reader_.Release(); }
  bool Send(uint32_t socket, std::span<const uint8_t> payload,
            const std::optional<net::Endpoint>& peer) override {
    return reader_.Send(socket, payload, peer);
  }
  size_t SendBatch(std::span<const channel::SendView> datagrams) override {
    return reader_.SendBatch(datagrams);
  }
  int wait_fd() const override { return reader_.wait_fd(); }
  ChannelTransport transport() const override { return ChannelTransport::kSharedMemory; }
  uint32_t max_payload() const override { return reader_.buffer_bytes(); }
  int memfd() const override { return reader_.memfd(); }
  std::vector<int> event_fds() const override { return reader_.event_fds(); }
  absl::Status ended() const override {
    // quadsockd closes the side connection when it ends the channel.
    pollfd p{side_fd_, POLLIN | POLLRDHUP, 0};
    if (poll(&p, 1, 0) == 1 && (p.revents & (POLLHUP | POLLRDHUP | POLLIN)) != 0) {
      return absl::UnavailableError("quadsockd ended the data channel");
    }
    return absl::OkStatus();
  }

 private:
  channel::ChannelReader reader_;
  int side_fd_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<DataChannel>> DataChannel::Claim(const std::string& path,
                                                                const std::string& token) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  if (path.size() >= sizeof(a.sun_path)) {
    return absl::InvalidArgumentError(absl::StrCat("side socket path too long: ", path));
  }
  std::memcpy(a.sun_path, path.data(), path.size());
  const int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (fd < 0) return link::ErrnoStatus(errno, "socket(AF_UNIX, SOCK_SEQPACKET)");
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    const int err = errno;
    close(fd);
    // UNAVAILABLE whatever the errno (a missing socket file too): quadsockd is not there.
    return absl::UnavailableError(
        link::ErrnoStatus(err, absl::StrCat("cannot reach quadsockd's data channel socket ", path))
            .message());
  }
  auto fail = [fd](absl::Status s) {
    close(fd);
    return s;
  };
  if (send(fd, token.data(), token.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(token.size())) {
    return fail(absl::UnavailableError(link::ErrnoStatus(errno, "sending the token").message()));
  }
  pollfd p{fd, POLLIN, 0};
  if (poll(&p, 1, kAnswerTimeoutMs) != 1) {
    return fail(absl::UnavailableError("quadsockd did not answer on the data channel socket"));
  }
  char text[256];
  iovec iov{text, sizeof(text) - 1};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFds)];
  msghdr m{};
  m.msg_iov = &iov;
  m.msg_iovlen = 1;
  m.msg_control = control;
  m.msg_controllen = sizeof(control);
  const ssize_t n = recvmsg(fd, &m, MSG_CMSG_CLOEXEC);
  if (n <= 0) return fail(absl::UnavailableError("quadsockd closed the data channel socket"));
  std::vector<int> fds;
  for (cmsghdr* c = CMSG_FIRSTHDR(&m); c != nullptr; c = CMSG_NXTHDR(&m, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    const size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    fds.resize(count);
    std::memcpy(fds.data(), CMSG_DATA(c), count * sizeof(int));
  }
  const std::string answer(text, static_cast<size_t>(n));
  if (answer != "ok" || fds.empty() || (m.msg_flags & MSG_CTRUNC) != 0) {
    CloseAll(fds);
    return fail(absl::UnavailableError(absl::StrCat("quadsockd refused the channel: ", answer)));
  }
  const int memfd = fds.front();
  absl::StatusOr<channel::ChannelReader> reader =
      channel::ChannelReader::Map(memfd, std::vector<int>(fds.begin() + 1, fds.end()));
  if (!reader.ok()) return fail(reader.status());  // the reader closed the fds
  return std::unique_ptr<DataChannel>(new SharedMemoryChannel(std::move(*reader), fd));
}

}  // namespace quadsock
