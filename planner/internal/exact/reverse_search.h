// The search without OFFLOAD: a dynamic programme over the covering
// problem (cover.h) that decides the items from the top of the chain down,
// following the staircase of needs near the end of the chain exactly and
// treating the rest as one covering knapsack (ReverseSearch), with a
// heuristic pass of the same search that keeps only a beam of states.
//
// Contract: Run(root_bound, best) with no beam and no limit reached
// leaves in *best the cheapest selection of items, in (cost, count)
// order, that meets every need of req, if one is cheaper than *best was
// (else *best unchanged); Mark rebuilds its items. A search stopped at
// its work or time limit, or a beam pass, leaves the best it found (a
// selection that meets every need); the st->lower_bound_ns a stopped
// search sets is at most the optimum's cost. Bound(t, g, cost), and
// below the tail BodyBound, are lower bounds on the cost of any
// completion of a state at processing index t; PrepareCounts' root bound
// is at most the cost of any selection better than *best.
//
// Invariants: each front is a Pareto front, g up and (cost, count) down,
// one state per g; every state kept can still meet every need with the
// items left.
//
// Cost: O(items) per state and O(front log front) per step; the work
// (states examined, ExactStats::nodes) is what max_nodes limits, and a
// node of 8 bytes per state taken is kept until the search is destroyed.
//
// Thread safety: one thread per ReverseSearch.
#ifndef REMAT_PLANNER_INTERNAL_EXACT_REVERSE_SEARCH_H_
#define REMAT_PLANNER_INTERNAL_EXACT_REVERSE_SEARCH_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "planner/internal/exact/count_bound.h"
#include "planner/internal/exact/cover.h"
#include "planner/internal/exact/options.h"
#include "planner/internal/exact/split_bound.h"

namespace remat {
namespace internal {
namespace exact {

// The most states the tail may leave for the bound over plan counts to
// start from them (ReverseSearch::PrepareCounts).
inline constexpr size_t kMaxEntries = 4;

// One front state of the search: g is what the items not yet decided must
// still save (see ReverseSearch).
struct State {
  int64_t g;
  int64_t cost;   // total forward_ns of the items taken
  int32_t count;  // number of items taken
  int32_t node;   // last taken item in the node arena, -1 for none
};

// Parent-linked list of taken items.
struct Node {
  int32_t item;
  int32_t parent;
};

// The best plan known: its (cost, count) and how to rebuild it: the items
// of a node chain, plus (from >= 0) the items the search's default
// completion takes from processing index `from` on.
struct Best {
  int64_t cost = kInf;
  int64_t count = kInf;
  int32_t node = -2;  // -2: the greedy plan (chosen); else a node chain
  int32_t from = -1;
};

// The dynamic programme, deciding the items from the top of the chain
// down. Before item p is decided, a state is one number g: what the items
// below p must still save for every need at or above p to be met. From the
// top, g = req[m], and deciding item p (x = 1 when recomputed)
//
//   g' = max(req[p], g - s_p x)   clamped at 0 (any g <= 0 is met),
//
// and a plan meets every need when g is 0 at the bottom. Lower g and lower
// (cost, count) are better, so each front is a Pareto front: g up,
// (cost, count) down; states of equal g keep only the cheapest, which
// merges structurally identical layers.
//
// Far from the end of the chain, the max is never active: there
// req[p] <= gmin[p+1] - s_p, with gmin the g of the plan that recomputes
// every item above (the least g any state can have). Below the first
// position where it may be active (the tail: the staircase of needs near
// the end of the chain), every plan meets its needs exactly when the items
// there save g: a single covering knapsack, whose items can be decided in
// any order. They go in the order of |c_i - lambda s_i| (lambda: the LP's
// price per byte), closest first, as a knapsack core is expanded: the
// items where the LP hesitates branch, the rest are pruned to the LP's
// choice by the bound almost at once.
//
// Bound: relax every need below to "the undecided items save at least g".
// A completion that saves S then costs lambda S plus the r_i = c_i -
// lambda s_i of its items: at least lambda S + the negative r_i (the LP's
// choice, which saves def_s), plus |r_i| for each item where it differs
// from that choice, which between them move at least |S - def_s| bytes at
// no less than rho (the least |r_i| / s_i left) per byte (Bound, in the
// tail). Below the tail the items left are in price order, and the bound
// is their LP exactly (BodyLp), or SplitBound's where that is higher. A
// state is dropped when its bound reaches the best plan, or when even
// every undecided item cannot save g. Below the tail, a state that the
// LP's choice completes (g <= def_s) gives a plan, which finds good plans
// early as a core algorithm's break solution does, and is dropped once
// any other completion, differing somewhere and so costing at least the
// least |r_i| left more than the Lagrangian bound, cannot beat the best.
class ReverseSearch {
 public:
  // Over `items` and their needs `req` (cover.h; both must outlive the
  // search), with the LP's price per byte `lambda` (SolveCover's: the
  // bounds hold for any lambda >= 0, they are tightest there), at most
  // max_nodes states (Run) and time_limit from now (zero: none). Fills the
  // search's fields of *st as it runs.
  ReverseSearch(const std::vector<Item>& items, const std::vector<int64_t>& req,
                double lambda, int64_t max_nodes,
                std::chrono::nanoseconds time_limit, ExactStats* st);

  // Items in the tail (decided with their needs, from the top down).
  int tail() const { return m_ - body_; }

  // A lower bound on the cost of any plan that extends a state needing g
  // with the items from processing index t on undecided; at least `cost`.
  int64_t Bound(int t, int64_t g, int64_t cost) const;

  // The least integer at or above v less the rounding allowance; at least
  // `floor`.
  int64_t Ceil(double v, int64_t floor) const;

  // Below the tail the undecided items are in the order of |r_i| / s_i,
  // so the LP of the rest is exact per state: a completion differs from
  // the LP's choice (which saves def_s) by items it adds, r_i > 0, and
  // items it drops, r_i < 0; adding and dropping at once never pays in the
  // LP. So a state short of def_s by e > 0 adds the items left cheapest per
  // byte (c_i / s_i) until they save e, and one over it by e < 0 drops the
  // dearest per byte while they save no more than -e: prefix sums over the
  // processing order and a binary search.
  int64_t BodyLp(int t, int64_t g, int64_t cost) const;

  // The larger of BodyLp and WholeBound.
  int64_t BodyBound(int t, int64_t g, int64_t cost) const;

  // SplitBound's bound (kInf: the items left cannot save g); `cost` where
  // it does not apply. It may stop short where the bound cannot reach
  // `prune_at`. Its sums are exact but for O's LP, whose rounding is far
  // below the allowance of 1e-9 of the total.
  int64_t WholeBound(int t, int64_t g, int64_t cost,
                     int64_t prune_at = kInf) const;

  // Decides every item. Improves `best`; false when the work or time
  // limit stopped it (then st->lower_bound_ns is set). With `beam` > 0 it
  // is a heuristic pass instead, for a good plan early: each front keeps
  // only the `beam` states of least bound (so it examines at most 2 beam
  // per item, and the work limit does not apply), and the time limit just
  // ends it.
  bool Run(int64_t root_bound, Best* best, size_t beam = 0,
           int64_t max_nodes = kInf);

  // Decides the item at processing index t for every state of `front`
  // (see Run).
  void Step(int t, std::vector<State>* front_out, Best* best, size_t beam);

  // Cuts `front` (at processing index t) to the `beam` states of least
  // bound, still in the order of g.
  void KeepLeastBound(int t, size_t beam, std::vector<State>* front);

  // Prepares the bound over plan counts (CountBound) for the searches to
  // come, given a plan that exists (they may look for one below a target
  // instead, SolveCover); returns its root bound.
  int64_t PrepareCounts(Best* best);

  // Marks the items of the best plan `best` found here.
  void Mark(const Best& best, std::vector<char>* chosen) const;

 private:
  const std::vector<Item>& items_;
  const std::vector<int64_t>& req_;
  const int m_;
  const double lambda_;
  const int64_t max_nodes_;
  const std::chrono::nanoseconds time_limit_;
  const std::chrono::steady_clock::time_point start_;
  ExactStats* st_;
  int body_ = 0;                  // items [0, body_) are the body
  std::vector<bool> none_below_;  // by chain position
  std::vector<double> r_;         // c - lambda s, by chain position
  std::vector<int> order_;        // processing index -> chain position
  // Suffix sums over the processing order, from index t on: the negative
  // r, every saving, and the saving, cost and count of the LP's choice.
  std::vector<double> neg_;
  std::vector<int64_t> left_s_, def_s_, def_c_, def_n_;
  // Prefix sums over the processing order, before index t: the saving and
  // cost of the items the LP leaves out (add) and of those it takes (drop).
  std::vector<int64_t> add_s_, add_c_, drop_s_, drop_c_;
  // The least |r| / s and |r| of the undecided items.
  std::vector<double> rho_, min_abs_;
  double slack_ = 0;  // rounding allowance of Bound, in ns
  int64_t largest_need_ = 0;
  SplitBound split_;              // prepared when first needed
  CountBound count_;  // see PrepareCounts
  mutable int split_hint_ = -1;  // where its scan starts (see Rest)
  std::vector<Node> arena_;
  std::vector<State> keep_, take_, merged_;
  std::vector<std::pair<int64_t, State>> bounded_;  // KeepLeastBound's
};

}  // namespace exact
}  // namespace internal
}  // namespace remat

#endif  // REMAT_PLANNER_INTERNAL_EXACT_REVERSE_SEARCH_H_
