// quadctl: quadsockd from the command line. One subcommand per RPC, tables for people and
// --json (protobuf's JSON form, one message per line) for scripts.
//
//   export QUADSOCK_SESSION=$(quadctl session new --lease=300)
//   S=$(quadctl open --family=4)
//   quadctl bind $S 10.1.0.2:4000
//   quadctl recv $S --count=1 --wait=5s
//   quadctl watch --wait=10s                  # every socket of the session at once
//   quadctl watch --shm --echo                # the same over shared memory, answering each
//   quadctl --json get $S | jq .counters
//   quadctl top --interval=1s --count=10
//
// Sockets belong to a session, and quadctl lives for one command: `session new` makes a session
// that outlives it (until its lease lapses without calls, or `session end`); pass its token
// with --session or QUADSOCK_SESSION. Administration commands without one use a session of their
// own for the one call; with --admin they go to quadsockd's administration listener, which takes
// them without a session, and is the one place where the neighbour table may be changed:
//
//   sudo quadctl --admin neigh set 10.1.0.1 02:00:00:00:00:01
//
// Exit status: 0 success, 1 the call failed ("quadctl: NOT_FOUND: ..."), 2 a usage error.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "clients/cpp/client.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/message.h"
#include "google/protobuf/util/json_util.h"
#include "clients/quadctl/cli.h"
#include "clients/quadctl/commands.h"
#include "clients/quadctl/output.h"
#include "common/did_you_mean.h"

namespace quadsock::quadctl {
namespace {

void PrintOptions(const std::vector<Option>& options) {
  for (const Option& o : options) {
    std::cout << absl::StrFormat("  --%-22s %s\n", o.name + (o.takes_value ? "=VALUE" : ""),
                                 o.help);
  }
}

void PrintHelp() {
  std::cout << "quadctl: quadsockd from the command line.\n\n"
               "  quadctl [OPTIONS] COMMAND [ARGUMENTS] [OPTIONS]\n\n"
               "Sockets live in a session: start one with `export QUADSOCK_SESSION=$(quadctl "
               "session new --lease=300)`.\n\nCommands:\n";
  for (const Command& c : Commands()) {
    std::cout << absl::StrFormat("  %-36s %s\n", absl::StrCat(c.name, " ", c.usage), c.summary);
  }
  std::cout << "\nAdministration: `quadctl --admin COMMAND` talks to quadsockd's administration "
               "listener\n(default unix:/run/quadsock-admin/admin.sock, mode 0600: run it as "
               "quadsockd's user, root)\nwithout a session. Only there may the neighbour table "
               "be changed:\n`sudo quadctl --admin neigh set ADDRESS MAC` (on the ordinary "
               "listener that is PERMISSION_DENIED);\nand it answers when clients hold every "
               "session there is.\n";
  std::cout << "\nOptions (every command):\n";
  PrintOptions(GlobalOptions());
  std::cout << "\n`quadctl COMMAND --help` describes one command. Exit status: 0 success, 1 the "
               "call failed, 2 a usage error.\n";
}

void PrintCommandHelp(const Command& c) {
  std::cout << "quadctl " << c.name << (c.usage.empty() ? "" : " ") << c.usage << "\n\n"
            << c.summary << ".\n";
  if (!c.options.empty()) {
    std::cout << "\nOptions:\n";
    PrintOptions(c.options);
  }
  std::cout << "\nOptions of every command:\n";
  PrintOptions(GlobalOptions());
}

const Command* FindCommand(std::vector<std::string>& positional) {
  if (positional.empty()) return nullptr;
  if (positional.size() >= 2) {
    const std::string two = positional[0] + " " + positional[1];
    for (const Command& c : Commands()) {
      if (c.name == two) {
        positional.erase(positional.begin(), positional.begin() + 2);
        return &c;
      }
    }
  }
  std::string one = positional[0];
  if (one == "neigh") one = "neigh list";  // the default
  for (const Command& c : Commands()) {
    if (c.name == one) {
      positional.erase(positional.begin());
      return &c;
    }
  }
  return nullptr;
}

// "unknown command "stat" (did you mean stats?)": the words commands start with are the known
// ones ("neigh" of "neigh set").
std::string UnknownCommand(const std::string& word) {
  std::vector<std::string> known;
  for (const Command& c : Commands()) {
    const std::string first = c.name.substr(0, c.name.find(' '));
    if (std::find(known.begin(), known.end(), first) == known.end()) known.push_back(first);
  }
  const std::optional<std::string> meant = DidYouMean(word, known);
  return absl::StrCat("unknown command \"", word, "\"",
                      meant ? absl::StrCat(" (did you mean ", *meant, "?)") : "");
}

// Where the target came from, for the hint when nothing answers there.
struct TargetChoice {
  std::string target;
  std::string source;  // "--target", "QUADSOCK_TARGET", or "" for the default
};

// What to do when quadctl cannot connect to the target: gRPC's own message names only a socket
// file that is not there, or that this user may not open.
std::string UnreachableHint(const TargetChoice& t, bool admin, const absl::Status& failure) {
  const char* env = admin ? "QUADSOCK_ADMIN_TARGET" : "QUADSOCK_TARGET";
  const std::string source =
      t.source.empty() ? absl::StrCat("the default: neither --target nor ", env, " is set")
                       : absl::StrCat("from ", t.source);
  if (absl::StrContains(failure.message(), "Permission denied")) {
    return absl::StrCat(
        "quadctl: this user may not open ", t.target, " (", source, "). ",
        admin ? "The administration listener is for quadsockd's own user only: `sudo quadctl "
                "--admin ...`.\n"
              : "quadsockd's listener is for its user and group (mode 0660): run quadctl as "
                "one of them, or with `sudo -E`, which keeps QUADSOCK_TARGET and "
                "QUADSOCK_SESSION.\n");
  }
  std::string hint = absl::StrCat(
      "quadctl: nothing answers at ", t.target, " (", source, "). Is quadsockd running, with ",
      admin ? "--admin_listen" : "--listen", " there? Point quadctl at it with "
      "--target=unix:PATH or ", env, ".\n");
  if (t.source.empty() && !admin && std::getenv("SUDO_USER") != nullptr) {
    absl::StrAppend(&hint,
                    "quadctl: sudo drops QUADSOCK_TARGET and QUADSOCK_SESSION from the "
                    "environment: `sudo -E quadctl ...` keeps them, or pass --target and "
                    "--session.\n");
  }
  return hint;
}

int Usage(const std::string& message, const Command* c) {
  std::cerr << "quadctl: " << message << "\n"
            << "see `quadctl " << (c == nullptr ? "" : c->name + " ") << "--help`\n";
  return 2;
}

int Main(int argc, char** argv) {
  const std::vector<std::string> argv_list(argv + 1, argv + argc);
  const Command* command = nullptr;
  Context c;
  try {
    Args first = Parse(argv_list, nullptr);
    command = FindCommand(first.positional);
    if (command == nullptr) {
      if (first.positional.empty() || first.positional[0] == "help" || first.Has("help")) {
        PrintHelp();
        return first.positional.empty() && !first.Has("help") ? 2 : 0;
      }
      return Usage(UnknownCommand(first.positional[0]), nullptr);
    }
    c.args = Parse(argv_list, command);
    FindCommand(c.args.positional);  // drop the command's own words
    if (c.args.Has("help")) {
      PrintCommandHelp(*command);
      return 0;
    }
    const size_t n = c.args.positional.size();
    if (n < command->min_args || n > command->max_args) {
      return Usage(absl::StrCat(command->name, ": expected ",
                                command->usage.empty() ? "no arguments" : command->usage,
                                ", got ", n, " argument(s)"),
                   command);
    }
    c.json = c.args.Has("json");

    ClientOptions& o = c.options;
    o.client_name = "quadctl";
    o.call_timeout = c.args.GetDuration("timeout", absl::Seconds(10));
    o.tls_ca = c.args.Get("tls_ca");
    o.tls_cert = c.args.Get("tls_cert");
    o.tls_key = c.args.Get("tls_key");
    o.tls_server_name = c.args.Get("tls_server_name");
    const char* env_session = std::getenv("QUADSOCK_SESSION");
    const std::string session = c.args.Get("session", env_session ? env_session : "");
    const bool admin = c.args.Has("admin");
    if (admin && (command->session == SessionUse::kRequired ||
                  command->session == SessionUse::kCreate)) {
      return Usage(absl::StrCat(command->name,
                                ": sessions and sockets live on quadsockd's ordinary listener; "
                                "--admin is for administration commands"),
                   command);
    }
    if (admin && c.args.Has("session")) {
      return Usage("--admin takes no --session: the administration listener needs none", command);
    }
    switch (command->session) {
      case SessionUse::kNone:
        o.create_session = false;
        break;
      case SessionUse::kCreate:
        o.lease_seconds = c.args.GetUint("lease", 0);
        o.client_name = c.args.Get("name", "quadctl");
        o.keep = ClientOptions::KeepSession::kNone;  // it outlives this process
        break;
      case SessionUse::kOwn:
        if (admin) {
          o.create_session = false;
        } else {
          o.session = session;  // or a new one, held for this call
        }
        break;
      case SessionUse::kRequired:
        if (session.empty()) {
          return Usage(absl::StrCat(command->name,
                                    ": needs a session: run `quadctl session new` and pass "
                                    "--session=TOKEN or set QUADSOCK_SESSION"),
                       command);
        }
        o.session = session;
        break;
    }
    const char* env_name = admin ? "QUADSOCK_ADMIN_TARGET" : "QUADSOCK_TARGET";
    const char* env_target = std::getenv(env_name);
    TargetChoice choice{admin ? kDefaultAdminTarget : kDefaultTarget, ""};
    if (c.args.Has("target")) {
      choice = {c.args.Get("target"), "--target"};
    } else if (env_target != nullptr) {
      choice = {env_target, env_name};
    }
    c.target = choice.target;
    absl::Status result;
    try {
      result = command->run(c);
    } catch (const ConnectError& e) {
      result = e.status;
    }
    c.connected.reset();
    std::cout.flush();
    if (!result.ok()) {
      std::cerr << "quadctl: " << absl::StatusCodeToString(result.code()) << ": "
                << result.message() << "\n";
      if (absl::IsUnavailable(result) && absl::StrContains(result.message(), "failed to connect")) {
        std::cerr << UnreachableHint(choice, admin, result);
      }
      return 1;
    }
    return c.exit_code;
  } catch (const UsageError& e) {
    return Usage(e.what(), command);
  }
}

}  // namespace
}  // namespace quadsock::quadctl

int main(int argc, char** argv) { return quadsock::quadctl::Main(argc, argv); }
