// The data channels a poll thread wrote datagrams into and has not yet published or woken, so
// that each is published once per RX batch, however many of its datagrams the batch held, and
// its application woken at most once every few busy turns (channel.h: Stage, Publish, Wake).
// Deliveries Add the channel of each datagram staged; at the end of the batch Publish shows the
// application all of them; EndTurn wakes sleeping applications at the engine's idle turn, or
// after kBusyTurnsPerWake busy ones (a ring past a quarter full wakes its application at once,
// in Channel::Publish). Internal to the stack.
//
// The pointers are RCU-protected (a channel outlives a grace period after its last socket left
// it): the poll thread reports a quiescent state only when empty() (PollEngine::Run), and
// WakeDeferred() before it goes offline.
//
//   StagedChannels staged(engine_index);
//   for (each datagram) if (c->Stage(staged.ring(), ...)) staged.Add(c);
//   staged.Publish();            // end of the RX batch
//   staged.EndTurn(frames == 0);  // end of the turn
#ifndef QUADSOCK_STACK_INTERNAL_STAGED_CHANNELS_H_
#define QUADSOCK_STACK_INTERNAL_STAGED_CHANNELS_H_

#include <array>
#include <cstddef>
#include <cstdint>

#include "stack/channel/channel.h"

namespace quadsock::stack {

class StagedChannels {
 public:
  // Channels one batch publishes together; a batch into more publishes (and wakes) the
  // earliest at once to make room.
  static constexpr size_t kMax = 8;
  // A busy engine wakes sleeping applications every this many turns (its idle turn always).
  static constexpr uint32_t kBusyTurnsPerWake = 4;

  // `ring`: the poll engine's index, its ring in every channel.
  explicit StagedChannels(uint32_t ring) : ring_(ring) {}
  StagedChannels(const StagedChannels&) = delete;
  StagedChannels& operator=(const StagedChannels&) = delete;

  uint32_t ring() const { return ring_; }
  bool empty() const { return size_ == 0; }
  // Whether the last batch staged a datagram: then the next one probably does too (the poll
  // engine prefetches its sockets' delivery line only then, so that a stack whose sockets have
  // callbacks does not fetch lines it never reads).
  bool last_batch_staged() const { return last_batch_staged_; }

  // A datagram was staged on `c` (per datagram: one compare when it is the last one's channel).
  void Add(channel::Channel* c) {
    batch_staged_ = true;
    if (size_ > 0 && channels_[size_ - 1] == c) return;
    for (size_t i = 0; i + 1 < size_; ++i) {
      if (channels_[i] == c) return;
    }
    if (size_ == kMax) {
      channels_[0]->Publish(ring_);
      channels_[0]->Wake(ring_);
      for (size_t i = 1; i < kMax; ++i) channels_[i - 1] = channels_[i];
      --size_;
    }
    channels_[size_++] = c;
  }
  // The end of an RX batch: every channel's staged datagrams become visible (a channel that
  // has none since its last Publish costs a compare).
  void Publish() {
    for (size_t i = 0; i < size_; ++i) channels_[i]->Publish(ring_);
    last_batch_staged_ = batch_staged_;
    batch_staged_ = false;
  }
  // The end of a turn (`idle`: it received nothing): wakes sleeping applications now when idle
  // or every kBusyTurnsPerWake busy turns.
  void EndTurn(bool idle) {
    if (size_ == 0) return;
    if (!idle && ++busy_turns_ < kBusyTurnsPerWake) return;
    WakeDeferred();
  }
  // Wakes every sleeping application of the channels published since the last wake-up, and
  // lets go of them.
  void WakeDeferred() {
    for (size_t i = 0; i < size_; ++i) channels_[i]->Wake(ring_);
    size_ = 0;
    busy_turns_ = 0;
  }

 private:
  const uint32_t ring_;
  size_t size_ = 0;
  uint32_t busy_turns_ = 0;
  bool batch_staged_ = false, last_batch_staged_ = false;
  std::array<channel::Channel*, kMax> channels_{};
};

}  // namespace quadsock::stack

#endif  // QUADSOCK_STACK_INTERNAL_STAGED_CHANNELS_H_
