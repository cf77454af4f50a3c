// The API's counters (quadsock.v1.Counters, what AdminService.GetCounters answers) in
// Prometheus' text exposition format, for the metrics endpoint (metrics_http.h). Rendered by
// walking the message, so every counter of the API is a metric without a line of its own here:
//   StackCounters.x      quadsock_x_total (or quadsock_x for a gauge), help from
//                        stack/stack_counters.h; parse_errors by {reason}
//   TableCounters.x      quadsock_table_x_total; chain_histogram as quadsock_table_chain_steps
//   Queue.counters.x     quadsock_queue_x_total{queue="N"}
//   XdpCounters.x        quadsock_xdp_x_total, and quadsock_xdp_pass_total (both kinds of pass)
//   sessions, sockets    gauges
//
//   std::string page = RenderMetrics(admin.Collect());
#ifndef QUADSOCK_SERVICE_METRICS_H_
#define QUADSOCK_SERVICE_METRICS_H_

#include <string>

#include "quadsock/v1/admin.pb.h"

namespace quadsock::service {

std::string RenderMetrics(const v1::Counters& c);

}  // namespace quadsock::service

#endif  // QUADSOCK_SERVICE_METRICS_H_
