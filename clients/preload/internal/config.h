// What the preload library does, from the environment (quadsock-run --help documents it):
//
//   QUADSOCK_TARGET     quadsockd's listener (default unix:/run/quadsock/quadsock.sock)
//   QUADSOCK_WILDCARD   quadsock | kernel: where a socket bound to 0.0.0.0 or :: goes
//                       (default quadsock, when quadsockd serves that family)
//   QUADSOCK_PORTS      the local ports it takes, "53,5000-5100" (default: every port)
//   QUADSOCK_REQUIRE    1: exit when quadsockd cannot be reached (default 0: stay on the kernel)
//   QUADSOCK_BUSY_POLL  microseconds a receive spins before it sleeps (default 0: never spins)
//   QUADSOCK_LOG        error | warn | info | debug (default warn)
//
//   Config c = ConfigFromEnvironment();
//   if (c.TakesPort(53)) ...
#ifndef QUADSOCK_CLIENTS_PRELOAD_INTERNAL_CONFIG_H_
#define QUADSOCK_CLIENTS_PRELOAD_INTERNAL_CONFIG_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace quadsock::preload {

enum class LogLevel { kError = 0, kWarn = 1, kInfo = 2, kDebug = 3 };

struct Config {
  std::string target = "unix:/run/quadsock/quadsock.sock";
  bool wildcard_to_quadsock = true;
  std::vector<std::pair<uint16_t, uint16_t>> ports;  // inclusive ranges; empty: all
  bool required = false;
  uint32_t busy_poll_us = 0;
  LogLevel log_level = LogLevel::kWarn;
  // What was wrong with the environment, one line each (said once at start; the default is
  // kept for a value it cannot read).
  std::vector<std::string> problems;

  bool TakesPort(uint16_t port) const;
};

Config ConfigFromEnvironment();

}  // namespace quadsock::preload

#endif  // QUADSOCK_CLIENTS_PRELOAD_INTERNAL_CONFIG_H_
