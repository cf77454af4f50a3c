// A fuzz target's input, read a field at a time: what runs past its end reads as zeros (a
// byte) or comes short (bytes), so any input decodes to something.
//
//   fuzz::Input in(data, size);
//   while (in.more()) { const uint8_t op = in.Byte(); std::span<const uint8_t> raw = in.Bytes(n); }
#ifndef QUADSOCK_FUZZ_INPUT_H_
#define QUADSOCK_FUZZ_INPUT_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>

namespace quadsock::fuzz {

class Input {
 public:
  Input(const uint8_t* data, size_t size) : in_(data, size) {}
  bool more() const { return !in_.empty(); }
  uint8_t Byte() {
    if (in_.empty()) return 0;
    const uint8_t b = in_[0];
    in_ = in_.subspan(1);
    return b;
  }
  uint32_t U32() {  // little-endian
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v |= uint32_t{Byte()} << (8 * i);
    return v;
  }
  std::span<const uint8_t> Bytes(size_t n) {
    n = std::min(n, in_.size());
    const std::span<const uint8_t> out = in_.first(n);
    in_ = in_.subspan(n);
    return out;
  }

 private:
  std::span<const uint8_t> in_;
};

}  // namespace quadsock::fuzz

#endif  // QUADSOCK_FUZZ_INPUT_H_
