// quadctl's command line: the options, the parsed arguments, a command's description, and the
// context a command runs in (it connects to quadsockd on first use).
//
//   Args args = Parse(argv, &command);        // UsageError on a malformed line
//   Context c{.args = args};  c.client().Open(...);
#ifndef QUADSOCK_CLIENTS_QUADCTL_CLI_H_
#define QUADSOCK_CLIENTS_QUADCTL_CLI_H_

#include <functional>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "clients/cpp/client.h"

namespace quadsock::quadctl {

constexpr char kDefaultTarget[] = "unix:/run/quadsock/quadsock.sock";
// quadsockd's administration listener (--admin_listen): quadctl --admin.
constexpr char kDefaultAdminTarget[] = "unix:/run/quadsock-admin/admin.sock";

// ----------------------------------------------------------------------------- command line

struct Option {
  std::string name;
  bool takes_value;
  std::string help;
};

const std::vector<Option>& GlobalOptions();

// How a command uses sessions.
enum class SessionUse {
  kNone,       // health: no session at all
  kOwn,        // administration: --session if given, else a session for this one call;
               // none with --admin (the administration listener takes calls without one)
  kRequired,   // sockets: they live in the --session's session
  kCreate,     // session new
};

// A malformed command line (exit status 2). quadctl's commands read their arguments where they
// use them; this unwinds from there to Main, which prints it with the command's usage hint.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct Args {
  std::vector<std::string> positional;
  std::map<std::string, std::string> options;  // name -> value ("" for flags)

  bool Has(const std::string& name) const { return options.count(name) > 0; }
  std::string Get(const std::string& name, const std::string& fallback = "") const {
    auto it = options.find(name);
    return it == options.end() ? fallback : it->second;
  }
  uint32_t GetUint(const std::string& name, uint32_t fallback, uint32_t max = UINT32_MAX) const {
    if (!Has(name)) return fallback;
    uint32_t v = 0;
    if (!absl::SimpleAtoi(Get(name), &v) || v > max) {
      throw UsageError(absl::StrCat("--", name, "=", Get(name), ": expected a number 0..", max));
    }
    return v;
  }
  absl::Duration GetDuration(const std::string& name, absl::Duration fallback) const {
    if (!Has(name)) return fallback;
    absl::Duration d;
    if (!absl::ParseDuration(Get(name), &d) || d < absl::ZeroDuration()) {
      throw UsageError(absl::StrCat("--", name, "=", Get(name), ": expected a duration like 2s"));
    }
    return d;
  }
};

struct Context;

struct Command {
  std::string name;   // "bind", "neigh set"
  std::string usage;  // arguments: "SOCKET ADDRESS:PORT"
  std::string summary;
  size_t min_args = 0;
  size_t max_args = 0;
  SessionUse session = SessionUse::kOwn;
  std::vector<Option> options;
  std::function<absl::Status(Context&)> run;
};

// Connecting failed (exit status 1); unwinds to Main like UsageError.
class ConnectError : public std::runtime_error {
 public:
  explicit ConnectError(absl::Status s) : std::runtime_error(s.ToString()), status(std::move(s)) {}
  absl::Status status;
};

struct Context {
  Args args;
  bool json = false;
  std::string target;
  ClientOptions options;
  std::unique_ptr<Client> connected;
  int exit_code = 0;  // set by commands that fail without an RPC error (health)

  const std::string& Arg(size_t i) const { return args.positional[i]; }
  // Connects on first use, so that commands read (and reject) their arguments first.
  Client& client() {
    if (connected == nullptr) {
      absl::StatusOr<std::unique_ptr<Client>> c = Client::Connect(target, options);
      if (!c.ok()) throw ConnectError(c.status());
      connected = std::move(*c);
    }
    return *connected;
  }
};

// Splits argv into positional arguments and options known to `command` (and the global ones).
Args Parse(const std::vector<std::string>& argv, const Command* command);

}  // namespace quadsock::quadctl

#endif  // QUADSOCK_CLIENTS_QUADCTL_CLI_H_
