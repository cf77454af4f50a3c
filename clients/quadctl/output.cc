#include "clients/quadctl/output.h"

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
#include "clients/quadctl/cli.h"

namespace quadsock::quadctl {

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

}  // namespace quadsock::quadctl
