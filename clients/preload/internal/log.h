// The preload library's lines on the program's stderr, each "quadsock-preload[PID]: ...", at
// or above QUADSOCK_LOG's level. LogOnce says a thing the first time only (an option it does
// not support, say), however often the program asks.
//
//   Log(LogLevel::kInfo, absl::StrCat("socket ", fd, " is on quadsock at ", local));
//   LogOnce(LogLevel::kWarn, "IP_MULTICAST_IF", "IP_MULTICAST_IF is not supported ...");
#ifndef QUADSOCK_CLIENTS_PRELOAD_INTERNAL_LOG_H_
#define QUADSOCK_CLIENTS_PRELOAD_INTERNAL_LOG_H_

#include "absl/strings/string_view.h"
#include "clients/preload/internal/config.h"

namespace quadsock::preload {

void SetLogLevel(LogLevel level);
bool Logs(LogLevel level);
void Log(LogLevel level, absl::string_view line);
void LogOnce(LogLevel level, absl::string_view key, absl::string_view line);

}  // namespace quadsock::preload

#endif  // QUADSOCK_CLIENTS_PRELOAD_INTERNAL_LOG_H_
