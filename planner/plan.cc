#include "planner/plan.h"

#include <algorithm>

namespace remat {

const char* ActionName(Action action) {
  switch (action) {
    case Action::kKeep:
      return "KEEP";
    case Action::kRecompute:
      return "RECOMPUTE";
    case Action::kOffload:
      return "OFFLOAD";
  }
  return "UNKNOWN";
}

bool ParseAction(const std::string& name, Action* action) {
  for (Action a : {Action::kKeep, Action::kRecompute, Action::kOffload}) {
    if (name == ActionName(a)) {
      *action = a;
      return true;
    }
  }
  return false;
}

int64_t PredictedPeakBytes(const PlanProblem& problem,
                           const std::vector<Action>& actions) {
  int64_t retained = 0;
  int64_t rematerialised = 0;  // the max term
  for (size_t i = 0; i < problem.blocks.size(); ++i) {
    const BlockCost& b = problem.blocks[i];
    switch (actions[i]) {
      case Action::kKeep:
        retained += b.act_bytes;
        break;
      case Action::kRecompute:
        retained += b.input_bytes;
        rematerialised = std::max(rematerialised, b.act_bytes - b.input_bytes);
        break;
      case Action::kOffload:
        rematerialised = std::max(rematerialised, b.act_bytes);
        break;
    }
  }
  return problem.base_bytes + retained + rematerialised;
}

int64_t RecomputeNs(const PlanProblem& problem,
                    const std::vector<Action>& actions) {
  int64_t ns = 0;
  for (size_t i = 0; i < problem.blocks.size(); ++i) {
    if (actions[i] == Action::kRecompute) ns += problem.blocks[i].forward_ns;
  }
  return ns;
}

void ScorePlan(const PlanProblem& problem, Plan* plan) {
  plan->predicted_peak_bytes = PredictedPeakBytes(problem, plan->actions);
  plan->recompute_ns = RecomputeNs(problem, plan->actions);
  plan->feasible = plan->predicted_peak_bytes <= problem.limit_bytes();
}

std::vector<Action> SafeActions(const ModelSpec& model) {
  std::vector<Action> actions;
  actions.reserve(model.blocks.size());
  for (const BlockSpec& b : model.blocks) {
    actions.push_back(b.checkpointable ? Action::kRecompute : Action::kKeep);
  }
  return actions;
}

Plan SafePlan(const ModelSpec& model, const std::string& solver,
              const std::string& reason) {
  Plan plan;
  plan.solver = solver;
  plan.actions = SafeActions(model);
  for (const BlockSpec& b : model.blocks) {
    plan.reasons.push_back(b.checkpointable ? reason : "not checkpointable");
  }
  plan.feasible = false;
  plan.predicted_peak_bytes = 0;
  return plan;
}

const char* PlanSourceName(PlanSource source) {
  switch (source) {
    case PlanSource::kLocalCache:
      return "local_cache";
    case PlanSource::kPlanner:
      return "planner";
    case PlanSource::kCollect:
      return "collect";
    case PlanSource::kLastGood:
      return "last_good";
    case PlanSource::kSafe:
      return "safe";
  }
  return "unknown";
}

}  // namespace remat
