// The data channel's datagrams packed as bytes, for the gRPC stream (ChannelResponse's
// `descriptors` and `payloads` in socket.proto): each datagram's descriptor exactly as in the
// shared-memory rings (layout.h), and the payloads back to back in the same order. quadsockd
// forwards what its ChannelReader takes from the rings, undecoded; the client checks a batch once, as it
// arrives, and then hands out views into it: nothing is built or parsed per datagram, on either
// side.
//
//   std::string descriptors, payloads;                              // quadsockd
//   reader.ForwardOrArm(max, [&](const ChannelDescriptor& d, std::span<const uint8_t> p) {
//     AppendPacked(d, p, descriptors, payloads);
//   });
//
//   if (absl::Status s = CheckPacked(descriptors, payloads); !s.ok()) ...   // the client
//   for (size_t i = 0, offset = 0; i < PackedCount(descriptors); ++i) {
//     ReceivedView v = UnpackAt(descriptors, payloads, i, offset);
//     offset += v.payload.size();
//   }
#ifndef QUADSOCK_STACK_CHANNEL_PACKED_H_
#define QUADSOCK_STACK_CHANNEL_PACKED_H_

#include <cstddef>
#include <span>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "stack/channel/layout.h"
#include "stack/channel/reader.h"

namespace quadsock::channel {

// Appends a datagram as a ring holds it (ChannelReader::ForwardOrArm): its descriptor, with
// `length` set to the payload's, to `descriptors`, its payload to `payloads`.
void AppendPacked(const ChannelDescriptor& d, std::span<const uint8_t> payload,
                  std::string& descriptors, std::string& payloads);
// The same for a datagram as a view (UnpackAt's inverse).
void AppendPacked(const ReceivedView& v, std::string& descriptors, std::string& payloads);

// OK when `descriptors` is whole descriptors and their lengths add up to payloads.size();
// INVALID_ARGUMENT otherwise (UnpackAt trusts a batch this passed).
absl::Status CheckPacked(std::string_view descriptors, std::string_view payloads);

inline size_t PackedCount(std::string_view descriptors) {
  return descriptors.size() / sizeof(ChannelDescriptor);
}

// Datagram `i` of a checked batch, whose payload starts `offset` bytes into `payloads` (the
// lengths of the datagrams before it). The view points into `payloads`.
ReceivedView UnpackAt(std::string_view descriptors, std::string_view payloads, size_t i,
                      size_t offset);

}  // namespace quadsock::channel

#endif  // QUADSOCK_STACK_CHANNEL_PACKED_H_
