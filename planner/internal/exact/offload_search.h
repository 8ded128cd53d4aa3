// The search with OFFLOAD (the problem has a host link): a dynamic
// programme over the chain in forward order (offload_chain.h restates the
// memory model for it) whose states are partial plans, pruned by bounds
// and by the dominance front (offload_front.h), its cost recompute plus
// exposed transfer time.
//
// A state: sigma, cost, count, block k-1's action (Last), and the
// copies still in flight when the next block's forward starts (their bytes
// and landing times: what the future moments depend on; which blocks they
// are does not matter, so identical layers merge). States with the same
// copies in flight and the same last action compare on (sigma, cost,
// count) alone: a Pareto front per
// such group, as in the recompute search, and across groups as
// DominanceFront says. Pruned as there: a state that cannot reach a later
// need even with every block left at its larger saving; a state whose cost
// plus the LP bound over the items left (the relaxation's, of the blocks
// above, OffloadRelaxation::Items; or
// PrepareTop's, of those below the top) reaches the best plan, or on
// chains of up to kMaxWholeBlocks its cost plus what the blocks up to the
// top cost whole (PrepareWhole) passes it; a state
// that meets every need ahead whatever comes (it finishes with every block
// left kept). An offload's least wait is charged
// when it is chosen and the wait at the end of forward as each copy is
// queued, so a state's cost is already most of what it will cost. The
// last block is never recomputed or offloaded (neither lowers any moment),
// nor is a block whose saving is not positive, nor offloaded a block whose
// recompute is never worse (MakeOffloadChain). Times are doubles, as in
// SimulateStep; a plan's cost here can differ from SimulateStep's by a
// rounding, never more.
//
// Before the search: where no block can send anything, the recompute
// search's plan is the answer. Else the relaxation's covering problem, solved
// exactly (SolveCover), bounds every plan; where its optimum is the
// recompute plan's cost, that plan is optimal and there is no search.
// Else a heuristic pass of the search (the least-bound states per step,
// as without OFFLOAD) looks for a cheaper plan to start from, and the
// search proper deepens from the root bound (RunDeepening) where the
// whole-block bounds make that bound close.
//
// Contract: Beat(cost, count) sets the plan to beat; RunDeepening (or Run)
// with no limit reached finds the cheapest plan over every action the
// chain allows (SimulateStep's cost, a rounding apart) if one is cheaper
// than that, in (cost, count) order (found(), best_cost(), BestActions());
// a search stopped at its limit, FinishStopped or a beam pass leave the
// best plan they found, which fits. lower_bound() is at most the cost of
// any plan that fits and beats the plan to beat.
//
// Cost: up to OffloadNodeLimit states (each a node of 32 bytes kept until
// the search is destroyed), each with O(copies in flight) bookkeeping.
//
// Thread safety: one thread per OffloadSearch.
#ifndef REMAT_PLANNER_INTERNAL_EXACT_OFFLOAD_SEARCH_H_
#define REMAT_PLANNER_INTERNAL_EXACT_OFFLOAD_SEARCH_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include "planner/internal/exact/cover.h"
#include "planner/internal/exact/lp_bound.h"
#include "planner/internal/exact/offload_chain.h"
#include "planner/internal/exact/offload_front.h"
#include "planner/internal/exact/offload_relax.h"
#include "planner/internal/exact/options.h"
#include "planner/plan.h"

namespace remat {
namespace internal {
namespace exact {

class OffloadSearch {
 public:
  // `start`: when the call began (ExactOptions::time_limit counts from it).
  OffloadSearch(const PlanProblem& problem, const ExactOptions& options,
                std::chrono::steady_clock::time_point start, ExactStats* st);

  // The plan to beat: its cost and count (kInf: none known); found() is
  // false until a search finds a cheaper one.
  void Beat(double cost, int64_t count) {
    best_cost_ = cost;
    best_count_ = count;
    best_node_ = -2;
  }

  // Searches from the empty plan for one cheaper than the plan to beat;
  // false when a limit stopped it. With `beam` > 0 it is a heuristic pass
  // instead, for a good plan early, as the recompute search's (each front
  // keeps the `beam` states of least bound; the work limit does not apply
  // and the time limit just ends it).
  bool Run(size_t beam = 0) { return Sweep({{0, 0, 0, -1, -1, kLastKeep}}, 0, beam); }

  // Where a limit stopped the search: the states of least bound it had
  // left, finished as the heuristic pass finishes its own, for a plan
  // cheaper than the one to beat. On the chains where the link binds the
  // plan to beat is far from the best: on a 96-block chain of
  // bench:solver --stats, 5.8% above the optimum (found with 16 times the
  // work limit), and these plans 1.0%. Passes four times wider each, up
  // to a sixteenth of the work limit (each state has up to four children
  // a step), until ExactOptions::time_limit ends one.
  void FinishStopped();

  // Run from `front` (states before block `from`).
  bool Sweep(std::vector<OffloadState> front, int from, size_t beam);

  // The search for the optimum (Run's), deepened as the recompute search's
  // (SolveCover) on chains the whole-block bounds reach from the root: it
  // searches for a plan below a target a little above the root bound,
  // raised until one turns up (then it is the optimum: the search keeps
  // every state that could lead to a plan below the target) or the target
  // nears the plan to beat. A level search finds plans only at its end, so
  // until then it prunes against the plan it started with: on the bench's
  // two slowest 96-block chains with a link that plan was 0.05 and 0.3 ms
  // above the optimum, and a search against the optimum itself examined 1
  // and 17 thousand states, not 25 and 98. A target with no plan below it
  // is proven a lower bound. Longer chains have only the LPs' root bound,
  // percents below the optimum where they are hard, and search plainly.
  bool RunDeepening();

  // A bound on every plan: the LPs' at the root, and the whole-block
  // bounds' where they reach it.
  double RootBound();

  // Whether some block may send something to host (else every plan left
  // is one of KEEP and RECOMPUTE alone).
  bool can_send() const;

  // The relaxation's covering problem (OffloadRelaxation, for SolveCover):
  // its items, and its needs, req[p] for the items below p (the needs of
  // the blocks from item p-1's up to item p's).
  const std::vector<Item>& items() const { return items_; }
  std::vector<int64_t> RelaxedNeeds() const { return relax_.RelaxedNeeds(items_); }

  // Whether the search found a plan better than the one to beat.
  bool found() const { return best_node_ != -2; }
  double best_cost() const { return best_cost_; }
  double lower_bound() const { return lower_bound_; }

  // The best plan found by the search (found() true).
  std::vector<Action> BestActions() const;

 private:
  // Cuts `front` (the states before block k) to the `beam` states of
  // least bound.
  void KeepLeastBound(int k, const LpBound& lp, size_t beam,
                      std::vector<OffloadState>* front);

  // A bound on every plan that extends a state of `front` (the states
  // before block k), for a search stopped there: the least over the front
  // of its cost and the LP of what is left, over HullItems with the copy
  // engine at the price that bounds highest, or over the relaxation's
  // items where that is higher. No more than the plan to beat. (The search
  // prunes with their LP alone: with HullItems' it examined about as many states,
  // each at more cost.)
  double StoppedBound(const std::vector<OffloadState>& front, int k) const;

  // The top: the block j whose need bounds the root highest when only the
  // blocks below j may meet it (their LP over HullItems at price 0), and
  // those items. Step's other bound relaxes every need ahead to the
  // largest, met by every block left, so a cheap block above that need's
  // moment (the last MLP below a head) counts towards it, and the
  // relaxation's items let a block count twice. This one does neither: on the bench's
  // slowest 96-block chains it is higher by up to half a block's cost.
  void PrepareTop();

  // The whole-block bounds, on chains of up to kMaxWholeBlocks: for the
  // top (PrepareTop's) and for the largest need, which is higher whole
  // where the LP at the top's is higher fractionally (on the bench's
  // 96-block chains with a link, either bounds some chain's root closer).
  void PrepareWholes();

  // The price of copy-engine time (ns of cost per ns a copy out takes,
  // in [0, 1], see HullItems) at which the LP over HullItems bounds the
  // root highest: 0 unless the link is busy enough to bind.
  double RootPrice() const;

  // The relaxation's whole-block points for `top`, at the price found by
  // RootPrice and under the plan to beat (OffloadRelaxation::PrepareWhole).
  void PrepareWhole(int top, Whole* w) {
    relax_.PrepareWhole(top, price_, best_cost_, w);
  }

  // What the blocks from k+1 to the top add at least to the cost of `c`
  // (which decided block k, and k+1 >= w->from): their least points
  // that save what the top still needs, with what block k's copy back
  // waits beyond its least wait (if it sent one) given block k+1's kind.
  double WholeBound(const Whole& w, const OffloadState& c, int k) const;

  std::vector<Item> HullItems(double price) const { return relax_.HullItems(price); }

  int64_t InFlight(const OffloadState& x, double time,
                   std::vector<int32_t>* nodes) const {
    return exact::InFlight(blocks_, arena_, x, time, nodes);
  }

  // What block k, decided last by `x`, holds more during the backward of
  // block k+1: its copy back, prefetched whole.
  int64_t Prefetched(const OffloadState& x, int k) const;

  // When the copies out of `x` are all landed (0: none queued).
  double Drained(const OffloadState& x) const;

  // The wait at the end of forward for the copies out (charged as each
  // copy is queued: later copies only add to it).
  double DrainWait(double drained) const;

  // What the wait for block k's copy back (of kind `last`: a copy that
  // Sends) costs beyond its least wait (charged already), given block
  // k+1's action.
  double ExtraWait(int k, uint8_t last, bool above_recomputed) const;

  double BackWait(int k, double back_ns, bool above_recomputed) const {
    return exact::BackWait(blocks_, k, back_ns, above_recomputed);
  }

  // The cost of `x` finished with every block above k kept.
  double Finished(const OffloadState& x, int k) const;

  // A plan found: the best if it beats the best known.
  void Offer(double cost, int64_t count, int32_t node);

  // Decides block k for every state of `front` (the states before it);
  // leaves the states before block k + 1 there.
  void Step(int k, std::vector<OffloadState>& front, const LpBound& lp,
            const LpBound& top_lp);

  const int n_;
  const int64_t limit_;
  const int64_t max_nodes_;
  const std::chrono::nanoseconds time_limit_;
  // The search proper stops by here, leaving the rest of time_limit_ to
  // FinishStopped: on the bench's 48-block chains with a link under the
  // daemon's 40 ms, the two that stop then cost 0.1% and 0.3% above the
  // optimum, where with all 40 ms to the search they cost 5.3% and 2.8%.
  const std::chrono::nanoseconds search_time_;
  const std::chrono::steady_clock::time_point start_;
  ExactStats* st_;
  const OffloadChain chain_;
  const std::vector<OffloadBlock>& blocks_;
  const std::vector<int64_t>& need_;
  const std::vector<int64_t>& ahead_;
  const std::vector<int64_t>& reach_;
  const OffloadRelaxation relax_;
  std::vector<Item> items_, by_rank_;  // relax_.Items(), and by rank
  std::vector<int> rank_of_;
  bool whole_prepared_ = false;
  double price_ = 0;  // RootPrice(), for PrepareWhole's points
  std::vector<Whole> wholes_;  // PrepareWholes
  // PrepareTop's: the top (-1: none) and the items below it.
  bool top_prepared_ = false;
  int top_ = -1;
  std::vector<Item> top_items_, top_by_rank_;
  std::vector<int> top_rank_of_;
  std::vector<OffloadNode> arena_;
  // Where a limit stopped the search (FinishStopped): its front, before
  // block stopped_from_ (-1: none).
  std::vector<OffloadState> stopped_front_;
  int stopped_from_ = -1;
  std::vector<OffloadState> children_;
  std::vector<std::pair<double, OffloadState>> bounded_;  // KeepLeastBound's
  DominanceFront dominance_;
  double best_cost_ = std::numeric_limits<double>::infinity();
  int64_t best_count_ = kInf;
  int32_t best_node_ = -2;  // -2: the plan to beat, not found here
  double lower_bound_ = 0;
};

}  // namespace exact
}  // namespace internal
}  // namespace remat

#endif  // REMAT_PLANNER_INTERNAL_EXACT_OFFLOAD_SEARCH_H_
