// RemotePlanner when the daemon goes away mid-training: the last good plan
// for the bucket, then the safe plan, errors (not silence) for samples, and
// recovery once the daemon is back, on the same unix socket.
#include "client/remote_planner.h"

#include <signal.h>

#include <catch2/catch.hpp>
#include <thread>

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
  RemotePlanner planner(options);
  REQUIRE(planner.RegisterModel(spec).ok());
  REQUIRE(planner.ReportSamples("m", testing::TestSampleGrid(spec)).ok());

  // Training: plans from the daemon.
  auto good = planner.GetPlan({"m", {4, 200}, budget, ""});
  REQUIRE(good.ok());
  REQUIRE_FALSE(good->collect);
  REQUIRE(good->plan->solver != "safe");
  REQUIRE(good->fallback_status.ok());
  REQUIRE(planner.stats().plans_from_daemon >= 1);

  // The daemon dies.
  REQUIRE(daemon->Signal(SIGKILL) == 128 + SIGKILL);

  // Same bucket (seq 197 rounds up to 200 like 200): the last good plan.
  auto last = planner.GetPlan({"m", {4, 197}, budget, ""});
  REQUIRE(last.ok());
  REQUIRE(last->plan == good->plan);
  // It says it is a fallback, and why.
  REQUIRE(last->fallback_last_good);
  REQUIRE(!last->fallback_status.ok());
  REQUIRE(planner.stats().fallback_last_good == 1);
  // A smaller batch is covered by that bucket too.
  auto smaller = planner.GetPlan({"m", {2, 150}, budget, ""});
  REQUIRE(smaller.ok());
  REQUIRE(smaller->plan == good->plan);

  // A bigger batch has no covering plan: the safe plan.
  auto safe = planner.GetPlan({"m", {8, 480}, budget, ""});
  REQUIRE(safe.ok());
  REQUIRE(safe->plan->solver == "safe");
  REQUIRE(!safe->fallback_last_good);
  REQUIRE(!safe->fallback_status.ok());
  REQUIRE(safe->plan->actions[0] ==
          Action::kKeep);  // embed: not checkpointable
  for (size_t i = 1; i < spec.blocks.size(); ++i) {
    REQUIRE(safe->plan->actions[i] == Action::kRecompute);
  }
  REQUIRE(planner.stats().fallback_safe == 1);

  // Samples are not silently lost: the caller sees the error.
  const absl::Status lost =
      planner.ReportSamples("m", {testing::TestSample(spec, 3, 99)});
  REQUIRE(absl::IsUnavailable(lost));

  // The daemon comes back (same socket, same state): plans recover.
  daemon = std::make_unique<DaemonProcess>();
  REQUIRE(daemon->Start({state, socket}).ok());
  absl::StatusOr<PlanResult> back = absl::UnavailableError("not yet");
  const auto until =
      std::chrono::steady_clock::now() + std::chrono::seconds(15);
  while (std::chrono::steady_clock::now() < until) {
    back = planner.GetPlan({"m", {8, 480}, budget, ""});
    if (back.ok() && back->plan->solver != "safe") break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  REQUIRE(back.ok());
  REQUIRE(back->plan->solver != "safe");
  REQUIRE_FALSE(back->collect);
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
    if (r.ok() && r->plan->solver != "safe") break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  REQUIRE(r.ok());
  REQUIRE(r->collect);  // the fresh daemon has no samples yet
  REQUIRE(planner.stats().reregistrations == 1);
  REQUIRE(planner.GetModelState("m").ok());
  REQUIRE(daemon->Signal(SIGTERM) == 0);
}

TEST_CASE("an address nobody serves: fast errors and the safe plan") {
  RemotePlannerOptions options;
  options.address = "unix:" + testing::MakeTempDir() + "/nobody.sock";
  RemotePlanner planner(options);
  const ModelSpec spec = testing::TestModel("m", 3);
  // Registration fails with UNAVAILABLE but the spec is kept for plans.
  REQUIRE(absl::IsUnavailable(planner.RegisterModel(spec)));
  auto r = planner.GetPlan({"m", {1, 64}, 1 << 30, ""});
  REQUIRE(r.ok());
  REQUIRE(r->plan->solver == "safe");
  REQUIRE(absl::IsUnavailable(
      planner.ReportSamples("m", {testing::TestSample(spec, 1, 64)})));
  // Bad input is still an error, never a fallback.
  REQUIRE(absl::IsInvalidArgument(
      planner.GetPlan({"m", {1}, 1 << 30, ""}).status()));
  // A model this client never registered cannot get a safe plan.
  REQUIRE_FALSE(planner.GetPlan({"other", {1, 64}, 1 << 30, ""}).ok());
}

}  // namespace
}  // namespace remat
