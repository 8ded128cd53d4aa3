// Test support for the exact solver's parts: small random chains, every
// plan of one scored by the memory model (SimulateStep), and the cheapest
// selection of a covering problem's items by enumeration.
#ifndef REMAT_PLANNER_INTERNAL_EXACT_BRUTE_FORCE_FOR_TEST_H_
#define REMAT_PLANNER_INTERNAL_EXACT_BRUTE_FORCE_FOR_TEST_H_

#include <cstdint>
#include <functional>
#include <random>
#include <vector>

#include "planner/internal/exact/cover.h"
#include "planner/plan.h"

namespace remat {
namespace internal {
namespace exact {
namespace testing {

// How many times fewer random problems the long brute-force checks draw: 4
// under a sanitizer, which runs them about five times slower and is there
// for memory and thread errors, which a quarter of the sample reaches on
// the same code paths; 1 in the plain build, which draws them all.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr int kSampleDivisor = 4;
#else
inline constexpr int kSampleDivisor = 1;
#endif

enum class ChainKind {
  kRandom,       // every quantity drawn alone
  kTransformer,  // alternating attention / MLP, near-identical
  kEqual,        // identical blocks
};

// A chain of n blocks with bytes in the hundreds and times in the tens of
// ns, some not checkpointable; no link, budget 0 (the caller sets both).
PlanProblem RandomChain(std::mt19937_64& rng, int n, ChainKind kind);

// RandomChain with a host link (from "lands at once" to slower than the
// whole forward, not always symmetric) and some blocks with measured
// transfer, backward and (with checkpoints) output sizes.
// offload_checkpoints as `checkpoints` says.
PlanProblem RandomLinkChain(std::mt19937_64& rng, int n, ChainKind kind,
                            bool checkpoints);

// One plan, scored by SimulateStep.
struct ScoredPlan {
  std::vector<Action> actions;
  int64_t peak = 0;
  int64_t cost = 0;   // recompute plus exposed transfer time
  int64_t count = 0;  // blocks not kept
};

// Every plan over the first `kinds` actions (2: KEEP and RECOMPUTE; 3:
// and OFFLOAD; 4: and RECOMPUTE_OFFLOAD) on the checkpointable blocks,
// the others kept: kinds^(checkpointable blocks) plans.
std::vector<ScoredPlan> EveryPlan(const PlanProblem& p, int kinds);

// The cheapest plan of `plans` whose peak is at most `limit`, in (cost,
// count) order; found false when none is.
struct Optimum {
  bool found = false;
  int64_t cost = 0, count = 0;
  std::vector<Action> actions;
};
Optimum Cheapest(const std::vector<ScoredPlan>& plans, int64_t limit);

// The least peak of `plans`, and the keep-all peak of `p`.
int64_t LeastPeak(const std::vector<ScoredPlan>& plans);
int64_t KeepAllPeak(const PlanProblem& p);

// Limits to try on a chain: from just under the least peak to above the
// keep-all peak, and `random` drawn between.
std::vector<int64_t> Limits(std::mt19937_64& rng, int64_t least_peak,
                            int64_t keep_all_peak, int random);

// Small chains with a link, every plan of each scored, at limits from
// Limits(): chain `iter` (of `chains`) has kind iter % 3, sends its
// checkpoints to host when iter is even (then scores 4 kinds of action
// over min_blocks..6 blocks, else 3 over min_blocks..7). `visit(iter, p,
// plans)` sees `p` with budget_bytes at each limit in turn; it may draw
// from `rng` too (the draws interleave).
void ForEachLinkChainLimit(
    std::mt19937_64& rng, int chains, int min_blocks, int random_limits,
    const std::function<void(int iter, const PlanProblem& p,
                             const std::vector<ScoredPlan>& plans)>& visit);

// The cheapest selection of `items` that meets every need of `req`
// (MeetsNeeds), in (cost, count) order, by enumeration (items.size() at
// most 20); found false when none does.
struct CoverOptimum {
  bool found = false;
  int64_t cost = 0, count = 0;
};
CoverOptimum CheapestCover(const std::vector<Item>& items,
                           const std::vector<int64_t>& req);

// The least cost of items[ids[i]] for i in [first, last) whose savings
// sum to at least x (0 for x <= 0; kInf when they cannot).
int64_t CheapestSaving(const std::vector<Item>& items,
                       const std::vector<int>& ids, int first, int last,
                       int64_t x);

// The LP's price per byte of covering `req`'s largest need with `items`,
// as SolveCover has it: the cost per byte of the item that completes the
// cheapest-per-byte cover.
double LpPrice(const std::vector<Item>& items, const std::vector<int64_t>& req);

// Random items (savings 1..max_s, costs 0..max_c), half of them from two
// near-identical kinds when `layered`.
std::vector<Item> RandomItems(std::mt19937_64& rng, int m, int64_t max_s,
                              int64_t max_c, bool layered);

}  // namespace testing
}  // namespace exact
}  // namespace internal
}  // namespace remat

#endif  // REMAT_PLANNER_INTERNAL_EXACT_BRUTE_FORCE_FOR_TEST_H_
