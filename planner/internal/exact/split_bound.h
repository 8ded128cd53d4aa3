// Lower bounds on covering that know items come whole: CoverBound over a
// fixed set of items (the LP, and the cheapest k items where k items must
// be taken), and SplitBound, which splits the undecided items of the
// search without OFFLOAD's body in two (ReverseSearch::WholeBound).
//
// Contract: CoverBound's Lp(x) and Counted(x) are each at most the least
// cost of a selection of its items that saves at least x (infinity when
// every item together cannot). SplitBound::Prepare(items, order, r, from,
// g) is at most the least cost of a selection of the items order[from,
// end) that saves at least g; after Start(t) or Advance(t), Rest(t, g, ...)
// is at most that of the items order[t, end), whatever `hint` says. With
// Enough{low, high} it may answer less than the exact value of its formula
// (below), but only where both are below low or both at or above high.
//
// Cost: CoverBound::Build O(n log n), Lp and Counted O(log n); Prepare
// O(5 n log n) (five splits tried); Start O(n log n); Advance O(n) per
// item dropped; Rest O(log n) steps of O(log n) from no hint, or a walk
// from the hint, plus the steps each way its least point leaves.
//
// Thread safety: one thread per object.
#ifndef REMAT_PLANNER_INTERNAL_EXACT_SPLIT_BOUND_H_
#define REMAT_PLANNER_INTERNAL_EXACT_SPLIT_BOUND_H_

#include <cstdint>
#include <limits>
#include <vector>

#include "planner/internal/exact/cover.h"

namespace remat {
namespace internal {
namespace exact {

// Lower bounds on the cost of saving x bytes with some of a fixed set of
// items: the LP (fractional items, cheapest per byte first), and the
// cheapest k items where k is the least number whose largest savings
// reach x.
class CoverBound {
 public:
  // Builds the bounds for items[ids[first..last)] (reusing the buffers).
  void Build(const std::vector<Item>& items, const std::vector<int>& ids,
             int first, int last);

  int64_t total() const { return largest_.back(); }
  // Prefix sums of the savings, largest first, and of the costs, cheapest
  // first, from 0 items up.
  const std::vector<int64_t>& largest() const { return largest_; }
  const std::vector<int64_t>& cheapest() const { return cheapest_; }

  // The bounds on saving x (infinity: the items cannot). The LP:
  double Lp(int64_t x) const;

  // The count bound on saving x: the cheapest k items, k the least number
  // whose largest savings reach x.
  double Counted(int64_t x) const;

 private:
  std::vector<int64_t> largest_, cheapest_;  // prefix sums, from 0 items
  std::vector<int64_t> lp_s_, lp_c_;
  std::vector<double> per_byte_;
  std::vector<int> ids_;  // by cost per byte
  std::vector<int64_t> sizes_, costs_;
};

// A bound for the body that knows items come whole, from a split of the
// undecided items into C, the near-price items order[t, q), and O, the
// rest order[q, end). A completion that takes K items of C saves at most
// the K largest of them and costs at least the K cheapest; its O items
// must save the rest, at no less than either of O's CoverBounds:
//
//   cost >= min over K of  cheapest_C(K) + O.Least(g - largest_C(K)),
//   O.Least(x) = max(O.Lp(x), O.Counted(x)).
//
// On chains of near-identical layers the LP's price sits inside one
// layer type (C), whose count the LP takes fractionally; the other
// type's items (O) are near-identical too. The bound then charges both
// for whole layers, and often meets the optimum. Valid for any split; q
// is the one (where |r| / s jumps most) that bounds the state the
// search prepares it for highest.
class SplitBound {
 public:
  // Where Rest may stop short: a bound below `low` or at or above `high`
  // answers as well as the exact one.
  struct Enough {
    double low, high;
  };
  static constexpr Enough kExact = {-std::numeric_limits<double>::infinity(),
                                    std::numeric_limits<double>::infinity()};

  // Chooses q for a state at processing index `from` that needs g, and
  // returns the bound on its rest there. Candidates: where |r| / s jumps
  // most (between layer types), and m. `items` and `order` must outlive
  // the bound; r[p] is item p's c - lambda s.
  double Prepare(const std::vector<Item>& items, const std::vector<int>& order,
                 const std::vector<double>& r, int from, int64_t g);

  bool active() const { return active_; }

  // Rest answers for states at processing index t from now on (t at least
  // the preparing one): C's sums over its items at t or later.
  void Start(int t);

  // Moves on to processing index t >= the current one (drops the C items
  // decided in between).
  void Advance(int t);

  // The bound on what a state at processing index t (the current one)
  // that needs g still costs (before rounding); -infinity where it does
  // not apply. `hint`: where the scan starts, and where it ended (states
  // in the order of g move it one way).
  double Rest(int t, int64_t g, int* hint, Enough enough) const;

 private:
  void Sums();

  // min over K in 0..n of f(K) = cheapest[K] + o.Least(g - largest[K]).
  // f is at least h(K) = cheapest[K] + o.Lp(g - largest[K]), which is
  // convex in K (cheapest is, and o.Lp is convex and nondecreasing in a
  // concave decreasing argument): the scan finds h's least point, then
  // goes each way until h there reaches the least f found. Where the
  // answer is sure to fall below enough.low (f at h's least point does),
  // or to reach enough.high (h's least does), it returns h's least
  // instead: a bound all the same, for less work.
  static double Scan(const int64_t* largest, const int64_t* cheapest, int n,
                     const CoverBound& o, int64_t g, int* hint, Enough enough);

  bool active_ = false;
  const std::vector<Item>* items_ = nullptr;
  const std::vector<int>* order_ = nullptr;
  int from_ = 0, q_ = 0;
  int row_ = 0;  // the processing index Rest answers for
  // C's items at row_ or later: savings largest first, costs cheapest
  // first, and their prefix sums from 0 items up.
  std::vector<int64_t> sizes_, costs_, largest_, cheapest_;
  CoverBound o_;
};

}  // namespace exact
}  // namespace internal
}  // namespace remat

#endif  // REMAT_PLANNER_INTERNAL_EXACT_SPLIT_BOUND_H_
