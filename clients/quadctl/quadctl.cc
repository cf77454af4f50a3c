// quadctl: quadsockd from the command line. One subcommand per RPC, tables for people and
// --json (protobuf's JSON form, one message per line) for scripts.
//
//   export QUADSOCK_SESSION=$(quadctl session new --lease=300)
//   S=$(quadctl open --family=4)
//   quadctl bind $S 10.1.0.2:4000
//   quadctl recv $S --count=1 --timeout=5s
//   quadctl --json get $S | jq .counters
//   quadctl top --interval=1s --count=10
//
// Sockets belong to a session, and quadctl lives for one command: `session new` makes a session
// that outlives it (until its lease lapses without calls, or `session end`); pass its token
// with --session or QUADSOCK_SESSION. Administration commands without one use a session of their
// own for the one call. Exit status: 0 success, 1 the call failed ("quadctl: NOT_FOUND: ..."),
// 2 a usage error.
#include <unistd.h>

#include <cstdio>
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

namespace quadsock::quadctl {
namespace {

constexpr char kDefaultTarget[] = "unix:/run/quadsock/quadsock.sock";

// ----------------------------------------------------------------------------- command line

struct Option {
  std::string name;
  bool takes_value;
  std::string help;
};

const std::vector<Option>& GlobalOptions() {
  static const auto* options = new std::vector<Option>{
      {"target", true,
       "Where quadsockd listens: unix:PATH or HOST:PORT (TLS). Default: $QUADSOCK_TARGET, else "
       "unix:/run/quadsock/quadsock.sock"},
      {"session", true, "Session token from `quadctl session new`. Default: $QUADSOCK_SESSION"},
      {"json", false, "Print protobuf's JSON form, one message per line"},
      {"timeout", true, "Deadline of each call, e.g. 10s (default)"},
      {"tls_ca", true, "CA certificate (PEM) for a TLS target; default: the system's roots"},
      {"tls_cert", true, "Client certificate (PEM), for mTLS"},
      {"tls_key", true, "Client private key (PEM), for mTLS"},
      {"tls_server_name", true, "Name the server certificate must carry, if not the host"},
      {"help", false, "Show help"},
  };
  return *options;
}

// How a command uses sessions.
enum class SessionUse {
  kNone,       // health: no session at all
  kOwn,        // administration: --session if given, else a session for this one call
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
      throw UsageError(absl::StrCat("unknown option --", name));
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

// ----------------------------------------------------------------------------------- output

std::string Json(const google::protobuf::Message& m) {
  google::protobuf::util::JsonPrintOptions o;
  o.always_print_primitive_fields = true;
  std::string out;
  if (!google::protobuf::util::MessageToJsonString(m, &out, o).ok()) return "{}";
  return out;
}

void PrintJson(const google::protobuf::Message& m) { std::cout << Json(m) << "\n"; }

std::string Ep(const v1::Endpoint& e) {
  if (e.address().empty() && e.port() == 0) return "-";
  return Endpoint::FromProto(e).ToString();
}

std::string StateName(v1::SocketState s) {
  switch (s) {
    case v1::SOCKET_STATE_OPEN:
      return "open";
    case v1::SOCKET_STATE_BOUND:
      return "bound";
    case v1::SOCKET_STATE_CONNECTED:
      return "connected";
    default:
      return "?";
  }
}

// A table with columns padded to their widest cell.
void PrintTable(const std::vector<std::string>& header,
                const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width(header.size());
  for (size_t c = 0; c < header.size(); ++c) width[c] = header[c].size();
  for (const auto& r : rows) {
    for (size_t c = 0; c < r.size() && c < width.size(); ++c) width[c] = std::max(width[c], r[c].size());
  }
  auto line = [&](const std::vector<std::string>& r) {
    std::string out;
    for (size_t c = 0; c < r.size(); ++c) {
      out += r[c];
      if (c + 1 < r.size()) out += std::string(width[c] - r[c].size() + 2, ' ');
    }
    std::cout << out << "\n";
  };
  line(header);
  for (const auto& r : rows) line(r);
}

// Every scalar of a message as ("stack.rx_frames", "12") in field order: `stats` and `top`.
void Flatten(const google::protobuf::Message& m, const std::string& prefix,
             std::vector<std::pair<std::string, std::string>>* out) {
  using google::protobuf::FieldDescriptor;
  const google::protobuf::Reflection* r = m.GetReflection();
  const google::protobuf::Descriptor* d = m.GetDescriptor();
  for (int i = 0; i < d->field_count(); ++i) {
    const FieldDescriptor* f = d->field(i);
    const std::string name = prefix + f->name();
    auto scalar = [&](int index) -> std::string {
      const bool rep = f->is_repeated();
      switch (f->cpp_type()) {
        case FieldDescriptor::CPPTYPE_UINT64:
          return absl::StrCat(rep ? r->GetRepeatedUInt64(m, f, index) : r->GetUInt64(m, f));
        case FieldDescriptor::CPPTYPE_UINT32:
          return absl::StrCat(rep ? r->GetRepeatedUInt32(m, f, index) : r->GetUInt32(m, f));
        case FieldDescriptor::CPPTYPE_INT64:
          return absl::StrCat(rep ? r->GetRepeatedInt64(m, f, index) : r->GetInt64(m, f));
        case FieldDescriptor::CPPTYPE_INT32:
          return absl::StrCat(rep ? r->GetRepeatedInt32(m, f, index) : r->GetInt32(m, f));
        case FieldDescriptor::CPPTYPE_BOOL:
          return (rep ? r->GetRepeatedBool(m, f, index) : r->GetBool(m, f)) ? "true" : "false";
        case FieldDescriptor::CPPTYPE_STRING:
          return rep ? r->GetRepeatedString(m, f, index) : r->GetString(m, f);
        case FieldDescriptor::CPPTYPE_ENUM:
          return (rep ? r->GetRepeatedEnum(m, f, index) : r->GetEnum(m, f))->name();
        default:
          return "?";
      }
    };
    if (f->is_map()) {
      // map<string, uint64>: key and value of each entry.
      std::vector<std::pair<std::string, std::string>> entries;
      for (int j = 0; j < r->FieldSize(m, f); ++j) {
        const google::protobuf::Message& e = r->GetRepeatedMessage(m, f, j);
        std::vector<std::pair<std::string, std::string>> kv;
        Flatten(e, "", &kv);
        if (kv.size() == 2) entries.emplace_back(name + "." + kv[0].second, kv[1].second);
      }
      std::sort(entries.begin(), entries.end());
      out->insert(out->end(), entries.begin(), entries.end());
    } else if (f->is_repeated()) {
      for (int j = 0; j < r->FieldSize(m, f); ++j) {
        if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
          Flatten(r->GetRepeatedMessage(m, f, j), absl::StrCat(name, "[", j, "]."), out);
        } else {
          out->emplace_back(absl::StrCat(name, "[", j, "]"), scalar(j));
        }
      }
    } else if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
      if (r->HasField(m, f)) Flatten(r->GetMessage(m, f), name + ".", out);
    } else {
      out->emplace_back(name, scalar(0));
    }
  }
}

void PrintFlat(const google::protobuf::Message& m) {
  std::vector<std::pair<std::string, std::string>> flat;
  Flatten(m, "", &flat);
  std::vector<std::vector<std::string>> rows;
  for (auto& [k, v] : flat) rows.push_back({k, v});
  PrintTable({"NAME", "VALUE"}, rows);
}

// Something received, for people: endpoints, sequence, and the payload with C escapes.
std::string DatagramLine(const v1::Datagram& d, bool hex) {
  return absl::StrCat(Ep(d.peer()), " -> ", Ep(d.local()), " #", d.sequence(), " ",
                      d.payload().size(), " bytes: ",
                      hex ? absl::BytesToHexString(d.payload()) : absl::CHexEscape(d.payload()));
}

Endpoint ParseEndpointArg(const std::string& text) {
  absl::StatusOr<Endpoint> e = Endpoint::Parse(text);
  if (!e.ok()) throw UsageError(std::string(e.status().message()));
  return *e;
}

// --------------------------------------------------------------------------------- commands

absl::Status SessionNew(Context& c) {
  v1::CreateSessionResponse r;
  r.set_session(c.client().session());
  r.set_lease_seconds(c.client().lease_seconds());
  if (c.json) {
    PrintJson(r);
  } else {
    std::cout << r.session() << "\n";
  }
  return absl::OkStatus();
}

absl::Status SessionKeepAlive(Context& c) {
  if (absl::Status s = c.client().KeepAlive(); !s.ok()) return s;
  if (c.json) PrintJson(v1::KeepAliveResponse());
  return absl::OkStatus();
}

absl::Status SessionEnd(Context& c) {
  absl::StatusOr<uint32_t> n = c.client().EndSession();
  if (!n.ok()) return n.status();
  v1::EndSessionResponse r;
  r.set_sockets_closed(*n);
  if (c.json) {
    PrintJson(r);
  } else {
    std::cout << "session ended, " << *n << " socket(s) closed\n";
  }
  return absl::OkStatus();
}

absl::Status Open(Context& c) {
  OpenOptions o;
  const std::string family = c.args.Get("family", "4");
  if (family == "4" || family == "ipv4") {
    o.family = v1::FAMILY_IPV4;
  } else if (family == "6" || family == "ipv6") {
    o.family = v1::FAMILY_IPV6;
  } else {
    throw UsageError(absl::StrCat("--family=", family, ": expected 4 or 6"));
  }
  o.v6only = c.args.Has("v6only");
  o.reuse_port = c.args.Has("reuse_port");
  o.bound_device = c.args.Get("device");
  o.receive_queue_depth = c.args.GetUint("queue_depth", 0);
  absl::StatusOr<RemoteSocket> s = c.client().Open(o);
  if (!s.ok()) return s.status();
  v1::OpenResponse r;
  r.set_socket(s->Release());  // it lives on in the session
  if (c.json) {
    PrintJson(r);
  } else {
    std::cout << r.socket() << "\n";
  }
  return absl::OkStatus();
}

// bind, connect, rehash: print the local endpoint (JSON: {"local": {...}}).
absl::Status PrintLocal(Context& c, const absl::StatusOr<Endpoint>& local) {
  if (!local.ok()) return local.status();
  v1::BindResponse r;  // BindResponse, ConnectResponse and RehashResponse all are {local}
  *r.mutable_local() = local->ToProto();
  if (c.json) {
    PrintJson(r);
  } else {
    std::cout << local->ToString() << "\n";
  }
  return absl::OkStatus();
}

absl::Status Bind(Context& c) {
  const Endpoint local = ParseEndpointArg(c.Arg(1));
  RemoteSocket s = c.client().Attach(c.Arg(0));
  absl::StatusOr<Endpoint> r = s.Bind(local);
  s.Release();
  return PrintLocal(c, r);
}

absl::Status ConnectCmd(Context& c) {
  const Endpoint peer = ParseEndpointArg(c.Arg(1));
  RemoteSocket s = c.client().Attach(c.Arg(0));
  absl::StatusOr<Endpoint> r = s.Connect(peer);
  s.Release();
  return PrintLocal(c, r);
}

absl::Status Rehash(Context& c) {
  std::optional<uint16_t> port;
  if (c.args.Has("port")) port = static_cast<uint16_t>(c.args.GetUint("port", 0, 65535));
  const std::string address = c.args.Get("address");
  if (address.empty() && !port.has_value()) {
    throw UsageError("rehash: give --address, --port or both");
  }
  RemoteSocket s = c.client().Attach(c.Arg(0));
  absl::StatusOr<Endpoint> r = s.Rehash(address, port);
  s.Release();
  return PrintLocal(c, r);
}

template <typename Response>
absl::Status PrintEmpty(Context& c, absl::Status s) {
  if (s.ok() && c.json) PrintJson(Response());
  return s;
}

absl::Status Disconnect(Context& c) {
  RemoteSocket s = c.client().Attach(c.Arg(0));
  absl::Status st = s.Disconnect();
  s.Release();
  return PrintEmpty<v1::DisconnectResponse>(c, st);
}

absl::Status Close(Context& c) {
  RemoteSocket s = c.client().Attach(c.Arg(0));
  return PrintEmpty<v1::CloseResponse>(c, s.Close());
}

absl::Status Send(Context& c) {
  std::optional<Endpoint> to;
  if (c.args.Has("to")) to = ParseEndpointArg(c.args.Get("to"));
  const uint32_t repeat = c.args.GetUint("repeat", 1, 1024);
  std::vector<Datagram> batch;
  for (uint32_t i = 0; i < repeat; ++i) {
    for (size_t a = 1; a < c.args.positional.size(); ++a) {
      Datagram d;
      if (c.args.Has("hex")) {
        const std::string& h = c.Arg(a);
        if (h.size() % 2 != 0 || !std::all_of(h.begin(), h.end(), ::isxdigit)) {
          throw UsageError(absl::StrCat("--hex: \"", h, "\" is not hex"));
        }
        d.payload = absl::HexStringToBytes(h);
      } else {
        d.payload = c.Arg(a);
      }
      if (to.has_value()) d.peer = *to;
      batch.push_back(std::move(d));
    }
  }
  RemoteSocket s = c.client().Attach(c.Arg(0));
  v1::SendBatchResponse r;
  absl::Status st;
  if (batch.size() == 1) {
    st = s.Send(batch[0].payload, to);
    if (st.ok()) r.set_queued(1);
  } else {
    absl::StatusOr<uint32_t> n = s.SendBatch(batch);
    st = n.status();
    if (n.ok()) r.set_queued(*n);
  }
  s.Release();
  if (!st.ok()) return st;
  if (c.json) {
    PrintJson(r);
  } else {
    std::cout << "queued " << r.queued() << "\n";
  }
  return absl::OkStatus();
}

absl::Status Recv(Context& c) {
  const uint32_t count = c.args.GetUint("count", 1);
  const absl::Duration timeout = c.args.GetDuration("timeout", absl::Seconds(5));
  const absl::Time deadline = absl::Now() + timeout;
  RemoteSocket s = c.client().Attach(c.Arg(0));
  absl::Status result;
  for (uint32_t i = 0; count == 0 || i < count; ++i) {
    absl::StatusOr<Datagram> d = s.Receive(std::max(deadline - absl::Now(), absl::ZeroDuration()));
    if (!d.ok()) {
      result = d.status();
      if (result.code() == absl::StatusCode::kDeadlineExceeded) {
        result = absl::DeadlineExceededError(
            absl::StrCat("received ", i, " of ", count, " datagram(s) within ",
                         absl::FormatDuration(timeout)));
      }
      break;
    }
    v1::Datagram out;
    out.set_payload(d->payload);
    *out.mutable_peer() = d->peer.ToProto();
    *out.mutable_local() = d->local.ToProto();
    out.set_arrival_unix_nanos(absl::ToUnixNanos(d->arrival));
    out.set_sequence(d->sequence);
    if (c.json) {
      PrintJson(out);
    } else {
      std::cout << DatagramLine(out, c.args.Has("hex")) << "\n";
    }
    std::cout.flush();
  }
  s.Release();
  return result;
}

absl::Status List(Context& c) {
  ListOptions o;
  const std::string state = c.args.Get("state");
  if (state == "open") {
    o.state = v1::SOCKET_STATE_OPEN;
  } else if (state == "bound") {
    o.state = v1::SOCKET_STATE_BOUND;
  } else if (state == "connected") {
    o.state = v1::SOCKET_STATE_CONNECTED;
  } else if (!state.empty()) {
    throw UsageError(absl::StrCat("--state=", state, ": expected open, bound or connected"));
  }
  o.local_port = static_cast<uint16_t>(c.args.GetUint("port", 0, 65535));
  absl::StatusOr<std::vector<v1::Socket>> sockets = c.client().List(o);
  if (!sockets.ok()) return sockets.status();
  if (c.json) {
    v1::ListResponse r;
    for (const v1::Socket& s : *sockets) *r.add_sockets() = s;
    PrintJson(r);
    return absl::OkStatus();
  }
  std::vector<std::vector<std::string>> rows;
  for (const v1::Socket& s : *sockets) {
    rows.push_back({s.socket(), s.family() == v1::FAMILY_IPV6 ? "ipv6" : "ipv4",
                    StateName(s.state()), Ep(s.local()), Ep(s.peer()),
                    s.in_hash4() ? "yes" : "no", absl::StrCat(s.counters().rx_datagrams()),
                    absl::StrCat(s.counters().tx_datagrams()),
                    absl::StrCat(s.counters().rx_dropped() + s.counters().tx_dropped()),
                    absl::StrCat(s.counters().queued())});
  }
  PrintTable({"SOCKET", "FAMILY", "STATE", "LOCAL", "PEER", "HASH4", "RX", "TX", "DROPPED",
              "QUEUED"},
             rows);
  return absl::OkStatus();
}

absl::Status Get(Context& c) {
  RemoteSocket s = c.client().Attach(c.Arg(0));
  absl::StatusOr<v1::Socket> info = s.Get();
  s.Release();
  if (!info.ok()) return info.status();
  if (c.json) {
    PrintJson(*info);
  } else {
    PrintFlat(*info);
  }
  return absl::OkStatus();
}

absl::Status Stats(Context& c) {
  absl::StatusOr<v1::Counters> counters = c.client().Counters();
  if (!counters.ok()) return counters.status();
  if (c.json) {
    PrintJson(*counters);
  } else {
    PrintFlat(*counters);
  }
  return absl::OkStatus();
}

absl::Status Top(Context& c) {
  const absl::Duration interval = c.args.GetDuration("interval", absl::Seconds(1));
  const uint32_t count = c.args.GetUint("count", 0);
  const bool clear = !c.json && isatty(STDOUT_FILENO);
  std::map<std::string, double> before;
  absl::Time then;
  for (uint32_t i = 0; count == 0 || i < count; ++i) {
    if (i > 0) absl::SleepFor(interval);
    absl::StatusOr<v1::Counters> counters = c.client().Counters();
    if (!counters.ok()) return counters.status();
    const absl::Time now = absl::Now();
    if (c.json) {
      PrintJson(*counters);
      std::cout.flush();
      continue;
    }
    std::vector<std::pair<std::string, std::string>> flat;
    Flatten(*counters, "", &flat);
    const double seconds = i == 0 ? 0 : absl::ToDoubleSeconds(now - then);
    std::vector<std::vector<std::string>> rows;
    std::map<std::string, double> values;
    for (const auto& [name, text] : flat) {
      double v = 0;
      if (!absl::SimpleAtod(text, &v)) continue;
      values[name] = v;
      if (v == 0) continue;  // a live view shows what moves
      std::string rate = "-";
      if (seconds > 0 && before.count(name)) {
        rate = absl::StrFormat("%.1f", (v - before[name]) / seconds);
      }
      rows.push_back({name, text, rate});
    }
    const v1::TableCounters& t = counters->table();
    if (clear) std::cout << "\033[H\033[2J";
    std::cout << absl::FormatTime("%H:%M:%S", now, absl::LocalTimeZone()) << "  sessions "
              << counters->sessions() << "  sockets " << counters->sockets() << "  hash4 hit ratio "
              << (t.hash4_hits() + t.hash4_misses() == 0
                      ? std::string("-")
                      : absl::StrFormat("%.1f%%", 100.0 * t.hash4_hits() /
                                                      (t.hash4_hits() + t.hash4_misses())))
              << "\n";
    PrintTable({"COUNTER", "TOTAL", "PER SECOND"}, rows);
    if (!clear) std::cout << "\n";
    std::cout.flush();
    before = std::move(values);
    then = now;
  }
  return absl::OkStatus();
}

absl::Status NeighList(Context& c) {
  absl::StatusOr<std::vector<v1::Neighbor>> n = c.client().Neighbors();
  if (!n.ok()) return n.status();
  if (c.json) {
    v1::ListNeighborsResponse r;
    for (const v1::Neighbor& x : *n) *r.add_neighbors() = x;
    PrintJson(r);
    return absl::OkStatus();
  }
  std::vector<std::vector<std::string>> rows;
  for (const v1::Neighbor& x : *n) {
    rows.push_back({x.address(), x.mac().empty() ? "-" : x.mac(), x.state(),
                    absl::StrCat(x.pending())});
  }
  PrintTable({"ADDRESS", "MAC", "STATE", "PENDING"}, rows);
  return absl::OkStatus();
}

absl::Status NeighSet(Context& c) {
  return PrintEmpty<v1::SetNeighborResponse>(c, c.client().SetNeighbor(c.Arg(0), c.Arg(1)));
}

absl::Status NeighDel(Context& c) {
  return PrintEmpty<v1::RemoveNeighborResponse>(c, c.client().RemoveNeighbor(c.Arg(0)));
}

absl::Status Routes(Context& c) {
  absl::StatusOr<std::vector<v1::Route>> routes = c.client().Routes();
  if (!routes.ok()) return routes.status();
  if (c.json) {
    v1::ListRoutesResponse r;
    for (const v1::Route& x : *routes) *r.add_routes() = x;
    PrintJson(r);
    return absl::OkStatus();
  }
  std::vector<std::vector<std::string>> rows;
  for (const v1::Route& x : *routes) {
    rows.push_back({x.destination(), x.gateway().empty() ? "connected" : x.gateway(),
                    x.source().empty() ? "-" : x.source()});
  }
  PrintTable({"DESTINATION", "GATEWAY", "SOURCE"}, rows);
  return absl::OkStatus();
}

absl::Status Addresses(Context& c) {
  absl::StatusOr<std::vector<std::string>> a = c.client().Addresses();
  if (!a.ok()) return a.status();
  if (c.json) {
    v1::ListAddressesResponse r;
    for (const std::string& p : *a) r.add_prefixes(p);
    PrintJson(r);
  } else {
    for (const std::string& p : *a) std::cout << p << "\n";
  }
  return absl::OkStatus();
}

absl::Status Interfaces(Context& c) {
  absl::StatusOr<std::vector<v1::Interface>> ifs = c.client().Interfaces();
  if (!ifs.ok()) return ifs.status();
  if (c.json) {
    v1::ListInterfacesResponse r;
    for (const v1::Interface& x : *ifs) *r.add_interfaces() = x;
    PrintJson(r);
    return absl::OkStatus();
  }
  std::vector<std::vector<std::string>> rows;
  for (const v1::Interface& x : *ifs) {
    rows.push_back({x.name(), absl::StrCat(x.ifindex()), x.mac(), absl::StrCat(x.mtu()),
                    x.xdp_mode(), x.bind_mode(), absl::StrCat(x.queues_size())});
  }
  PrintTable({"NAME", "IFINDEX", "MAC", "MTU", "XDP", "BIND", "QUEUES"}, rows);
  std::vector<std::vector<std::string>> queues;
  for (const v1::Interface& x : *ifs) {
    for (const v1::Queue& q : x.queues()) {
      const v1::QueueCounters& k = q.counters();
      queues.push_back({x.name(), absl::StrCat(q.queue()), q.mode(), absl::StrCat(k.rx_frames()),
                        absl::StrCat(k.tx_frames()), absl::StrCat(k.rx_dropped()),
                        absl::StrCat(k.tx_ring_full()), absl::StrCat(k.wakeups())});
    }
  }
  if (!queues.empty()) {
    std::cout << "\n";
    PrintTable({"INTERFACE", "QUEUE", "MODE", "RX", "TX", "RX_DROPPED", "TX_RING_FULL", "WAKEUPS"},
               queues);
  }
  return absl::OkStatus();
}

absl::Status Health(Context& c) {
  absl::StatusOr<HealthStatus> h = c.client().Health(c.args.Get("service"));
  if (!h.ok()) return h.status();
  const std::string name(HealthStatusName(*h));
  if (c.json) {
    std::cout << "{\"status\":\"" << name << "\"}\n";
  } else {
    std::cout << name << "\n";
  }
  if (*h != HealthStatus::kServing) c.exit_code = 1;
  return absl::OkStatus();
}

absl::Status Check(Context& c) {
  absl::Status s = c.client().CheckFrameAccounting();
  if (!s.ok()) return s;
  v1::CheckFrameAccountingResponse r;
  r.set_ok(true);
  if (c.json) {
    PrintJson(r);
  } else {
    std::cout << "frame accounting ok\n";
  }
  return absl::OkStatus();
}

const std::vector<Command>& Commands() {
  using S = SessionUse;
  static const auto* commands = new std::vector<Command>{
      {"session new", "", "Start a session that outlives quadctl; prints its token", 0, 0, S::kCreate,
       {{"lease", true, "Seconds without a call before it ends (default: the server's)"},
        {"name", true, "A name for the server's logs (default quadctl)"}},
       SessionNew},
      {"session keepalive", "", "Renew the --session's lease", 0, 0, S::kRequired, {},
       SessionKeepAlive},
      {"session end", "", "End the --session now, closing its sockets", 0, 0, S::kRequired, {},
       SessionEnd},
      {"open", "", "Open a UDP socket in the session; prints its handle", 0, 0, S::kRequired,
       {{"family", true, "4 (default) or 6"},
        {"v6only", false, "IPv6 only (no v4-mapped traffic)"},
        {"reuse_port", false, "May share its address and port with other reuse_port sockets"},
        {"device", true, "Bind to this interface"},
        {"queue_depth", true, "Datagrams kept for recv (default: the server's)"}},
       Open},
      {"bind", "SOCKET ADDRESS:PORT", "Bind (0.0.0.0 / [::] for any address, port 0: ephemeral)",
       2, 2, S::kRequired, {}, Bind},
      {"connect", "SOCKET ADDRESS:PORT", "Connect to a peer (enters hash4); prints the local end",
       2, 2, S::kRequired, {}, ConnectCmd},
      {"rehash", "SOCKET", "Move a live socket to a new local address and/or port", 1, 1,
       S::kRequired,
       {{"address", true, "The new local address"},
        {"port", true, "The new local port (0: ephemeral)"}},
       Rehash},
      {"disconnect", "SOCKET", "Undo connect", 1, 1, S::kRequired, {}, Disconnect},
      {"send", "SOCKET PAYLOAD...", "Send datagrams (several: one SendBatch call)", 2, 1024,
       S::kRequired,
       {{"to", true, "Destination ADDRESS:PORT (required unless connected)"},
        {"hex", false, "Payloads are hex"},
        {"repeat", true, "Send the payloads this many times (at most 1024)"}},
       Send},
      {"recv", "SOCKET", "Print received datagrams; fails if fewer than --count came in time", 1,
       1, S::kRequired,
       {{"count", true, "How many (default 1; 0: until --timeout)"},
        {"timeout", true, "How long to wait in all (default 5s)"},
        {"hex", false, "Print payloads as hex"}},
       Recv},
      {"close", "SOCKET", "Close a socket", 1, 1, S::kRequired, {}, Close},
      {"list", "", "The session's sockets", 0, 0, S::kRequired,
       {{"state", true, "open, bound or connected"}, {"port", true, "Only this local port"}},
       List},
      {"get", "SOCKET", "One socket in detail, with its counters", 1, 1, S::kRequired, {}, Get},
      {"stats", "", "The server's counters (stack, socket table, queues, XDP)", 0, 0, S::kOwn, {},
       Stats},
      {"top", "", "A live view of the counters that move, with rates", 0, 0, S::kOwn,
       {{"interval", true, "Time between refreshes (default 1s)"},
        {"count", true, "Stop after this many refreshes (default 0: until interrupted)"}},
       Top},
      {"neigh list", "", "The neighbour cache (ARP/NDP)", 0, 0, S::kOwn, {}, NeighList},
      {"neigh set", "ADDRESS MAC", "Add a permanent neighbour entry", 2, 2, S::kOwn, {}, NeighSet},
      {"neigh del", "ADDRESS", "Remove a neighbour entry", 1, 1, S::kOwn, {}, NeighDel},
      {"route", "", "The routes", 0, 0, S::kOwn, {}, Routes},
      {"addr", "", "The stack's own addresses", 0, 0, S::kOwn, {}, Addresses},
      {"iface", "", "Interfaces, XDP and bind modes, per-queue counters", 0, 0, S::kOwn, {},
       Interfaces},
      {"check", "", "Check that every UMEM frame is accounted for", 0, 0, S::kOwn, {}, Check},
      {"health", "", "grpc.health.v1: SERVING (exit 0) or not (exit 1); needs no session", 0, 0,
       S::kNone, {{"service", true, "A service name (default: the whole server)"}}, Health},
  };
  return *commands;
}

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
      return Usage(absl::StrCat("unknown command \"", first.positional[0], "\""), nullptr);
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
        o.session = session;  // or a new one, held for this call
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
    const char* env_target = std::getenv("QUADSOCK_TARGET");
    c.target = c.args.Get("target", env_target ? env_target : kDefaultTarget);
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
