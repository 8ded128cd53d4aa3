// Relaxations of the search with OFFLOAD (offload_search.h): problems
// every plan maps into at no more cost, so that their optima, or their
// LPs, bound the search's states and the root.
//
//  * Items() and RelaxedNeeds(): a covering problem (cover.h) with an item
//    per way a block, or a block and the one above, can save. Solved
//    exactly (SolveCover) before the search, its optimum bounds every
//    plan in (cost, count) order; its LP bounds the search's states.
//  * HullItems(price): per block the lower convex hull of its actions'
//    savings against their costs, a copy out also charged `price` per ns
//    it takes; the LP over them, less price times the forward time left,
//    bounds the cost of any completion (StoppedBound, PrepareTop).
//  * PrepareWhole: the blocks up to a top need, whole, with the waits for
//    copies back that the block above decides (the whole-block bound).
//
// Contract (tested against every plan of small chains): for every plan
// that fits, with cost = recompute plus exposed time (SimulateStep) and
// count = blocks not kept, the covering problem's optimum is at most
// (cost, count); for any price in [0, 1] the LP over HullItems(price)
// covering the largest need, less price times the forward after block 0,
// is at most the cost, and so is the LP over the hull items (at price 0)
// below block j covering need[j]; and the least point of PrepareWhole's, at block 0,
// that saves need[top], less price times the same, is at most the cost of
// any plan cheaper than best_cost.
//
// Cost: Items and HullItems O(blocks); PrepareWhole up to kMaxWholePoints
// points, each merged in O(streams).
//
// Thread safety: const methods over a chain that does not change.
#ifndef REMAT_PLANNER_INTERNAL_EXACT_OFFLOAD_RELAX_H_
#define REMAT_PLANNER_INTERNAL_EXACT_OFFLOAD_RELAX_H_

#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include "planner/internal/exact/cover.h"
#include "planner/internal/exact/offload_chain.h"

namespace remat {
namespace internal {
namespace exact {

// The most points PrepareWhole keeps (on the bench's 200- and 1000-block
// chains its points pruned no state and cost up to 20% of the median
// solve, so it prepares only chains of up to kMaxWholeBlocks).
inline constexpr size_t kMaxWholePoints = size_t{1} << 18;

// PrepareWhole's points for one top: per block k from `from` up to the
// top and per kind of block k (kept or sent; recomputed), the Pareto
// points (what blocks [k, top) save, the least they cost), saving up.
struct WholePoint {
  int64_t saving;
  double cost;
};
struct Whole {
  int top;
  std::vector<std::array<std::vector<WholePoint>, 2>> points;
  int from = std::numeric_limits<int>::max();
};

// The least cost of the points of `f` (saving up) that save at least g.
double LeastCovering(const std::vector<WholePoint>& f, int64_t g);

// The highest of `bound`, a bound on plans for each price of copy-engine
// time in [0, 1] (one concave in the price: a least of functions linear
// in it), and the price it is at: a golden-section search, to a price
// within 1% of the best.
template <typename Bound>
std::pair<double, double> BestPrice(const Bound& bound) {
  const double g = (std::sqrt(5.0) - 1) / 2;
  double lo = 0, hi = 1;
  double x1 = hi - g * (hi - lo), x2 = lo + g * (hi - lo);
  double f1 = bound(x1), f2 = bound(x2);
  for (int i = 0; i < 10; ++i) {
    if (f1 < f2) {
      lo = x1, x1 = x2, f1 = f2;
      x2 = lo + g * (hi - lo), f2 = bound(x2);
    } else {
      hi = x2, x2 = x1, f2 = f1;
      x1 = hi - g * (hi - lo), f1 = bound(x1);
    }
  }
  return f1 > f2 ? std::make_pair(f1, x1) : std::make_pair(f2, x2);
}

// The top: the block j whose need bounds the root highest when only the
// blocks below j may meet it (their LP over HullItems at price 0), and

// The relaxations of one chain (which must outlive this).
class OffloadRelaxation {
 public:
  explicit OffloadRelaxation(const OffloadChain& chain);

  // A relaxation of the problem as a covering one, for the LP
  // bound and for SolveCover. Needs as OffloadChain::need has them (the copies in
  // flight and the prefetched block left out), and an item per way a
  // block (or a block and the one above) can save, at no more than it
  // costs. A block that sends (OFFLOAD, or RECOMPUTE_OFFLOAD's checkpoint)
  // waits for its copy back less when the block above is recomputed,
  // which that recompute pays for; so the sender has an item alone, with
  // its wait when the block above is not recomputed, and one with the
  // block above recomputed (plain or sending its own checkpoint at its
  // least wait), its saving and cost included. A plan maps to items from
  // the bottom up: a sender not already in the pair of the block below
  // takes the block above into its pair when that one is recomputed, else
  // stands alone; a RECOMPUTE not in a pair is its own item. The items
  // save at least what the plan saves below every need (a pair's saving
  // placed at its lower block only adds) and cost no more; the count (a
  // pair is one item) is no more either. An item that saves nothing is
  // left out; where the block above saves nothing the pair is no better
  // than the item alone (its wait is at most the recompute's time more).
  std::vector<Item> Items() const;

  // Its needs: req[p] for the items below p (the needs of the blocks from
  // item p-1's up to item p's).
  std::vector<int64_t> RelaxedNeeds(const std::vector<Item>& items) const;

  // A second relaxation as LP items, for OffloadSearch's StoppedBound,
  // PrepareTop and RootPrice: per block, the
  // lower convex hull of what its actions save against what they cost, as
  // increments (their ratios rise, so the LP takes a block's increments in
  // order and no block counts twice; Items()' pairs let a block both
  // recompute and send, which is cheap where the link is busy and so puts
  // that bound blocks' cost low). A send costs its least wait, plus `price`
  // for each ns its copy out takes:
  //
  // the copies out of the blocks from k on start no earlier than block k's
  // end, nor before the copies already queued land (at `drained`), and run
  // one after another, so the wait at the end of forward they add is at
  // least their time less the forward left after max(drained, block k's
  // end); for any price in [0, 1], at least price times that.
  std::vector<Item> HullItems(double price) const;

  // The blocks from k up to `top`, whole: per block k and whether it is
  // recomputed (which hides more of the copy back of the block below), the
  // Pareto points (what blocks [k, top) save, the least they cost). A
  // relaxation that keeps what the LPs lose: blocks come whole, and the
  // wait for a copy back depends on the action of the block above. It
  // drops the copies in flight, the order of the link's queue and every
  // need but the top's (as the needs do); a copy out costs `price` for
  // each ns it takes, which the bound takes back for the ns of forward
  // left (HullItems says why that holds). Built down from the top; a point
  // goes when even the LP over the blocks below cannot complete it under
  // the plan to beat (best_cost), and the building stops (w->from) past
  // kMaxWholePoints. On the bench's three slowest 96-block chains with a
  // link the better of PrepareWholes' two bounds the root 0.007, 0.07 and
  // 0.03 ms below the optimum, where the LP's is 1.0, 1.7 and 0.34 ms
  // below it.
  void PrepareWhole(int top, double price, double best_cost, Whole* w) const;

 private:
  double BackWait(int k, double back_ns, bool above_recomputed) const {
    return exact::BackWait(blocks_, k, back_ns, above_recomputed);
  }

  const std::vector<OffloadBlock>& blocks_;
  const std::vector<int64_t>& need_;
  const int n_;
};

}  // namespace exact
}  // namespace internal
}  // namespace remat

#endif  // REMAT_PLANNER_INTERNAL_EXACT_OFFLOAD_RELAX_H_
