#include "clients/quadctl/cli.h"

#include "common/did_you_mean.h"

namespace quadsock::quadctl {

const std::vector<Option>& GlobalOptions() {
  static const auto* options = new std::vector<Option>{
      {"target", true,
       "Where quadsockd listens: unix:PATH or HOST:PORT (TLS). Default: $QUADSOCK_TARGET, else "
       "unix:/run/quadsock/quadsock.sock; with --admin: $QUADSOCK_ADMIN_TARGET, else "
       "unix:/run/quadsock-admin/admin.sock"},
      {"admin", false,
       "Use quadsockd's administration listener (--admin_listen), as its user (root): "
       "no session; needed to change neighbours"},
      {"session", true, "Session token from `quadctl session new`. Default: $QUADSOCK_SESSION"},
      {"json", false, "Print protobuf's JSON form, one message per line"},
      {"timeout", true,
       "Deadline of each call (default 10s); a stream such as recv's waits for --wait instead"},
      {"tls_ca", true, "CA certificate (PEM) for a TLS target; default: the system's roots"},
      {"tls_cert", true, "Client certificate (PEM), for mTLS"},
      {"tls_key", true, "Client private key (PEM), for mTLS"},
      {"tls_server_name", true, "Name the server certificate must carry, if not the host"},
      {"help", false, "Show help"},
  };
  return *options;
}

Args Parse(const std::vector<std::string>& argv, const Command* command) {
  Args out;
  auto find = [&](const std::string& name) -> const Option* {
    for (const Option& o : GlobalOptions()) {
      if (o.name == name) return &o;
    }
    if (command != nullptr) {
      for (const Option& o : command->options) {
        if (o.name == name) return &o;
      }
    }
    return nullptr;
  };
  bool options_done = false;
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string& a = argv[i];
    if (options_done || a.size() < 2 || a.rfind("--", 0) != 0) {
      out.positional.push_back(a);
      continue;
    }
    if (a == "--") {
      options_done = true;
      continue;
    }
    const size_t eq = a.find('=');
    std::string name = a.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
    const Option* o = find(name);
    if (o == nullptr) {
      if (command == nullptr) continue;  // first pass: only the global options matter
      std::vector<std::string> known;
      for (const Option& k : GlobalOptions()) known.push_back(k.name);
      for (const Option& k : command->options) known.push_back(k.name);
      const std::optional<std::string> meant = DidYouMean(name, known);
      throw UsageError(absl::StrCat("unknown option --", name,
                                    meant ? absl::StrCat(" (did you mean --", *meant, "?)") : ""));
    }
    if (!o->takes_value) {
      if (eq != std::string::npos) throw UsageError(absl::StrCat("--", name, " takes no value"));
      out.options[name] = "";
    } else if (eq != std::string::npos) {
      out.options[name] = a.substr(eq + 1);
    } else if (i + 1 < argv.size()) {
      out.options[name] = argv[++i];
    } else {
      throw UsageError(absl::StrCat("--", name, " needs a value"));
    }
  }
  return out;
}

}  // namespace quadsock::quadctl
