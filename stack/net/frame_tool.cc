// frame_tool: look at frames the way quadsock's parser sees them, and build frames with its
// builders. One frame per line on stdin, one result per line on stdout.
//
//   echo 0200...6c6f | frame_tool parse
//     error=ok l3=ipv4 src=10.1.0.1 dst=10.1.0.2 ttl=64 proto=17 frag=0 l4=udp sport=4000 ...
//   echo "udp src=10.1.0.1:4000 dst=10.1.0.2:53 payload=68656c6c6f" | frame_tool build
//     0200...6c6f
//
// Build specs: `udp src=EP dst=EP payload=HEX [ttl=N] [vlan=ID]`,
// `arp op=1|2 sha=MAC spa=IP tha=MAC tpa=IP`, `icmp src=IP dst=IP type=N code=N rest=N
// body=HEX`, `ndp src=IP dst=IP type=135|136 target=IP [lladdr=MAC] [flags=N]`; every kind
// takes `smac=MAC dmac=MAC`. A line that cannot be built prints `error=<reason>`.
#include <cstdio>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "stack/net/frame.h"
#include "stack/net/frame_builder.h"

namespace quadsock::net {
namespace {

bool HexToBytes(absl::string_view hex, std::string& out) {
  if (hex.size() % 2 != 0) return false;
  for (char c : hex) {
    if (!absl::ascii_isxdigit(static_cast<unsigned char>(c))) return false;
  }
  out = absl::HexStringToBytes(hex);
  return true;
}

std::string Hex(std::span<const uint8_t> bytes) {
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
}

const char* L3Name(L3 l3) {
  switch (l3) {
    case L3::kArp: return "arp";
    case L3::kIpv4: return "ipv4";
    case L3::kIpv6: return "ipv6";
    case L3::kOther: return "other";
  }
  return "?";
}

const char* L4Name(L4 l4) {
  switch (l4) {
    case L4::kNone: return "none";
    case L4::kUdp: return "udp";
    case L4::kIcmpv4: return "icmp";
    case L4::kIcmpv6: return "icmpv6";
    case L4::kOther: return "other";
  }
  return "?";
}

std::string Describe(std::span<const uint8_t> frame) {
  ParsedFrame f;
  const ParseError error = ParseFrame(frame, f);
  std::vector<std::string> out = {absl::StrCat("error=", ParseErrorName(error))};
  if (error != ParseError::kOk) return absl::StrJoin(out, " ");
  out.push_back(absl::StrCat("dmac=", f.eth.dst.ToString(), " smac=", f.eth.src.ToString(),
                             " ethertype=", f.eth.ethertype));
  std::vector<int> vlans;
  for (int i = 0; i < f.eth.vlan_count; ++i) vlans.push_back(f.eth.vlans[i].vlan_id());
  if (!vlans.empty()) out.push_back(absl::StrCat("vlan=", absl::StrJoin(vlans, ",")));
  out.push_back(absl::StrCat("l3=", L3Name(f.l3)));
  if (f.l3 == L3::kArp) {
    out.push_back(absl::StrCat("arp_op=", f.arp.op, " arp_sha=", f.arp.sender_mac.ToString(),
                               " arp_spa=", f.arp.sender_ip.ToString(),
                               " arp_tha=", f.arp.target_mac.ToString(),
                               " arp_tpa=", f.arp.target_ip.ToString()));
  }
  if (f.l3 == L3::kIpv4 || f.l3 == L3::kIpv6) {
    out.push_back(absl::StrCat("src=", f.src.ToString(), " dst=", f.dst.ToString(),
                               " ttl=", f.ttl, " proto=", f.protocol, " frag=", f.fragment ? 1 : 0,
                               " l4=", L4Name(f.l4)));
  }
  if (f.l4 == L4::kUdp) {
    out.push_back(absl::StrCat("sport=", f.udp.src_port, " dport=", f.udp.dst_port,
                               " ulen=", f.udp.length, " payload=", Hex(f.payload(frame))));
  }
  if (f.l4 == L4::kIcmpv4 || f.l4 == L4::kIcmpv6) {
    out.push_back(absl::StrCat("icmp_type=", f.icmp.type, " icmp_code=", f.icmp.code,
                               " icmp_rest=", f.icmp.rest, " body=", Hex(f.payload(frame))));
    if (f.l4 == L4::kIcmpv6 && (f.icmp.type == kIcmpv6NeighborSolicitation ||
                                f.icmp.type == kIcmpv6NeighborAdvertisement)) {
      out.push_back(absl::StrCat("ndp_target=", f.ndp.target.ToString()));
      if (f.ndp.link_address) {
        out.push_back(absl::StrCat("ndp_lladdr=", f.ndp.link_address->ToString()));
      }
    }
    if (IsIcmpError(f.l4 == L4::kIcmpv6, f.icmp.type)) {
      out.push_back(absl::StrCat("quote_src=", f.quote.src.ToString(),
                                 " quote_dst=", f.quote.dst.ToString(),
                                 " quote_proto=", f.quote.protocol,
                                 " quote_sport=", f.quote.src_port,
                                 " quote_dport=", f.quote.dst_port));
    }
  }
  return absl::StrJoin(out, " ");
}

// Reads `key` of `spec` with `parse`; records the first failure in `error`.
template <typename T, typename F>
T Field(const std::map<std::string, std::string>& spec, const std::string& key, F parse,
        std::string& error, T fallback = T()) {
  auto it = spec.find(key);
  if (it == spec.end()) return fallback;
  auto value = parse(it->second);
  if (!value.ok()) {
    if (error.empty()) error = absl::StrCat("bad_", key);
    return fallback;
  }
  return *value;
}

absl::StatusOr<uint32_t> ParseNumber(const std::string& s) {
  uint32_t v;
  if (!absl::SimpleAtoi(s, &v)) return absl::InvalidArgumentError("not a number");
  return v;
}

std::string Build(const std::string& line) {
  std::vector<std::string> words = absl::StrSplit(line, ' ', absl::SkipEmpty());
  if (words.empty()) return "error=empty";
  std::map<std::string, std::string> spec;
  for (size_t i = 1; i < words.size(); ++i) {
    std::pair<std::string, std::string> kv = absl::StrSplit(words[i], absl::MaxSplits('=', 1));
    spec[kv.first] = kv.second;
  }
  std::string error;
  LinkAddresses link;
  link.src = Field<MacAddress>(spec, "smac", MacAddress::Parse, error,
                               *MacAddress::Parse("02:00:00:00:00:01"));
  link.dst = Field<MacAddress>(spec, "dmac", MacAddress::Parse, error,
                               *MacAddress::Parse("02:00:00:00:00:02"));
  if (spec.count("vlan")) {
    link.vlan = VlanTag{kEtherTypeVlan,
                        static_cast<uint16_t>(Field<uint32_t>(spec, "vlan", ParseNumber, error))};
  }
  std::string payload;
  if (spec.count("payload") && !HexToBytes(spec["payload"], payload)) error = "bad_payload";
  if (spec.count("body") && !HexToBytes(spec["body"], payload)) error = "bad_body";
  const std::span<const uint8_t> data(reinterpret_cast<const uint8_t*>(payload.data()),
                                      payload.size());
  IpOptions ip;
  ip.ttl = static_cast<uint8_t>(Field<uint32_t>(spec, "ttl", ParseNumber, error, 64));
  std::vector<uint8_t> buf(70000);
  std::optional<size_t> n;
  const std::string& kind = words[0];
  if (kind == "udp") {
    UdpAddresses a{Field<Endpoint>(spec, "src", Endpoint::Parse, error),
                   Field<Endpoint>(spec, "dst", Endpoint::Parse, error)};
    if (error.empty()) n = BuildUdp(link, a, data, buf, ip);
  } else if (kind == "arp") {
    ArpPacket arp;
    arp.op = static_cast<uint16_t>(Field<uint32_t>(spec, "op", ParseNumber, error, 1));
    arp.sender_mac = Field<MacAddress>(spec, "sha", MacAddress::Parse, error);
    arp.sender_ip = Field<IpAddress>(spec, "spa", IpAddress::Parse, error);
    arp.target_mac = Field<MacAddress>(spec, "tha", MacAddress::Parse, error);
    arp.target_ip = Field<IpAddress>(spec, "tpa", IpAddress::Parse, error);
    if (error.empty()) n = BuildArp(link, arp, buf);
  } else if (kind == "icmp") {
    IcmpHeader h;
    h.type = static_cast<uint8_t>(Field<uint32_t>(spec, "type", ParseNumber, error));
    h.code = static_cast<uint8_t>(Field<uint32_t>(spec, "code", ParseNumber, error));
    h.rest = Field<uint32_t>(spec, "rest", ParseNumber, error);
    const IpAddress src = Field<IpAddress>(spec, "src", IpAddress::Parse, error);
    const IpAddress dst = Field<IpAddress>(spec, "dst", IpAddress::Parse, error);
    if (error.empty()) n = BuildIcmp(link, src, dst, h, data, buf, ip);
  } else if (kind == "ndp") {
    NdpMessage m;
    const uint8_t type = static_cast<uint8_t>(Field<uint32_t>(spec, "type", ParseNumber, error));
    m.target = Field<IpAddress>(spec, "target", IpAddress::Parse, error);
    if (spec.count("lladdr")) m.link_address = Field<MacAddress>(spec, "lladdr", MacAddress::Parse, error);
    const uint32_t flags = Field<uint32_t>(spec, "flags", ParseNumber, error);
    const IpAddress src = Field<IpAddress>(spec, "src", IpAddress::Parse, error);
    const IpAddress dst = Field<IpAddress>(spec, "dst", IpAddress::Parse, error);
    if (error.empty()) n = BuildNdp(link, src, dst, type, m, buf, flags);
  } else {
    return "error=unknown_kind";
  }
  if (!error.empty()) return "error=" + error;
  if (!n.has_value()) return "error=does_not_fit";
  return Hex({buf.data(), *n});
}

int Main(int argc, char** argv) {
  const std::string mode = argc == 2 ? argv[1] : "";
  if (mode != "parse" && mode != "build") {
    std::fprintf(stderr,
                 "usage: frame_tool parse|build < lines\n"
                 "  parse: each line is a frame in hex; prints the parser's view of it\n"
                 "  build: each line is a spec (see frame_tool.cc); prints the frame in hex\n");
    return 2;
  }
  std::string line;
  while (std::getline(std::cin, line)) {
    if (mode == "build") {
      std::cout << Build(line) << "\n";
      continue;
    }
    std::string bytes;
    if (!HexToBytes(line, bytes)) {
      std::cout << "error=bad_hex\n";
      continue;
    }
    std::cout << Describe({reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()}) << "\n";
  }
  return 0;
}

}  // namespace
}  // namespace quadsock::net

int main(int argc, char** argv) { return quadsock::net::Main(argc, argv); }
