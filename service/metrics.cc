#include "service/metrics.h"

#include <string_view>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/message.h"
#include "stack/net/parse_error.h"
#include "stack/stack_counters.h"

namespace quadsock::service {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;

// What a field of the API means, for the fields the stack's counter list does not describe;
// keyed "message.field". A field missing here still becomes a metric, with its name for help.
const absl::flat_hash_map<std::string_view, std::string_view>& OtherHelp() {
  static const auto* help = new absl::flat_hash_map<std::string_view, std::string_view>{
      {"TableCounters.lookups", "Socket table lookups."},
      {"TableCounters.misses", "Lookups that found no socket."},
      {"TableCounters.hash4_hits", "Lookups answered by hash4 (a connected socket)."},
      {"TableCounters.hash4_misses", "hash4 tried without a match."},
      {"TableCounters.hash2_lookups", "Lookups that went on to hash2."},
      {"TableCounters.resizes", "Online resizes of the table."},
      {"TableCounters.slots", "Slots in each of the table's arrays."},
      {"TableCounters.sockets", "Sockets in the table."},
      {"TableCounters.hash4_entries", "Sockets in hash4 (connected)."},
      {"TableCounters.memory_bytes", "Bytes the table's arrays and entries take."},
      {"TableCounters.hash4_enabled", "1 when hash4 is on (--hash4), 0 when it is off."},
      {"QueueCounters.rx_frames", "Frames received on the queue."},
      {"QueueCounters.tx_frames", "Frames sent on the queue."},
      {"QueueCounters.tx_ring_full", "Frames dropped: the TX ring was full."},
      {"QueueCounters.no_tx_buffer", "Frames not sent: no free UMEM frame."},
      {"QueueCounters.fill_ring_empty", "Times the fill ring ran empty."},
      {"QueueCounters.rx_dropped", "Frames the kernel dropped on the queue's AF_XDP socket."},
      {"QueueCounters.wakeups", "Wakeups of the kernel (need_wakeup)."},
      {"QueueCounters.busy_polls", "recvfrom() calls made to run the device's NAPI."},
      {"QueueCounters.busy_poll_unavailable",
       "1 when busy polling was asked for but the queue's socket has no NAPI id."},
      {"QueueCounters.rx_ring_fill",
       "Frames waiting on the RX ring when the poll thread last looked (before its batch)."},
      {"QueueCounters.rx_chained", "Jumbo frames received as chains of UMEM frames."},
      {"QueueCounters.tx_chained", "Jumbo frames sent as chains of UMEM frames."},
      {"QueueCounters.rx_chains_dropped",
       "Received chains dropped: no large buffer free, or longer than the MTU allows."},
      {"QueueCounters.tx_kicks_failed",
       "TX wake-ups the kernel refused (interface down, no buffer): the frames wait on the ring."},
      {"XdpCounters.redirect", "Frames the XDP program redirected to the stack's sockets."},
      {"XdpCounters.pass_not_owned", "Frames left to the kernel: not to an address we own."},
      {"XdpCounters.pass_other", "Frames left to the kernel: a protocol the stack leaves."},
      {"XdpCounters.malformed", "Frames the XDP program could not parse (left to the kernel)."},
      {"XdpCounters.redirect_no_xsk",
       "Frames for the stack on an RX queue with no AF_XDP socket, left to the kernel."},
      {"Counters.sessions", "Client sessions."},
      {"Counters.sockets", "Sockets open."},
      {"Counters.connections_refused",
       "Connections to the Unix sockets closed at once for a cap (total, per user, unclaimed)."},
      {"Counters.accept_failures",
       "accept() failures on the Unix sockets (no descriptor or memory left)."},
      {"Counters.interface_down", "Times the interface was seen to go down (checked each second)."},
      {"Counters.interface_mtu_changes", "Times the interface's MTU was seen to change."},
      {"Counters.stream_datagrams", "Datagrams written to clients on StreamChannel streams."},
      {"Counters.stream_credit_waits",
       "Looks of StreamChannel streams that found datagrams waiting and no client credit."},
  };
  return *help;
}

// Names that must differ from their field's so that the unit comes last, as Prometheus'
// conventions ask (metrics_http_test checks every name that holds a unit).
const absl::flat_hash_map<std::string_view, std::string_view>& Renamed() {
  static const auto* renamed = new absl::flat_hash_map<std::string_view, std::string_view>{
      {"StackCounters.receive_bytes_queued", "receive_queued_bytes"},
  };
  return *renamed;
}

std::string Key(const FieldDescriptor& f) {
  return absl::StrCat(f.containing_type()->name(), ".", f.name());
}

const stack::CounterInfo* StackInfo(const FieldDescriptor& f) {
  if (f.containing_type()->name() != "StackCounters") return nullptr;
  for (const stack::CounterInfo& i : stack::kStackCounterInfo) {
    if (f.name() == i.name) return &i;
  }
  return nullptr;
}

// Fields that are values now, not totals.
bool IsGauge(const FieldDescriptor& f) {
  static const auto* gauges = new absl::flat_hash_set<std::string_view>{
      "TableCounters.slots", "TableCounters.sockets", "TableCounters.hash4_entries",
      "TableCounters.memory_bytes", "Counters.sessions", "Counters.sockets",
      "QueueCounters.rx_ring_fill"};
  if (f.cpp_type() == FieldDescriptor::CPPTYPE_BOOL) return true;
  if (const stack::CounterInfo* i = StackInfo(f)) return i->gauge;
  return gauges->contains(Key(f));
}

std::string Help(const FieldDescriptor& f) {
  if (const stack::CounterInfo* i = StackInfo(f)) return i->help;
  auto it = OtherHelp().find(Key(f));
  return it != OtherHelp().end() ? std::string(it->second) : Key(f);
}

// The fields rendered one family each: scalar counters and flags.
bool IsMetric(const FieldDescriptor& f) {
  return !f.is_repeated() && (f.cpp_type() == FieldDescriptor::CPPTYPE_UINT64 ||
                              f.cpp_type() == FieldDescriptor::CPPTYPE_BOOL);
}

uint64_t Value(const Message& m, const FieldDescriptor& f) {
  return f.cpp_type() == FieldDescriptor::CPPTYPE_BOOL ? m.GetReflection()->GetBool(m, &f)
                                                       : m.GetReflection()->GetUInt64(m, &f);
}

std::string MetricName(const FieldDescriptor& f, const std::string& prefix) {
  auto it = Renamed().find(Key(f));
  const std::string base = it != Renamed().end() ? std::string(it->second) : f.name();
  return absl::StrCat(prefix, base, IsGauge(f) ? "" : "_total");
}

// The text format's escapes: a label value escapes \ " and newline, HELP \ and newline.
std::string LabelValue(absl::string_view v) {
  return absl::StrReplaceAll(v, {{"\\", "\\\\"}, {"\"", "\\\""}, {"\n", "\\n"}});
}
std::string HelpText(absl::string_view v) {
  return absl::StrReplaceAll(v, {{"\\", "\\\\"}, {"\n", "\\n"}});
}

class Page {
 public:
  explicit Page(const MetricsLabels& labels)
      : labels_(labels),
        interface_(absl::StrCat("interface=\"", LabelValue(labels.interface), "\"")) {}

  // A family's HELP and TYPE; its samples follow.
  void Family(const std::string& name, absl::string_view help, const char* type) {
    absl::StrAppend(&out_, "# HELP quadsock_", name, " ", HelpText(help), "\n# TYPE quadsock_",
                    name, " ", type, "\n");
  }
  // A sample labelled with the interface and `labels` ("" or `k="v"`, already escaped).
  void Sample(const std::string& name, const std::string& labels, uint64_t value) {
    absl::StrAppend(&out_, "quadsock_", name, "{", interface_, labels.empty() ? "" : ",", labels,
                    "} ", value, "\n");
  }
  // Every scalar field of `m` as a family of one sample, named `prefix` + the field.
  void Fields(const Message& m, const std::string& prefix) {
    const google::protobuf::Descriptor* d = m.GetDescriptor();
    for (int i = 0; i < d->field_count(); ++i) {
      const FieldDescriptor& f = *d->field(i);
      if (!IsMetric(f) || Key(f) == "TableCounters.chain_steps") continue;  // the histogram's
      const std::string name = MetricName(f, prefix);
      Family(name, Help(f), IsGauge(f) ? "gauge" : "counter");
      Sample(name, "", Value(m, f));
    }
  }
  void BuildInfo() {
    Family("build_info", "The quadsock version and git commit quadsockd was built from (1).",
           "gauge");
    absl::StrAppend(&out_, "quadsock_build_info{version=\"", LabelValue(labels_.version),
                    "\",commit=\"", LabelValue(labels_.commit), "\"} 1\n");
  }
  std::string& text() { return out_; }

 private:
  const MetricsLabels& labels_;
  const std::string interface_;
  std::string out_;
};

void ParseErrors(const v1::StackCounters& s, Page& page) {
  page.Family("parse_errors_total", "Frames dropped as malformed, by reason.", "counter");
  absl::flat_hash_set<std::string> known;
  for (int e = 1; e < net::kParseErrorCount; ++e) {  // 0 is kOk
    const std::string reason = net::ParseErrorName(static_cast<net::ParseError>(e));
    known.insert(reason);
    auto it = s.parse_errors().find(reason);
    page.Sample("parse_errors_total", absl::StrCat("reason=\"", reason, "\""),
                it == s.parse_errors().end() ? 0 : it->second);
  }
  for (const auto& [reason, n] : s.parse_errors()) {  // one this build does not know (none yet)
    if (known.contains(reason)) continue;
    page.Sample("parse_errors_total", absl::StrCat("reason=\"", LabelValue(reason), "\""), n);
  }
}

// chain_histogram's buckets hold 0, 1, 2, 3, 4-7, 8-15, 16-31 and 32+ entries visited.
void ChainHistogram(const v1::TableCounters& t, Page& page) {
  static const char* kBuckets[] = {"0", "1", "2", "3", "7", "15", "31", "+Inf"};
  page.Family("table_lookup_chain_steps", "Entries visited per socket table lookup.",
              "histogram");
  uint64_t cumulative = 0;
  for (int i = 0; i < 8; ++i) {
    // The last bucket takes any the API may add past 32+.
    for (int j = i; j < (i == 7 ? t.chain_histogram_size() : i + 1); ++j) {
      if (j < t.chain_histogram_size()) cumulative += t.chain_histogram(j);
    }
    page.Sample("table_lookup_chain_steps_bucket", absl::StrCat("le=\"", kBuckets[i], "\""),
                cumulative);
  }
  page.Sample("table_lookup_chain_steps_sum", "", t.chain_steps());
  page.Sample("table_lookup_chain_steps_count", "", cumulative);
}

}  // namespace

std::string RenderMetrics(const v1::Counters& c, const MetricsLabels& labels) {
  Page page(labels);
  page.BuildInfo();
  page.Fields(c.stack(), "");
  ParseErrors(c.stack(), page);

  page.Fields(c.table(), "table_");
  ChainHistogram(c.table(), page);

  // A family per queue counter, with a sample per queue.
  const google::protobuf::Descriptor* qd = v1::QueueCounters::descriptor();
  for (int i = 0; i < qd->field_count(); ++i) {
    const FieldDescriptor& f = *qd->field(i);
    if (!IsMetric(f)) continue;
    const std::string name = MetricName(f, "queue_");
    page.Family(name, Help(f), IsGauge(f) ? "gauge" : "counter");
    for (const v1::Queue& q : c.queues()) {
      page.Sample(name, absl::StrCat("queue=\"", q.queue(), "\""), Value(q.counters(), f));
    }
  }

  if (c.has_xdp()) {
    page.Fields(c.xdp(), "xdp_");
    const v1::XdpCounters& x = c.xdp();
    page.Family("xdp_pass_total",
                "Frames left to the kernel (XDP_PASS): pass_not_owned, pass_other, malformed "
                "and redirect_no_xsk together.",
                "counter");
    page.Sample("xdp_pass_total", "",
                x.pass_not_owned() + x.pass_other() + x.malformed() + x.redirect_no_xsk());
  }
  page.Fields(c, "");
  return std::move(page.text());
}

}  // namespace quadsock::service
