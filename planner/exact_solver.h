// The exact solver's search, kept apart from the solver registry so tests
// and benchmarks can read its statistics. Not part of the public API: use
// NewSolver("exact").
//
// Thread safety: pure function; concurrent calls are safe.
#ifndef REMAT_PLANNER_EXACT_SOLVER_H_
#define REMAT_PLANNER_EXACT_SOLVER_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "planner/plan.h"
#include "planner/solver.h"

namespace remat {
namespace internal {

// What the search did, for benchmarks and tuning.
struct ExactStats {
  bool keep_all_fits = false;  // no search needed
  bool infeasible = false;     // even the min-peak plan is over the limit
  int candidates = 0;          // blocks that can lower the peak
  int steps = 0;               // sweep steps run before the bounds stopped it
  int64_t states = 0;          // front states kept, summed over steps
  int64_t max_front = 0;       // largest front
  // The search's lower bound before it starts: the LP's, or on long
  // chains the bound over plan counts' where higher; with a link, the
  // relaxation's (exact_solver.cc).
  int64_t root_bound_ns = 0;
  int64_t cost_ns = 0;         // the optimum's recompute (+ exposed) time
  // The best plan before the search proper: the greedy plan, improved by
  // the heuristic pass (with OFFLOAD: the recompute plan, improved by the
  // heuristic pass of the search with OFFLOAD, then by offloading its
  // recomputed blocks where that is cheaper; a search stopped at its
  // limit offloads so in its best plan too).
  int64_t heuristic_cost_ns = 0;
  int64_t nodes = 0;           // search states examined (the work measure)
  // States the heuristic pass examined before the search (at most 2 * 16
  // per candidate without OFFLOAD, 4 * 16 per block with it).
  int64_t heuristic_nodes = 0;
  // States dropped by the bound that counts whole blocks (exact_solver.cc,
  // SplitBound) that the LP bound kept.
  int64_t whole_pruned = 0;
  // States dropped by the bound that counts a plan's blocks (exact_solver.cc,
  // CountBound) that the LP bound kept.
  int64_t count_pruned = 0;
  int tail = 0;                // candidates decided with their needs (the
                               // rest are one covering knapsack)
  // With a link: the relaxation of the search with OFFLOAD proved the plan
  // without OFFLOAD optimal, so that search did not run (the other fields
  // are the search without OFFLOAD's).
  bool relaxation_proved = false;
  // The search hit ExactOptions::max_nodes or time_limit: the plan is the
  // best one found (it fits whenever any plan fits, or with a link
  // whenever a plan without OFFLOAD fits) but not proven optimal.
  bool stopped_at_limit = false;
  // No plan that fits costs less (cost_ns when proven optimal; else the
  // least bound over the states the search had left, or the highest
  // target a deepening search proved no plan is below). Set when the
  // search ran (not for keep_all_fits or infeasible).
  int64_t lower_bound_ns = 0;
  // No plan fits, with a link: the solves the bisection for the least
  // peak ran (exact_solver.cc, LeastPeak).
  int least_peak_solves = 0;
};

struct ExactOptions {
  // Work limit: the search stops once it has examined this many states and
  // returns the best plan found so far (see ExactStats::stopped_at_limit).
  // A state costs roughly 15 to 40 nanoseconds, so the default (2^30, about
  // a billion) only stops a search after tens of seconds: it is a safety
  // valve, not a latency target. A daemon that must answer within a
  // deadline sets its own (about 2^22 per 100 ms). At most 2^30 are used
  // whatever this says (the search's node ids are 32-bit), and at most
  // 2^20 by the search with OFFLOAD (its states cost more), on chains of
  // over 128 blocks 2^25 over their length (exact_solver.cc says why). The
  // heuristic pass before the search (ExactStats::heuristic_nodes) is
  // outside this limit: it examines at most 32 states per candidate (64
  // per block with OFFLOAD). So is the relaxation the search with OFFLOAD
  // solves first (a search without OFFLOAD over an item per block and
  // action), which has a limit of its own, 2^20; and where the search with
  // OFFLOAD stops, the passes that finish its best states (up to a
  // sixteenth of its limit each).
  int64_t max_nodes = int64_t{1} << 30;
  // Time limit from the call's start (zero: none), checked where max_nodes
  // is, so it is overshot by at most two fronts' worth of states. The
  // daemon sets it from its solve deadline: a plan in time, even one not
  // proven optimal, beats an optimal one the trainer no longer waits for.
  // With a link the search proper has three quarters of it; a search
  // stopped then finishes its most promising states in the rest.
  std::chrono::nanoseconds time_limit{0};
  // On chains of 128 candidates or more, the work of a first, plain
  // search (at least this, or 16 states per candidate). Most chains end
  // there; past it the search bounds the number of blocks a plan takes
  // and deepens (exact_solver.cc, SolveCover). 0: at once.
  int64_t plain_search_nodes = int64_t{1} << 14;
};

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
