// Fuzz target: the whole receive path. A Stack over a MemoryLink (one poll thread, polled here)
// gets a set of sockets the input chooses (IPv4 and IPv6, bound to our addresses or the
// wildcard, connected, in reuseport groups, v6only), then the input's frames, raw or built as
// well-formed UDP from fuzzed fields (so that datagrams get past the checksum and reach the
// sockets). After each input:
//   - the frame ledger holds (Stack::CheckFrameAccounting: every frame the link lent came back);
//   - every datagram a socket received was for it: to its port, to its address (or any, for a
//     wildcard bind; IPv4 to an IPv6 socket only when it is not v6only, v4-mapped), and from its
//     peer when it is connected;
//   - everything the stack sent is a frame ParseFrame takes (or an ICMP error quoting a packet
//     too short to name ports, whole).
//
// Input: a byte of socket count, 8 bytes per socket, then frames, each a byte of kind (even:
// built, odd: raw), and a built frame's 8 bytes of fields, or a raw frame's 2-byte length and
// bytes. A raw frame's kind also pads it: (kind >> 1) * 16 zero bytes follow what the input
// gave, so that a short input makes a frame as long as the MTU (runs keep inputs short:
// fuzz/flags/receive.flags).
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "fuzz/check.h"
#include "fuzz/input.h"
#include "stack/link/memory_link.h"
#include "stack/net/bytes.h"
#include "stack/net/frame.h"
#include "stack/net/frame_builder.h"
#include "stack/stack.h"

namespace {

using namespace quadsock;  // NOLINT: a fuzz target's few names

const net::MacAddress kOurMac = *net::MacAddress::Parse("02:00:00:00:00:0b");
const net::MacAddress kPeerMac = *net::MacAddress::Parse("02:00:00:00:00:0a");

// The addresses an input picks from: ours, the peer's, another host's, per family.
const net::IpAddress& Address(uint8_t pick) {
  static const auto* all = new std::vector<net::IpAddress>{
      *net::IpAddress::Parse("10.1.0.2"),   *net::IpAddress::Parse("10.1.0.1"),
      *net::IpAddress::Parse("10.1.0.9"),   *net::IpAddress::Parse("fd00:1::2"),
      *net::IpAddress::Parse("fd00:1::1"),  *net::IpAddress::Parse("fd00:1::9"),
      *net::IpAddress::Parse("0.0.0.0"),    *net::IpAddress::Parse("::"),
      *net::IpAddress::Parse("::ffff:10.1.0.2")};
  return (*all)[pick % all->size()];
}
uint16_t Port(uint8_t pick) { return static_cast<uint16_t>(4000 + pick % 4); }

struct Harness {
  Harness() {
    link::MemoryLink::Pair p = link::MemoryLink::CreateWithTestEnd({.name = "fz", .mac = kOurMac});
    wire = std::move(p.test_end);
    std::vector<std::unique_ptr<link::Link>> links;
    links.push_back(std::move(p.link));
    stack::StackOptions o;
    o.addresses = {*net::IpPrefix::Parse("10.1.0.2/24"), *net::IpPrefix::Parse("fd00:1::2/64")};
    o.clock = [this] { return now; };
    o.wall_clock = [this] { return now; };
    o.receive_queue_depth = 64;
    s = stack::Stack::Create(std::move(o), std::move(links)).value();
  }
  absl::Time now = absl::FromUnixSeconds(1'000'000);
  std::unique_ptr<link::MemoryLink::TestEnd> wire;
  std::unique_ptr<stack::Stack> s;
};


void OpenSockets(fuzz::Input& r, stack::Stack& s) {
  const int count = r.Byte() % 9;
  for (int i = 0; i < count; ++i) {
    const uint8_t flags = r.Byte();
    const uint8_t local = r.Byte(), local_port = r.Byte(), remote = r.Byte(),
                  remote_port = r.Byte();
    (void)r.Bytes(3);
    stack::OpenOptions o;
    o.v6only = (flags & 2) != 0;
    o.reuse_port = (flags & 4) != 0;
    absl::StatusOr<stack::SocketId> id =
        s.Open((flags & 1) != 0 ? net::Family::kV6 : net::Family::kV4, o);
    if (!id.ok()) continue;
    // Refusals (a family or address that does not fit, a port in use) are part of the game.
    (void)s.Bind(*id, {Address(local), Port(local_port)});
    if ((flags & 8) != 0) {
      (void)s.Connect(*id, {Address(remote), static_cast<uint16_t>(5000 + remote_port % 4)});
    }
  }
}

void Inject(fuzz::Input& r, Harness& h) {
  static const std::vector<uint8_t> kPayload(256, 'p');  // a built frame's bytes: up to 255
  std::vector<uint8_t> frame(2048);  // one for the input: allocating a frame's worth is not free
  while (r.more()) {
    const uint8_t kind = r.Byte();
    size_t n = 0;
    if (kind % 2 == 0) {
      const uint8_t src = r.Byte(), sport = r.Byte(), dst = r.Byte(), dport = r.Byte(),
                    length = r.Byte();
      (void)r.Bytes(3);
      const net::IpAddress from = Address(src), to = Address(dst);
      if (from.is_v4() != to.is_v4()) continue;
      const std::optional<size_t> built = net::BuildUdp(
          {kPeerMac, kOurMac, std::nullopt},
          {{from, static_cast<uint16_t>(5000 + sport % 4)}, {to, Port(dport)}},
          {kPayload.data(), length}, frame);
      if (!built.has_value()) continue;
      n = *built;
    } else {
      const size_t length = r.Byte() | (size_t{r.Byte()} << 8);
      std::span<const uint8_t> raw = r.Bytes(std::min<size_t>(length, frame.size()));
      std::copy(raw.begin(), raw.end(), frame.begin());
      n = std::min(frame.size(), raw.size() + static_cast<size_t>(kind >> 1) * 16);
      std::fill(frame.begin() + raw.size(), frame.begin() + n, 0);
    }
    (void)h.wire->Inject({frame.data(), n});
    h.now += absl::Microseconds(100);
    h.s->PollOnce();
  }
}

// What a datagram must be to be the socket's (the socket's state as it is now).
void CheckDelivery(const demux::SocketInfo& info, const stack::ReceivedDatagram& d) {
  FUZZ_CHECK(info.state != demux::SocketState::kOpen, "an unbound socket received a datagram");
  FUZZ_CHECK(d.destination.port == info.local.port, "a datagram for another port");
  const bool v6 = info.options.family == net::Family::kV6;
  FUZZ_CHECK(v6 != d.destination.address.is_v4(), "a datagram of the other family as it came");
  if (v6 && d.destination.address.Unmapped().is_v4()) {
    FUZZ_CHECK(!info.options.v6only, "IPv4 reached a v6only socket");
  }
  if (!info.local.address.IsUnspecified()) {
    FUZZ_CHECK(d.destination.address == info.local.address, "a datagram for another address");
  }
  if (info.state == demux::SocketState::kConnected) {
    FUZZ_CHECK(d.source == info.remote, "a connected socket received from another peer");
  }
}

// An ICMP error the stack sent about a packet with less than 8 bytes after its IP header (say,
// an unknown next header and nothing after it), quoting it whole, as RFC 792 and RFC 4443 ask:
// ParseFrame refuses such a quote from the wire (it names no ports), rightly. `p` is what
// ParseFrame made of the frame before it refused the quote (the ICMP header, checksum checked).
bool QuotesAShortPacketWhole(std::span<const uint8_t> frame, const net::ParsedFrame& p) {
  if (p.l4 != net::L4::kIcmpv4 && p.l4 != net::L4::kIcmpv6) return false;
  const std::span<const uint8_t> quote = p.payload(frame);
  if (p.l3 == net::L3::kIpv6) {
    return quote.size() >= 40 && (quote[0] >> 4) == 6 &&
           quote.size() == 40 + size_t{net::LoadBe16(&quote[4])} && quote.size() < 40 + 8;
  }
  if (quote.size() < 20 || (quote[0] >> 4) != 4) return false;
  const size_t header = size_t{quote[0] & 0x0fu} * 4;
  return header >= 20 && quote.size() >= header && quote.size() == net::LoadBe16(&quote[2]) &&
         quote.size() < header + 8;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Harness* h = new Harness();
  stack::Stack& s = *h->s;
  for (stack::SocketId id : s.List()) (void)s.Close(id);
  fuzz::Input r(data, size);
  OpenSockets(r, s);
  Inject(r, *h);
  for (const std::vector<uint8_t>& sent : h->wire->TakeSent()) {
    net::ParsedFrame p;
    const net::ParseError e = net::ParseFrame(sent, p);
    FUZZ_CHECK(e == net::ParseError::kOk ||
                   (e == net::ParseError::kBadIcmpQuote && QuotesAShortPacketWhole(sent, p)),
               "the stack sent a bad frame");
  }
  for (stack::SocketId id : s.List()) {
    absl::StatusOr<stack::SocketStatus> st = s.Get(id);
    FUZZ_CHECK(st.ok(), "a listed socket has no status");
    while (std::optional<stack::ReceivedDatagram> d = s.Receive(id).value()) {
      CheckDelivery(st->info, *d);
    }
  }
  FUZZ_CHECK(s.CheckFrameAccounting().ok(), "the frame ledger does not hold");
  return 0;
}
