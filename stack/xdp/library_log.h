// Where libbpf's and libxdp's own messages go. Both libraries print to stderr unless told
// otherwise, process-wide, and some of their lines mislead a reader who has not asked for them
// (as non-root, libbpf blames the kernel's BPF support for what is a missing capability). Their
// callers (XdpProgram, XskPort) say what failed in their own errors; the libraries' lines are
// for when one asks for detail.
//
//   RouteLibraryMessages(verbose ? Log : nullptr);   // before the first libbpf or libxdp call
//
// With a sink, each message is one call, as the library wrote it without its line end
// ("libbpf: failed to load object 'quadsock_steer'"); with none they are dropped. Call it while
// no other thread uses libbpf or libxdp (libbpf_set_print is not thread-safe); the sink must be
// callable from any thread that calls them.
#ifndef QUADSOCK_STACK_XDP_LIBRARY_LOG_H_
#define QUADSOCK_STACK_XDP_LIBRARY_LOG_H_

#include <functional>

#include "absl/strings/string_view.h"

namespace quadsock::xdp {

void RouteLibraryMessages(std::function<void(absl::string_view)> sink);

}  // namespace quadsock::xdp

#endif  // QUADSOCK_STACK_XDP_LIBRARY_LOG_H_
