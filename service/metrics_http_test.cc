#include "service/metrics.h"
#include "service/metrics_http.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/message.h"

namespace quadsock::service {
namespace {

std::string Get(uint16_t port, const std::string& request) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  send(fd, request.data(), request.size(), 0);
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = recv(fd, buf, sizeof(buf), 0)) > 0) out.append(buf, static_cast<size_t>(n));
  close(fd);
  return out;
}

TEST(MetricsTest, RendersPrometheusText) {
  v1::Counters c;
  c.mutable_stack()->set_udp_delivered(42);
  c.mutable_stack()->set_icmp_errors_received(6);
  c.mutable_stack()->set_icmp_errors_unmatched(2);
  (*c.mutable_stack()->mutable_parse_errors())["bad_udp_checksum"] = 3;
  for (int i = 0; i < 8; ++i) c.mutable_table()->add_chain_histogram(i == 1 ? 10 : 0);
  c.set_sockets(7);
  v1::Queue* q = c.add_queues();
  q->set_queue(1);
  q->mutable_counters()->set_busy_polls(5);
  const std::string text = RenderMetrics(c);
  EXPECT_NE(text.find("quadsock_udp_delivered_total 42\n"), std::string::npos) << text;
  EXPECT_NE(text.find("quadsock_icmp_errors_received_total 6\n"), std::string::npos);
  EXPECT_NE(text.find("quadsock_icmp_errors_unmatched_total 2\n"), std::string::npos);
  EXPECT_NE(text.find("quadsock_parse_errors_total{reason=\"bad_udp_checksum\"} 3\n"),
            std::string::npos);
  EXPECT_NE(text.find("quadsock_table_chain_steps_bucket{le=\"+Inf\"} 10\n"), std::string::npos);
  EXPECT_NE(text.find("quadsock_sockets 7\n"), std::string::npos);
  EXPECT_NE(text.find("quadsock_queue_busy_polls_total{queue=\"1\"} 5\n"), std::string::npos);
}

// Sets every uint64 field of `m` (and of the messages in it) to a value of its own.
void FillEveryCounter(google::protobuf::Message& m, uint64_t& next) {
  const google::protobuf::Descriptor* d = m.GetDescriptor();
  const google::protobuf::Reflection* r = m.GetReflection();
  for (int i = 0; i < d->field_count(); ++i) {
    const google::protobuf::FieldDescriptor* f = d->field(i);
    if (f->is_repeated()) continue;
    if (f->cpp_type() == google::protobuf::FieldDescriptor::CPPTYPE_UINT64) {
      r->SetUInt64(&m, f, next++);
    } else if (f->cpp_type() == google::protobuf::FieldDescriptor::CPPTYPE_MESSAGE) {
      FillEveryCounter(*r->MutableMessage(&m, f), next);
    }
  }
}

TEST(MetricsTest, EveryCounterOfTheApiIsAMetric) {
  v1::Counters c;
  uint64_t next = 1000;
  FillEveryCounter(c, next);
  v1::Queue* q = c.add_queues();
  q->set_queue(3);
  FillEveryCounter(*q, next);
  const std::string text = RenderMetrics(c);
  // Each value once, on a sample line of its own, after its family's HELP and TYPE.
  for (uint64_t v = 1000; v < next; ++v) {
    const std::string value = absl::StrCat(" ", v, "\n");
    const size_t at = text.find(value);
    ASSERT_NE(at, std::string::npos) << "no metric has the value " << v << ":\n" << text;
    const size_t line = text.rfind('\n', at) + 1;
    const std::string name = text.substr(line, text.find_first_of(" {", line) - line);
    EXPECT_NE(text.find("# TYPE " + name + " "), std::string::npos) << name;
    EXPECT_NE(text.find("# HELP " + name + " "), std::string::npos) << name;
  }
  EXPECT_NE(text.find("quadsock_neighbor_table_full_total "), std::string::npos);
  EXPECT_NE(text.find("quadsock_queue_rx_frames_total{queue=\"3\"} "), std::string::npos);
  EXPECT_NE(text.find("\nquadsock_receive_bytes_queued "), std::string::npos);  // a gauge
}

TEST(MetricsTest, ServesGetMetricsAndNothingElse) {
  absl::StatusOr<std::unique_ptr<MetricsHttp>> m =
      MetricsHttp::Start("127.0.0.1:0", [] { return std::string("quadsock_x 1\n"); });
  ASSERT_TRUE(m.ok()) << m.status();
  const std::string ok = Get((*m)->port(), "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(ok.rfind("HTTP/1.0 200 OK\r\n", 0), 0u) << ok;
  EXPECT_NE(ok.find("\r\n\r\nquadsock_x 1\n"), std::string::npos);
  const std::string missing = Get((*m)->port(), "GET / HTTP/1.1\r\n\r\n");
  EXPECT_EQ(missing.rfind("HTTP/1.0 404", 0), 0u) << missing;
  const std::string garbage = Get((*m)->port(), std::string(9000, 'x'));
  EXPECT_EQ(garbage.rfind("HTTP/1.0 404", 0), 0u);
  EXPECT_EQ(MetricsHttp::Start("not an endpoint", [] { return std::string(); }).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace quadsock::service
