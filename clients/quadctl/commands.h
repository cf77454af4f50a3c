// quadctl's subcommands: one per RPC of quadsockd, each reading its own arguments.
//
//   for (const Command& c : Commands()) ...     // name, usage, options, run
#ifndef QUADSOCK_CLIENTS_QUADCTL_COMMANDS_H_
#define QUADSOCK_CLIENTS_QUADCTL_COMMANDS_H_

#include <vector>

#include "clients/quadctl/cli.h"

namespace quadsock::quadctl {

const std::vector<Command>& Commands();

}  // namespace quadsock::quadctl

#endif  // QUADSOCK_CLIENTS_QUADCTL_COMMANDS_H_
