#include "stack/internal/udp_protocol.h"

#include "stack/internal/neighbor_resolution.h"
#include "stack/internal/poll_engine.h"
#include "stack/net/frame_builder.h"

namespace quadsock::stack {
namespace {

constexpr size_t kSendsPerTurn = 256;

std::span<const uint8_t> AsBytes(const std::string& s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

}  // namespace

void UdpProtocol::SendQueued(PollEngine& engine, absl::Time now) {
  for (size_t i = 0; i < kSendsPerTurn; ++i) {
    std::optional<SendRequest*> r = engine.PopSend();
    if (!r.has_value()) return;
    std::unique_ptr<SendRequest> request(*r);
    SendDatagram(engine, *request, now);
  }
}

void UdpProtocol::SendDatagram(PollEngine& engine, SendRequest& request, absl::Time now) {
  // On the wire a v4-mapped IPv6 socket speaks IPv4.
  const net::Endpoint dst{request.dst.address.Unmapped(), request.dst.port};
  net::Endpoint src{request.src.address.Unmapped(), request.src.port};
  absl::StatusOr<Route> route = routes_.Lookup(dst.address);
  if (!route.ok()) {
    engine.Bump(EngineCounter::tx_no_route);
    request.socket->CountSendDrop();
    return;
  }
  if (src.address.IsUnspecified()) src.address = route->source;
  // No MAC yet: the datagram waits for the neighbour (and is counted there if it cannot).
  const std::optional<net::MacAddress> mac =
      neighbors_.Resolve(engine, route->next_hop, now, [&] {
        return PendingDatagram{src, dst, route->next_hop, std::move(request.payload),
                               request.socket};
      });
  if (!mac.has_value()) return;
  TransmitUdp(engine, src, dst, *mac, AsBytes(request.payload), std::move(request.socket));
}

void TransmitUdp(PollEngine& engine, const net::Endpoint& src, const net::Endpoint& dst,
                 const net::MacAddress& dst_mac, std::span<const uint8_t> payload,
                 std::shared_ptr<UdpSocket> socket) {
  std::optional<link::FrameBuffer> out = engine.NewTxFrame();
  if (!out.has_value()) {
    if (socket != nullptr) socket->CountSendDrop();
    return;
  }
  std::optional<size_t> n = net::BuildUdp(engine.LinkTo(dst_mac), {src, dst}, payload,
                                          {out->data, out->capacity});
  engine.QueueTx(*out, n, {std::move(socket), payload.size()});
}

}  // namespace quadsock::stack
