#include "stack/channel/packed.h"

#include <cstddef>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace quadsock::channel {
namespace {

// Copied: the bytes need not be aligned.
ChannelDescriptor Read(std::string_view descriptors, size_t i) {
  ChannelDescriptor d;
  std::memcpy(&d, descriptors.data() + i * sizeof(d), sizeof(d));
  return d;
}

uint32_t LengthAt(std::string_view descriptors, size_t i) {
  uint32_t length;
  std::memcpy(&length,
              descriptors.data() + i * sizeof(ChannelDescriptor) +
                  offsetof(ChannelDescriptor, length),
              sizeof(length));
  return length;
}

}  // namespace

void AppendPacked(const ChannelDescriptor& d, std::span<const uint8_t> payload,
                  std::string& descriptors, std::string& payloads) {
  const size_t at = descriptors.size();
  descriptors.append(reinterpret_cast<const char*>(&d), sizeof(d));
  const uint32_t length = static_cast<uint32_t>(payload.size());
  std::memcpy(descriptors.data() + at + offsetof(ChannelDescriptor, length), &length,
              sizeof(length));
  payloads.append(reinterpret_cast<const char*>(payload.data()), payload.size());
}

void AppendPacked(const ReceivedView& v, std::string& descriptors, std::string& payloads) {
  ChannelDescriptor d{};
  d.socket = v.socket;
  d.length = static_cast<uint32_t>(v.payload.size());
  d.arrival_unix_ns = absl::ToUnixNanos(v.arrival);
  d.sequence = v.sequence;
  std::memcpy(d.peer, v.peer.address.bytes16().data(), 16);
  std::memcpy(d.local, v.local.address.bytes16().data(), 16);
  d.peer_port = v.peer.port;
  d.local_port = v.local.port;
  d.flags = v.peer.address.is_v4() ? kIpv4 : 0;
  AppendPacked(d, v.payload, descriptors, payloads);
}

absl::Status CheckPacked(std::string_view descriptors, std::string_view payloads) {
  if (descriptors.size() % sizeof(ChannelDescriptor) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "packed datagrams: ", descriptors.size(), " bytes of descriptors are not whole ones"));
  }
  uint64_t total = 0;
  for (size_t i = 0; i < PackedCount(descriptors); ++i) total += LengthAt(descriptors, i);
  if (total != payloads.size()) {
    return absl::InvalidArgumentError(absl::StrCat("packed datagrams: the descriptors say ",
                                                   total, " payload bytes, the batch has ",
                                                   payloads.size()));
  }
  return absl::OkStatus();
}

ReceivedView UnpackAt(std::string_view descriptors, std::string_view payloads, size_t i,
                      size_t offset) {
  const ChannelDescriptor d = Read(descriptors, i);
  ReceivedView v;
  ViewOf(d, {reinterpret_cast<const uint8_t*>(payloads.data()) + offset, d.length}, v);
  return v;
}

}  // namespace quadsock::channel
