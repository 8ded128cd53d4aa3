// RemotePlanner when the daemon goes away mid-training, behind PlanChooser
// as the runtime uses it: the last good plan for a covering bucket, then
// the safe plan, each reported as a fallback with the reason; errors (not
// silence) for samples; and recovery once the daemon is back, on the same
// unix socket.
#include "client/remote_planner.h"

#include <signal.h>

#include <catch2/catch.hpp>
#include <thread>

#include "client/plan_chooser.h"
#include "tests/daemon_harness.h"

namespace remat {
namespace {

using testing::DaemonProcess;

TEST_CASE("fallback plans while the daemon is down, recovery after") {
  const std::string dir = testing::MakeTempDir();
  const std::string socket = dir + "/rematd.sock";
  const std::string state = dir + "/state";
  const ModelSpec spec = testing::TestModel("m", 4);
  const int64_t budget = int64_t{2} << 30;

  auto daemon = std::make_unique<DaemonProcess>();
  REQUIRE(daemon->Start({state, socket}).ok());
  RemotePlannerOptions options;
  options.address = "unix:" + socket;
  options.get_plan_deadline = std::chrono::milliseconds(2000);  // a busy CI
  // A refit of the sample grid by a daemon under ThreadSanitizer, on a busy
  // machine, took over the default 2 s; calls to a daemon that is down
  // still fail at once (no wait for ready).
  options.call_deadline = std::chrono::milliseconds(60000);
  RemotePlanner planner(options);
  PlanChooser chooser(&planner, spec);
  REQUIRE(planner.RegisterModel(spec).ok());
  REQUIRE(planner.ReportSamples("m", testing::TestSampleGrid(spec)).ok());

  // Training: plans from the daemon.
  const PlanChoice good = chooser.Choose({4, 200}, budget);
  REQUIRE(good.source == PlanSource::kPlanner);
  REQUIRE(good.planner_status.ok());
  REQUIRE(planner.stats().plans_from_daemon >= 1);
  chooser.InvalidatePlans();  // as after a refit: ask the daemon next time

  // No plan fits: the smallest reachable peak comes with the error, and
  // the largest batch that fits is the one GetPlan accepts.
  const absl::Status tiny = planner.GetPlan({"m", {8, 400}, 1 << 20, ""}).status();
  REQUIRE(absl::IsResourceExhausted(tiny));
  const std::optional<int64_t> peak4 =
      SmallestPeakBytes(planner.GetPlan({"m", {4, 400}, 1 << 20, ""}).status());
  REQUIRE(peak4.has_value());
  absl::StatusOr<BatchFit> fit = chooser.FitBatch({8, 400}, *peak4, 0);
  REQUIRE(fit.ok());
  int64_t brute = 0;
  for (int b = 1; b <= 8; ++b) {
    brute = planner.GetPlan({"m", {double(b), 400}, *peak4, ""}).ok() ? b : brute;
  }
  CHECK(brute >= 4);
  CHECK(fit->max_batch == brute);
  CHECK(fit->micro_batches == (8 + brute - 1) / brute);

  // The daemon dies: the planner says so, it does not answer for itself.
  REQUIRE(daemon->Signal(SIGKILL) == 128 + SIGKILL);
  REQUIRE(absl::IsUnavailable(
      planner.GetPlan({"m", {4, 200}, budget, ""}).status()));

  // Same bucket (seq 197 rounds up to 200 like 200): the last good plan,
  // reported as a fallback with the reason.
  const PlanChoice last = chooser.Choose({4, 197}, budget);
  REQUIRE(last.source == PlanSource::kLastGood);
  REQUIRE(last.actions == good.actions);
  REQUIRE(absl::IsUnavailable(last.planner_status));
  // A smaller batch is covered by that bucket too.
  const PlanChoice smaller = chooser.Choose({2, 150}, budget);
  REQUIRE(smaller.source == PlanSource::kLastGood);
  REQUIRE(smaller.actions == good.actions);

  // A bigger batch has no covering plan: the safe plan.
  const PlanChoice safe = chooser.Choose({8, 480}, budget);
  REQUIRE(safe.source == PlanSource::kSafe);
  REQUIRE(safe.actions[0] == Action::kKeep);  // embed: not checkpointable
  for (size_t i = 1; i < spec.blocks.size(); ++i) {
    REQUIRE(safe.actions[i] == Action::kRecompute);
  }
  REQUIRE(chooser.stats().fallbacks_last_good == 2);
  REQUIRE(chooser.stats().fallbacks_safe == 1);

  // Samples are not silently lost: the caller sees the error.
  const absl::Status lost =
      planner.ReportSamples("m", {testing::TestSample(spec, 3, 99)});
  REQUIRE(absl::IsUnavailable(lost));

  // The daemon comes back (same socket, same state): plans recover.
  daemon = std::make_unique<DaemonProcess>();
  REQUIRE(daemon->Start({state, socket}).ok());
  PlanChoice back;
  const auto until =
      std::chrono::steady_clock::now() + std::chrono::seconds(15);
  while (std::chrono::steady_clock::now() < until) {
    back = chooser.Choose({8, 480}, budget);
    if (back.source == PlanSource::kPlanner) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  REQUIRE(back.source == PlanSource::kPlanner);
  REQUIRE(planner.ReportSamples("m", {testing::TestSample(spec, 3, 99)}).ok());
  REQUIRE(daemon->Signal(SIGTERM) == 0);
}

TEST_CASE("a daemon that lost its state gets the model registered again") {
  const std::string dir = testing::MakeTempDir();
  const std::string socket = dir + "/rematd.sock";
  const ModelSpec spec = testing::TestModel("m", 2);
  auto daemon = std::make_unique<DaemonProcess>();
  REQUIRE(daemon->Start({dir + "/a", socket}).ok());
  RemotePlannerOptions options;
  options.address = "unix:" + socket;
  options.get_plan_deadline = std::chrono::milliseconds(5000);
  options.call_deadline = std::chrono::milliseconds(60000);  // as above
  RemotePlanner planner(options);
  REQUIRE(planner.RegisterModel(spec).ok());
  REQUIRE(daemon->Signal(SIGTERM) == 0);

  // Same address, empty state (e.g. the state dir was wiped).
  daemon = std::make_unique<DaemonProcess>();
  REQUIRE(daemon->Start({dir + "/b", socket}).ok());
  absl::StatusOr<PlanResult> r = absl::UnavailableError("not yet");
  const auto until =
      std::chrono::steady_clock::now() + std::chrono::seconds(15);
  while (std::chrono::steady_clock::now() < until) {
    r = planner.GetPlan({"m", {1, 64}, 1 << 30, ""});
    if (r.ok()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  REQUIRE(r.ok());
  REQUIRE(r->collect);  // the fresh daemon has no samples yet
  REQUIRE(planner.stats().reregistrations == 1);
  REQUIRE(planner.GetModelState("m").ok());
  REQUIRE(daemon->Signal(SIGTERM) == 0);
}

TEST_CASE("an address nobody serves: fast errors, and the safe plan") {
  RemotePlannerOptions options;
  options.address = "unix:" + testing::MakeTempDir() + "/nobody.sock";
  RemotePlanner planner(options);
  const ModelSpec spec = testing::TestModel("m", 3);
  // Registration fails with UNAVAILABLE but the spec is kept for plans.
  REQUIRE(absl::IsUnavailable(planner.RegisterModel(spec)));
  REQUIRE(absl::IsUnavailable(
      planner.GetPlan({"m", {1, 64}, 1 << 30, ""}).status()));
  // In front of it, PlanChooser runs the safe plan and says why.
  PlanChooser chooser(&planner, spec);
  const PlanChoice safe = chooser.Choose({1, 64}, 1 << 30);
  REQUIRE(safe.source == PlanSource::kSafe);
  REQUIRE(absl::IsUnavailable(safe.planner_status));
  REQUIRE(absl::IsUnavailable(
      planner.ReportSamples("m", {testing::TestSample(spec, 1, 64)})));
  // Bad input is still an error, never a fallback.
  REQUIRE(absl::IsInvalidArgument(
      planner.GetPlan({"m", {1}, 1 << 30, ""}).status()));
  // A model this client never registered: its spec is unknown.
  REQUIRE_FALSE(planner.GetPlan({"other", {1, 64}, 1 << 30, ""}).ok());
}

}  // namespace
}  // namespace remat
