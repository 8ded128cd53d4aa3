// The exact solution of the covering problem (cover.h): the cheapest
// selection of items that meets every need, found by the search without
// OFFLOAD (ReverseSearch) after a greedy plan and a heuristic pass, and on
// long chains by a search that deepens from the root bound with the bound
// over plan counts (CountBound).
//
// The best plan starts as a greedy one (recompute the cheapest per byte
// until every need is met, then drop what is not needed, dearest first),
// then a heuristic pass of the same search that keeps only the few states
// of least bound per step improves it, and the search proper improves it
// whenever a state meets every need, or the LP's choice completes it. On
// long chains that a first search with a small work limit does not
// finish, a bound that knows how many blocks a plan takes (CountBound,
// from each state the staircase leaves, with that state's need) joins the
// others, and the search deepens: it looks for a plan below a target just
// above the root bound, raised until one is found, so that every bound
// prunes against a value near the optimum rather than against the best
// plan known.
//
// Contract: the selection always meets every need (the greedy plan does,
// so a search stopped at its work or time limit still answers one,
// flagged in st.stopped_at_limit); unstopped, it is the cheapest in (cost,
// count) order, st.cost_ns its cost and st.lower_bound_ns too. Stopped,
// st.lower_bound_ns is at most the optimum's cost.
//
// Cost: the greedy plan O(items log items); the searches up to
// options.max_nodes states (at most 2^30), plus the heuristic pass's 32
// per item.
//
// Thread safety: a pure function.
#ifndef REMAT_PLANNER_INTERNAL_EXACT_SOLVE_COVER_H_
#define REMAT_PLANNER_INTERNAL_EXACT_SOLVE_COVER_H_

#include <cstdint>
#include <vector>

#include "planner/internal/exact/cover.h"
#include "planner/internal/exact/options.h"

namespace remat {
namespace internal {
namespace exact {

// The fewest items for which the search deepens its target (SolveCover)
// and bounds states by their count (CountBound): on shorter chains neither
// pays for itself.
inline constexpr int kDeepenItems = 128;
// The work of the first search before them, per candidate, at least
// (ExactOptions::plain_search_nodes).
inline constexpr int64_t kTryNodesPerItem = 16;

// The cheapest selection of `items` (in chain order) that meets every need
// of `req` (req[p]: what the items below p must save), in (cost, count)
// order; every need must be met by all the items together. Fills the
// search's fields of `st`. With `below`, what is asked is only whether
// some selection is under it: the greedy plan or the heuristic pass, where
// either is, answers at once (then st.lower_bound_ns is the LP's).
std::vector<char> SolveCover(const std::vector<Item>& items,
                             const std::vector<int64_t>& req,
                             const ExactOptions& options, ExactStats& st,
                             const CostCount* below = nullptr);

}  // namespace exact
}  // namespace internal
}  // namespace remat

#endif  // REMAT_PLANNER_INTERNAL_EXACT_SOLVE_COVER_H_
