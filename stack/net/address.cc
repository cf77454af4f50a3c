#include "stack/net/address.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"

namespace quadsock::net {
namespace {

absl::Status Invalid(absl::string_view what, absl::string_view text) {
  return absl::InvalidArgumentError(absl::StrCat("not ", what, ": \"", absl::CHexEscape(text), "\""));
}

// IPv4 dotted-quad text as inet_pton(AF_INET) takes it: exactly four decimal parts of 0-255,
// no sign, no leading zero ("01"), nothing before or after.
bool ParseDottedQuad(absl::string_view text, uint8_t out[4]) {
  size_t i = 0;
  for (int part = 0; part < 4; ++part) {
    if (part > 0) {
      if (i == text.size() || text[i] != '.') return false;
      ++i;
    }
    const size_t start = i;
    unsigned value = 0;
    while (i < text.size() && i - start < 3 && text[i] >= '0' && text[i] <= '9') {
      value = value * 10 + static_cast<unsigned>(text[i] - '0');
      ++i;
    }
    if (i == start || value > 255 || (i - start > 1 && text[start] == '0')) return false;
    out[part] = static_cast<uint8_t>(value);
  }
  return i == text.size();
}

char* FormatOctet(unsigned v, char* p) {
  if (v >= 100) {
    *p++ = static_cast<char>('0' + v / 100);
    v %= 100;
    *p++ = static_cast<char>('0' + v / 10);
  } else if (v >= 10) {
    *p++ = static_cast<char>('0' + v / 10);
  }
  *p++ = static_cast<char>('0' + v % 10);
  return p;
}

}  // namespace

absl::StatusOr<IpAddress> IpAddress::Parse(absl::string_view text) {
  // inet_pton wants a NUL-terminated string; no valid address is longer than 45 characters.
  if (text.empty() || text.size() > INET6_ADDRSTRLEN - 1) return Invalid("an IP address", text);
  uint8_t bytes[16];
  if (ParseDottedQuad(text, bytes)) return V4Bytes(bytes);
  char buf[INET6_ADDRSTRLEN];
  std::memcpy(buf, text.data(), text.size());
  buf[text.size()] = '\0';
  if (inet_pton(AF_INET6, buf, bytes) == 1) return V6Bytes(bytes);
  return Invalid("an IP address", text);
}

bool IpAddress::IsLoopback() const {
  if (is_v4()) return bytes_[12] == 127;
  Bytes one{};
  one[15] = 1;
  return bytes_ == one;
}

bool IpAddress::IsLinkLocal() const {
  if (is_v4()) return bytes_[12] == 169 && bytes_[13] == 254;
  return bytes_[0] == 0xfe && (bytes_[1] & 0xc0) == 0x80;
}

IpAddress IpAddress::ToV6() const {
  IpAddress a = *this;
  a.family_ = Family::kV6;
  return a;
}

uint32_t IpAddress::v4_host_order() const {
  return uint32_t{bytes_[12]} << 24 | uint32_t{bytes_[13]} << 16 | uint32_t{bytes_[14]} << 8 |
         bytes_[15];
}

size_t IpAddress::Format(char (&buf)[kMaxText]) const {
  static_assert(kMaxText == INET6_ADDRSTRLEN);
  if (is_v6()) {
    inet_ntop(AF_INET6, data(), buf, sizeof(buf));
    return std::strlen(buf);
  }
  const uint8_t* b = data();
  char* p = buf;
  for (int i = 0; i < 4; ++i) {
    if (i > 0) *p++ = '.';
    p = FormatOctet(b[i], p);
  }
  *p = '\0';
  return static_cast<size_t>(p - buf);
}

std::string IpAddress::ToString() const {
  char buf[kMaxText];
  return std::string(buf, Format(buf));
}

absl::StatusOr<IpPrefix> IpPrefix::Make(IpAddress address, int length) {
  const int max = address.is_v4() ? 32 : 128;
  if (length < 0 || length > max) {
    return absl::InvalidArgumentError(
        absl::StrFormat("prefix length %d is out of range 0..%d for %s", length, max,
                        address.ToString()));
  }
  return IpPrefix(address, length);
}

absl::StatusOr<IpPrefix> IpPrefix::Parse(absl::string_view text) {
  const size_t slash = text.find('/');
  if (slash == absl::string_view::npos) {
    return Invalid("an address with a prefix length (such as 10.1.0.2/24)", text);
  }
  absl::StatusOr<IpAddress> address = IpAddress::Parse(text.substr(0, slash));
  if (!address.ok()) return address.status();
  const absl::string_view len_text = text.substr(slash + 1);
  int length = 0;
  if (len_text.empty() || len_text.size() > 3 || !absl::SimpleAtoi(len_text, &length) ||
      !absl::ascii_isdigit(len_text[0])) {
    return Invalid("a prefix length", len_text);
  }
  return Make(*address, length);
}

const char* IpAddress::NotAHostReason() const {
  const IpAddress plain = Unmapped();
  if (plain.IsUnspecifiedInAnyForm()) return "the unspecified address";
  if (plain.IsMulticast()) return "a multicast address";
  if (plain == V4(0xffffffff)) return "the broadcast address";
  return nullptr;
}

bool IpPrefix::IsBroadcast(const IpAddress& a) const {
  if (!a.is_v4() || !address_.is_v4() || length_ == 0 || length_ >= 31 || !Contains(a)) {
    return false;
  }
  return (a.v4_host_order() | ~0u << (32 - length_)) == ~0u;
}

bool IpPrefix::Contains(const IpAddress& a) const {
  if (a.family() != address_.family()) return false;
  const int offset = a.is_v4() ? 96 : 0;
  const int bits = offset + length_;
  const auto& x = a.bytes16();
  const auto& y = address_.bytes16();
  int i = offset / 8;
  for (; (i + 1) * 8 <= bits; ++i) {
    if (x[i] != y[i]) return false;
  }
  const int rest = bits - i * 8;
  if (rest == 0) return true;
  const uint8_t mask = static_cast<uint8_t>(0xff << (8 - rest));
  return (x[i] & mask) == (y[i] & mask);
}

IpPrefix IpPrefix::Network() const {
  IpAddress::Bytes b = address_.bytes16();
  const int bits = (address_.is_v4() ? 96 : 0) + length_;
  for (int i = 0; i < 16; ++i) {
    const int keep = std::clamp(bits - i * 8, 0, 8);
    b[i] &= static_cast<uint8_t>(0xff00 >> keep);
  }
  const IpAddress network =
      address_.is_v4() ? IpAddress::V4Bytes(b.data() + 12) : IpAddress::V6Bytes(b.data());
  return IpPrefix(network, length_);
}

std::string IpPrefix::ToString() const { return absl::StrCat(address_.ToString(), "/", length_); }

absl::StatusOr<Endpoint> Endpoint::Parse(absl::string_view text) {
  absl::string_view host;
  absl::string_view port_text;
  if (!text.empty() && text[0] == '[') {
    const size_t close = text.find(']');
    if (close == absl::string_view::npos || close + 1 >= text.size() || text[close + 1] != ':') {
      return Invalid("an endpoint (such as [fd00::2]:53)", text);
    }
    host = text.substr(1, close - 1);
    port_text = text.substr(close + 2);
  } else {
    const size_t colon = text.rfind(':');
    if (colon == absl::string_view::npos || text.find(':') != colon) {
      return Invalid("an endpoint (such as 10.1.0.2:53 or [fd00::2]:53)", text);
    }
    host = text.substr(0, colon);
    port_text = text.substr(colon + 1);
  }
  absl::StatusOr<IpAddress> address = IpAddress::Parse(host);
  if (!address.ok()) return address.status();
  uint32_t port = 0;
  if (port_text.empty() || port_text.size() > 5 || !absl::ascii_isdigit(port_text[0]) ||
      !absl::SimpleAtoi(port_text, &port) || port > 65535) {
    return Invalid("a port (0..65535)", port_text);
  }
  return Endpoint{*address, static_cast<uint16_t>(port)};
}

std::string Endpoint::ToString() const {
  if (address.is_v6()) return absl::StrCat("[", address.ToString(), "]:", port);
  return absl::StrCat(address.ToString(), ":", port);
}

MacAddress MacAddress::FromBytes(const uint8_t bytes[6]) {
  Bytes b;
  std::memcpy(b.data(), bytes, 6);
  return MacAddress(b);
}

absl::StatusOr<MacAddress> MacAddress::Parse(absl::string_view text) {
  std::vector<absl::string_view> parts = absl::StrSplit(text, ':');
  if (parts.size() != 6) return Invalid("a MAC address (such as 02:00:00:00:00:01)", text);
  Bytes b;
  for (int i = 0; i < 6; ++i) {
    if (parts[i].size() != 2 || !absl::ascii_isxdigit(parts[i][0]) ||
        !absl::ascii_isxdigit(parts[i][1])) {
      return Invalid("a MAC address (such as 02:00:00:00:00:01)", text);
    }
    b[i] = static_cast<uint8_t>(std::stoi(std::string(parts[i]), nullptr, 16));
  }
  return MacAddress(b);
}

MacAddress MacAddress::Ipv6Multicast(const IpAddress& group) {
  const auto& g = group.bytes16();
  return MacAddress(Bytes{0x33, 0x33, g[12], g[13], g[14], g[15]});
}

std::string MacAddress::ToString() const {
  return absl::StrFormat("%02x:%02x:%02x:%02x:%02x:%02x", bytes_[0], bytes_[1], bytes_[2],
                         bytes_[3], bytes_[4], bytes_[5]);
}

IpAddress SolicitedNodeMulticast(const IpAddress& a) {
  uint8_t b[16] = {0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01, 0xff, 0, 0, 0};
  const auto& x = a.bytes16();
  b[13] = x[13];
  b[14] = x[14];
  b[15] = x[15];
  return IpAddress::V6Bytes(b);
}

std::ostream& operator<<(std::ostream& os, const IpAddress& a) { return os << a.ToString(); }
std::ostream& operator<<(std::ostream& os, const IpPrefix& p) { return os << p.ToString(); }
std::ostream& operator<<(std::ostream& os, const Endpoint& e) { return os << e.ToString(); }
std::ostream& operator<<(std::ostream& os, const MacAddress& m) { return os << m.ToString(); }

}  // namespace quadsock::net
