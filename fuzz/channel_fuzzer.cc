// Fuzz target: a data channel (stack/channel) as quadsockd reads it, the application's side of
// the shared memory in the input's hands. The first byte picks the channel (one or two RX rings,
// 2 to 16 slots, 64- or 128-byte buffers) and whether a second thread scribbles over the TX
// ring's control and descriptors the whole time (as a hostile application may while a poll
// thread reads: a field read twice, or read past its check, shows up under ASan). Then steps,
// each the application's or quadsockd's:
//   application: a TX descriptor (socket, length, peer, flags), the TX producer index (moved by
//     a small step or set to anything), an RX consumer index, a ring's `sleeping` epoch, raw
//     bytes anywhere in the memfd (the header too);
//   quadsockd: Stage of a datagram into an RX ring, Publish, Wake, a turn of NextSend with a
//     budget, FinishSends, ArmSends and DisarmSends.
// Checked after each step:
//   - a datagram NextSend returns is the payload of the TX slot it took (its buffer, at most
//     buffer_bytes), and NextSend takes no slot the producer index had not published;
//   - quadsockd's TX consumer index (what FinishSends wrote) never passes what it took;
//   - a broken channel stays broken: Stage and Publish fail and NextSend returns nothing;
//   - the counters add up: sends and bad sends are the slots taken, deliveries the datagrams
//     staged (published or not), and no ring ever shows the application more than a ring.
#include <sys/mman.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "fuzz/check.h"
#include "fuzz/input.h"
#include "stack/channel/channel.h"
#include "stack/channel/layout.h"

namespace {

using namespace quadsock;  // NOLINT: a fuzz target's few names
using channel::Channel;
using channel::ChannelDescriptor;
using channel::ChannelHeader;
using channel::RingView;

// The application's view: its own mapping of the memfd.
struct Application {
  uint8_t* base = nullptr;
  size_t bytes = 0;
  ChannelHeader header{};
  std::vector<RingView> rings;  // the RX rings, then the TX ring
  uint32_t tx_producer = 0;     // what it published last (its own count, as a client keeps)
  RingView& tx() { return rings.back(); }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::Input in(data, size);
  const uint8_t shape = in.Byte();
  const channel::ChannelOptions options{.rings = 1u + (shape >> 1 & 1),
                                        .slots = 2u << (shape >> 2 & 3),
                                        .buffer_bytes = (shape >> 4 & 1) != 0 ? 128u : 64u};
  absl::StatusOr<std::shared_ptr<Channel>> made = Channel::Create(options);
  FUZZ_CHECK(made.ok(), "a channel of legal sizes could not be made");
  Channel& c = **made;
  Application app;
  app.bytes = c.bytes();
  void* mapped = mmap(nullptr, app.bytes, PROT_READ | PROT_WRITE, MAP_SHARED, c.memfd(), 0);
  FUZZ_CHECK(mapped != MAP_FAILED, "the application cannot map the channel");
  app.base = static_cast<uint8_t*>(mapped);
  std::memcpy(&app.header, app.base, sizeof(app.header));
  for (uint32_t r = 0; r <= app.header.rings; ++r) {
    app.rings.push_back(channel::RingAt(app.base, app.header, r));
  }
  const uint32_t slots = app.header.slots;
  const uint32_t buffer_bytes = app.header.buffer_bytes;
  // The TX ring's buffers in quadsockd's own mapping (the application's is another address).
  const uint8_t* tx_buffers =
      channel::RingAt(const_cast<uint8_t*>(c.memory()), app.header, app.header.rings).buffers;

  // The hostile writer: flips the TX ring's indexes and descriptor fields without pause.
  std::atomic<bool> stop{false};
  std::thread scribbler;
  if ((shape & 1) != 0) {
    scribbler = std::thread([&, seed = uint32_t{shape} * 2654435761u] {
      uint32_t x = seed | 1;
      auto* control = reinterpret_cast<std::atomic<uint32_t>*>(app.tx().control);
      auto* words = reinterpret_cast<std::atomic<uint32_t>*>(app.tx().descriptors);
      const size_t word_count = slots * sizeof(ChannelDescriptor) / 4;
      while (!stop.load(std::memory_order_relaxed)) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        if ((x & 7) == 0) {
          control[0].store(x >> 3, std::memory_order_relaxed);  // the producer index
        } else {
          words[(x >> 3) % word_count].store(x, std::memory_order_relaxed);
        }
      }
    });
  }

  // quadsockd's side, as this target counts it.
  uint32_t tx_taken = 0;        // slots NextSend took (returned or refused)
  uint32_t tx_released = 0;     // slots FinishSends gave back
  uint64_t sends = 0, bad = 0;  // of those: datagrams, and descriptors refused
  std::vector<uint64_t> staged(app.header.rings, 0), published(app.header.rings, 0);
  bool was_broken = false;
  const net::Endpoint from{*net::IpAddress::Parse("10.1.0.1"), 5000};
  const net::Endpoint to{*net::IpAddress::Parse("10.1.0.2"), 4000};
  uint64_t sequence = 0;

  for (int steps = 0; in.more() && steps < 512; ++steps) {
    const uint8_t op = in.Byte();
    const uint32_t ring = op >> 5 & 1 ? app.header.rings - 1 : 0;
    switch (op % 12) {
      case 0: {  // the application queues a datagram on the TX ring
        ChannelDescriptor& d = app.tx().descriptor(app.tx_producer);
        d.socket = in.Byte();
        d.length = (in.Byte() & 1) != 0 ? in.U32() : in.Byte() % (buffer_bytes + 1);
        d.flags = in.Byte() & 3;
        std::span<const uint8_t> peer = in.Bytes(16);
        std::memcpy(d.peer, peer.data(), peer.size());
        d.peer_port = static_cast<uint16_t>(in.Byte() << 8 | in.Byte());
        app.tx_producer++;
        app.tx().control->producer.store(app.tx_producer, std::memory_order_release);
        break;
      }
      case 1:  // the TX producer index set to anything
        app.tx_producer = in.U32();
        app.tx().control->producer.store(app.tx_producer, std::memory_order_release);
        break;
      case 2:  // an RX ring's consumer index: moved on a little, or set to anything
        if ((in.Byte() & 1) != 0) {
          app.rings[ring].control->consumer.store(in.U32(), std::memory_order_release);
        } else {
          const uint32_t now = app.rings[ring].control->consumer.load();
          app.rings[ring].control->consumer.store(now + in.Byte() % 4, std::memory_order_release);
        }
        break;
      case 3:  // a ring's sleep epoch (the TX ring's is quadsockd's to write; it may anyway)
        app.rings[(op >> 4) % app.rings.size()].control->sleeping.store(in.U32());
        break;
      case 4: {  // raw bytes anywhere
        const size_t at = (size_t{in.U32()} % app.bytes);
        std::span<const uint8_t> raw = in.Bytes(in.Byte() % 32);
        std::memcpy(app.base + at, raw.data(), std::min(raw.size(), app.bytes - at));
        break;
      }
      case 5: case 6: {  // quadsockd stages a datagram
        std::span<const uint8_t> payload = in.Bytes(in.Byte() % (buffer_bytes + 8));
        if (c.Stage(ring, in.Byte(), from, to, payload, absl::UnixEpoch(), ++sequence)) {
          FUZZ_CHECK(!was_broken, "Stage took a datagram on a broken channel");
          FUZZ_CHECK(payload.size() <= buffer_bytes, "Stage took a payload past a buffer");
          staged[ring]++;
        }
        break;
      }
      case 7: {  // Publish
        const bool something = published[ring] != staged[ring];
        if (c.Publish(ring)) {
          FUZZ_CHECK(!was_broken || !something, "Publish showed datagrams on a broken channel");
          published[ring] = staged[ring];
          if (something) {
            // It read the consumer index and took it: the ring holds at most a ring's worth.
            const uint32_t consumer = app.rings[ring].control->consumer.load();
            FUZZ_CHECK(static_cast<uint32_t>(published[ring]) - consumer <= slots,
                       "a ring shows the application more than a ring of datagrams");
            FUZZ_CHECK(app.rings[ring].control->producer.load() ==
                           static_cast<uint32_t>(published[ring]),
                       "the producer index is not what was published");
          }
        }
        break;
      }
      case 8:
        c.Wake(ring);
        break;
      case 9: {  // a turn of sends
        channel::SendTurn turn{.budget = 1u + in.Byte() % 16};
        // The producer index as the memory holds it (raw bytes may have rewritten it).
        const uint32_t producer = app.tx().control->producer.load();
        size_t refused_seen = 0;
        while (std::optional<channel::OutgoingDatagram> d = c.NextSend(turn)) {
          FUZZ_CHECK(!was_broken, "NextSend read a broken channel");
          tx_taken += static_cast<uint32_t>(turn.refused - refused_seen);  // skipped before it
          refused_seen = turn.refused;
          const uint8_t* slot = tx_buffers + size_t{tx_taken & (slots - 1)} * buffer_bytes;
          FUZZ_CHECK(d->payload.data() == slot, "a datagram is not its slot's buffer");
          FUZZ_CHECK(d->payload.size() <= buffer_bytes, "a datagram longer than its buffer");
          tx_taken++;
          sends++;
        }
        tx_taken += static_cast<uint32_t>(turn.refused - refused_seen);
        bad += turn.refused;
        if ((shape & 1) == 0 && !c.broken()) {
          FUZZ_CHECK(tx_taken - tx_released <= producer - tx_released &&
                         producer - tx_released <= slots,
                     "NextSend took a slot the application had not published");
        }
        break;
      }
      case 10:
        c.FinishSends();
        tx_released = tx_taken;
        FUZZ_CHECK(app.tx().control->consumer.load() == tx_taken || (shape & 1) != 0,
                   "FinishSends gave back other slots than it had taken");
        break;
      case 11:
        if ((op >> 4 & 1) != 0) {
          c.ArmSends();
        } else {
          c.DisarmSends();
        }
        break;
    }
    if (c.broken()) was_broken = true;
    FUZZ_CHECK(!was_broken || c.broken(), "a broken channel mended itself");
    const channel::ChannelCounters counters = c.counters();
    FUZZ_CHECK(counters.sends == sends, "sends counted otherwise than NextSend returned");
    FUZZ_CHECK(counters.bad_sends == bad, "refused descriptors counted otherwise");
    uint64_t all_staged = 0;
    for (uint32_t r = 0; r < app.header.rings; ++r) all_staged += staged[r];
    FUZZ_CHECK(counters.delivered == all_staged, "deliveries counted otherwise than staged");
  }
  stop = true;
  if (scribbler.joinable()) scribbler.join();
  munmap(app.base, app.bytes);
  return 0;
}
