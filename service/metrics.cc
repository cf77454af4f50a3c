#include "service/metrics.h"

#include <string_view>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/message.h"
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
      {"TableCounters.hash4_hits", "Lookups answered by hash4."},
      {"TableCounters.hash4_misses", "hash4 tried without a match."},
      {"TableCounters.hash2_lookups", "Lookups that went on to hash2."},
      {"TableCounters.chain_steps", "Entries visited by all lookups."},
      {"TableCounters.resizes", "Online resizes of the table."},
      {"TableCounters.slots", "Slots in each of the table's arrays."},
      {"TableCounters.sockets", "Sockets in the table."},
      {"TableCounters.hash4_entries", "Sockets in hash4 (connected)."},
      {"TableCounters.memory_bytes", "Bytes the table's arrays and entries take."},
      {"QueueCounters.rx_frames", "Frames received on the queue."},
      {"QueueCounters.tx_frames", "Frames sent on the queue."},
      {"QueueCounters.tx_ring_full", "Frames dropped: the TX ring was full."},
      {"QueueCounters.no_tx_buffer", "Frames not sent: no free UMEM frame."},
      {"QueueCounters.fill_ring_empty", "Times the fill ring ran empty."},
      {"QueueCounters.rx_dropped", "Frames the kernel dropped on the queue's AF_XDP socket."},
      {"QueueCounters.wakeups", "Wakeups of the kernel (need_wakeup)."},
      {"QueueCounters.busy_polls", "recvfrom() calls made to run the device's NAPI."},
      {"XdpCounters.redirect", "Frames the XDP program steered to the stack."},
      {"XdpCounters.pass_not_owned", "Frames left to the kernel: not to an address we own."},
      {"XdpCounters.pass_other", "Frames left to the kernel: a protocol the stack leaves."},
      {"XdpCounters.malformed", "Frames the XDP program could not parse."},
      {"XdpCounters.redirect_no_xsk", "Frames for the stack on a queue with no AF_XDP socket."},
      {"Counters.sessions", "Client sessions."},
      {"Counters.sockets", "Sockets open."},
  };
  return *help;
}

// Fields that are values now, not totals.
bool IsGauge(const FieldDescriptor& f) {
  static const auto* gauges = new absl::flat_hash_set<std::string_view>{
      "TableCounters.slots", "TableCounters.sockets", "TableCounters.hash4_entries",
      "TableCounters.memory_bytes", "Counters.sessions", "Counters.sockets"};
  if (f.containing_type()->name() == "StackCounters") {
    for (const stack::CounterInfo& i : stack::kStackCounterInfo) {
      if (f.name() == i.name) return i.gauge;
    }
  }
  return gauges->contains(absl::StrCat(f.containing_type()->name(), ".", f.name()));
}

std::string Help(const FieldDescriptor& f) {
  if (f.containing_type()->name() == "StackCounters") {
    for (const stack::CounterInfo& i : stack::kStackCounterInfo) {
      if (f.name() == i.name) return i.help;
    }
  }
  const std::string key = absl::StrCat(f.containing_type()->name(), ".", f.name());
  auto it = OtherHelp().find(key);
  return it != OtherHelp().end() ? std::string(it->second) : key;
}

class Page {
 public:
  // A family's HELP and TYPE, then its samples: `labels` is "" or `{k="v"}`.
  void Family(const std::string& name, const std::string& help, const char* type) {
    absl::StrAppend(&out_, "# HELP quadsock_", name, " ", help, "\n# TYPE quadsock_", name, " ",
                    type, "\n");
  }
  void Sample(const std::string& name, const std::string& labels, uint64_t value) {
    absl::StrAppend(&out_, "quadsock_", name, labels, " ", value, "\n");
  }
  // Every scalar uint64 field of `m` as a family of one sample, named `prefix` + the field.
  void Fields(const Message& m, const std::string& prefix) {
    const google::protobuf::Descriptor* d = m.GetDescriptor();
    for (int i = 0; i < d->field_count(); ++i) {
      const FieldDescriptor& f = *d->field(i);
      if (f.is_repeated() || f.cpp_type() != FieldDescriptor::CPPTYPE_UINT64) continue;
      const std::string name = MetricName(f, prefix);
      Family(name, Help(f), IsGauge(f) ? "gauge" : "counter");
      Sample(name, "", m.GetReflection()->GetUInt64(m, &f));
    }
  }
  static std::string MetricName(const FieldDescriptor& f, const std::string& prefix) {
    return absl::StrCat(prefix, f.name(), IsGauge(f) ? "" : "_total");
  }
  std::string& text() { return out_; }

 private:
  std::string out_;
};

}  // namespace

std::string RenderMetrics(const v1::Counters& c) {
  Page page;
  const v1::StackCounters& s = c.stack();
  page.Fields(s, "");
  page.Family("parse_errors_total", "Frames dropped as malformed, by reason.", "counter");
  for (const auto& [reason, n] : s.parse_errors()) {
    page.Sample("parse_errors_total", absl::StrCat("{reason=\"", reason, "\"}"), n);
  }

  const v1::TableCounters& t = c.table();
  page.Fields(t, "table_");
  static const char* kBuckets[] = {"0", "1", "2", "3", "7", "15", "31", "+Inf"};
  page.Family("table_chain_steps", "Entries visited per lookup.", "histogram");
  uint64_t cumulative = 0;
  for (int i = 0; i < t.chain_histogram_size() && i < 8; ++i) {
    cumulative += t.chain_histogram(i);
    page.Sample("table_chain_steps_bucket", absl::StrCat("{le=\"", kBuckets[i], "\"}"),
                cumulative);
  }
  page.Sample("table_chain_steps_count", "", cumulative);
  page.Sample("table_chain_steps_sum", "", t.chain_steps());

  // A family per queue counter, with a sample per queue.
  const google::protobuf::Descriptor* qd = v1::QueueCounters::descriptor();
  for (int i = 0; i < qd->field_count(); ++i) {
    const FieldDescriptor& f = *qd->field(i);
    if (f.cpp_type() != FieldDescriptor::CPPTYPE_UINT64) continue;
    const std::string name = Page::MetricName(f, "queue_");
    page.Family(name, Help(f), IsGauge(f) ? "gauge" : "counter");
    for (const v1::Queue& q : c.queues()) {
      page.Sample(name, absl::StrCat("{queue=\"", q.queue(), "\"}"),
                  q.counters().GetReflection()->GetUInt64(q.counters(), &f));
    }
  }

  if (c.has_xdp()) {
    page.Fields(c.xdp(), "xdp_");
    page.Family("xdp_pass_total", "Frames the XDP program left to the kernel.", "counter");
    page.Sample("xdp_pass_total", "", c.xdp().pass_not_owned() + c.xdp().pass_other());
  }
  page.Fields(c, "");
  return std::move(page.text());
}

}  // namespace quadsock::service
