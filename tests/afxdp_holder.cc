// Holds an AF_XDP stack on an interface until killed: the test of what SIGKILL leaves behind.
//
//   afxdp_holder IFACE PREFIX...      e.g. afxdp_holder qs0 10.7.0.2/24
// Prints "ready" once the stack runs.
#include <unistd.h>

#include <cstdio>

#include "stack/afxdp_stack.h"

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s INTERFACE PREFIX...\n", argv[0]);
    return 2;
  }
  quadsock::stack::AfXdpOptions o;
  o.interface = argv[1];
  for (int i = 2; i < argc; ++i) {
    absl::StatusOr<quadsock::net::IpPrefix> p = quadsock::net::IpPrefix::Parse(argv[i]);
    if (!p.ok()) {
      std::fprintf(stderr, "%s\n", p.status().ToString().c_str());
      return 2;
    }
    o.stack.addresses.push_back(*p);
  }
  absl::StatusOr<std::unique_ptr<quadsock::stack::AfXdpStack>> s =
      quadsock::stack::AfXdpStack::Create(o);
  if (!s.ok()) {
    std::fprintf(stderr, "%s\n", s.status().ToString().c_str());
    return 1;
  }
  if (absl::Status st = (*s)->stack().Start(); !st.ok()) return 1;
  std::printf("ready\n");
  std::fflush(stdout);
  for (;;) pause();
}
