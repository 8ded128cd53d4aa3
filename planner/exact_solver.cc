// The exact solver, under the memory model v2 (plan.h, SimulateStep), over
// KEEP and RECOMPUTE, and OFFLOAD when the problem has a host link: first
// the search without OFFLOAD, whose plan is then the one to beat for the
// search with it. This file decides which search runs, under which limits,
// and what the stats say; the searches and their bounds are in
// planner/internal/exact/:
//
//   cover.h           the covering problem (items and needs) of KEEP and
//                     RECOMPUTE, and what the parts share
//   lp_bound.h        the LP bound over items as a search decides them
//   count_bound.h     the bound that knows how many items a plan takes
//   split_bound.h     the bounds that know items come whole
//   reverse_search.h  the search without OFFLOAD (the staircase of needs,
//                     then one covering knapsack) and its heuristic pass
//   solve_cover.h     the cheapest cover: greedy plan, heuristic pass,
//                     search, deepening on long chains
//   offload_chain.h   the chain, the states and the limits of the search
//                     with OFFLOAD
//   offload_relax.h   its relaxations (covering items, hull items, whole
//                     blocks)
//   offload_front.h   its dominance front of states with copies in flight
//   offload_search.h  the search with OFFLOAD
//   offload_polish.h  passes that polish its plans (checkpoints sent,
//                     offload where cheaper)
//
// The smallest reachable peak recomputes every candidate: that minimises
// every prefix at once. When even it does not fit, it is the answer.
//
// Work limit: ExactOptions::max_nodes caps the states the merges examine,
// time_limit the time. Past either the search stops and returns the best
// plan found so far, which fits whenever any plan fits (the greedy plan
// does), flagged in ExactStats::stopped_at_limit and in the plan's reasons
// (solver.cc): never over budget, only possibly not the cheapest.
//
// Ties: among plans of equal recompute time, fewer recomputed blocks; the
// search is exact in that order (not in the peak among such plans).
//
// With OFFLOAD the cost is recompute plus exposed transfer time, ties go
// to fewer blocks not kept, and when no plan fits the answer is the least
// peak over every action, found by bisection over the limit (LeastPeak).
#include "planner/exact_solver.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>

#include "planner/internal/exact/cover.h"
#include "planner/internal/exact/offload_polish.h"
#include "planner/internal/exact/offload_search.h"
#include "planner/internal/exact/solve_cover.h"

namespace remat {
namespace internal {
namespace {

using exact::CostCount;
using exact::CostNs;
using exact::Cover;
using exact::Item;
using exact::kBeamWidth;
using exact::kInf;
using exact::kMaxOffloadNodes;
using exact::LexLess;
using exact::MeetsNeeds;
using exact::NotKept;
using exact::OffloadSearch;
using exact::OffloadWhereCheaper;
using exact::RecomputeCover;
using exact::SolveCover;
using exact::WithCheckpointsSent;

// KEEP and RECOMPUTE only (the problem's link is ignored).
std::vector<Action> SolveRecompute(const PlanProblem& problem,
                                   const ExactOptions& options,
                                   ExactStats& st) {
  st = ExactStats();

  const size_t n = problem.blocks.size();
  std::vector<Action> actions(n, Action::kKeep);

  // Candidates in chain order, and the needs: req[p] is the largest need
  // that the items below p must meet (constraints between item p-1's block
  // and item p's).
  const Cover cover = RecomputeCover(problem);
  const std::vector<Item>& items = cover.items;
  const std::vector<int64_t>& req = cover.req;
  const int m = static_cast<int>(items.size());
  st.candidates = m;

  int64_t largest_need = 0;
  for (int64_t need : req) largest_need = std::max(largest_need, need);
  if (largest_need <= 0) {
    st.keep_all_fits = true;
    return actions;
  }
  if (!MeetsNeeds(items, std::vector<char>(m, 1), req)) {
    // Even every item leaves a need unmet.
    st.infeasible = true;
    for (const Item& it : items) actions[it.block] = Action::kRecompute;
    return actions;
  }

  const std::vector<char> chosen = SolveCover(items, req, options, st);
  for (int p = 0; p < m; ++p) {
    if (chosen[p]) actions[items[p].block] = Action::kRecompute;
  }
  return actions;
}

// SolveExact under problem.limit_bytes(), timed from `start`: the cheapest
// plan that fits, else (st.infeasible) the recompute search's least peak,
// its checkpoints sent where that lowers it.
std::vector<Action> SolveUnderLimit(const PlanProblem& problem,
                                    const ExactOptions& options,
                                    std::chrono::steady_clock::time_point start,
                                    ExactStats& st) {
  std::vector<Action> actions = SolveRecompute(problem, options, st);
  if (!problem.has_link() || st.keep_all_fits) return actions;
  OffloadSearch search(problem, options, start, &st);
  // Where no block can send anything to host (every offload is never
  // better than its recompute, see OffloadSearch), the plans left are the
  // recompute search's, which is exact for them: its answer stands.
  if (!search.can_send()) return actions;
  // The recompute plan is the one to beat (when it fits); the search with
  // OFFLOAD starts its count of work afresh.
  const StepSimulation base = SimulateStep(problem, actions);
  const bool base_fits = !st.infeasible;
  const double base_cost = base_fits ? static_cast<double>(CostNs(base))
                                     : std::numeric_limits<double>::infinity();
  const int64_t base_count = NotKept(actions);
  const int64_t heuristic = st.cost_ns;
  // The relaxation's optimum (OffloadRelaxation::Items) bounds every plan's
  // cost. Where it is the recompute plan's own, that plan is optimal.
  // Else it stops once it knows a cheaper cover, and its LP bound is the
  // search's root bound.
  int64_t relaxed_bound = 0;
  const auto elapsed = std::chrono::duration_cast<std::chrono::nanoseconds>(
      std::chrono::steady_clock::now() - start);
  if (base_fits &&
      (options.time_limit.count() == 0 || elapsed < options.time_limit)) {
    // A proof is only worth a fraction of the search it saves: the
    // relaxation gets as many states as that search may examine.
    ExactOptions relax_options = options;
    relax_options.max_nodes = std::min(options.max_nodes, kMaxOffloadNodes);
    if (options.time_limit.count() > 0) relax_options.time_limit -= elapsed;
    ExactStats relaxed;
    const CostCount recompute{st.cost_ns, base_count};
    const std::vector<char> chosen = SolveCover(
        search.items(), search.RelaxedNeeds(), relax_options, relaxed, &recompute);
    const int64_t count = std::count(chosen.begin(), chosen.end(), 1);
    if (!relaxed.stopped_at_limit &&
        !LexLess(relaxed.cost_ns, count, st.cost_ns, base_count)) {
      st.stopped_at_limit = false;
      st.lower_bound_ns = st.cost_ns;
      st.relaxation_proved = true;
      return actions;
    }
    relaxed_bound = relaxed.lower_bound_ns;
  }
  st = ExactStats();
  st.heuristic_cost_ns = heuristic;
  const auto deadline = options.time_limit.count() > 0
                            ? start + options.time_limit
                            : std::chrono::steady_clock::time_point::max();
  search.Beat(base_cost, base_fits ? base_count : kInf);
  // Where the recompute plan does not fit, it may with its checkpoints
  // sent; then that is the plan to beat.
  const std::vector<Action> sending = WithCheckpointsSent(problem, actions);
  bool start_fits = base_fits;
  if (!base_fits) {
    const StepSimulation sim = SimulateStep(problem, sending);
    if (sim.peak_bytes <= problem.limit_bytes()) {
      actions = sending;
      start_fits = true;
      search.Beat(static_cast<double>(CostNs(sim)), NotKept(actions));
      st.heuristic_cost_ns = CostNs(sim);
    }
  }
  // A heuristic pass first, as without OFFLOAD; its work is kept apart.
  // Its plan (or the one to beat) then offloads where that is cheaper.
  search.Run(kBeamWidth);
  if (search.found()) {
    st.heuristic_cost_ns = static_cast<int64_t>(std::ceil(search.best_cost()));
  }
  // Whether some plan known fits (found() turns false once a cheaper
  // start is the plan to beat).
  start_fits = start_fits || search.found();
  if (start_fits) {
    std::vector<Action> start_plan = search.found() ? search.BestActions() : actions;
    int64_t cost = CostNs(SimulateStep(problem, start_plan));
    const int64_t before = cost;
    OffloadWhereCheaper(problem, deadline, &start_plan, &cost);
    if (cost < before) {
      actions = std::move(start_plan);
      search.Beat(static_cast<double>(cost), NotKept(actions));
      st.heuristic_cost_ns = cost;
    }
  }
  st.heuristic_nodes = st.nodes;
  st.nodes = st.states = st.max_front = st.steps = 0;
  const bool complete = search.RunDeepening();
  if (!complete) search.FinishStopped();
  st.infeasible = !start_fits && !search.found();
  if (st.infeasible) {
    // No plan fits: the smallest peak without offloading (recompute-only
    // search's answer), lower still with its checkpoints sent; LeastPeak
    // goes on from there.
    if (PredictedPeakBytes(problem, sending) < PredictedPeakBytes(problem, actions)) {
      return sending;
    }
    return actions;
  }
  if (search.found()) actions = search.BestActions();
  st.cost_ns = static_cast<int64_t>(std::ceil(search.best_cost()));
  if (!complete) OffloadWhereCheaper(problem, deadline, &actions, &st.cost_ns);
  st.root_bound_ns = std::min(relaxed_bound, st.cost_ns);
  st.lower_bound_ns = std::max(
      relaxed_bound,
      static_cast<int64_t>(std::floor(complete ? search.best_cost()
                                               : search.lower_bound())));
  return actions;
}

// No plan fits under the limit, with a link: `actions`, the least peak
// without offloading, may not be the least peak (an OFFLOAD, or a
// checkpoint sent to host after a block that saves nothing by itself,
// reaches lower). The search decides exactly whether any plan fits a
// limit, so the least peak is the least limit at which one does: found by
// bisection between the limit (nothing fits) and the best peak known,
// each fitting plan's own peak lowering the top. Bytes are integers, so
// it ends after about log2 of that gap solves (30 for gigabytes); what
// is left of the time limit bounds it, and a bisection stopped there
// answers the least peak it found, which is reachable.
std::vector<Action> LeastPeak(const PlanProblem& problem,
                              const ExactOptions& options,
                              std::chrono::steady_clock::time_point start,
                              std::vector<Action> actions, ExactStats& st) {
  const auto deadline = options.time_limit.count() > 0
                            ? start + options.time_limit
                            : std::chrono::steady_clock::time_point::max();
  int64_t low = problem.limit_bytes();  // no plan fits
  int64_t high = PredictedPeakBytes(problem, actions);
  PlanProblem probe = problem;
  while (high - low > 1) {
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) {
      st.stopped_at_limit = true;
      break;
    }
    const int64_t mid = low + (high - low) / 2;
    probe.budget_bytes = mid + problem.margin_bytes;
    ExactOptions probe_options = options;
    if (options.time_limit.count() > 0) {
      probe_options.time_limit =
          std::chrono::duration_cast<std::chrono::nanoseconds>(deadline - now);
    }
    ExactStats probe_stats;
    std::vector<Action> found =
        SolveUnderLimit(probe, probe_options, now, probe_stats);
    ++st.least_peak_solves;
    if (probe_stats.infeasible) {
      // A search stopped at its limit may have missed a plan: the least
      // peak then is the one known, reachable but maybe not the least.
      if (probe_stats.stopped_at_limit) {
        st.stopped_at_limit = true;
        break;
      }
      low = mid;
    } else {
      high = PredictedPeakBytes(problem, found);
      actions = std::move(found);
    }
  }
  return actions;
}

}  // namespace

std::vector<Action> SolveExact(const PlanProblem& problem,
                               const ExactOptions& options,
                               ExactStats* stats) {
  const auto start = std::chrono::steady_clock::now();
  ExactStats local_stats;
  ExactStats& st = stats != nullptr ? *stats : local_stats;
  std::vector<Action> actions = SolveUnderLimit(problem, options, start, st);
  if (!st.infeasible || !problem.has_link()) return actions;
  return LeastPeak(problem, options, start, std::move(actions), st);
}

std::vector<Action> SolveExact(const PlanProblem& problem, ExactStats* stats) {
  return SolveExact(problem, ExactOptions(), stats);
}

}  // namespace internal
}  // namespace remat
