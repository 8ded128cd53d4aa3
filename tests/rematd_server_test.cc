// rematd's server layer, against the real daemon process: plan-cache hits
// are answered while a slow solve holds every worker, plan misses while
// reports wait for a refit, health answers per service, and reflection is
// served only when asked for.
#include <grpcpp/client_context.h>

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "client/remote_planner.h"
#include "proto/health.grpc.pb.h"
#include "proto/reflection.grpc.pb.h"
#include "proto/remat.grpc.pb.h"
#include "tests/daemon_harness.h"

namespace remat {
namespace {

using testing::DaemonProcess;
using Clock = std::chrono::steady_clock;


// Sanitizers make everything several times slower, the fit of the samples
// included: a shorter chain still solves slowly there.
#if defined(__SANITIZE_THREAD__)
constexpr int kSlowSolveLayers = 300;  // ThreadSanitizer: ~10x slower still
#elif defined(__SANITIZE_ADDRESS__)
constexpr int kSlowSolveLayers = 1000;
#else
constexpr int kSlowSolveLayers = 3000;
#endif

// Generous deadlines: reporting the chain's samples (one fit) took 48 to
// 57 s of a 60 s deadline under ASan on a busy 2-core machine.
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
constexpr std::chrono::milliseconds kCallDeadline(240000);
#else
constexpr std::chrono::milliseconds kCallDeadline(60000);
#endif

RemotePlannerOptions Options(const std::string& address) {
  RemotePlannerOptions o;
  o.address = address;
  o.get_plan_deadline = kCallDeadline;
  o.call_deadline = kCallDeadline;
  return o;
}

// A long chain whose blocks all differ a little, so that the exact solver
// has a large Pareto front to search: a slow solve.
ModelSpec JitteredModel(int layers) { return testing::TestModel("long", layers); }

std::vector<Sample> JitteredSamples(const ModelSpec& spec) {
  std::vector<Sample> samples = testing::TestSampleGrid(spec);
  for (Sample& s : samples) {
    for (size_t i = 0; i < s.blocks.size(); ++i) {
      // Up to 2% apart, every block its own size and time.
      const double jitter =
          1.0 + static_cast<double>((i * 2654435761u) % 1000003) / 5e7;
      s.blocks[i].act_bytes =
          static_cast<int64_t>(s.blocks[i].act_bytes * jitter);
      s.blocks[i].forward_ns =
          static_cast<int64_t>(s.blocks[i].forward_ns * (2.2 - jitter));
    }
  }
  return samples;
}

TEST_CASE("cache hits are answered while a slow solve holds every worker") {
  DaemonProcess daemon;
  REQUIRE(daemon.Start({"", "", {"--worker-threads", "1"}}).ok());
  RemotePlanner planner(Options(daemon.address()));
  const ModelSpec spec = JitteredModel(kSlowSolveLayers);
  REQUIRE(planner.RegisterModel(spec).ok());
  const absl::Status reported =
      planner.ReportSamples("long", JitteredSamples(spec));
  INFO(reported.ToString());
  REQUIRE(reported.ok());

  // Budget halfway between recomputing everything and keeping everything.
  const Features at = {8, 512};
  auto all = planner.GetPlan({"long", at, int64_t{1} << 50, "all"});
  auto none = planner.GetPlan({"long", at, int64_t{1} << 50, "none"});
  REQUIRE(all.ok());
  REQUIRE(none.ok());
  const int64_t budget = (all->plan->predicted_peak_bytes +
                          none->plan->predicted_peak_bytes) / 2;
  // A plan to hit: a cheap solver's, cached now.
  const PlanRequest hit{"long", {1, 64}, budget, "all"};
  REQUIRE(planner.GetPlan(hit).ok());

  // Eight other clients keep the one worker busy with solves (each a new
  // budget, so never cached): a queue of solves that a hit must not join.
  std::atomic<bool> stop{false};
  std::atomic<int64_t> next_budget{budget};
  // Catch2's assertions are not thread-safe: the solvers count their failed
  // and cached answers, checked after the join.
  std::vector<double> solve_ms;
  std::atomic<int> solve_failed{0};
  std::atomic<int> solve_cached{0};
  std::atomic<int> solves_done{0};
  absl::Mutex solve_mu;
  std::vector<std::thread> solvers;
  for (int t = 0; t < 8; ++t) {
    solvers.emplace_back([&] {
      RemotePlanner other(Options(daemon.address()));
      while (!stop) {
        const auto start = Clock::now();
        auto r = other.GetPlan({"long", at, next_budget += 4096, "exact"});
        const double ms =
            std::chrono::duration<double, std::milli>(Clock::now() - start)
                .count();
        if (!r.ok()) {
          ++solve_failed;
          continue;
        }
        if (r->from_cache) ++solve_cached;
        ++solves_done;
        absl::MutexLock lock(&solve_mu);
        solve_ms.push_back(ms);
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const int solves_before_hits = solves_done.load();
  std::vector<double> hit_ms;
  for (int i = 0; i < 21; ++i) {
    const auto start = Clock::now();
    auto r = planner.GetPlan(hit);
    REQUIRE(r.ok());
    REQUIRE(r->from_cache);
    hit_ms.push_back(
        std::chrono::duration<double, std::milli>(Clock::now() - start)
            .count());
  }
  std::sort(hit_ms.begin(), hit_ms.end());
  const int solves_during_hits = solves_done.load() - solves_before_hits;
  stop = true;
  for (std::thread& t : solvers) t.join();
  CHECK(solve_failed == 0);
  CHECK(solve_cached == 0);
  std::sort(solve_ms.begin(), solve_ms.end());
  REQUIRE(solve_ms.size() >= 8);
  const double median_solve_ms = solve_ms[solve_ms.size() / 2];
  INFO("solves " << solve_ms.size() << ", median " << median_solve_ms
                 << " ms; cache hits median " << hit_ms[10] << " ms, worst "
                 << hit_ms.back() << " ms; solves done during the 21 hits "
                 << solves_during_hits);
  // Order, not time: a hit queued behind the worker would wait for the
  // solves ahead of it (up to seven each), so 21 such hits would see well
  // over 21 solves finish. Answered on the I/O thread, they see few.
  REQUIRE(solves_during_hits < 21);
}

// Long enough that one refit of the model (its grid of samples and one
// more) takes well over the 200 ms the test gives its reports to arrive.
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
constexpr int kSlowRefitLayers = 60;
#else
constexpr int kSlowRefitLayers = 300;
#endif

TEST_CASE("a plan miss is answered while reports wait for their refit") {
  DaemonProcess daemon;
  REQUIRE(daemon.Start({"", "", {"--worker-threads", "1"}}).ok());
  RemotePlanner planner(Options(daemon.address()));
  const ModelSpec spec = testing::TestModel("reports", kSlowRefitLayers);
  REQUIRE(planner.RegisterModel(spec).ok());
  auto start = Clock::now();
  REQUIRE(planner.ReportSamples("reports", testing::TestSampleGrid(spec)).ok());
  const double fit_ms =
      std::chrono::duration<double, std::milli>(Clock::now() - start).count();

  // Three trainers report a sample each at once: one refits (on the one
  // thread reports have), the others wait for it, then for their own
  // round. Each finishing call takes the next number.
  std::atomic<int> finished{0};
  std::atomic<int> report_failed{0};
  std::vector<int> report_order(3, 0);
  std::vector<std::thread> reporters;
  for (int t = 0; t < 3; ++t) {
    reporters.emplace_back([&, t] {
      RemotePlanner other(Options(daemon.address()));
      const absl::Status s = other.ReportSamples(
          "reports", {testing::TestSample(spec, 3 + t, 96 + 32 * t)});
      report_order[t] = ++finished;
      if (!s.ok()) ++report_failed;
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  // A plan miss (never asked before) for the same model.
  start = Clock::now();
  auto plan = planner.GetPlan({"reports", {2, 128}, int64_t{1} << 50, "all"});
  const int plan_order = ++finished;
  const double plan_ms =
      std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  for (std::thread& t : reporters) t.join();
  INFO("first fit " << fit_ms << " ms; plan miss " << plan_ms
                    << " ms, finished " << plan_order << " of 4");
  REQUIRE(plan.ok());
  CHECK_FALSE(plan->from_cache);
  CHECK(report_failed == 0);
  // Order, not time: had the reports held the one worker, the miss would
  // have waited for at least one refit to end.
  CHECK(plan_order == 1);
}

std::string Check(const std::string& address, const std::string& service) {
  auto stub = grpc::health::v1::Health::NewStub(MakeDaemonChannel(address));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::seconds(5));
  grpc::health::v1::HealthCheckRequest request;
  request.set_service(service);
  grpc::health::v1::HealthCheckResponse response;
  const grpc::Status s = stub->Check(&context, request, &response);
  if (!s.ok()) return "code " + std::to_string(s.error_code());
  return grpc::health::v1::HealthCheckResponse::ServingStatus_Name(
      response.status());
}

TEST_CASE("health answers for the server and the planner, NOT_FOUND else") {
  DaemonProcess daemon;
  REQUIRE(daemon.Start({}).ok());
  CHECK(Check(daemon.address(), "") == "SERVING");
  CHECK(Check(daemon.address(), "remat.v1.Planner") == "SERVING");
  CHECK(Check(daemon.address(), "nope") ==
        "code " + std::to_string(grpc::StatusCode::NOT_FOUND));
}

// The services the reflection service lists, or the call's error code.
std::vector<std::string> ListServices(const std::string& address,
                                      grpc::StatusCode* code) {
  auto stub = grpc::reflection::v1alpha::ServerReflection::NewStub(
      MakeDaemonChannel(address));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::seconds(5));
  auto stream = stub->ServerReflectionInfo(&context);
  grpc::reflection::v1alpha::ServerReflectionRequest request;
  request.set_list_services("");
  stream->Write(request);
  stream->WritesDone();
  std::vector<std::string> names;
  grpc::reflection::v1alpha::ServerReflectionResponse response;
  while (stream->Read(&response)) {
    for (const auto& service : response.list_services_response().service()) {
      names.push_back(service.name());
    }
  }
  *code = stream->Finish().error_code();
  return names;
}

TEST_CASE("reflection is served only with --reflection") {
  grpc::StatusCode code = grpc::StatusCode::OK;
  {
    DaemonProcess daemon;
    REQUIRE(daemon.Start({}).ok());
    CHECK(ListServices(daemon.address(), &code).empty());
    CHECK(code == grpc::StatusCode::UNIMPLEMENTED);
  }
  DaemonProcess daemon;
  REQUIRE(daemon.Start({"", "", {"--reflection"}}).ok());
  const std::vector<std::string> names = ListServices(daemon.address(), &code);
  CHECK(code == grpc::StatusCode::OK);
  auto has = [&](const std::string& n) {
    return std::find(names.begin(), names.end(), n) != names.end();
  };
  CHECK(has("remat.v1.Planner"));
  CHECK(has("grpc.health.v1.Health"));
  // And the plan-cache path still works with the synchronous reflection
  // service beside it.
  RemotePlanner planner(Options(daemon.address()));
  REQUIRE(planner.RegisterModel(testing::TestModel("bert")).ok());
}

}  // namespace
}  // namespace remat
