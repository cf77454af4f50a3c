// Addresses of the network layer and below: IPv4/IPv6 addresses, prefixes, UDP endpoints and
// Ethernet MAC addresses. Values, cheap to copy, hashable with absl::Hash, printable.
//
// An IpAddress is either IPv4 or IPv6 and stores 16 bytes; an IPv4 address is kept in its
// v4-mapped IPv6 form (::ffff:a.b.c.d) so that comparisons and hashing are one code path, while
// family() still says which it is. An IPv6 socket can hold a v4-mapped address, as in Linux.
//
//   absl::StatusOr<IpAddress> a = IpAddress::Parse("10.1.0.2");
//   absl::StatusOr<Endpoint> e = Endpoint::Parse("[fd00:1::2]:4000");
//   absl::StatusOr<IpPrefix> p = IpPrefix::Parse("10.1.0.2/24");
//   if (p->Contains(*a)) ...
#ifndef QUADSOCK_STACK_NET_ADDRESS_H_
#define QUADSOCK_STACK_NET_ADDRESS_H_

#include <array>
#include <bit>
#include <compare>
#include <cstdint>
#include <cstring>
#include <ostream>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace quadsock::net {

enum class Family : uint8_t { kV4 = 4, kV6 = 6 };

// Whether two 16-byte keys are equal, in two word compares (std::array's == calls memcmp).
inline bool SameBytes16(const std::array<uint8_t, 16>& a, const std::array<uint8_t, 16>& b) {
  uint64_t a0, a1, b0, b1;
  std::memcpy(&a0, a.data(), 8);
  std::memcpy(&a1, a.data() + 8, 8);
  std::memcpy(&b0, b.data(), 8);
  std::memcpy(&b1, b.data() + 8, 8);
  return ((a0 ^ b0) | (a1 ^ b1)) == 0;
}

class IpAddress {
 public:
  using Bytes = std::array<uint8_t, 16>;

  // The IPv6 unspecified address "::". See AnyV4() for "0.0.0.0".
  constexpr IpAddress() = default;

  static absl::StatusOr<IpAddress> Parse(absl::string_view text);
  // Host byte order: V4(0x0a010002) is 10.1.0.2.
  static constexpr IpAddress V4(uint32_t host_order) {
    IpAddress a;
    a.family_ = Family::kV4;
    a.bytes_[10] = a.bytes_[11] = 0xff;
    a.bytes_[12] = host_order >> 24;
    a.bytes_[13] = host_order >> 16;
    a.bytes_[14] = host_order >> 8;
    a.bytes_[15] = host_order;
    return a;
  }
  // From network-order bytes (a packet's header).
  static IpAddress V4Bytes(const uint8_t bytes[4]) {
    IpAddress a;
    a.AssignV4Bytes(bytes);
    return a;
  }
  static IpAddress V6Bytes(const uint8_t bytes[16]) {
    IpAddress a;
    a.AssignV6Bytes(bytes);
    return a;
  }
  // The same, in place: the receive path's parsers write each datagram's addresses straight
  // into their result. Built as a temporary and copied, an address was read back (one 16-byte
  // load) over the narrower stores that had just written it, which store forwarding cannot
  // serve: about a tenth of the receive path's time at 1.5 Mpps.
  void AssignV4Bytes(const uint8_t bytes[4]) {
    uint32_t v4;
    std::memcpy(&v4, bytes, 4);
    const uint64_t high = 0;  // bytes 0-7
    // Bytes 8-15 as they lie in memory: 0, 0, 0xff, 0xff, then the four address bytes.
    const uint64_t low = std::endian::native == std::endian::little
                             ? (uint64_t{v4} << 32) | 0xffff0000u
                             : (uint64_t{0xffff} << 32) | v4;
    family_ = Family::kV4;
    std::memcpy(bytes_.data(), &high, 8);
    std::memcpy(bytes_.data() + 8, &low, 8);
  }
  void AssignV6Bytes(const uint8_t bytes[16]) {
    family_ = Family::kV6;
    std::memcpy(bytes_.data(), bytes, 16);
  }
  static constexpr IpAddress AnyV4() { return V4(0); }
  static constexpr IpAddress AnyV6() { return IpAddress(); }

  Family family() const { return family_; }
  bool is_v4() const { return family_ == Family::kV4; }
  bool is_v6() const { return family_ == Family::kV6; }
  // The wildcard: 0.0.0.0 or ::. (The predicates the data path asks per packet are inline.)
  bool IsUnspecified() const {
    if (is_v4()) return v4_word() == 0;
    return SameBytes16(bytes_, Bytes{});
  }
  // The wildcard in any form: 0.0.0.0, ::, or ::ffff:0.0.0.0 (Unmapped().IsUnspecified(),
  // without the copy).
  bool IsUnspecifiedInAnyForm() const {
    return is_v4() || IsV4Mapped() ? v4_word() == 0 : SameBytes16(bytes_, Bytes{});
  }
  // An IPv6 address of the form ::ffff:a.b.c.d.
  bool IsV4Mapped() const {
    uint64_t low;
    uint32_t mid;
    std::memcpy(&low, bytes_.data(), 8);
    std::memcpy(&mid, bytes_.data() + 8, 4);
    return is_v6() && low == 0 && mid == kMappedMarker;
  }
  bool IsLoopback() const;
  bool IsMulticast() const {
    if (is_v4()) return (bytes_[12] & 0xf0) == 0xe0;
    return bytes_[0] == 0xff;
  }
  // fe80::/10.
  bool IsLinkLocal() const;
  // Why no unicast host can have this address (in its plain or v4-mapped form): "the
  // unspecified address", "a multicast address" or "the broadcast address" (255.255.255.255);
  // null when a host can.
  const char* NotAHostReason() const;

  // The IPv6 form: an IPv4 address becomes ::ffff:a.b.c.d; an IPv6 address is unchanged.
  IpAddress ToV6() const;
  // A v4-mapped IPv6 address becomes IPv4; anything else is unchanged.
  IpAddress Unmapped() const {
    IpAddress a = *this;
    if (IsV4Mapped()) a.family_ = Family::kV4;
    return a;
  }

  // For IPv4 only: the address in host byte order.
  uint32_t v4_host_order() const;
  // The four IPv4 bytes (IPv4 only) or the sixteen IPv6 bytes, in network order.
  const uint8_t* data() const { return is_v4() ? bytes_.data() + 12 : bytes_.data(); }
  size_t size() const { return is_v4() ? 4 : 16; }
  // Always sixteen bytes: IPv4 in its v4-mapped form.
  const Bytes& bytes16() const { return bytes_; }

  std::string ToString() const;
  // Room for any address's text, with a NUL (INET6_ADDRSTRLEN).
  static constexpr size_t kMaxText = 46;
  // ToString() into `buf`, NUL-terminated, without a heap allocation; returns its length.
  // IPv4 is formatted by hand (the data channel's gRPC stream writes two addresses a datagram;
  // inet_ntop goes through vfprintf).
  size_t Format(char (&buf)[kMaxText]) const;

  friend bool operator==(const IpAddress& a, const IpAddress& b) {
    return a.family_ == b.family_ && SameBytes16(a.bytes_, b.bytes_);
  }
  friend auto operator<=>(const IpAddress&, const IpAddress&) = default;

  template <typename H>
  friend H AbslHashValue(H h, const IpAddress& a) {
    return H::combine(std::move(h), a.family_, a.bytes_);
  }

 private:
  // Bytes 8-11 of a v4-mapped address (00 00 ff ff), as a native-order word.
  static constexpr uint32_t kMappedMarker =
      std::endian::native == std::endian::little ? 0xffff0000u : 0x0000ffffu;
  uint32_t v4_word() const {
    uint32_t w;
    std::memcpy(&w, bytes_.data() + 12, 4);
    return w;
  }

  Family family_ = Family::kV6;
  Bytes bytes_{};
};

// An address and a prefix length: "10.1.0.2/24" keeps the host address 10.1.0.2.
class IpPrefix {
 public:
  static absl::StatusOr<IpPrefix> Parse(absl::string_view text);
  static absl::StatusOr<IpPrefix> Make(IpAddress address, int length);

  const IpAddress& address() const { return address_; }
  int length() const { return length_; }
  // The network itself: host bits cleared ("10.1.0.2/24" -> "10.1.0.0/24").
  IpPrefix Network() const;
  // Whether `a` (same family) falls within the prefix.
  bool Contains(const IpAddress& a) const;
  // Whether `a` is the IPv4 network's broadcast address: within it, all host bits set (a /31 or
  // /32 has none, nor has IPv6).
  bool IsBroadcast(const IpAddress& a) const;
  std::string ToString() const;

  friend bool operator==(const IpPrefix&, const IpPrefix&) = default;

 private:
  IpPrefix(IpAddress address, int length) : address_(address), length_(length) {}
  IpAddress address_;
  int length_ = 0;
};

// A UDP endpoint: address and port. Printed "10.1.0.2:53" or "[fd00::2]:53".
struct Endpoint {
  IpAddress address;
  uint16_t port = 0;

  static absl::StatusOr<Endpoint> Parse(absl::string_view text);
  std::string ToString() const;

  friend bool operator==(const Endpoint&, const Endpoint&) = default;
  friend auto operator<=>(const Endpoint&, const Endpoint&) = default;
  template <typename H>
  friend H AbslHashValue(H h, const Endpoint& e) {
    return H::combine(std::move(h), e.address, e.port);
  }
};

class MacAddress {
 public:
  using Bytes = std::array<uint8_t, 6>;

  constexpr MacAddress() = default;
  constexpr explicit MacAddress(const Bytes& bytes) : bytes_(bytes) {}
  static MacAddress FromBytes(const uint8_t bytes[6]);
  static absl::StatusOr<MacAddress> Parse(absl::string_view text);
  static constexpr MacAddress Broadcast() { return MacAddress(Bytes{255, 255, 255, 255, 255, 255}); }
  // 33:33:xx:xx:xx:xx for an IPv6 multicast group (RFC 2464).
  static MacAddress Ipv6Multicast(const IpAddress& group);

  const Bytes& bytes() const { return bytes_; }
  bool IsBroadcast() const { return *this == Broadcast(); }
  bool IsMulticast() const { return bytes_[0] & 1; }
  bool IsZero() const { return *this == MacAddress(); }
  std::string ToString() const;

  friend bool operator==(const MacAddress&, const MacAddress&) = default;
  friend auto operator<=>(const MacAddress&, const MacAddress&) = default;
  template <typename H>
  friend H AbslHashValue(H h, const MacAddress& m) {
    return H::combine(std::move(h), m.bytes_);
  }

 private:
  Bytes bytes_{};
};

// The solicited-node multicast group ff02::1:ffXX:XXXX of an IPv6 address (RFC 4291 2.7.1).
IpAddress SolicitedNodeMulticast(const IpAddress& a);

std::ostream& operator<<(std::ostream& os, const IpAddress& a);
std::ostream& operator<<(std::ostream& os, const IpPrefix& p);
std::ostream& operator<<(std::ostream& os, const Endpoint& e);
std::ostream& operator<<(std::ostream& os, const MacAddress& m);

}  // namespace quadsock::net

#endif  // QUADSOCK_STACK_NET_ADDRESS_H_
