// A lower bound for the covering knapsack that knows how many items a
// plan takes (the Lagrangian of "saves G" with the count held), for the
// search without OFFLOAD on long chains (ReverseSearch, from the states
// its staircase leaves).
//
// Contract: after Prepare(items, free, entries, best_cost, best_count),
// Start(order, t) and Remove(p) for each item decided since, MayBeat(cost,
// count, g, ...) is false only when no completion of that state (a state
// that descends from one of the entries, the undecided items saving at
// least g) is better than (best_cost, best_count) in (cost, count) order;
// RootBound() is at most the cost of any completion of an entry that is
// better than that. Inactive (MayBeat never asked) when too many counts
// remain.
//
// Cost: Prepare sorts the free items 25 times per entry (a grid of mu),
// bisects mu (32 selections of the free items) per count an entry may
// take, and sorts every item once per count kept (at most kMaxCounts
// counts, each with a mu per entry); Start O(items log items) per count
// kept; Remove and MayBeat O(log items) per count kept.
//
// Thread safety: one thread per CountBound.
#ifndef REMAT_PLANNER_INTERNAL_EXACT_COUNT_BOUND_H_
#define REMAT_PLANNER_INTERNAL_EXACT_COUNT_BOUND_H_

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "planner/internal/exact/cover.h"

namespace remat {
namespace internal {
namespace exact {

// A bound that knows how many items a plan takes. A plan of exactly K
// items that saves at least G costs at least, for any mu >= 0,
//
//   mu G + the sum of the K least c_i - mu s_i
//
// (the Lagrangian of "saves G" with the count held). Near-equal layers
// make the LP take a fraction of a block where a plan takes a whole one;
// at the count a plan really takes, with mu chosen for that count, this
// bound meets the optimum within a few ns on the bench's 1000-block
// chains, and at every other count it exceeds it. So Prepare finds the
// counts a plan cheaper than a known one may take (a grid of mu rules
// most out at once, a search over mu the rest), and MayBeat bounds a
// state at each of those counts, with the items still undecided.
class CountBound {
 public:
  // A state that the items given to Prepare complete: its cost and count
  // so far, and the saving g it still needs from those items.
  struct Entry {
    int64_t cost;
    int64_t count;
    int64_t g;
  };

  bool active() const { return active_; }

  // For completions of the `entries` by the items at positions `free` of
  // `items` (a relaxation: one need per entry over all of them), and a
  // plan that exists (cost, count): the counts a better plan may take and
  // the mu of each. Inactive when too many counts remain. Start says
  // which items are undecided.
  void Prepare(const std::vector<Item>& items, const std::vector<int>& free,
               const std::vector<Entry>& entries, int64_t best_cost,
               int64_t best_count);

  // The items order[t, m) undecided, the others decided.
  void Start(const std::vector<int>& order, int t);

  // No plan better than the best given to Prepare costs less than this
  // (kInf: there is none); 0 when inactive.
  int64_t RootBound() const;

  // Item p (chain position) is decided.
  void Remove(int p);

  // Whether a state (cost, count taken so far, need g from the undecided
  // items) may extend to a plan better than the best, at one of the counts
  // left. A count has a mu per entry: each gives a bound there, and the
  // largest is the one that decides.
  bool MayBeat(int64_t cost, int64_t count, int64_t g, int64_t best_cost,
               int64_t best_count) const;

 private:
  struct Count {
    int k;
    double mu;
    std::vector<int> rank;      // by chain position, 1-based
    std::vector<double> value;  // by rank: c - mu s
    std::vector<int> fn;        // Fenwick: undecided items per rank
    std::vector<double> fv;     // Fenwick: their values
  };
  // Counts left, over all entries.
  static constexpr size_t kMaxCounts = 4;

  // The counts (total, with the entry's) at which a completion of `e` may
  // beat the best plan, each with its best mu (kept in *left); false when
  // too many.
  bool CountsLeft(const std::vector<Item>& items, const std::vector<int>& free,
                  const Entry& e, double lo_ratio, double hi_ratio,
                  int64_t best_cost, int64_t best_count, std::vector<Count>* left);

  // For completions of `e` by k items of `free`: the mu of the largest
  // bound, by bisection on the slope of the (concave) bound, g less the
  // savings of the k least; and that bound.
  static std::pair<double, double> BestMu(const std::vector<Item>& items,
                                          const std::vector<int>& free,
                                          const Entry& e, int k, double hi_ratio);

  // Whether a bound `lb` on plans of k items leaves none better than the
  // best (a tie goes to fewer items); a ns of allowance for rounding.
  static bool Excludes(double lb, int k, int64_t best_cost, int64_t best_count);

  void Add(Count* c, int p, int sign);

  // The sum of the `k` least values undecided; false when fewer are left.
  bool SumOfLeast(const Count& c, int64_t k, double* sum) const;

  bool active_ = false;
  int top_ = 1;
  std::vector<Count> counts_;
  double least_ = 0;  // the least bound over the counts left
};

}  // namespace exact
}  // namespace internal
}  // namespace remat

#endif  // REMAT_PLANNER_INTERNAL_EXACT_COUNT_BOUND_H_
