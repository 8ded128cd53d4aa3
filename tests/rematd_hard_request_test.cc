// A hard request never holds the planner: sixteen trainers ask the real
// rematd at once for a plan that an unlimited exact search takes seconds
// to find (planner/hard_chain_for_test.h), each with a 100 ms deadline.
// The daemon's solve deadline (core.solve_deadline_ms, 40 ms) bounds the
// one shared solve; every caller gets a plan or DEADLINE_EXCEEDED, cache
// hits for another model are answered while they wait, and the daemon
// answers the hard request afterwards. The tests assert outcomes and
// order; the latencies are printed, and measured by bench:grpc_load.
#include <algorithm>
#include <csignal>
#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "planner/hard_chain_for_test.h"
#include "tests/daemon_harness.h"
#include "tests/raw_client.h"

namespace remat {
namespace {

using Clock = std::chrono::steady_clock;

double MsSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start)
      .count();
}

double Quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(q * (v.size() - 1))];
}

// Registers the hard chain as model "hard" with its samples; returns the
// budget of the hard request.
int64_t RegisterHardModel(testing::RawClient* client) {
  const ModelSpec hard = testing::HardChainModel("hard");
  const grpc::Status registered = client->Register(hard);
  INFO("RegisterModel: " << registered.error_message());
  REQUIRE(registered.ok());
  const grpc::Status reported =
      client->Samples(hard, testing::HardChainSamples(hard));
  INFO("ReportSamples: " << reported.error_code() << " "
                         << reported.error_message());
  REQUIRE(reported.ok());
  return testing::HardChainBudgetBytes(hard);
}

TEST_CASE("a hard request from 16 clients never holds the planner") {
  testing::DaemonProcess daemon;
  REQUIRE(daemon.Start({}).ok());
  testing::RawClient setup(daemon.address());
  const int64_t hard_budget = RegisterHardModel(&setup);
  const ModelSpec easy = testing::TestModel("easy", 6);
  REQUIRE(setup.Register(easy).ok());
  REQUIRE(setup.Samples(easy, testing::TestSampleGrid(easy)).ok());
  v1::GetPlanResponse warm;
  REQUIRE(setup.Plan("easy", 4, 200, int64_t{8} << 30, &warm).ok());

  auto hit_ms = [&] {
    v1::GetPlanResponse r;
    const auto start = Clock::now();
    REQUIRE(setup.Plan("easy", 4, 200, int64_t{8} << 30, &r).ok());
    REQUIRE(r.from_cache());
    return MsSince(start);
  };
  std::vector<double> before;
  for (int i = 0; i < 200; ++i) before.push_back(hit_ms());

  constexpr int kClients = 16;
  constexpr auto kDeadline = std::chrono::milliseconds(100);
  std::vector<std::unique_ptr<testing::RawClient>> clients;
  for (int i = 0; i < kClients; ++i) {
    clients.push_back(std::make_unique<testing::RawClient>(daemon.address()));
  }
  std::vector<grpc::Status> status(kClients);
  std::vector<double> elapsed_ms(kClients);
  std::vector<v1::GetPlanResponse> plans(kClients);
  std::atomic<int> ready{0}, done{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kClients; ++i) {
    threads.emplace_back([&, i] {
      ready.fetch_add(1);
      while (ready.load() < kClients) std::this_thread::yield();
      const auto start = Clock::now();
      status[i] = clients[i]->Plan("hard", testing::kHardBatch,
                                   testing::kHardSeq, hard_budget, &plans[i],
                                   kDeadline);
      elapsed_ms[i] = MsSince(start);
      done.fetch_add(1);
    });
  }
  std::vector<double> during;
  while (done.load() < kClients) during.push_back(hit_ms());
  for (std::thread& t : threads) t.join();

  int answered = 0, missed = 0;
  for (int i = 0; i < kClients; ++i) {
    INFO("client " << i << ": " << status[i].error_code() << " "
                   << status[i].error_message() << " after " << elapsed_ms[i]
                   << " ms");
    CHECK((status[i].ok() ||
           status[i].error_code() == grpc::StatusCode::DEADLINE_EXCEEDED));
    if (status[i].ok()) {
      ++answered;
      CHECK(plans[i].decision() == v1::PLAN);
    } else {
      ++missed;
    }
  }
  // Hits are answered on the daemon's I/O thread, never behind a solve:
  // some were answered before the last hard request returned.
  CHECK_FALSE(during.empty());
  // The daemon is not held by what the 16 asked: the same request, with
  // time to spare, gets its plan.
  v1::GetPlanResponse after;
  const grpc::Status after_status =
      setup.Plan("hard", testing::kHardBatch, testing::kHardSeq, hard_budget,
                 &after);
  INFO(after_status.error_code() << " " << after_status.error_message());
  REQUIRE(after_status.ok());
  CHECK(after.decision() == v1::PLAN);
  const double before_p50 = Quantile(before, 0.5);
  const double during_p50 = during.empty() ? 0 : Quantile(during, 0.5);
  const double during_max =
      during.empty() ? 0 : *std::max_element(during.begin(), during.end());
  WARN("16 clients: " << answered << " answered, " << missed
                      << " DEADLINE_EXCEEDED, slowest "
                      << *std::max_element(elapsed_ms.begin(), elapsed_ms.end())
                      << " ms; hits for another model: p50 " << before_p50
                      << " ms before, p50 " << during_p50 << " ms / max "
                      << during_max << " ms during (" << during.size()
                      << " hits)");
  REQUIRE(daemon.Signal(SIGTERM) == 0);
}

// The value of the exposition line that starts with `series` ("name{labels}"),
// or -1.
double MetricValue(const std::string& exposition, const std::string& series) {
  const std::string key = "\n" + series + " ";
  const size_t at = exposition.find(key);
  if (at == std::string::npos) return -1;
  return std::stod(exposition.substr(at + key.size()));
}

TEST_CASE("a call whose caller has gone while it queued is not solved") {
  // One worker, busy with 32 hard misses (tens of milliseconds each, up to
  // the 100 ms solve deadline); eight more misses (distinct budgets, no
  // deadline of their own) queue behind them and their callers cancel.
  // The worker answers those CANCELLED without solving: the daemon counts
  // 32 solved misses and eight cancelled calls.
  testing::DaemonProcess daemon;
  REQUIRE(daemon
              .Start({"", "",
                      {"--worker-threads", "1", "--solve-deadline-ms", "100"}})
              .ok());
  testing::RawClient setup(daemon.address());
  const int64_t budget = RegisterHardModel(&setup);

  constexpr int kBusy = 32;
  std::vector<grpc::Status> busy_status(kBusy);
  std::vector<std::thread> busy;
  for (int i = 0; i < kBusy; ++i) {
    busy.emplace_back([&, i] {
      testing::RawClient client(daemon.address());
      v1::GetPlanResponse plan;
      busy_status[i] =
          client.Plan("hard", testing::kHardBatch, testing::kHardSeq,
                      budget + i * 4096, &plan, std::chrono::seconds(60));
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  constexpr int kCancelled = 8;
  std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
  for (int i = 0; i < kCancelled; ++i) {
    contexts.push_back(std::make_unique<grpc::ClientContext>());
  }
  std::vector<grpc::Status> status(kCancelled);
  std::vector<std::thread> callers;
  for (int i = 0; i < kCancelled; ++i) {
    callers.emplace_back([&, i] {
      testing::RawClient client(daemon.address());
      v1::GetPlanResponse plan;
      status[i] = client.Plan(contexts[i].get(), "hard", testing::kHardBatch,
                              testing::kHardSeq, budget - (i + 1) * 4096,
                              &plan);
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  for (auto& c : contexts) c->TryCancel();
  for (std::thread& t : callers) t.join();
  for (std::thread& t : busy) t.join();
  for (const grpc::Status& s : busy_status) {
    INFO(s.error_message());
    CHECK(s.ok());
  }
  for (const grpc::Status& s : status) {
    CHECK(s.error_code() == grpc::StatusCode::CANCELLED);
  }
  // The worker reaches the cancelled calls after the busy one: wait for it.
  double cancelled = -1;
  std::string metrics;
  for (int i = 0; i < 100 && cancelled < kCancelled; ++i) {
    metrics = testing::HttpGet(daemon.metrics_port(), "/metrics");
    cancelled = MetricValue(
        metrics, "rematd_requests_total{method=\"GetPlan\",code=\"CANCELLED\"}");
    if (cancelled < kCancelled) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  INFO(metrics);
  CHECK(cancelled == kCancelled);
  CHECK(MetricValue(metrics,
                    "rematd_plan_latency_seconds_count{result=\"miss\"}") ==
        kBusy);
  REQUIRE(daemon.Signal(SIGTERM) == 0);
}

TEST_CASE("calls queued at shutdown are answered UNAVAILABLE, not dropped") {
  // One worker, hard misses that each take the full solve deadline, and a
  // grace period shorter than the queue: calls the worker has not begun
  // when SIGTERM arrives are answered UNAVAILABLE at once (a client
  // retries), the one running finishes; none is cancelled by the grace
  // period's end.
  testing::DaemonProcess daemon;
  REQUIRE(daemon.Start({"", "", {"--worker-threads", "1", "--grace-seconds", "0.3"}})
              .ok());
  testing::RawClient setup(daemon.address());
  const int64_t budget = RegisterHardModel(&setup);
  constexpr int kCalls = 24;
  std::vector<grpc::Status> status(kCalls);
  std::atomic<int> started{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kCalls; ++i) {
    threads.emplace_back([&, i] {
      testing::RawClient client(daemon.address());
      v1::GetPlanResponse plan;
      started.fetch_add(1);
      // Distinct budgets: no two share a solve or a cached plan.
      status[i] = client.Plan("hard", testing::kHardBatch, testing::kHardSeq,
                              budget - i * 4096, &plan);
    });
  }
  while (started.load() < kCalls) std::this_thread::yield();
  std::this_thread::sleep_for(std::chrono::milliseconds(60));
  const auto stop_start = Clock::now();
  const int rc = daemon.Signal(SIGTERM);
  const double stop_ms = MsSince(stop_start);
  for (std::thread& t : threads) t.join();
  CHECK(rc == 0);
  int ok = 0, unavailable = 0, answered_unavailable = 0;
  for (const grpc::Status& s : status) {
    INFO(s.error_code() << " " << s.error_message());
    CHECK((s.ok() || s.error_code() == grpc::StatusCode::UNAVAILABLE));
    ok += s.ok();
    unavailable += s.error_code() == grpc::StatusCode::UNAVAILABLE;
    // rematd's own answer, not gRPC's cancellation at the grace's end.
    answered_unavailable +=
        s.error_message().find("shutting down") != std::string::npos;
  }
  CHECK(ok >= 1);
  CHECK(answered_unavailable >= 1);
  WARN("at shutdown: " << ok << " answered, " << unavailable
                       << " UNAVAILABLE (" << answered_unavailable
                       << " answered so by rematd); stopped in " << stop_ms
                       << " ms of a 300 ms grace");
}

}  // namespace
}  // namespace remat
