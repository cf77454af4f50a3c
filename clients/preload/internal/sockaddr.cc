#include "clients/preload/internal/sockaddr.h"

#include <netinet/in.h>

#include <algorithm>
#include <cstring>

namespace quadsock::preload {

int FamilyOf(const sockaddr* addr, socklen_t len) {
  if (addr == nullptr || len < static_cast<socklen_t>(sizeof(sa_family_t))) return AF_UNSPEC;
  if (addr->sa_family == AF_INET && len >= static_cast<socklen_t>(sizeof(sockaddr_in))) {
    return AF_INET;
  }
  if (addr->sa_family == AF_INET6 && len >= static_cast<socklen_t>(sizeof(sockaddr_in6))) {
    return AF_INET6;
  }
  return AF_UNSPEC;
}

std::optional<net::Endpoint> EndpointOf(const sockaddr* addr, socklen_t len) {
  switch (FamilyOf(addr, len)) {
    case AF_INET: {
      sockaddr_in a;
      std::memcpy(&a, addr, sizeof(a));
      return net::Endpoint{net::IpAddress::V4Bytes(reinterpret_cast<const uint8_t*>(&a.sin_addr)),
                           ntohs(a.sin_port)};
    }
    case AF_INET6: {
      sockaddr_in6 a;
      std::memcpy(&a, addr, sizeof(a));
      return net::Endpoint{
          net::IpAddress::V6Bytes(reinterpret_cast<const uint8_t*>(&a.sin6_addr)),
          ntohs(a.sin6_port)};
    }
    default:
      return std::nullopt;
  }
}

void WriteSockaddr(const net::Endpoint& e, int family, sockaddr* out, socklen_t* out_len) {
  sockaddr_storage s{};
  socklen_t len;
  if (family == AF_INET) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(e.port);
    std::memcpy(&a.sin_addr, e.address.bytes16().data() + 12, 4);
    std::memcpy(&s, &a, sizeof(a));
    len = sizeof(a);
  } else {
    sockaddr_in6 a{};
    a.sin6_family = AF_INET6;
    a.sin6_port = htons(e.port);
    std::memcpy(&a.sin6_addr, e.address.ToV6().bytes16().data(), 16);
    std::memcpy(&s, &a, sizeof(a));
    len = sizeof(a);
  }
  if (out != nullptr && out_len != nullptr) {
    std::memcpy(out, &s, std::min(*out_len, len));
  }
  if (out_len != nullptr) *out_len = len;
}

}  // namespace quadsock::preload
