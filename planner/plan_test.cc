#include "planner/plan.h"

#include <catch2/catch.hpp>

namespace remat {
namespace {

PlanProblem Problem() {
  PlanProblem p;
  p.base_bytes = 1000;
  p.budget_bytes = 2000;
  p.blocks = {{"a", 300, 50, 7}, {"b", 500, 100, 11}, {"c", 200, 40, 3}};
  return p;
}

TEST_CASE("keeping everything retains every block's activations") {
  const PlanProblem p = Problem();
  const std::vector<Action> keep(3, Action::kKeep);
  CHECK(PredictedPeakBytes(p, keep) == 1000 + 300 + 500 + 200);
  CHECK(RecomputeNs(p, keep) == 0);
}

TEST_CASE("recompute keeps inputs plus the largest rematerialised block") {
  const PlanProblem p = Problem();
  const std::vector<Action> actions = {Action::kRecompute, Action::kRecompute,
                                       Action::kKeep};
  // retained: 50 + 100 + 200; max term: max(300-50, 500-100) = 400.
  CHECK(PredictedPeakBytes(p, actions) == 1000 + 350 + 400);
  CHECK(RecomputeNs(p, actions) == 18);
}

TEST_CASE("offload holds nothing but the block prefetched back") {
  const PlanProblem p = Problem();
  const std::vector<Action> actions = {Action::kKeep, Action::kOffload,
                                       Action::kKeep};
  CHECK(PredictedPeakBytes(p, actions) == 1000 + 300 + 200 + 500);
}

TEST_CASE("ScorePlan fills peak, time and feasibility against the margin") {
  PlanProblem p = Problem();
  Plan plan;
  plan.actions = {Action::kRecompute, Action::kRecompute, Action::kKeep};
  ScorePlan(p, &plan);
  CHECK(plan.feasible);  // 1750 <= 2000
  p.margin_bytes = 300;  // limit 1700
  ScorePlan(p, &plan);
  CHECK_FALSE(plan.feasible);
}

TEST_CASE("the safe plan recomputes what it may and claims no fit") {
  const ModelSpec model{"m", {"seq"}, {{"embed", false}, {"l0", true}, {"l1", true}}};
  const Plan plan = SafePlan(model, "safe", "planner unreachable");
  CHECK(plan.actions ==
        std::vector<Action>{Action::kKeep, Action::kRecompute, Action::kRecompute});
  CHECK(plan.actions == SafeActions(model));
  CHECK(plan.solver == "safe");
  CHECK(plan.reasons ==
        std::vector<std::string>{"not checkpointable", "planner unreachable",
                                 "planner unreachable"});
  CHECK_FALSE(plan.feasible);  // nothing predicted, nothing claimed
  CHECK(plan.predicted_peak_bytes == 0);
}

TEST_CASE("action names round-trip") {
  for (Action a : {Action::kKeep, Action::kRecompute, Action::kOffload}) {
    Action parsed;
    REQUIRE(ParseAction(ActionName(a), &parsed));
    CHECK(parsed == a);
  }
  Action parsed;
  CHECK_FALSE(ParseAction("keep", &parsed));
}

TEST_CASE("safe actions recompute every checkpointable block") {
  const ModelSpec model{
      "m", {"batch"}, {{"embed", false}, {"l0", true}, {"l1", true}}};
  CHECK(SafeActions(model) == std::vector<Action>{Action::kKeep,
                                                  Action::kRecompute,
                                                  Action::kRecompute});
  const ModelSpec frozen{"f", {"batch"}, {{"a", false}, {"b", false}}};
  CHECK(SafeActions(frozen) ==
        std::vector<Action>{Action::kKeep, Action::kKeep});
  CHECK(SafeActions(ModelSpec{"empty", {"batch"}, {}}).empty());
}

}  // namespace
}  // namespace remat
