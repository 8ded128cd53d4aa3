// Solvers: given a PlanProblem, choose an Action per block. All solvers sit
// behind one interface and are chosen by name, so benchmarks compare them in
// one run.
//
// Thread safety: Solve is const and safe to call concurrently.
#ifndef REMAT_PLANNER_SOLVER_H_
#define REMAT_PLANNER_SOLVER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "planner/plan.h"

namespace remat {

class Solver {
 public:
  virtual ~Solver() = default;
  virtual std::string name() const = 0;
  // Always returns a plan with one action per block, scored by ScorePlan.
  // Non-checkpointable blocks are always KEEP. When no plan fits,
  // plan.feasible is false; the exact solver then returns the plan with the
  // smallest reachable peak.
  virtual Plan Solve(const PlanProblem& problem) const = 0;
};

// "none", "all", "sqrt", "static_max", "mimose_greedy", "delta", "exact".
// static_max solves exactly like "exact": what makes it static is that the
// caller (PlannerCore) asks it once, for the largest input observed, and
// reuses that plan for every batch.
// INVALID_ARGUMENT naming the known solvers for anything else.
absl::StatusOr<std::unique_ptr<Solver>> NewSolver(const std::string& name);

std::vector<std::string> SolverNames();

}  // namespace remat

#endif  // REMAT_PLANNER_SOLVER_H_
