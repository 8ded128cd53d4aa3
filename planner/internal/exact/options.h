// What the exact solver may do (ExactOptions) and what it did (ExactStats):
// the types planner/exact_solver.h declares SolveExact with, here so that
// the search's parts (the files of this folder) can read and fill them.
// Include planner/exact_solver.h, not this.
//
// Thread safety: plain values.
#ifndef REMAT_PLANNER_INTERNAL_EXACT_OPTIONS_H_
#define REMAT_PLANNER_INTERNAL_EXACT_OPTIONS_H_

#include <chrono>
#include <cstdint>

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
  // relaxation's (offload_relax.h).
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
  // States dropped by the bound that counts whole blocks (SplitBound,
  // split_bound.h) that the LP bound kept.
  int64_t whole_pruned = 0;
  // States dropped by the bound that counts a plan's blocks (CountBound,
  // count_bound.h) that the LP bound kept.
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
  // over 128 blocks 2^25 over their length (offload_chain.h says why). The
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
  // and deepens (SolveCover, solve_cover.h). 0: at once.
  int64_t plain_search_nodes = int64_t{1} << 14;
};

}  // namespace internal
}  // namespace remat

#endif  // REMAT_PLANNER_INTERNAL_EXACT_OPTIONS_H_
