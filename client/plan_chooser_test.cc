#include "client/plan_chooser.h"

#include <atomic>
#include <cmath>
#include <functional>
#include <future>
#include <thread>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

namespace remat {
namespace {

const Action K = Action::kKeep;
const Action R = Action::kRecompute;

ModelSpec Model() {
  return ModelSpec{
      "m", {"batch", "seq"}, {{"embed", false}, {"l0", true}, {"l1", true}}};
}

// A scripted planner: answers with `next` (plan or error), buckets with
// `granularity` on seq, counts calls.
class ScriptedPlanner final : public Planner {
 public:
  absl::Status RegisterModel(const ModelSpec& spec) override {
    ++register_calls;
    if (!register_status.ok()) return register_status;
    registered = spec.name;
    return absl::OkStatus();
  }
  absl::StatusOr<PlanResult> GetPlan(const PlanRequest& request) override {
    if (before_answer) before_answer(request);
    ++plan_calls;
    last_request = request;
    if (!status.ok()) return status;
    PlanResult result;
    result.collect = collect;
    if (collect && !collect_actions.empty()) {
      auto plan = std::make_shared<Plan>();
      plan->actions = collect_actions;
      plan->solver = "collect";
      result.plan = plan;
    }
    if (!collect) {
      auto plan = std::make_shared<Plan>();
      plan->actions = actions;
      plan->feasible = true;
      plan->predicted_peak_bytes = predicted_peak_bytes;
      plan->solver = "exact";
      result.plan = plan;
    }
    for (size_t i = 0; i < request.features.size(); ++i) {
      double g = i == 1 ? seq_granularity : 1;
      result.bucket.push_back(
          static_cast<int64_t>(std::ceil(request.features[i] / g) * g));
    }
    return result;
  }
  absl::Status ReportSamples(const std::string&,
                             const std::vector<Sample>&) override {
    return absl::OkStatus();
  }
  absl::Status ReportOutcome(const Outcome&) override {
    return absl::OkStatus();
  }

  absl::Status register_status;
  absl::Status status;
  // Runs before each answer (on the calling thread).
  std::function<void(const PlanRequest&)> before_answer;
  bool collect = false;
  std::vector<Action> collect_actions;  // COLLECT's plan; empty: none
  std::vector<Action> actions = {K, R, K};
  int64_t predicted_peak_bytes = 12345;
  double seq_granularity = 8;
  int register_calls = 0;
  int plan_calls = 0;
  std::string registered;
  PlanRequest last_request;
};

// The local bucket of the scripted planner's: sequence lengths in steps
// of 8 tokens.
PlanChooserOptions Eights() {
  PlanChooserOptions options;
  options.granularity = {{"seq", 8}};
  return options;
}

TEST_CASE("a plan's prediction and solver travel with it, cached too") {
  ScriptedPlanner planner;
  PlanChooser chooser(&planner, Model(), Eights());
  PlanChoice a = chooser.Choose({4, 100}, 1 << 20);
  CHECK(a.predicted_peak_bytes == 12345);
  CHECK(a.solver == "exact");
  PlanChoice b = chooser.Choose({4, 101}, 1 << 20);
  REQUIRE(b.source == PlanSource::kLocalCache);
  CHECK(b.predicted_peak_bytes == 12345);
  chooser.InvalidatePlans();
  planner.status = absl::UnavailableError("gone");
  PlanChoice c = chooser.Choose({4, 100}, 1 << 20);
  REQUIRE(c.source == PlanSource::kLastGood);
  CHECK(c.predicted_peak_bytes == 12345);
  planner.collect = true;
  planner.status = absl::OkStatus();
  PlanChoice d = chooser.Choose({4, 300}, 1 << 20);
  CHECK(d.predicted_peak_bytes == 0);
}

TEST_CASE("a repeat in the same bucket is answered locally") {
  ScriptedPlanner planner;
  PlanChooser chooser(&planner, Model(), Eights());
  PlanChoice a = chooser.Choose({4, 100}, 1 << 20);
  CHECK(a.source == PlanSource::kPlanner);
  CHECK(a.actions == std::vector<Action>{K, R, K});
  CHECK(a.bucket == std::vector<int64_t>{4, 104});
  CHECK(planner.registered == "m");
  CHECK(planner.last_request.budget_bytes == 1 << 20);

  PlanChoice b = chooser.Choose({4, 97}, 1 << 20);  // same bucket
  CHECK(b.source == PlanSource::kLocalCache);
  CHECK(b.actions == a.actions);
  CHECK(planner.plan_calls == 1);

  // Another budget or bucket asks again.
  chooser.Choose({4, 97}, 1 << 21);
  chooser.Choose({4, 105}, 1 << 20);
  CHECK(planner.plan_calls == 3);
  CHECK(planner.register_calls == 1);
  CHECK(chooser.stats().local_hits == 1);
}

TEST_CASE("a planner bucket that differs from the local one is not cached") {
  ScriptedPlanner planner;
  planner.seq_granularity = 16;  // coarser than the local 8
  PlanChooser chooser(&planner, Model(), Eights());
  CHECK(chooser.Choose({4, 100}, 1000).source == PlanSource::kPlanner);
  CHECK(chooser.Choose({4, 100}, 1000).source == PlanSource::kPlanner);
  CHECK(planner.plan_calls == 2);
}

TEST_CASE("COLLECT runs the safe plan and is never cached") {
  ScriptedPlanner planner;
  planner.collect = true;
  PlanChooser chooser(&planner, Model(), Eights());
  PlanChoice c = chooser.Choose({4, 64}, 1000);
  CHECK(c.collect());
  CHECK(c.actions == std::vector<Action>{K, R, R});
  chooser.Choose({4, 64}, 1000);
  CHECK(planner.plan_calls == 2);
  CHECK(chooser.stats().collects == 2);
}

TEST_CASE("COLLECT runs the planner's safe plan when this runtime can") {
  const Action RO = Action::kRecomputeOffload;
  ScriptedPlanner planner;
  planner.collect = true;
  planner.collect_actions = {K, R, RO};
  PlanChooserOptions sending = Eights();
  sending.offload = sending.offload_checkpoints = true;
  PlanChooser chooser(&planner, Model(), sending);
  CHECK(chooser.Choose({4, 64}, 1000).actions == planner.collect_actions);
  CHECK(planner.last_request.offload_checkpoints);
  // A runtime that cannot send checkpoints runs its own safe plan.
  PlanChooser plain(&planner, Model());
  CHECK(plain.Choose({4, 64}, 1000).actions == std::vector<Action>{K, R, R});
  CHECK_FALSE(planner.last_request.offload_checkpoints);
  // A "safe" plan that keeps a block it could recompute is not one.
  planner.collect_actions = {K, K, RO};
  CHECK(chooser.Choose({4, 64}, 1000).actions == std::vector<Action>{K, R, R});
}

TEST_CASE("planner errors fall back to the last good plan, else safe") {
  ScriptedPlanner planner;
  PlanChooserOptions options = Eights();
  options.cache_capacity = 1;
  PlanChooser chooser(&planner, Model(), options);
  REQUIRE(chooser.Choose({4, 64}, 1000).source == PlanSource::kPlanner);
  REQUIRE(chooser.Choose({8, 64}, 1000).source == PlanSource::kPlanner);
  // {4,64} was evicted from the local cache (capacity 1), and last-good
  // holds one entry too, so only {8,64} survives there: it covers {4,64}
  // (a plan for a larger batch fits a smaller one), not {16,64}.
  planner.status = absl::UnavailableError("daemon down");
  PlanChoice covered = chooser.Choose({4, 64}, 1000);
  CHECK(covered.source == PlanSource::kLastGood);
  CHECK(covered.actions == std::vector<Action>{K, R, K});
  PlanChoice uncovered = chooser.Choose({16, 64}, 1000);
  CHECK(uncovered.source == PlanSource::kSafe);
  CHECK(uncovered.actions == std::vector<Action>{K, R, R});
  CHECK(uncovered.planner_status.code() == absl::StatusCode::kUnavailable);
  // Nor does a plan for another budget.
  CHECK(chooser.Choose({4, 64}, 999).source == PlanSource::kSafe);

  // After the planner refits, local plans become last-good ones.
  chooser.InvalidatePlans();
  PlanChoice kept = chooser.Choose({8, 64}, 1000);
  CHECK(kept.source == PlanSource::kLastGood);
  CHECK(kept.actions == std::vector<Action>{K, R, K});
  CHECK(chooser.stats().fallbacks_last_good == 2);
  CHECK(chooser.stats().fallbacks_safe == 2);

  // Once the planner is back, it is asked again (the local cache was
  // invalidated).
  planner.status = absl::OkStatus();
  CHECK(chooser.Choose({8, 64}, 1000).source == PlanSource::kPlanner);
}

TEST_CASE("the tightest covering bucket is the last good plan") {
  ScriptedPlanner planner;
  PlanChooser chooser(&planner, Model(), Eights());
  planner.actions = {K, R, R};
  REQUIRE(chooser.Choose({8, 512}, 1000).source == PlanSource::kPlanner);
  planner.actions = {K, K, R};
  REQUIRE(chooser.Choose({8, 128}, 1000).source == PlanSource::kPlanner);
  planner.actions = {K, K, K};
  REQUIRE(chooser.Choose({2, 64}, 1000).source == PlanSource::kPlanner);
  chooser.InvalidatePlans();
  planner.status = absl::DeadlineExceededError("rematd too slow");
  // {4, 100}: both {8,128} and {8,512} cover it; {8,128} is tighter.
  const PlanChoice c = chooser.Choose({4, 100}, 1000);
  CHECK(c.source == PlanSource::kLastGood);
  CHECK(c.actions == std::vector<Action>{K, K, R});
  CHECK(absl::IsDeadlineExceeded(c.planner_status));
  CHECK(chooser.Choose({4, 200}, 1000).actions ==
        std::vector<Action>{K, R, R});
  CHECK(chooser.Choose({4, 600}, 1000).source == PlanSource::kSafe);
}

TEST_CASE("a slow planner call does not hold other threads' local hits") {
  ScriptedPlanner planner;
  PlanChooser chooser(&planner, Model(), Eights());
  REQUIRE(chooser.Choose({4, 100}, 1000).source == PlanSource::kPlanner);
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::atomic<bool> waiting{false};
  planner.before_answer = [&](const PlanRequest&) {
    waiting = true;
    released.wait();
  };
  std::thread slow([&] { chooser.Choose({4, 300}, 1000); });  // a miss
  while (!waiting) std::this_thread::yield();
  // The miss is inside the planner; a repeat of the first batch is answered.
  CHECK(chooser.Choose({4, 100}, 1000).source == PlanSource::kLocalCache);
  release.set_value();
  slow.join();
}

TEST_CASE("no plan fits: the safe plan, with the planner's reason") {
  ScriptedPlanner planner;
  planner.status = absl::ResourceExhaustedError("smallest peak 5000");
  PlanChooser chooser(&planner, Model(), Eights());
  PlanChoice c = chooser.Choose({4, 64}, 1000);
  CHECK(c.source == PlanSource::kSafe);
  CHECK(c.planner_status.code() == absl::StatusCode::kResourceExhausted);
}

TEST_CASE("a failed registration falls back and is retried") {
  ScriptedPlanner planner;
  planner.register_status = absl::UnavailableError("down");
  PlanChooser chooser(&planner, Model(), Eights());
  CHECK(chooser.Choose({4, 64}, 1000).source == PlanSource::kSafe);
  CHECK(planner.plan_calls == 0);
  planner.register_status = absl::OkStatus();
  CHECK(chooser.Choose({4, 64}, 1000).source == PlanSource::kPlanner);
  CHECK(planner.register_calls == 2);
}

TEST_CASE("plans this runtime cannot run are refused") {
  ScriptedPlanner planner;
  PlanChooser chooser(&planner, Model(), Eights());
  SECTION("OFFLOAD") {
    planner.actions = {K, Action::kOffload, K};
    PlanChoice c = chooser.Choose({4, 64}, 1000);
    CHECK(c.source == PlanSource::kSafe);
    CHECK(std::string(c.planner_status.message()).find("OFFLOAD") !=
          std::string::npos);
    // A runtime with a copy engine runs it.
    PlanChooserOptions with_engine = Eights();
    with_engine.offload = true;
    PlanChooser offloading(&planner, Model(), with_engine);
    PlanChoice o = offloading.Choose({4, 64}, 1000);
    CHECK(o.source == PlanSource::kPlanner);
    CHECK(o.actions == planner.actions);
  }
  SECTION("RECOMPUTE_OFFLOAD") {
    planner.actions = {K, R, Action::kRecomputeOffload};
    PlanChooserOptions with_engine = Eights();
    with_engine.offload = true;
    PlanChooser offloading(&planner, Model(), with_engine);
    PlanChoice c = offloading.Choose({4, 64}, 1000);
    CHECK(c.source == PlanSource::kSafe);
    CHECK(std::string(c.planner_status.message()).find("RECOMPUTE_OFFLOAD") !=
          std::string::npos);
    // A runtime that sends checkpoints to host runs it.
    with_engine.offload_checkpoints = true;
    PlanChooser sending(&planner, Model(), with_engine);
    PlanChoice o = sending.Choose({4, 64}, 1000);
    CHECK(o.source == PlanSource::kPlanner);
    CHECK(o.actions == planner.actions);
    // Never on a block that cannot be recomputed.
    planner.actions = {Action::kRecomputeOffload, R, R};
    PlanChooser again(&planner, Model(), with_engine);
    CHECK(again.Choose({4, 64}, 1000).source == PlanSource::kSafe);
  }
  SECTION("recompute of a non-checkpointable block") {
    planner.actions = {R, R, R};
    PlanChoice c = chooser.Choose({4, 64}, 1000);
    CHECK(c.source == PlanSource::kSafe);
    CHECK(std::string(c.planner_status.message()).find("embed") !=
          std::string::npos);
  }
  SECTION("wrong length") {
    planner.actions = {K, R};
    CHECK(chooser.Choose({4, 64}, 1000).source == PlanSource::kSafe);
  }
}

TEST_CASE("bad features get the safe plan without a planner call") {
  ScriptedPlanner planner;
  PlanChooser chooser(&planner, Model(), Eights());
  PlanChoice c = chooser.Choose({4}, 1000);
  CHECK(c.source == PlanSource::kSafe);
  CHECK(c.planner_status.code() == absl::StatusCode::kInvalidArgument);
  CHECK(planner.plan_calls == 0);
}

}  // namespace
}  // namespace remat
