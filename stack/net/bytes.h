// Bounded byte cursors over a frame, and the one place where quadsock converts byte order.
//
// A ByteReader never reads past its end: every read checks the remaining length first and the
// caller learns of a short frame from the bool result, never from a crash. A ByteWriter does the
// same for output buffers. Wire structs (ethernet.h, ipv4.h, ...) hold host-order fields and use
// these cursors to read and write them; nothing else calls htons/ntohs.
//
//   ByteReader r(frame);
//   uint16_t ethertype;
//   if (!r.Skip(12) || !r.ReadU16(ethertype)) return ParseError::kTruncatedEthernet;
#ifndef QUADSOCK_STACK_NET_BYTES_H_
#define QUADSOCK_STACK_NET_BYTES_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

namespace quadsock::net {

// Big-endian (network order) loads and stores of unaligned values.
inline uint16_t LoadBe16(const uint8_t* p) { return static_cast<uint16_t>(p[0] << 8 | p[1]); }
inline uint32_t LoadBe32(const uint8_t* p) {
  return uint32_t{p[0]} << 24 | uint32_t{p[1]} << 16 | uint32_t{p[2]} << 8 | p[3];
}
inline void StoreBe16(uint8_t* p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v >> 8);
  p[1] = static_cast<uint8_t>(v);
}
inline void StoreBe32(uint8_t* p, uint32_t v) {
  p[0] = static_cast<uint8_t>(v >> 24);
  p[1] = static_cast<uint8_t>(v >> 16);
  p[2] = static_cast<uint8_t>(v >> 8);
  p[3] = static_cast<uint8_t>(v);
}

class ByteReader {
 public:
  explicit ByteReader(std::span<const uint8_t> bytes) : bytes_(bytes) {}

  size_t offset() const { return offset_; }
  size_t remaining() const { return bytes_.size() - offset_; }
  // The unread bytes.
  std::span<const uint8_t> rest() const { return bytes_.subspan(offset_); }

  bool Skip(size_t n) {
    if (n > remaining()) return false;
    offset_ += n;
    return true;
  }
  bool ReadU8(uint8_t& v) {
    if (remaining() < 1) return false;
    v = bytes_[offset_++];
    return true;
  }
  bool ReadU16(uint16_t& v) {
    if (remaining() < 2) return false;
    v = LoadBe16(&bytes_[offset_]);
    offset_ += 2;
    return true;
  }
  bool ReadU32(uint32_t& v) {
    if (remaining() < 4) return false;
    v = LoadBe32(&bytes_[offset_]);
    offset_ += 4;
    return true;
  }
  bool ReadBytes(uint8_t* out, size_t n) {
    if (n > remaining()) return false;
    std::memcpy(out, &bytes_[offset_], n);
    offset_ += n;
    return true;
  }

 private:
  std::span<const uint8_t> bytes_;
  size_t offset_ = 0;
};

class ByteWriter {
 public:
  explicit ByteWriter(std::span<uint8_t> bytes) : bytes_(bytes) {}

  size_t offset() const { return offset_; }
  size_t remaining() const { return bytes_.size() - offset_; }
  // Whether every write so far fitted. Writes after the first that did not fit are ignored.
  bool ok() const { return ok_; }
  // Where the next byte goes (for filling a checksum later).
  uint8_t* cursor() { return bytes_.data() + offset_; }

  void WriteU8(uint8_t v) {
    if (Reserve(1)) bytes_[offset_++] = v;
  }
  void WriteU16(uint16_t v) {
    if (!Reserve(2)) return;
    StoreBe16(&bytes_[offset_], v);
    offset_ += 2;
  }
  void WriteU32(uint32_t v) {
    if (!Reserve(4)) return;
    StoreBe32(&bytes_[offset_], v);
    offset_ += 4;
  }
  void WriteBytes(const uint8_t* data, size_t n) {
    if (!Reserve(n)) return;
    if (n > 0) std::memcpy(&bytes_[offset_], data, n);
    offset_ += n;
  }
  void WriteZeros(size_t n) {
    if (!Reserve(n)) return;
    std::memset(&bytes_[offset_], 0, n);
    offset_ += n;
  }

 private:
  bool Reserve(size_t n) {
    if (!ok_ || n > remaining()) ok_ = false;
    return ok_;
  }

  std::span<uint8_t> bytes_;
  size_t offset_ = 0;
  bool ok_ = true;
};

}  // namespace quadsock::net

#endif  // QUADSOCK_STACK_NET_BYTES_H_
