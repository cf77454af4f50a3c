#include "stack/xdp/library_log.h"

#include <bpf/libbpf.h>
#include <xdp/libxdp.h>

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <string>

namespace quadsock::xdp {
namespace {

// Set before the libraries are used, read by their print callbacks.
std::function<void(absl::string_view)>& Sink() {
  static auto* sink = new std::function<void(absl::string_view)>();
  return *sink;
}

int Forward(const char* format, va_list args) {
  if (!Sink()) return 0;
  char line[1024];
  const int n = std::vsnprintf(line, sizeof(line), format, args);
  if (n < 0) return 0;
  absl::string_view text(line, std::min<size_t>(n, sizeof(line) - 1));
  while (!text.empty() && text.back() == '\n') text.remove_suffix(1);
  Sink()(text);
  return n;
}

int FromLibbpf(enum libbpf_print_level level, const char* format, va_list args) {
  if (level == LIBBPF_DEBUG) return 0;  // libbpf's own default leaves these out too
  return Forward(format, args);
}

int FromLibxdp(enum libxdp_print_level level, const char* format, va_list args) {
  if (level == LIBXDP_DEBUG) return 0;
  return Forward(format, args);
}

}  // namespace

void RouteLibraryMessages(std::function<void(absl::string_view)> sink) {
  Sink() = std::move(sink);
  libbpf_set_print(FromLibbpf);
  libxdp_set_print(FromLibxdp);
}

}  // namespace quadsock::xdp
