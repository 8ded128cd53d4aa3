#include "planner/service/metrics.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <string>

#include "planner/service/http_server.h"

namespace remat {
namespace {

bool Contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

TEST_CASE("histograms are cumulative with sum and count") {
  Histogram h({1, 2, 5});
  for (double v : {0.5, 1.0, 1.5, 3.0, 10.0}) h.Observe(v);
  std::string out;
  h.Render("x", "a=\"b\"", &out);
  REQUIRE(Contains(out, "x_bucket{a=\"b\",le=\"1\"} 2\n"));
  REQUIRE(Contains(out, "x_bucket{a=\"b\",le=\"2\"} 3\n"));
  REQUIRE(Contains(out, "x_bucket{a=\"b\",le=\"5\"} 4\n"));
  REQUIRE(Contains(out, "x_bucket{a=\"b\",le=\"+Inf\"} 5\n"));
  REQUIRE(Contains(out, "x_sum{a=\"b\"} 16\n"));
  REQUIRE(Contains(out, "x_count{a=\"b\"} 5\n"));
}

TEST_CASE("the exposition has every metric with HELP and TYPE") {
  Metrics m;
  m.CountRequest("GetPlan", "OK");
  m.CountRequest("GetPlan", "OK");
  m.CountRequest("GetPlan", "INVALID_ARGUMENT");
  m.ObservePlanLatency(0.0002, true);
  m.ObservePlanLatency(0.003, false);
  m.ObservePeakRatio(1.02);
  m.CountOutcome(true);
  m.CountOutcome(false, "safe");
  m.CountOutcome(false, "safe");
  m.CountOutcome(false, "planner");
  m.CountSamples(7);
  m.CountCopyWait(3000000, 100000000);
  m.CountCopyWait(0, 50000000);
  REQUIRE(m.requests("GetPlan", "OK") == 2);
  const std::string text = m.RenderPrometheus(
      {{"rematd_plan_cache_hits_total", "Hits.", "counter", 12}});
  REQUIRE(Contains(
      text, "rematd_requests_total{method=\"GetPlan\",code=\"OK\"} 2\n"));
  REQUIRE(Contains(text,
                   "rematd_requests_total{method=\"GetPlan\",code=\"INVALID_"
                   "ARGUMENT\"} 1\n"));
  REQUIRE(Contains(text, "# TYPE rematd_plan_latency_seconds histogram\n"));
  REQUIRE(
      Contains(text, "rematd_plan_latency_seconds_count{result=\"hit\"} 1\n"));
  REQUIRE(
      Contains(text, "rematd_plan_latency_seconds_count{result=\"miss\"} 1\n"));
  REQUIRE(Contains(text, "rematd_peak_ratio_bucket{le=\"1.05\"} 1\n"));
  REQUIRE(Contains(text, "rematd_peak_ratio_bucket{le=\"1\"} 0\n"));
  REQUIRE(Contains(text, "rematd_oom_reports_total 1\n"));
  REQUIRE(Contains(text, "rematd_outcomes_total 4\n"));
  REQUIRE(Contains(text, "rematd_outcomes_by_source_total{source=\"safe\"} 2\n"));
  REQUIRE(
      Contains(text, "rematd_outcomes_by_source_total{source=\"planner\"} 1\n"));
  REQUIRE(Contains(text, "rematd_samples_total 7\n"));
  REQUIRE(Contains(text, "rematd_copy_wait_reports_total 2\n"));
  REQUIRE(Contains(text, "rematd_copy_waited_steps_total 1\n"));
  REQUIRE(Contains(text, "rematd_copy_wait_seconds_total 0.003\n"));
  REQUIRE(Contains(text, "rematd_copy_wait_step_seconds_total 0.15\n"));
  REQUIRE(Contains(text,
                   "# TYPE rematd_plan_cache_hits_total counter\n"
                   "rematd_plan_cache_hits_total 12\n"));
}

TEST_CASE("label values are escaped") {
  REQUIRE(EscapeLabelValue("a\"b\\c\nd") == "a\\\"b\\\\c\\nd");
}

// Sends `request` raw to 127.0.0.1:port and returns the whole answer.
std::string Send(int port, const std::string& request) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  REQUIRE(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
  size_t off = 0;
  while (off < request.size()) {
    ssize_t w =
        send(fd, request.data() + off, request.size() - off, MSG_NOSIGNAL);
    if (w <= 0) break;  // the server may close early (413)
    off += static_cast<size_t>(w);
  }
  shutdown(fd, SHUT_WR);
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = recv(fd, buf, sizeof(buf), 0)) > 0) out.append(buf, n);
  close(fd);
  return out;
}

TEST_CASE("the HTTP server answers GETs and refuses everything else") {
  int calls = 0;
  HttpServer server([&calls](const std::string& path) {
    ++calls;
    HttpResponse r;
    if (path == "/metrics") {
      r.body = "rematd_up 1\n";
    } else {
      r.status = 404;
      r.body = "nope\n";
    }
    return r;
  });
  REQUIRE(server.Start(0).ok());
  REQUIRE(server.port() > 0);

  std::string r = Send(server.port(), "GET /metrics HTTP/1.0\r\n\r\n");
  REQUIRE(r.rfind("HTTP/1.0 200 OK\r\n", 0) == 0);
  REQUIRE(Contains(r, "Content-Length: 12\r\n"));
  REQUIRE(Contains(r, "\r\n\r\nrematd_up 1\n"));

  r = Send(server.port(), "GET /metrics?x=1 HTTP/1.1\r\nHost: a\r\n\r\n");
  REQUIRE(r.rfind("HTTP/1.0 200", 0) == 0);

  REQUIRE(Send(server.port(), "GET /other HTTP/1.0\r\n\r\n")
              .rfind("HTTP/1.0 404", 0) == 0);
  REQUIRE(Send(server.port(), "POST /metrics HTTP/1.0\r\n\r\n")
              .rfind("HTTP/1.0 405", 0) == 0);
  REQUIRE(Send(server.port(), "hello\r\n\r\n").rfind("HTTP/1.0 400", 0) == 0);
  REQUIRE(Send(server.port(),
               "GET /" + std::string(20000, 'a') + " HTTP/1.0\r\n\r\n")
              .rfind("HTTP/1.0 413", 0) == 0);
  REQUIRE(calls == 3);  // only the well-formed GETs reached the handler

  // Still serving after all that.
  REQUIRE(Send(server.port(), "GET /metrics HTTP/1.0\r\n\r\n")
              .rfind("HTTP/1.0 200", 0) == 0);
  server.Stop();
  server.Stop();  // idempotent
}

TEST_CASE("a port in use is a clear error") {
  HttpServer a([](const std::string&) { return HttpResponse{}; });
  REQUIRE(a.Start(0).ok());
  HttpServer b([](const std::string&) { return HttpResponse{}; });
  absl::Status s = b.Start(a.port());
  REQUIRE_FALSE(s.ok());
  REQUIRE(Contains(std::string(s.message()), "metrics_port"));
}

}  // namespace
}  // namespace remat
