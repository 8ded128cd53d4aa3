// The LP bound of a covering problem: the least cost of saving d bytes
// with fractions of items allowed (the cheapest per byte first), over a
// set of items that changes as a search decides them.
//
// Contract: for items with s > 0 and c >= 0, LowerBound(d) is the LP
// optimum of "save at least d" over the items present, rounded up to an
// integer; so no selection of whole present items that saves d costs less.
// kInf when even every present item cannot save d.
//
// Cost: Add and LowerBound O(log items) (Fenwick sums over the ranks);
// construction O(items), Rank O(items log items).
//
// Thread safety: an LpBound is used by one thread; Rank is a pure function.
#ifndef REMAT_PLANNER_INTERNAL_EXACT_LP_BOUND_H_
#define REMAT_PLANNER_INTERNAL_EXACT_LP_BOUND_H_

#include <cstdint>
#include <vector>

#include "planner/internal/exact/cover.h"

namespace remat {
namespace internal {
namespace exact {

// Items indexed by rank in cost/saving order (1-based), with Fenwick sums of
// saving and cost over the ranks currently present. LowerBound(d) is the LP
// relaxation of "cover saving d at least cost" over the present items.
// None is present at first. `by_rank` (Rank's) must outlive the bound.
class LpBound {
 public:
  explicit LpBound(const std::vector<Item>& by_rank);

  // Every item present.
  void AddAll();

  // The item of rank `rank` in (sign +1) or out (sign -1).
  void Add(int rank, int sign);

  // Lower bound on the cost of covering d > 0; kInf when the present items
  // cannot cover it.
  int64_t LowerBound(int64_t d) const;

 private:
  const std::vector<Item>& by_rank_;
  int n_;
  int top_;
  std::vector<int64_t> fs_;
  std::vector<int64_t> fc_;
};

// The items by rank in cost/saving order, for LpBound, and (unless null)
// the rank of each (1-based).
void Rank(const std::vector<Item>& items, std::vector<int>* rank_of,
          std::vector<Item>* by_rank);

// Called per state and per item decided: inline.

inline void LpBound::Add(int rank, int sign) {
  const int64_t s = sign * by_rank_[rank - 1].s;
  const int64_t c = sign * by_rank_[rank - 1].c;
  for (int i = rank; i <= n_; i += i & -i) {
    fs_[i] += s;
    fc_[i] += c;
  }
}

inline int64_t LpBound::LowerBound(int64_t d) const {
  if (d <= 0) return 0;
  int pos = 0;
  int64_t cs = 0;
  int64_t cc = 0;
  for (int step = top_; step > 0; step >>= 1) {
    const int next = pos + step;
    if (next <= n_ && cs + fs_[next] < d) {
      pos = next;
      cs += fs_[next];
      cc += fc_[next];
    }
  }
  // The item at rank pos + 1 is present and completes the cover.
  if (pos >= n_) return kInf;
  const Item& it = by_rank_[pos];
  return cc + MulDivCeil(d - cs, it.c, it.s);
}

}  // namespace exact
}  // namespace internal
}  // namespace remat

#endif  // REMAT_PLANNER_INTERNAL_EXACT_LP_BOUND_H_
