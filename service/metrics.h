// The API's counters (quadsock.v1.Counters, what AdminService.GetCounters answers) in
// Prometheus' text exposition format, for the metrics endpoint (metrics_http.h). Rendered by
// walking the message, so every counter of the API is a metric without a line of its own here.
// Every sample carries the label interface="<--interface>"; every family has HELP and TYPE,
// and every series exists from the first scrape (a parse-error reason at zero, not absent):
//   StackCounters.x      quadsock_x_total (quadsock_x for a gauge), help from
//                        stack/stack_counters.h; parse_errors as
//                        quadsock_parse_errors_total{reason} for every reason there is
//   TableCounters.x      quadsock_table_x_total; chain_histogram and chain_steps as the
//                        histogram quadsock_table_lookup_chain_steps (_bucket, _sum, _count)
//   Queue.counters.x     quadsock_queue_x_total{queue="N"}
//   XdpCounters.x        quadsock_xdp_x_total, and quadsock_xdp_pass_total (both kinds of pass)
//   sessions, sockets    gauges; a bool field is a gauge of 0 or 1
//   quadsock_build_info{version, commit} 1, from `labels` (quadsockd passes build_info.h's)
// A name that holds a unit ends with it (quadsock_receive_queued_bytes): MetricName below.
//
//   std::string page = RenderMetrics(admin.Collect(), {"eth0", BuildVersion(), BuildCommit()});
#ifndef QUADSOCK_SERVICE_METRICS_H_
#define QUADSOCK_SERVICE_METRICS_H_

#include <string>

#include "quadsock/v1/admin.pb.h"

namespace quadsock::service {

// What the page says besides the counters.
struct MetricsLabels {
  std::string interface;  // on every series
  std::string version;    // quadsock_build_info's
  std::string commit;
};

std::string RenderMetrics(const v1::Counters& c, const MetricsLabels& labels);

}  // namespace quadsock::service

#endif  // QUADSOCK_SERVICE_METRICS_H_
