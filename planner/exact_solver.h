// The exact solver's search, kept apart from the solver registry so tests
// and benchmarks can read its statistics. Not part of the public API: use
// NewSolver("exact"). Its parts (the searches and their bounds) are in
// planner/internal/exact/; exact_solver.cc decides which of them run.
//
// Thread safety: pure function; concurrent calls are safe.
#ifndef REMAT_PLANNER_EXACT_SOLVER_H_
#define REMAT_PLANNER_EXACT_SOLVER_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "planner/internal/exact/options.h"
#include "planner/plan.h"
#include "planner/solver.h"

namespace remat {
namespace internal {

// ExactStats (what the search did, for benchmarks and tuning) and
// ExactOptions (its limits) are defined in planner/internal/exact/options.h,
// which this header exports: include this one.

// Actions of the optimal plan for `problem` (exact_solver.cc says how and
// the order that breaks ties): the least recompute time, or with a host
// link (problem.has_link()) the least recompute plus exposed transfer
// time over KEEP, RECOMPUTE and OFFLOAD (and RECOMPUTE_OFFLOAD with
// problem.offload_checkpoints). When no plan fits, the plan with the
// least peak over every action the problem allows (stats->infeasible; a
// search stopped at its work or time limit may answer a reachable peak
// above the least, flagged in stats->stopped_at_limit). Non-checkpointable
// blocks are always KEEP. With a link, `stats` describes the search with OFFLOAD
// (cost_ns and lower_bound_ns in recompute plus exposed time).
//
// Preconditions: every act_bytes, input_bytes and forward_ns is >= 0, and
// base_bytes plus the sum of all act_bytes fits in int64 with room to spare
// (below 2^62).
std::vector<Action> SolveExact(const PlanProblem& problem,
                               const ExactOptions& options,
                               ExactStats* stats = nullptr);
std::vector<Action> SolveExact(const PlanProblem& problem,
                               ExactStats* stats = nullptr);

// The "exact" solver of NewSolver, with explicit options (a daemon sets a
// tighter work limit). `name` is what Solver::name() and Plan::solver say.
// When the search stops at the work limit, every checkpointable block's
// reason ends with kStoppedAtLimitNote: the plan fits whenever any plan
// fits, but is not proven to be the cheapest.
inline constexpr char kStoppedAtLimitNote[] =
    "; search stopped at the work limit; best plan found, not proven optimal";
std::unique_ptr<Solver> NewExactSolver(const ExactOptions& options,
                                       const std::string& name = "exact");

}  // namespace internal
}  // namespace remat

#endif  // REMAT_PLANNER_EXACT_SOLVER_H_
