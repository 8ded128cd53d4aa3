#include "planner/internal/exact/offload_polish.h"

#include <algorithm>

namespace remat {
namespace internal {
namespace exact {

std::vector<Action> WithCheckpointsSent(const PlanProblem& problem,
                                        std::vector<Action> actions) {
  if (!problem.offload_checkpoints) return actions;
  for (size_t i = 1; i < actions.size(); ++i) {
    if (actions[i] == Action::kRecompute && Recomputes(actions[i - 1])) {
      actions[i] = Action::kRecomputeOffload;
    }
  }
  return actions;
}

int64_t NotKept(const std::vector<Action>& actions) {
  return std::count_if(actions.begin(), actions.end(),
                       [](Action a) { return a != Action::kKeep; });
}

int64_t CostNs(const StepSimulation& sim) {
  return sim.recompute_ns + sim.exposed_transfer_ns;
}

void OffloadWhereCheaper(const PlanProblem& problem,
                         std::chrono::steady_clock::time_point deadline,
                         std::vector<Action>* actions, int64_t* cost_ns) {
  const size_t n = actions->size();
  for (size_t k = 0; k + 1 < n && std::chrono::steady_clock::now() < deadline; ++k) {
    const BlockCost& b = problem.blocks[k];
    if ((*actions)[k] != Action::kRecompute || !b.checkpointable) continue;
    const BlockMemory m = MemoryOf(problem, k);
    if (m.transfer_bytes <= 0) continue;
    // The copy back waits at least what the backward above (and its
    // recompute) leaves unhidden: no cheaper than this recompute, skip.
    const BlockCost& up = problem.blocks[k + 1];
    const double hides =
        static_cast<double>(MemoryOf(problem, k + 1).backward_ns) +
        (Recomputes((*actions)[k + 1]) ? static_cast<double>(up.forward_ns) : 0.0);
    const double back_ns =
        static_cast<double>(m.transfer_bytes) / problem.h2d_bytes_per_s * 1e9;
    if (back_ns - hides >= static_cast<double>(b.forward_ns)) continue;
    (*actions)[k] = Action::kOffload;
    const StepSimulation sim = SimulateStep(problem, *actions);
    if (sim.peak_bytes <= problem.limit_bytes() && CostNs(sim) < *cost_ns) {
      *cost_ns = CostNs(sim);
    } else {
      (*actions)[k] = Action::kRecompute;
    }
  }
}

}  // namespace exact
}  // namespace internal
}  // namespace remat
