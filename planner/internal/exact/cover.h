// The covering problem the exact searches solve, and what they share: its
// items (Item), its needs (RecomputeCover), the sentinel kInf and small
// arithmetic on items.
//
// The problem, under the memory model v2 (planner/plan.h, SimulateStep)
// with KEEP and RECOMPUTE. Block i holds a_i until backward when kept and
// o_i when recomputed, so recomputing it frees s_i = a_i - o_i; a block
// with s_i <= 0 is never recomputed (it frees nothing and costs time), nor
// is the last block (its recompute never lowers the peak, plan.h). With
// S_k the savings of the recomputed blocks below k and A_k = base + the
// a_i of the blocks below k, the moments of SimulateStep are
//
//   backward of block k:  A_k - S_k + (a_k + o_k + x_k + w_k) <= limit
//   end of forward:       A_L - S_L <= limit
//
// (the forward moments are never larger than the backward one of the same
// block), so a plan fits exactly when S_k >= need_k for every k: prefix
// covering constraints along the chain. The items are the blocks that may
// be recomputed (the candidates), in chain order; req[p] is the largest
// need the items below item p must meet. The searches minimise the cost
// (the items' forward_ns), then the count of items taken. Bytes are never
// rounded.
//
// Thread safety: plain values and pure functions.
#ifndef REMAT_PLANNER_INTERNAL_EXACT_COVER_H_
#define REMAT_PLANNER_INTERNAL_EXACT_COVER_H_

#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

#include "planner/model.h"
#include "planner/plan.h"

namespace remat {
namespace internal {
namespace exact {

// "Infinite" needs, costs and bounds: far above any real one, and the sum
// of two does not overflow.
inline constexpr int64_t kInf = std::numeric_limits<int64_t>::max() / 4;

// The states per step the heuristic pass keeps (ReverseSearch::Run, and
// OffloadSearch::Run's with a link).
inline constexpr size_t kBeamWidth = 16;
// The largest problem the planner builds (MakePlanProblem: base and
// calibration, plus kMaxBlocks blocks at the estimator's largest
// prediction, and one block's backward terms, the step's tail among them)
// stays below the sentinel, so no real need or cost reads as "infinite"
// and no sum of two overflows.
static_assert(kMaxQuantity + kMaxCalibrationBytes +
                      int64_t{kMaxBlocks} * kMaxQuantity + 5 * kMaxQuantity <
                  kInf,
              "a planned problem can reach the solver's infinity");

// One way to save memory: a block recomputed (or, in the search with
// OFFLOAD's relaxations, any action or pair of actions of a block).
struct Item {
  int block;
  int64_t s;  // saving a - o, > 0
  int64_t c;  // forward_ns
};

// A cost and a count, compared in that order (LexLess).
struct CostCount {
  int64_t cost = 0, count = 0;
};

// ceil(a * b / d) for non-negative a, b and positive d without overflow.
inline int64_t MulDivCeil(int64_t a, int64_t b, int64_t d) {
  const __int128 num = static_cast<__int128>(a) * b;
  return static_cast<int64_t>((num + d - 1) / d);
}

// (c1, n1) < (c2, n2): cost first, then count.
inline bool LexLess(int64_t c1, int64_t n1, int64_t c2, int64_t n2) {
  return c1 < c2 || (c1 == c2 && n1 < n2);
}

// *sums = the prefix sums of v, from 0 items up.
void PrefixSums(const std::vector<int64_t>& v, std::vector<int64_t>* sums);

// Whether recomputing the items marked in `chosen` meets every need.
// Preconditions: chosen.size() == items.size(), req.size() ==
// items.size() + 1. O(items).
bool MeetsNeeds(const std::vector<Item>& items, const std::vector<char>& chosen,
                const std::vector<int64_t>& req);

// The greedy cover: the items in `order` (a permutation of the items'
// indices, cheapest per byte first) taken until every need is met, then
// each taken item dropped, dearest first (the later one of equal cost
// first), where the rest still meet every need. Where all the items
// together do not meet them, every item is taken. The same selection as
// that description with MeetsNeeds after each step, which is O(items^2);
// this keeps each need's slack in blocks of 16 with their least values:
// O(items (16 + items / 16)), a few plain loops a step.
std::vector<char> GreedyCover(const std::vector<Item>& items,
                              const std::vector<int64_t>& req,
                              const std::vector<int>& order);

// The covering problem of a plan over KEEP and RECOMPUTE (the problem's
// link is ignored).
struct Cover {
  // The candidates in chain order: checkpointable blocks, not the last,
  // whose recompute saves something (s > 0).
  std::vector<Item> items;
  // items.size() + 1 needs: req[p] is the largest need that the items
  // below p must meet (constraints between item p-1's block and item
  // p's); -kInf where there is none. A plan that recomputes the items it
  // marks fits under problem.limit_bytes() exactly when MeetsNeeds says so.
  std::vector<int64_t> req;
};
// O(blocks).
Cover RecomputeCover(const PlanProblem& problem);

}  // namespace exact
}  // namespace internal
}  // namespace remat

#endif  // REMAT_PLANNER_INTERNAL_EXACT_COVER_H_
