// The exact solver, under the memory model v2 (plan.h, SimulateStep), over
// KEEP and RECOMPUTE, and OFFLOAD when the problem has a host link: first
// the search without OFFLOAD (below), whose plan is then the one to beat
// for the search with it (OffloadSearch, further down).
//
// The problem. Block i holds a_i until backward when kept and o_i when
// recomputed, so recomputing it frees s_i = a_i - o_i; a block with
// s_i <= 0 is never recomputed (it frees nothing and costs time), nor is
// the last block (its recompute never lowers the peak, plan.h). With S_k
// the savings of the recomputed blocks below k and A_k = base + the a_i of
// the blocks below k, the moments of SimulateStep are
//
//   backward of block k:  A_k - S_k + (a_k + o_k + x_k + w_k) <= limit
//   end of forward:       A_L - S_L <= limit
//
// (the forward moments are never larger than the backward one of the same
// block), so a plan fits when S_k >= need_k for every k: prefix covering
// constraints along the chain. Minimise the recompute time, then the
// number of recomputed blocks.
//
// Search: a dynamic programme that decides the candidates from the top of
// the chain down, a state being what the blocks still undecided must save
// (ReverseSearch says how). Near the end of the chain the needs form a
// staircase that the state follows exactly; below it every need is met
// once the total is, so the rest is one covering knapsack, decided in the
// order a knapsack core is expanded (closest to the LP's price per byte
// first) and pruned by the LP of what is left and by a bound that knows
// blocks come whole (SplitBound). The best plan starts as a greedy one
// (recompute the cheapest per byte until every need is met, then drop
// what is not needed, dearest first), then a heuristic pass of the same
// search that keeps only the few states of least bound per step improves
// it, and the search proper improves it whenever a state meets every
// need, or the LP's choice completes it. On long chains that a first
// search with a small work limit does not finish, a bound that knows how
// many blocks a plan takes (CountBound, from each state the staircase
// leaves, with that state's need) joins the others, and the search
// deepens: it looks for a plan below a target just above the root bound,
// raised until one is found, so that every bound prunes against a value
// near the optimum rather than against the best plan known. Bytes are never
// rounded. States of equal need keep only the cheapest: structurally
// identical layers have equal savings, so without that a front grows with
// the number of ways to reach the same saving.
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
#include <array>
#include <chrono>
#include <cmath>
#include <functional>
#include <limits>
#include <numeric>
#include <tuple>

#include "absl/container/flat_hash_map.h"
#include "absl/types/span.h"

namespace remat {
namespace internal {
namespace {

constexpr int64_t kInf = std::numeric_limits<int64_t>::max() / 4;

// The fewest items for which the search deepens its target (SolveCover)
// and bounds states by their count (CountBound): on shorter chains neither
// pays for itself.
constexpr int kDeepenItems = 128;
// The work of the first search before them, per candidate, at least
// (ExactOptions::plain_search_nodes).
constexpr int64_t kTryNodesPerItem = 16;
// The most states the tail may leave for the bound over plan counts to
// start from them (ReverseSearch::PrepareCounts).
constexpr size_t kMaxEntries = 4;
// The states per step the heuristic pass keeps (ReverseSearch::Run).
constexpr size_t kBeamWidth = 16;
// The largest problem the planner builds (MakePlanProblem: base and
// calibration, plus kMaxBlocks blocks at the estimator's largest
// prediction, and one block's backward terms, the step's tail among them)
// stays below the sentinel, so no real need or cost reads as "infinite"
// and no sum of two overflows.
static_assert(kMaxQuantity + kMaxCalibrationBytes +
                      int64_t{kMaxBlocks} * kMaxQuantity + 5 * kMaxQuantity <
                  kInf,
              "a planned problem can reach the solver's infinity");

struct Item {
  int block;
  int64_t s;  // saving a - o, > 0
  int64_t c;  // forward_ns
};

// ceil(a * b / d) for non-negative a, b and positive d without overflow.
int64_t MulDivCeil(int64_t a, int64_t b, int64_t d) {
  const __int128 num = static_cast<__int128>(a) * b;
  return static_cast<int64_t>((num + d - 1) / d);
}

// Items indexed by rank in cost/saving order (1-based), with Fenwick sums of
// saving and cost over the ranks currently present. LowerBound(d) is the LP
// relaxation of "cover saving d at least cost" over the present items.
class LpBound {
 public:
  explicit LpBound(const std::vector<Item>& by_rank)
      : by_rank_(by_rank),
        n_(static_cast<int>(by_rank.size())),
        fs_(n_ + 1, 0),
        fc_(n_ + 1, 0) {
    top_ = 1;
    while (top_ * 2 <= n_) top_ *= 2;
  }

  // Every item present.
  void AddAll() {
    for (int r = 1; r <= n_; ++r) Add(r, +1);
  }

  void Add(int rank, int sign) {
    const int64_t s = sign * by_rank_[rank - 1].s;
    const int64_t c = sign * by_rank_[rank - 1].c;
    for (int i = rank; i <= n_; i += i & -i) {
      fs_[i] += s;
      fc_[i] += c;
    }
  }

  // Lower bound on the cost of covering d > 0; kInf when the present items
  // cannot cover it.
  int64_t LowerBound(int64_t d) const {
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

 private:
  const std::vector<Item>& by_rank_;
  int n_;
  int top_;
  std::vector<int64_t> fs_;
  std::vector<int64_t> fc_;
};

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
               int64_t best_count) {
    active_ = true;
    counts_.clear();
    least_ = std::numeric_limits<double>::infinity();
    double lo_ratio = std::numeric_limits<double>::infinity(), hi_ratio = 0;
    for (int p : free) {
      const double ratio =
          static_cast<double>(items[p].c) / static_cast<double>(items[p].s);
      lo_ratio = std::min(lo_ratio, ratio);
      hi_ratio = std::max(hi_ratio, ratio);
    }
    lo_ratio = std::max(lo_ratio, 1e-6 * hi_ratio);
    if (!(hi_ratio > 0)) {
      active_ = false;
      return;
    }
    // The counts each entry leaves, with their mu; then, at every count
    // some entry leaves, each entry's mu: a state from an entry that rules
    // a count out is then bounded at that count by its entry's mu (a
    // bound over the same mu only rises along the search), not by the
    // weaker mu of the entry that leaves it.
    std::vector<std::vector<Count>> left(entries.size());
    std::vector<int> counts;
    for (size_t i = 0; i < entries.size(); ++i) {
      if (!CountsLeft(items, free, entries[i], lo_ratio, hi_ratio, best_cost,
                      best_count, &left[i])) {
        active_ = false;
        return;
      }
      for (const Count& c : left[i]) counts.push_back(c.k);
    }
    std::sort(counts.begin(), counts.end());
    counts.erase(std::unique(counts.begin(), counts.end()), counts.end());
    if (counts.size() > kMaxCounts) {
      active_ = false;
      return;
    }
    for (int k : counts) {
      for (size_t i = 0; i < entries.size(); ++i) {
        const Entry& e = entries[i];
        const auto known = std::find_if(left[i].begin(), left[i].end(),
                                        [&](const Count& c) { return c.k == k; });
        if (known != left[i].end()) {
          counts_.push_back(std::move(*known));
          continue;
        }
        const int64_t more = k - e.count;
        if (more < (e.g > 0 ? 1 : 0) || more > static_cast<int64_t>(free.size())) {
          continue;  // no completion of that count: the bound is infinite
        }
        counts_.push_back(
            {k, BestMu(items, free, e, static_cast<int>(more), hi_ratio).first});
      }
    }
    // Per count left, every item by c - mu s, and Fenwick sums over the
    // undecided ones.
    const int m = static_cast<int>(items.size());
    std::vector<double> v(m);
    for (Count& c : counts_) {
      for (int i = 0; i < m; ++i) {
        v[i] = static_cast<double>(items[i].c) -
               c.mu * static_cast<double>(items[i].s);
      }
      std::vector<int> by_value(m);
      std::iota(by_value.begin(), by_value.end(), 0);
      std::sort(by_value.begin(), by_value.end(),
                [&](int a, int b) { return v[a] < v[b]; });
      c.rank.assign(m, 0);
      c.value.assign(m + 1, 0);
      c.fn.assign(m + 1, 0);
      c.fv.assign(m + 1, 0);
      for (int r = 0; r < m; ++r) {
        c.rank[by_value[r]] = r + 1;
        c.value[r + 1] = v[by_value[r]];
      }
    }
    top_ = 1;
    while (top_ * 2 <= m) top_ *= 2;
  }

  // The items order[t, m) undecided, the others decided.
  void Start(const std::vector<int>& order, int t) {
    for (Count& c : counts_) {
      std::fill(c.fn.begin(), c.fn.end(), 0);
      std::fill(c.fv.begin(), c.fv.end(), 0.0);
      for (size_t u = t; u < order.size(); ++u) Add(&c, order[u], +1);
    }
  }

  // No plan better than the best given to Prepare costs less than this
  // (kInf: there is none); 0 when inactive.
  int64_t RootBound() const {
    if (!active_) return 0;
    if (least_ >= static_cast<double>(kInf)) return kInf;
    return static_cast<int64_t>(
        std::max(0.0, std::floor(least_ - 1 - 1e-9 * std::abs(least_))));
  }

  // Item p (chain position) is decided.
  void Remove(int p) {
    for (Count& c : counts_) Add(&c, p, -1);
  }

  // Whether a state (cost, count taken so far, need g from the undecided
  // items) may extend to a plan better than the best, at one of the counts
  // left. A count has a mu per entry: each gives a bound there, and the
  // largest is the one that decides.
  bool MayBeat(int64_t cost, int64_t count, int64_t g, int64_t best_cost,
               int64_t best_count) const {
    for (size_t i = 0; i < counts_.size();) {
      const int k = counts_[i].k;
      double bound = -std::numeric_limits<double>::infinity();
      for (; i < counts_.size() && counts_[i].k == k; ++i) {
        const Count& c = counts_[i];
        const int64_t more = c.k - count;
        double sum = 0;
        if (more < 0 || (more == 0 && g > 0) || !SumOfLeast(c, more, &sum)) {
          bound = std::numeric_limits<double>::infinity();
          continue;
        }
        bound = std::max(bound, static_cast<double>(cost) +
                                    c.mu * static_cast<double>(g) + sum);
      }
      if (!Excludes(bound, k, best_cost, best_count)) return true;
    }
    return false;
  }

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
                  int64_t best_cost, int64_t best_count, std::vector<Count>* left) {
    const int m = static_cast<int>(free.size());
    const double g = static_cast<double>(std::max<int64_t>(e.g, 0));
    const double base = static_cast<double>(e.cost);
    // The counts not ruled out by a grid of mu (around the LP's price,
    // from the least to the greatest cost per byte). No item at all is a
    // completion only where nothing is needed (g is 0).
    std::vector<double> v(m);
    std::vector<double> lb(m + 1, -std::numeric_limits<double>::infinity());
    lb[0] = base;
    constexpr int kGrid = 24;
    for (int j = 0; j <= kGrid; ++j) {
      const double mu = j == 0 ? 0.0 : lo_ratio * std::pow(4 * hi_ratio / lo_ratio,
                                                           (j - 1.0) / (kGrid - 1));
      for (int i = 0; i < m; ++i) {
        const Item& it = items[free[i]];
        v[i] = static_cast<double>(it.c) - mu * static_cast<double>(it.s);
      }
      std::sort(v.begin(), v.end());
      double sum = base + mu * g;
      for (int k = 1; k <= m; ++k) {
        sum += v[k - 1];
        lb[k] = std::max(lb[k], sum);
      }
    }
    std::vector<int> ks;
    for (int k = g > 0 ? 1 : 0; k <= m; ++k) {
      if (!Excludes(lb[k], e.count + k, best_cost, best_count)) ks.push_back(k);
    }
    if (ks.size() > kMaxCounts * 4) return false;
    for (int k : ks) {
      const auto [mu, best] = BestMu(items, free, e, k, hi_ratio);
      const double bound = std::max(best, lb[k]);
      if (!Excludes(bound, e.count + k, best_cost, best_count)) {
        left->push_back({static_cast<int>(e.count + k), mu});
        least_ = std::min(least_, bound);
      }
    }
    return true;
  }

  // For completions of `e` by k items of `free`: the mu of the largest
  // bound, by bisection on the slope of the (concave) bound, g less the
  // savings of the k least; and that bound.
  static std::pair<double, double> BestMu(const std::vector<Item>& items,
                                          const std::vector<int>& free,
                                          const Entry& e, int k, double hi_ratio) {
    const int m = static_cast<int>(free.size());
    const double g = static_cast<double>(std::max<int64_t>(e.g, 0));
    std::vector<double> v(m);
    std::vector<int> idx(m);
    double lo = 0, hi = 4 * hi_ratio, best_mu = 0;
    double best = k == 0 ? static_cast<double>(e.cost)
                         : -std::numeric_limits<double>::infinity();
    for (int it = 0; it < 32 && k > 0; ++it) {
      const double mu = 0.5 * (lo + hi);
      for (int i = 0; i < m; ++i) {
        const Item& item = items[free[i]];
        v[i] = static_cast<double>(item.c) - mu * static_cast<double>(item.s);
      }
      std::iota(idx.begin(), idx.end(), 0);
      std::nth_element(idx.begin(), idx.begin() + (k - 1), idx.end(),
                       [&](int a, int b) { return v[a] < v[b]; });
      double sum = static_cast<double>(e.cost) + mu * g, saved = 0;
      for (int i = 0; i < k; ++i) {
        sum += v[idx[i]];
        saved += static_cast<double>(items[free[idx[i]]].s);
      }
      if (sum > best) {
        best = sum;
        best_mu = mu;
      }
      (saved < g ? lo : hi) = mu;
    }
    return {best_mu, best};
  }

  // Whether a bound `lb` on plans of k items leaves none better than the
  // best (a tie goes to fewer items); a ns of allowance for rounding.
  static bool Excludes(double lb, int k, int64_t best_cost, int64_t best_count) {
    const double margin = 1 + 1e-9 * std::abs(lb);
    return lb - margin > static_cast<double>(best_cost) ||
           (lb - margin > static_cast<double>(best_cost) - 1 && k >= best_count);
  }

  void Add(Count* c, int p, int sign) {
    const int m = static_cast<int>(c->rank.size());
    const double value = c->value[c->rank[p]];
    for (int i = c->rank[p]; i <= m; i += i & -i) {
      c->fn[i] += sign;
      c->fv[i] += sign * value;
    }
  }

  // The sum of the `k` least values undecided; false when fewer are left.
  bool SumOfLeast(const Count& c, int64_t k, double* sum) const {
    const int m = static_cast<int>(c.rank.size());
    int pos = 0;
    int64_t n = 0;
    double acc = 0;
    for (int step = top_; step > 0; step >>= 1) {
      const int next = pos + step;
      if (next <= m && n + c.fn[next] <= k) {
        pos = next;
        n += c.fn[next];
        acc += c.fv[next];
      }
    }
    *sum = acc;
    return n == k;
  }

  bool active_ = false;
  int top_ = 1;
  std::vector<Count> counts_;
  double least_ = 0;  // the least bound over the counts left
};

// *sums = the prefix sums of v, from 0 items up.
void PrefixSums(const std::vector<int64_t>& v, std::vector<int64_t>* sums) {
  sums->assign(v.size() + 1, 0);
  for (size_t k = 0; k < v.size(); ++k) (*sums)[k + 1] = (*sums)[k] + v[k];
}

// Lower bounds on the cost of saving x bytes with some of a fixed set of
// items: the LP (fractional items, cheapest per byte first), and the
// cheapest k items where k is the least number whose largest savings
// reach x.
class CoverBound {
 public:
  // Builds the bounds for items[ids[first..last)] (reusing the buffers).
  void Build(const std::vector<Item>& items, const std::vector<int>& ids,
             int first, int last) {
    ids_.assign(ids.begin() + first, ids.begin() + last);
    sizes_.clear();
    costs_.clear();
    for (int i : ids_) {
      sizes_.push_back(items[i].s);
      costs_.push_back(items[i].c);
    }
    std::sort(sizes_.begin(), sizes_.end(), std::greater<int64_t>());
    std::sort(costs_.begin(), costs_.end());
    PrefixSums(sizes_, &largest_);
    PrefixSums(costs_, &cheapest_);
    std::sort(ids_.begin(), ids_.end(), [&](int x, int y) {
      const __int128 lhs = static_cast<__int128>(items[x].c) * items[y].s;
      const __int128 rhs = static_cast<__int128>(items[y].c) * items[x].s;
      return lhs != rhs ? lhs < rhs : x < y;
    });
    lp_s_.assign(1, 0);
    lp_c_.assign(1, 0);
    per_byte_.clear();
    for (int i : ids_) {
      lp_s_.push_back(lp_s_.back() + items[i].s);
      lp_c_.push_back(lp_c_.back() + items[i].c);
      per_byte_.push_back(static_cast<double>(items[i].c) /
                          static_cast<double>(items[i].s));
    }
  }

  int64_t total() const { return largest_.back(); }
  // Prefix sums of the savings, largest first, and of the costs, cheapest
  // first, from 0 items up.
  const std::vector<int64_t>& largest() const { return largest_; }
  const std::vector<int64_t>& cheapest() const { return cheapest_; }

  // The bounds on saving x (infinity: the items cannot). The LP:
  double Lp(int64_t x) const {
    if (x <= 0) return 0;
    if (x > total()) return std::numeric_limits<double>::infinity();
    const int u = static_cast<int>(
        std::lower_bound(lp_s_.begin() + 1, lp_s_.end(), x) - lp_s_.begin()) - 1;
    return static_cast<double>(lp_c_[u]) +
           static_cast<double>(x - lp_s_[u]) * per_byte_[u];
  }

  // The count bound on saving x: the cheapest k items, k the least number
  // whose largest savings reach x.
  double Counted(int64_t x) const {
    if (x <= 0) return 0;
    if (x > total()) return std::numeric_limits<double>::infinity();
    const int k = static_cast<int>(
        std::lower_bound(largest_.begin(), largest_.end(), x) - largest_.begin());
    return static_cast<double>(cheapest_[k]);
  }

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
  // most (between layer types), and m.
  double Prepare(const std::vector<Item>& items, const std::vector<int>& order,
                 const std::vector<double>& r, int from, int64_t g) {
    const int m = static_cast<int>(order.size());
    std::vector<std::pair<double, int>> jumps;
    auto away = [&](int t) {
      return std::abs(r[order[t]]) / static_cast<double>(items[order[t]].s);
    };
    for (int q = from + 1; q < m; ++q) jumps.push_back({away(q) - away(q - 1), q});
    const size_t kept = std::min<size_t>(jumps.size(), 4);
    std::partial_sort(jumps.begin(), jumps.begin() + kept, jumps.end(),
                      std::greater<>());
    jumps.resize(kept);
    jumps.push_back({0, m});
    double best = -std::numeric_limits<double>::infinity();
    int best_q = m;
    CoverBound c;
    for (const auto& [jump, q] : jumps) {
      c.Build(items, order, from, q);
      o_.Build(items, order, q, m);
      const double v = Scan(c.largest().data(), c.cheapest().data(), q - from,
                            o_, g, nullptr, kExact);
      if (v > best) {
        best = v;
        best_q = q;
      }
    }
    items_ = &items;
    order_ = &order;
    from_ = from;
    q_ = best_q;
    if (best_q != m) o_.Build(items, order, best_q, m);  // m was the last
    active_ = true;
    Start(from);
    return best;
  }

  bool active() const { return active_; }

  // Rest answers for states at processing index t from now on (t at least
  // the preparing one): C's sums over its items at t or later.
  void Start(int t) {
    row_ = std::max(t, from_);
    sizes_.clear();
    costs_.clear();
    for (int u = row_; u < q_; ++u) {
      sizes_.push_back((*items_)[(*order_)[u]].s);
      costs_.push_back((*items_)[(*order_)[u]].c);
    }
    std::sort(sizes_.begin(), sizes_.end(), std::greater<int64_t>());
    std::sort(costs_.begin(), costs_.end());
    Sums();
  }

  // Moves on to processing index t >= the current one (drops the C items
  // decided in between).
  void Advance(int t) {
    if (!active_ || t <= row_) return;
    for (; row_ < t; ++row_) {
      if (row_ >= q_) continue;
      const Item& it = (*items_)[(*order_)[row_]];
      sizes_.erase(std::lower_bound(sizes_.begin(), sizes_.end(), it.s,
                                    std::greater<int64_t>()));
      costs_.erase(std::lower_bound(costs_.begin(), costs_.end(), it.c));
    }
    Sums();
  }

  // The bound on what a state at processing index t (the current one)
  // that needs g still costs (before rounding); -infinity where it does
  // not apply. `hint`: where the scan starts, and where it ended (states
  // in the order of g move it one way).
  double Rest(int t, int64_t g, int* hint, Enough enough) const {
    if (!active_ || t != row_ || t >= q_ || g <= 0) {
      return -std::numeric_limits<double>::infinity();
    }
    return Scan(largest_.data(), cheapest_.data(),
                static_cast<int>(sizes_.size()), o_, g, hint, enough);
  }

 private:
  void Sums() {
    PrefixSums(sizes_, &largest_);
    PrefixSums(costs_, &cheapest_);
  }

  // min over K in 0..n of f(K) = cheapest[K] + o.Least(g - largest[K]).
  // f is at least h(K) = cheapest[K] + o.Lp(g - largest[K]), which is
  // convex in K (cheapest is, and o.Lp is convex and nondecreasing in a
  // concave decreasing argument): the scan finds h's least point, then
  // goes each way until h there reaches the least f found. Where the
  // answer is sure to fall below enough.low (f at h's least point does),
  // or to reach enough.high (h's least does), it returns h's least
  // instead: a bound all the same, for less work.
  static double Scan(const int64_t* largest, const int64_t* cheapest, int n,
                     const CoverBound& o, int64_t g, int* hint, Enough enough) {
    const int k0 = static_cast<int>(
        std::lower_bound(largest, largest + n + 1, g - o.total()) - largest);
    if (k0 > n) return std::numeric_limits<double>::infinity();
    auto h = [&](int k) {
      return static_cast<double>(cheapest[k]) + o.Lp(g - largest[k]);
    };
    int lo;
    double at;  // h(lo)
    if (hint != nullptr && *hint >= 0) {
      lo = std::min(std::max(*hint, k0), n);
      at = h(lo);
      for (double next; lo < n && (next = h(lo + 1)) < at; ++lo) at = next;
      for (double next; lo > k0 && (next = h(lo - 1)) < at; --lo) at = next;
    } else {
      lo = k0;
      for (int hi = n; lo < hi;) {
        const int mid = (lo + hi) / 2;
        if (h(mid + 1) >= h(mid)) {
          hi = mid;
        } else {
          lo = mid + 1;
        }
      }
      at = h(lo);
    }
    if (hint != nullptr) *hint = lo;
    if (at >= enough.high) return at;
    auto f = [&](int k, double h_k) {
      return std::max(h_k, static_cast<double>(cheapest[k]) +
                               o.Counted(g - largest[k]));
    };
    double least = f(lo, at);
    if (least < enough.low) return at;
    for (int k = lo + 1; k <= n; ++k) {
      const double h_k = h(k);
      if (h_k >= least) break;
      least = std::min(least, f(k, h_k));
    }
    for (int k = lo - 1; k >= k0; --k) {
      const double h_k = h(k);
      if (h_k >= least) break;
      least = std::min(least, f(k, h_k));
    }
    return least;
  }

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

bool LexLess(int64_t c1, int64_t n1, int64_t c2, int64_t n2) {
  return c1 < c2 || (c1 == c2 && n1 < n2);
}

// Whether recomputing the items marked in `chosen` meets every need.
bool MeetsNeeds(const std::vector<Item>& items, const std::vector<char>& chosen,
                const std::vector<int64_t>& req) {
  int64_t sigma = 0;
  for (size_t p = 0; p <= items.size(); ++p) {
    if (sigma < req[p]) return false;
    if (p < items.size() && chosen[p]) sigma += items[p].s;
  }
  return true;
}

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
  ReverseSearch(const std::vector<Item>& items, const std::vector<int64_t>& req,
                double lambda, int64_t max_nodes,
                std::chrono::nanoseconds time_limit, ExactStats* st)
      : items_(items),
        req_(req),
        m_(static_cast<int>(items.size())),
        lambda_(lambda),
        max_nodes_(max_nodes),
        time_limit_(time_limit),
        start_(std::chrono::steady_clock::now()),
        st_(st) {
    const int m = m_;
    // The tail: items from the lowest position where the max can act.
    std::vector<int64_t> gmin(m + 1);
    gmin[m] = req[m];
    for (int p = m; p-- > 0;) gmin[p] = std::max(req[p], gmin[p + 1] - items[p].s);
    body_ = 0;
    while (body_ < m && req[body_] <= gmin[body_ + 1] - items[body_].s) ++body_;
    // Whether every need below position p is met by saving nothing.
    none_below_.assign(m + 1, true);
    for (int p = 1; p <= m; ++p) {
      none_below_[p] = none_below_[p - 1] && req[p - 1] <= 0;
    }
    // Processing order: the tail from the top down, then the body closest
    // to the LP's price first (ties by chain position).
    r_.resize(m);
    double magnitude = 0;
    for (int p = 0; p < m; ++p) {
      r_[p] = static_cast<double>(items[p].c) - lambda * items[p].s;
      magnitude += std::abs(r_[p]) + static_cast<double>(items[p].c) +
                   lambda * static_cast<double>(items[p].s);
    }
    for (int p = m; p-- > body_;) order_.push_back(p);
    std::vector<int> body(body_);
    std::iota(body.begin(), body.end(), 0);
    std::sort(body.begin(), body.end(), [&](int x, int y) {
      const double ax = std::abs(r_[x]) / static_cast<double>(items[x].s);
      const double ay = std::abs(r_[y]) / static_cast<double>(items[y].s);
      return ax != ay ? ax < ay : x < y;
    });
    order_.insert(order_.end(), body.begin(), body.end());
    // Suffix sums over the processing order.
    neg_.assign(m + 1, 0);
    left_s_.assign(m + 1, 0);
    def_s_.assign(m + 1, 0);
    def_c_.assign(m + 1, 0);
    def_n_.assign(m + 1, 0);
    add_s_.assign(m + 1, 0);
    add_c_.assign(m + 1, 0);
    drop_s_.assign(m + 1, 0);
    drop_c_.assign(m + 1, 0);
    for (int t = 0; t < m; ++t) {
      const Item& it = items[order_[t]];
      const bool lp_takes = r_[order_[t]] < 0;
      add_s_[t + 1] = add_s_[t] + (lp_takes ? 0 : it.s);
      add_c_[t + 1] = add_c_[t] + (lp_takes ? 0 : it.c);
      drop_s_[t + 1] = drop_s_[t] + (lp_takes ? it.s : 0);
      drop_c_[t + 1] = drop_c_[t] + (lp_takes ? it.c : 0);
    }
    rho_.assign(m + 1, std::numeric_limits<double>::infinity());
    min_abs_.assign(m + 1, std::numeric_limits<double>::infinity());
    for (int t = m; t-- > 0;) {
      const int p = order_[t];
      const bool lp_takes = r_[p] < 0;
      rho_[t] = std::min(rho_[t + 1], std::abs(r_[p]) / items[p].s);
      min_abs_[t] = std::min(min_abs_[t + 1], std::abs(r_[p]));
      neg_[t] = neg_[t + 1] + std::min(0.0, r_[p]);
      left_s_[t] = left_s_[t + 1] + items[p].s;
      def_s_[t] = def_s_[t + 1] + (lp_takes ? items[p].s : 0);
      def_c_[t] = def_c_[t + 1] + (lp_takes ? items[p].c : 0);
      def_n_[t] = def_n_[t + 1] + lp_takes;
    }
    for (int64_t need : req) largest_need_ = std::max(largest_need_, need);
    slack_ = 1e-9 * (lambda * static_cast<double>(largest_need_) + magnitude) + 4;
  }

  // Items in the tail (decided with their needs, from the top down).
  int tail() const { return m_ - body_; }

  // A lower bound on the cost of any plan that extends a state needing g
  // with the items from processing index t on undecided; at least `cost`.
  int64_t Bound(int t, int64_t g, int64_t cost) const {
    // A completion that saves S >= g costs lambda S + neg + the |r| of the
    // items where it differs from the LP's choice, which save at least
    // |S - def_s| between them at no less than rho per byte.
    const double gd = static_cast<double>(g);
    const double def = static_cast<double>(def_s_[t]);
    const double rho = std::isfinite(rho_[t]) ? rho_[t] : 0;
    const double least =
        gd >= def ? lambda_ * gd + rho * (gd - def)
                  : std::min(lambda_ * gd + rho * (def - gd), lambda_ * def);
    return Ceil(static_cast<double>(cost) + neg_[t] + least, cost);
  }

  // The least integer at or above v less the rounding allowance; at least
  // `floor`.
  int64_t Ceil(double v, int64_t floor) const {
    v -= slack_;
    if (v <= static_cast<double>(floor)) return floor;
    return v >= static_cast<double>(kInf) ? kInf
                                         : static_cast<int64_t>(std::ceil(v));
  }

  // Below the tail the undecided items are in the order of |r_i| / s_i,
  // so the LP of the rest is exact per state: a completion differs from
  // the LP's choice (which saves def_s) by items it adds, r_i > 0, and
  // items it drops, r_i < 0; adding and dropping at once never pays in the
  // LP. So a state short of def_s by e > 0 adds the items left cheapest per
  // byte (c_i / s_i) until they save e, and one over it by e < 0 drops the
  // dearest per byte while they save no more than -e: prefix sums over the
  // processing order and a binary search.
  int64_t BodyLp(int t, int64_t g, int64_t cost) const {
    const int64_t e = g - def_s_[t];
    double rest = 0;
    if (e != 0) {
      const std::vector<int64_t>& sum_s = e > 0 ? add_s_ : drop_s_;
      const std::vector<int64_t>& sum_c = e > 0 ? add_c_ : drop_c_;
      const int64_t target = sum_s[t] + (e > 0 ? e : -e);
      double moved;  // the cost of the items added or dropped
      if (sum_s[m_] < target) {
        if (e > 0) return kInf;  // the items left cannot save g
        moved = static_cast<double>(sum_c[m_] - sum_c[t]);
      } else {
        // The first u whose item brings the sum to the target.
        const int u = static_cast<int>(
            std::lower_bound(sum_s.begin() + t + 1, sum_s.end(), target) -
            sum_s.begin()) - 1;
        const Item& it = items_[order_[u]];
        moved = static_cast<double>(sum_c[u] - sum_c[t]) +
                static_cast<double>(target - sum_s[u]) *
                    static_cast<double>(it.c) / static_cast<double>(it.s);
      }
      rest = e > 0 ? moved : -moved;
    }
    return Ceil(static_cast<double>(cost + def_c_[t]) + rest, cost);
  }

  // The larger of BodyLp and WholeBound.
  int64_t BodyBound(int t, int64_t g, int64_t cost) const {
    return std::max(BodyLp(t, g, cost), WholeBound(t, g, cost));
  }

  // SplitBound's bound (kInf: the items left cannot save g); `cost` where
  // it does not apply. It may stop short where the bound cannot reach
  // `prune_at`. Its sums are exact but for O's LP, whose rounding is far
  // below the allowance of 1e-9 of the total.
  int64_t WholeBound(int t, int64_t g, int64_t cost,
                     int64_t prune_at = kInf) const {
    // Within `slop` of prune_at - cost the exact bound decides (a tie
    // prunes on the count).
    const double slop = 2 + 1e-8 * static_cast<double>(prune_at);
    const double rest = split_.Rest(
        t, g, &split_hint_,
        prune_at >= kInf ? SplitBound::kExact
                         : SplitBound::Enough{
                               static_cast<double>(prune_at - cost) - slop,
                               static_cast<double>(prune_at - cost) + slop});
    if (rest >= static_cast<double>(kInf)) return kInf;
    if (!(rest > 0)) return cost;
    const double v = static_cast<double>(cost) + rest;
    return std::max(cost, static_cast<int64_t>(std::ceil(v - 1e-9 * v)));
  }

  // Decides every item. Improves `best`; false when the work or time
  // limit stopped it (then st->lower_bound_ns is set). With `beam` > 0 it
  // is a heuristic pass instead, for a good plan early: each front keeps
  // only the `beam` states of least bound (so it examines at most 2 beam
  // per item, and the work limit does not apply), and the time limit just
  // ends it.
  bool Run(int64_t root_bound, Best* best, size_t beam = 0,
           int64_t max_nodes = kInf) {
    const int m = m_;
    max_nodes = std::min(max_nodes, max_nodes_);
    std::vector<State> front = {{std::max<int64_t>(req_[m], 0), 0, 0, -1}};
    if (split_.active()) split_.Start(0);
    if (count_.active()) count_.Start(order_, 0);
    for (int t = 0; t < m && !front.empty(); ++t) {
      if ((beam == 0 && st_->nodes > max_nodes) ||
          (time_limit_.count() > 0 &&
           std::chrono::steady_clock::now() - start_ >= time_limit_)) {
        if (beam > 0) return false;
        st_->stopped_at_limit = true;
        int64_t bound = best->cost;
        for (const State& x : front) {
          bound = std::min(bound, BodyBound(t, x.g, x.cost));
        }
        st_->lower_bound_ns = std::max(root_bound, std::min(bound, best->cost));
        return false;
      }
      Step(t, &front, best, beam);
      if (beam > 0 && front.size() > beam) KeepLeastBound(t + 1, beam, &front);
    }
    return true;
  }

  // Decides the item at processing index t for every state of `front`
  // (see Run).
  void Step(int t, std::vector<State>* front_out, Best* best, size_t beam) {
    std::vector<State>& front = *front_out;
    ++st_->steps;
    const int p = order_[t];
    const Item& it = items_[p];
    const bool in_tail = t < tail();
    const int64_t floor = in_tail ? std::max<int64_t>(req_[p], 0) : 0;
    keep_.clear();
    take_.clear();
    for (const State& x : front) {
      keep_.push_back({std::max(x.g, floor), x.cost, x.count, x.node});
      if (x.g > 0) {  // its saving can matter
        arena_.push_back({p, x.node});
        take_.push_back({std::max(x.g - it.s, floor), x.cost + it.c,
                         x.count + 1,
                         static_cast<int32_t>(arena_.size() - 1)});
      }
    }
    st_->nodes += static_cast<int64_t>(keep_.size() + take_.size());
    // Merge by g (both lists ascend), then sweep from the least g up,
    // keeping a state only if it is cheaper than all with less g, and
    // only if it can still be completed and beat the best plan.
    merged_.resize(keep_.size() + take_.size());
    std::merge(keep_.begin(), keep_.end(), take_.begin(), take_.end(),
               merged_.begin(),
               [](const State& x, const State& y) { return x.g < y.g; });
    front.clear();
    split_.Advance(t + 1);
    split_hint_ = -1;
    if (count_.active()) count_.Remove(p);
    // A state below the tail or at its bottom is done at g = 0; in the
    // tail, only if no need below asks for a saving.
    const bool done_at_zero = !in_tail || none_below_[p];
    int64_t seen_cost = kInf, seen_count = kInf;
    for (const State& x : merged_) {
      if (x.g > left_s_[t + 1]) break;  // it, and every state above, falls short
      if (!LexLess(x.cost, x.count, seen_cost, seen_count)) continue;
      seen_cost = x.cost;
      seen_count = x.count;
      if (x.g == 0 && done_at_zero) {  // meets every need as it is
        if (LexLess(x.cost, x.count, best->cost, best->count)) {
          *best = {x.cost, x.count, x.node, -1};
        }
        continue;  // more items only cost more
      }
      const int64_t bound =
          in_tail ? Bound(t + 1, x.g, x.cost) : BodyLp(t + 1, x.g, x.cost);
      if (!LexLess(bound, x.count + (x.g > 0), best->cost, best->count)) {
        continue;
      }
      if (!in_tail) {
        if (x.g <= def_s_[t + 1]) {  // the LP's choice completes it
          const int64_t c = x.cost + def_c_[t + 1];
          const int64_t n = x.count + def_n_[t + 1];
          if (LexLess(c, n, best->cost, best->count)) {
            *best = {c, n, x.node, t + 1};
          }
        }
        // Any other completion differs from the LP's choice somewhere,
        // which costs at least min_abs more than the Lagrangian bound.
        const double lagrangian = static_cast<double>(x.cost) + neg_[t + 1] +
                                  lambda_ * static_cast<double>(x.g);
        if (Ceil(lagrangian + min_abs_[t + 1], x.cost) > best->cost) continue;
        // The dearer bound last, for the states the others keep; it is
        // prepared for the first such state (an easy search does
        // without).
        if (!split_.active()) {
          split_.Prepare(items_, order_, r_, t + 1, x.g);
          split_hint_ = -1;
        }
        if (beam == 0 && count_.active() &&
            !count_.MayBeat(x.cost, x.count, x.g, best->cost, best->count)) {
          ++st_->count_pruned;
          continue;
        }
        const int64_t whole = WholeBound(t + 1, x.g, x.cost, best->cost);
        if (!LexLess(whole, x.count + (x.g > 0), best->cost, best->count)) {
          ++st_->whole_pruned;
          continue;
        }
      }
      // Equal g: the cheaper replaces the state already kept (the merge
      // leaves ties in either order).
      if (!front.empty() && front.back().g == x.g) {
        front.back() = x;
      } else {
        front.push_back(x);
      }
    }
    st_->states += static_cast<int64_t>(front.size());
    st_->max_front =
        std::max<int64_t>(st_->max_front, static_cast<int64_t>(front.size()));
  }

  // Cuts `front` (at processing index t) to the `beam` states of least
  // bound, still in the order of g.
  void KeepLeastBound(int t, size_t beam, std::vector<State>* front) {
    bounded_.clear();
    for (const State& x : *front) {
      bounded_.push_back(
          {t < tail() ? Bound(t, x.g, x.cost) : BodyBound(t, x.g, x.cost), x});
    }
    std::nth_element(bounded_.begin(), bounded_.begin() + beam, bounded_.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    bounded_.resize(beam);
    std::sort(bounded_.begin(), bounded_.end(), [](const auto& a, const auto& b) {
      return a.second.g < b.second.g;
    });
    front->clear();
    for (const auto& [bound, x] : bounded_) front->push_back(x);
  }

  // Prepares the bound over plan counts (CountBound) for the searches to
  // come, given a plan that exists (they may look for one below a target
  // instead, SolveCover); returns its root bound.
  int64_t PrepareCounts(Best* best) {
    // Its entries: the states that the tail leaves (its items decided with
    // their needs, as Run does), so that the counts and their mu are those
    // of the body's knapsack. Where the tail leaves too many, the
    // relaxation of every need to the largest over all the items.
    // (A long tail's fronts can grow large: the walk gives up early.)
    std::vector<State> front = {{std::max<int64_t>(req_[m_], 0), 0, 0, -1}};
    if (split_.active()) split_.Start(0);
    int t = 0;
    for (; t < tail() && !front.empty() && front.size() <= 16 * kMaxEntries; ++t) {
      Step(t, &front, best, 0);
    }
    std::vector<CountBound::Entry> entries;
    std::vector<int> free(order_.begin() + tail(), order_.end());
    if ((t == tail() || front.empty()) && front.size() <= kMaxEntries) {
      for (const State& x : front) entries.push_back({x.cost, x.count, x.g});
      count_.Prepare(items_, free, entries, best->cost, best->count);
    }
    if (!count_.active()) {
      free = order_;
      entries = {{0, 0, largest_need_}};
      count_.Prepare(items_, free, entries, best->cost, best->count);
    }
    return entries.empty() ? best->cost : count_.RootBound();
  }

  // Marks the items of the best plan `best` found here.
  void Mark(const Best& best, std::vector<char>* chosen) const {
    for (int32_t node = best.node; node >= 0; node = arena_[node].parent) {
      (*chosen)[arena_[node].item] = 1;
    }
    if (best.from < 0) return;
    for (int t = best.from; t < m_; ++t) {
      if (r_[order_[t]] < 0) (*chosen)[order_[t]] = 1;
    }
  }

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

// A cost and a count, compared in that order (LexLess).
struct CostCount {
  int64_t cost = 0, count = 0;
};

// The cheapest selection of `items` (in chain order) that meets every need
// of `req` (req[p]: what the items below p must save), in (cost, count)
// order; every need must be met by all the items together. Fills the
// search's fields of `st`. With `below`, what is asked is only whether
// some selection is under it: the greedy plan or the heuristic pass, where
// either is, answers at once (then st.lower_bound_ns is the LP's).
std::vector<char> SolveCover(const std::vector<Item>& items,
                             const std::vector<int64_t>& req,
                             const ExactOptions& options, ExactStats& st,
                             const CostCount* below = nullptr) {
  const int m = static_cast<int>(items.size());
  int64_t largest_need = 0;
  for (int64_t need : req) largest_need = std::max(largest_need, need);
  // Cost/saving order (cheaper per byte first; then larger saving, then
  // chain position), for the LP's price and the greedy plan.
  std::vector<int> by_ratio(m);
  std::iota(by_ratio.begin(), by_ratio.end(), 0);
  std::sort(by_ratio.begin(), by_ratio.end(), [&](int x, int y) {
    const __int128 lhs = static_cast<__int128>(items[x].c) * items[y].s;
    const __int128 rhs = static_cast<__int128>(items[y].c) * items[x].s;
    if (lhs != rhs) return lhs < rhs;
    if (items[x].s != items[y].s) return items[x].s > items[y].s;
    return x < y;
  });

  // The greedy plan: cheapest per byte until every need is met, then drop
  // what is not needed, dearest first.
  std::vector<char> best_chosen(m, 0);
  for (int r = 0; r < m && !MeetsNeeds(items, best_chosen, req); ++r) {
    best_chosen[by_ratio[r]] = 1;
  }
  {
    std::vector<int> dearest(m);
    std::iota(dearest.begin(), dearest.end(), 0);
    std::sort(dearest.begin(), dearest.end(), [&](int x, int y) {
      return items[x].c != items[y].c ? items[x].c > items[y].c : x > y;
    });
    for (int p : dearest) {
      if (!best_chosen[p]) continue;
      best_chosen[p] = 0;
      if (!MeetsNeeds(items, best_chosen, req)) best_chosen[p] = 1;
    }
  }
  Best best{0, 0, -2, -1};
  for (int p = 0; p < m; ++p) {
    if (best_chosen[p]) {
      best.cost += items[p].c;
      ++best.count;
    }
  }

  // The LP's price per byte: the cost per byte of the item that completes
  // the cheapest-per-byte cover of the largest need.
  double lambda = 0;
  {
    int64_t covered = 0;
    for (int r = 0; r < m; ++r) {
      const Item& it = items[by_ratio[r]];
      lambda = static_cast<double>(it.c) / static_cast<double>(it.s);
      covered += it.s;
      if (covered >= largest_need) break;
    }
  }

  ReverseSearch search(items, req, lambda,
                       std::min<int64_t>(options.max_nodes, 1 << 30),
                       options.time_limit, &st);
  st.tail = search.tail();
  // Covering the largest need with every item is a relaxation of the
  // problem; its Lagrangian bound at lambda is the LP bound.
  st.root_bound_ns = std::min(search.Bound(0, largest_need, 0), best.cost);
  auto selection = [&] {
    std::vector<char> chosen(m, 0);
    if (best.node == -2 && best.from < 0) {
      chosen = best_chosen;
    } else {
      search.Mark(best, &chosen);
    }
    return chosen;
  };
  auto answered = [&] {
    if (below == nullptr || !LexLess(best.cost, best.count, below->cost, below->count)) {
      return false;
    }
    st.cost_ns = best.cost;
    st.lower_bound_ns = st.root_bound_ns;
    return true;
  };
  if (answered()) return selection();
  // The heuristic pass first: a plan near the optimum prunes most of the
  // search from its first steps. Its work is kept apart (the search's
  // stats and work limit are its own).
  search.Run(st.root_bound_ns, &best, kBeamWidth);
  st.heuristic_cost_ns = best.cost;
  st.heuristic_nodes = st.nodes;
  if (answered()) return selection();
  st.nodes = st.states = st.max_front = st.whole_pruned = st.count_pruned = 0;
  st.steps = 0;
  // Deepening: searches for a plan below a target a little above the root
  // bound, raised until one is found (then it is the optimum: the search
  // keeps every state that could lead to a plan below the target) or the
  // target reaches the best plan. The bounds prune against the target, so
  // a search that starts near the optimum does the least work; a target
  // with no plan below it is proven a lower bound. Most chains need none
  // of this: a first, plain search with a small work limit
  // (ExactOptions::plain_search_nodes) finishes them.
  int64_t proven = st.root_bound_ns;  // no plan cheaper than best costs less
  bool done = false, stopped = false;
  if (m >= kDeepenItems && options.plain_search_nodes > 0) {
    done = search.Run(st.root_bound_ns, &best, 0,
                      std::max(options.plain_search_nodes, kTryNodesPerItem * m));
    st.stopped_at_limit = false;  // (best may be better, and is a plan)
  }
  if (m >= kDeepenItems && !done) {
    proven = std::min(best.cost, std::max(proven, search.PrepareCounts(&best)));
    st.root_bound_ns = proven;
    // The first target sits just above the root bound: the bound over plan
    // counts puts it within about a thousandth of a block's cost of the
    // optimum on noisy chains, where the best plan known is tenths of a
    // block above. A target over the optimum keeps every state whose bound
    // is below the target until the optimum turns up, and near-equal
    // layers make those many; a target under it is proven cheaply.
    for (int64_t step = std::max<int64_t>(1, (best.cost - proven) / 1024);
         proven + step < best.cost; step *= 2) {
      Best target{proven + step, -1, -3, -1};  // a bound, not a plan
      if (!search.Run(st.root_bound_ns, &target)) {
        stopped = true;
        st.lower_bound_ns = std::max(st.lower_bound_ns, proven);
        break;
      }
      if (target.node != -3 || target.from >= 0) {
        best = target;
        done = true;
        break;
      }
      proven = target.cost;
    }
  }
  if (done) {
    st.lower_bound_ns = best.cost;
  } else if (!stopped) {
    if (search.Run(proven, &best)) {
      st.lower_bound_ns = best.cost;
    } else {
      st.lower_bound_ns = std::max(st.lower_bound_ns, proven);
    }
  }
  st.cost_ns = best.cost;
  return selection();
}

// KEEP and RECOMPUTE only (the problem's link is ignored).
std::vector<Action> SolveRecompute(const PlanProblem& problem,
                                   const ExactOptions& options,
                                   ExactStats& st) {
  st = ExactStats();

  const size_t n = problem.blocks.size();
  std::vector<Action> actions(n, Action::kKeep);
  const int64_t limit = problem.limit_bytes();

  // Candidates in chain order, and the needs: req[p] is the largest need
  // that the items below p must meet (constraints between item p-1's block
  // and item p's).
  std::vector<Item> items;
  std::vector<int64_t> req(1, -kInf);
  int64_t below = problem.base_bytes;  // A_k
  for (size_t k = 0; k < n; ++k) {
    const BlockMemory m = MemoryOf(problem, k);
    const BlockCost& b = problem.blocks[k];
    const int64_t s = m.keep_bytes - m.recompute_bytes;
    if (b.checkpointable && s > 0 && k + 1 < n) {
      items.push_back({static_cast<int>(k), s, b.forward_ns});
      req.push_back(-kInf);
    }
    // Block k's backward: the items below k are those before the newest
    // one when block k is itself an item.
    const size_t p = items.size() - (!items.empty() &&
                                     items.back().block == static_cast<int>(k));
    req[p] = std::max(req[p], below + m.backward_bytes - limit);
    below += m.keep_bytes;
  }
  req.back() = std::max(req.back(), below - limit);  // end of forward
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

// The search with OFFLOAD (the problem has a link). Memory model v2 as
// SimulateStep has it, restated for a search along the chain in forward
// order. Forward times do not depend on the plan (block k's forward ends
// at now_k, the sum of forward_ns up to k), so neither do the landing
// times of the copies out: first in first out, block i's copy lands at
// L_i = max(now_i, L of the copy before) + T_i. Before block k is decided,
// with sigma the savings of the blocks below k (a_i - o_i recomputed, t_i
// offloaded, whether landed or not), A_k = base + the a_i below k and
// inflight_k the t_i of copies not landed by now_{k-1}, when block k's
// forward starts (the runtime waits there for those that have):
//
//   end of block k's forward:  A_k - sigma + inflight_k + a_k <= limit
//   block k's backward:        A_k - sigma + bwd_k + [k-1 offloaded] t_{k-1}
//                              <= limit
//
// (backward begins once every copy out has landed, and the block below a
// backward is prefetched whole during it). Exposed time: the wait for the
// copies out at the end of forward, max(0, L_last - now_{L-1}), and per
// offloaded block j the wait for its copy back, which is issued when the
// backward of block j+1 begins and never queues:
// max(0, H_j - backward_ns_{j+1} - [j+1 recomputed] forward_ns_{j+1}).
// Every term is known once blocks k-1 and k are decided, so the cost
// (recompute plus exposed time) adds up along the chain.
// RECOMPUTE_OFFLOAD (PlanProblem::offload_checkpoints) is a recompute
// whose checkpoint o_{k-1} is a copy like an offload's t_k: sigma gains
// s_k + o_{k-1}, the copy queues and comes back the same way, and block
// k's own backward holds it again (sigma before k does not count it, so
// the moment above is unchanged). It is only chosen after a recomputed
// block (either kind), which the state's last action says; a block whose
// recompute saves nothing is then recomputed too when the block above
// can send its checkpoint.
//
// A state: sigma, cost, count, block k-1's action (Last), and the
// copies still in flight when the next block's forward starts (their bytes
// and landing times: what the future moments depend on; which blocks they
// are does not matter, so identical layers merge). States with the same
// copies in flight and the same last action compare on (sigma, cost,
// count) alone: a Pareto front per
// such group, as in the recompute search, and across groups as
// DropDominated says. Pruned as there: a state that cannot reach a later
// need even with every block left at its larger saving; a state whose cost
// plus the LP bound over the items left (Relax's, of the blocks above; or
// PrepareTop's, of those below the top) reaches the best plan, or on
// chains of up to kMaxWholeBlocks its cost plus what the blocks up to the
// top cost whole (PrepareWhole) passes it; a state
// that meets every need ahead whatever comes (it finishes with every block
// left kept). An offload's least wait is charged
// when it is chosen and the wait at the end of forward as each copy is
// queued, so a state's cost is already most of what it will cost. The
// last block is never recomputed or offloaded (neither lowers any moment),
// nor is a block whose saving is not positive, nor offloaded a block whose
// recompute is never worse (see the constructor). Times are doubles, as in
// SimulateStep; a plan's cost here can differ from SimulateStep's by a
// rounding, never more.
//
// Before the search: where no block can send anything, the recompute
// search's plan is the answer. Else Relax's covering problem, solved
// exactly (SolveCover), bounds every plan; where its optimum is the
// recompute plan's cost, that plan is optimal and there is no search.
// Else a heuristic pass of the search (the least-bound states per step,
// as without OFFLOAD) looks for a cheaper plan to start from, and the
// search proper deepens from the root bound (RunDeepening) where the
// whole-block bounds make that bound close.
//
// The most states the search with OFFLOAD examines, whatever
// ExactOptions::max_nodes says: each keeps a node (32 bytes) and costs
// up to 2 microseconds of bookkeeping (its copies in flight), so this
// bounds the search to about 2 seconds and 100 MiB.
constexpr int64_t kMaxOffloadNodes = int64_t{1} << 20;
// And on chains longer than kMaxWholeBlocks (no whole-block bounds, no
// deepening) at most this over the chain's length: there a search that
// has not finished early does not finish. On the bench's 200- and
// 1000-block chains with noisy layers and a link, the four that stop have
// the same plan and within 0.01% the same lower bound after 2^15 states
// as after 2^20, in a tenth of the time (on 1000 blocks, 69 against 780
// ms at p99); with equal layers two of the six stopped then finish after
// 2^20, and the plans of three are 0.04..0.06% dearer.
constexpr int64_t kOffloadBlockNodes = int64_t{1} << 25;
// OffloadSearch::PrepareWhole's limits: the longest chain it prepares for
// (on the bench's 200- and 1000-block chains its points pruned no state
// and cost up to 20% of the median solve), and the most points it keeps.
constexpr int kMaxWholeBlocks = 128;
constexpr size_t kMaxWholePoints = size_t{1} << 18;

// The search with OFFLOAD's work limit on a chain of n blocks.
int64_t OffloadNodeLimit(const ExactOptions& options, size_t n) {
  const int64_t limit = std::min(options.max_nodes, kMaxOffloadNodes);
  if (n <= static_cast<size_t>(kMaxWholeBlocks)) return limit;
  return std::min(limit, kOffloadBlockNodes / static_cast<int64_t>(n));
}
// Costs summed in different orders may differ by a rounding of the
// doubles, never by this much: a bound prunes only past it.
constexpr double kCostSlackNs = 1e-3;

struct OffloadBlock {
  int64_t below = 0;  // A_k: base plus the a_i of the blocks below
  int64_t a = 0, s = 0, t = 0, bwd = 0, c = 0;
  int64_t ro = 0;  // RECOMPUTE_OFFLOAD's copy: o_{k-1}, its checkpoint
  // now: when the block's forward ends; start: when it starts (a copy
  // landed by then is off the device at the block's end, SimulateStep).
  double bns = 0, now = 0, start = 0;
  // Per copy kind (OFFLOAD's t, RECOMPUTE_OFFLOAD's ro): time out, time
  // back, and the least wait for the copy back: with the block above
  // recomputed when that one can be. Charged when the block is chosen so;
  // the rest once the block above is decided.
  double out_ns = 0, back_ns = 0, least_wait = 0;
  double ro_out_ns = 0, ro_back_ns = 0, ro_least_wait = 0;
  bool can_r = false, can_o = false, can_ro = false;
};

// The action of the block a state decided last (what the next block's
// moments, waits and choices depend on).
enum Last : uint8_t { kLastKeep, kLastRecompute, kLastOffload, kLastRo };

bool Sends(uint8_t last) { return last == kLastOffload || last == kLastRo; }

struct OffloadNode {
  int32_t block;
  Action action;
  int32_t parent;    // previous non-KEEP node
  int32_t prev_off;  // previous node with a copy out
  double landed;     // with a copy out: when it lands
};

// Copies in flight as (landing time, bytes), the first to land first.
using Profile = std::vector<std::pair<double, int64_t>>;
using ProfileView = absl::Span<const std::pair<double, int64_t>>;

struct OffloadState {
  int64_t sigma;
  double cost;
  int32_t count;
  int32_t node;      // newest non-KEEP node, -1 for none
  int32_t off_node;  // newest node with a copy out, -1 for none
  uint8_t last;      // Last: the action of the block just decided
};

class OffloadSearch {
 public:
  // `start`: when the call began (ExactOptions::time_limit counts from it).
  OffloadSearch(const PlanProblem& problem, const ExactOptions& options,
                std::chrono::steady_clock::time_point start, ExactStats* st)
      : n_(static_cast<int>(problem.blocks.size())),
        limit_(problem.limit_bytes()),
        max_nodes_(OffloadNodeLimit(options, problem.blocks.size())),
        time_limit_(options.time_limit),
        search_time_(options.time_limit * 3 / 4),
        start_(start),
        st_(st) {
    blocks_.resize(n_);
    double now = 0;
    for (int k = 0; k < n_; ++k) {
      const BlockMemory m = MemoryOf(problem, k);
      const BlockCost& b = problem.blocks[k];
      OffloadBlock& x = blocks_[k];
      x.a = m.keep_bytes;
      x.s = m.keep_bytes - m.recompute_bytes;
      x.t = m.transfer_bytes;
      x.bwd = m.backward_bytes;
      x.c = b.forward_ns;
      x.bns = static_cast<double>(m.backward_ns);
      x.start = now;
      now += static_cast<double>(b.forward_ns);
      x.now = now;
      x.out_ns = static_cast<double>(x.t) / problem.d2h_bytes_per_s * 1e9;
      x.back_ns = static_cast<double>(x.t) / problem.h2d_bytes_per_s * 1e9;
      x.can_r = b.checkpointable && x.s > 0 && k + 1 < n_;
      x.can_o = b.checkpointable && x.t > 0 && k + 1 < n_;
      // RECOMPUTE_OFFLOAD acts after a recomputed block (plan.h); on the
      // last block it lowers no moment.
      if (problem.offload_checkpoints && k > 0 && k + 1 < n_ &&
          b.checkpointable && problem.blocks[k - 1].checkpointable) {
        x.ro = MemoryOf(problem, k - 1).output_bytes;
        x.can_ro = x.ro > 0;
        x.ro_out_ns = static_cast<double>(x.ro) / problem.d2h_bytes_per_s * 1e9;
        x.ro_back_ns = static_cast<double>(x.ro) / problem.h2d_bytes_per_s * 1e9;
      }
    }
    // A block whose recompute (or checkpoint sent) saves nothing is still
    // chosen so when that lets the block above send its checkpoint.
    for (int k = n_ - 1; k-- > 0;) {
      OffloadBlock& x = blocks_[k];
      const bool enables = blocks_[k + 1].can_ro;
      x.can_ro = x.can_ro && (x.s + x.ro > 0 || enables);
      if (enables) x.can_r = true;
    }
    for (int k = 0; k + 1 < n_; ++k) {
      OffloadBlock& x = blocks_[k];
      const OffloadBlock& up = blocks_[k + 1];
      const double hides =
          up.bns + (up.can_r || up.can_ro ? static_cast<double>(up.c) : 0.0);
      x.ro_least_wait = std::max(0.0, x.ro_back_ns - hides);
      if (!x.can_o) continue;
      x.least_wait = std::max(0.0, x.back_ns - hides);
      // Recomputing frees at least as much, at once, for no more time, and
      // hides more of the block below's copy back; offloading also holds
      // its bytes in the backward above and delays later copies: such an
      // offload is never better.
      if (x.can_r && x.t <= x.s && x.least_wait >= static_cast<double>(x.c)) {
        x.can_o = false;
      }
    }
    // need[k]: what sigma must be at block k's moments, ignoring the
    // copies in flight and the prefetched block (which only add to it).
    need_.assign(n_ + 1, -kInf);
    int64_t below = problem.base_bytes;
    for (int k = 0; k < n_; ++k) {
      blocks_[k].below = below;
      need_[k] = below + std::max(blocks_[k].a, blocks_[k].bwd) - limit_;
      below += blocks_[k].a;
    }
    // ahead[p]: the largest need at p or above; reach[p]: the least sigma
    // before block p from which every need at p or above can still be met
    // with each block from p on at its larger saving, counted at once.
    ahead_.assign(n_ + 1, -kInf);
    reach_.assign(n_ + 1, -kInf);
    for (int p = n_ - 1; p >= 0; --p) {
      const OffloadBlock& x = blocks_[p];
      const int64_t most = std::max<int64_t>(
          {0, x.can_r ? x.s : 0, x.can_o ? x.t : 0, x.can_ro ? x.s + x.ro : 0});
      ahead_[p] = std::max(ahead_[p + 1], need_[p]);
      reach_[p] = std::max(need_[p], reach_[p + 1] - most);
    }
    Relax();
    Rank(items_, &rank_of_, &by_rank_);
  }

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
  void FinishStopped() {
    if (stopped_from_ < 0) return;
    const std::vector<OffloadState> front = std::move(stopped_front_);
    const int from = std::exchange(stopped_from_, -1);
    const auto widest = static_cast<size_t>(
        std::max<int64_t>(kBeamWidth, max_nodes_ / (64 * (n_ - from))));
    for (size_t width = kBeamWidth;; width = std::min(4 * width, widest)) {
      if (!Sweep(front, from, width) || width == widest) return;
    }
  }

  // Run from `front` (states before block `from`).
  bool Sweep(std::vector<OffloadState> front, int from, size_t beam) {
    LpBound lp(by_rank_);
    lp.AddAll();
    size_t next_item = 0;  // items of blocks below the current one removed
    // (Not in the constructor: most problems are settled before a search.)
    if (!top_prepared_) PrepareTop();
    LpBound top_lp(top_by_rank_);
    top_lp.AddAll();
    size_t next_top_item = 0;
    for (; next_item < items_.size() && items_[next_item].block < from; ++next_item) {
      lp.Add(rank_of_[next_item], -1);
    }
    for (; next_top_item < top_items_.size() && top_items_[next_top_item].block < from;
         ++next_top_item) {
      top_lp.Add(top_rank_of_[next_top_item], -1);
    }
    if (beam > 0 && front.size() > beam) KeepLeastBound(from, lp, beam, &front);
    // (After the heuristic pass: the best plan known prunes its points.)
    if (beam == 0 && !whole_prepared_) PrepareWholes();
    // A step takes up to tens of ms on a front of ten thousand states, and
    // about as long as the one before it: the search stops where the next
    // would pass the time limit, if it takes that long.
    std::chrono::steady_clock::duration last_step{0};
    for (int k = from; k < n_ && !front.empty(); ++k) {
      const auto step_start = std::chrono::steady_clock::now();
      if ((beam == 0 && st_->nodes > max_nodes_) ||
          (time_limit_.count() > 0 &&
           step_start - start_ + last_step >= (beam > 0 ? time_limit_ : search_time_))) {
        if (beam > 0) return false;
        st_->stopped_at_limit = true;
        lower_bound_ = StoppedBound(front, k);
        stopped_front_ = std::move(front);
        stopped_from_ = k;
        return false;
      }
      // The items of block k are decided now.
      for (; next_item < items_.size() && items_[next_item].block <= k;
           ++next_item) {
        lp.Add(rank_of_[next_item], -1);
      }
      for (; next_top_item < top_items_.size() && top_items_[next_top_item].block <= k;
           ++next_top_item) {
        top_lp.Add(top_rank_of_[next_top_item], -1);
      }
      ++st_->steps;
      Step(k, front, lp, top_lp);
      last_step = std::chrono::steady_clock::now() - step_start;
      st_->states += static_cast<int64_t>(front.size());
      st_->max_front =
          std::max<int64_t>(st_->max_front, static_cast<int64_t>(front.size()));
      if (beam > 0 && front.size() > beam) KeepLeastBound(k + 1, lp, beam, &front);
    }
    if (beam == 0) lower_bound_ = best_cost_;
    return true;
  }

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
  bool RunDeepening() {
    // (With the plan to beat's cost: its points hold for every target.)
    if (!whole_prepared_) PrepareWholes();
    // The plan to beat, which the targets hide while they search.
    const double beat = best_cost_;
    const int64_t beat_count = best_count_;
    const int32_t beat_node = best_node_;
    double proven = RootBound();
    const bool deepens = std::any_of(wholes_.begin(), wholes_.end(),
                                     [](const Whole& w) { return w.from == 0; });
    bool complete = true, settled = false;
    // The work grows with the target: it doubles its step from 1/16 of the
    // gap (on the bench's 96-block chains fewer states than from 1/1024 or
    // 1/64 and about as many as 1/8); a target past halfway to the plan to
    // beat would cost about as much as the search against that plan.
    for (double step = std::max(1.0, (beat - proven) / 16);
         deepens && proven + 2 * step < beat; step *= 2) {
      Beat(proven + step, kInf);  // a bound, not a plan
      complete = Run();
      settled = found() || !complete;
      if (settled) break;
      proven += step;
    }
    if (!found()) {
      best_cost_ = beat;
      best_count_ = beat_count;
      best_node_ = beat_node;
    }
    if (!settled) complete = Run();
    if (!complete) lower_bound_ = std::max(lower_bound_, proven);
    return complete;
  }

  // A bound on every plan: the LPs' at the root, and the whole-block
  // bounds' where they reach it.
  double RootBound() {
    if (!top_prepared_) PrepareTop();
    LpBound lp(by_rank_);
    lp.AddAll();
    int64_t rest = lp.LowerBound(ahead_[0]);
    if (top_ > 0) {
      LpBound top_lp(top_by_rank_);
      top_lp.AddAll();
      rest = std::max(rest, top_lp.LowerBound(need_[top_]));
    }
    if (rest >= kInf) return std::numeric_limits<double>::infinity();
    double bound = static_cast<double>(rest);
    for (const Whole& w : wholes_) {
      if (w.from > 0) continue;
      const double least = std::min(LeastCovering(w.points[0][0], need_[w.top]),
                                    LeastCovering(w.points[0][1], need_[w.top]));
      bound = std::max(bound, least - price_ * std::max(0.0, blocks_[n_ - 1].now -
                                                             blocks_[0].now));
    }
    return bound;
  }

  // Cuts `front` (the states before block k) to the `beam` states of
  // least bound.
  void KeepLeastBound(int k, const LpBound& lp, size_t beam,
                      std::vector<OffloadState>* front) {
    bounded_.clear();
    for (const OffloadState& x : *front) {
      bounded_.push_back(
          {x.cost + static_cast<double>(lp.LowerBound(ahead_[k] - x.sigma)), x});
    }
    std::nth_element(bounded_.begin(), bounded_.begin() + beam, bounded_.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    front->clear();
    for (size_t i = 0; i < beam; ++i) front->push_back(bounded_[i].second);
  }

  // A bound on every plan that extends a state of `front` (the states
  // before block k), for a search stopped there: the least over the front
  // of its cost and the LP of what is left, over HullItems with the copy
  // engine at the price that bounds highest, or over Relax's items where
  // that is higher. No more than the plan to beat. (The search prunes with
  // Relax's LP alone: with HullItems' it examined about as many states,
  // each at more cost.)
  double StoppedBound(const std::vector<OffloadState>& front, int k) const {
    // The front by what it still needs, least first, so that the LP of
    // each (LpBound::LowerBound's) comes from one sweep of the items.
    std::vector<std::pair<int64_t, const OffloadState*>> by_need;
    by_need.reserve(front.size());
    for (const OffloadState& x : front) by_need.push_back({ahead_[k] - x.sigma, &x});
    std::sort(by_need.begin(), by_need.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    const double forward_ns = blocks_[n_ - 1].now;  // when forward ends
    auto least = [&](const std::vector<Item>& all, double price) {
      std::vector<Item> left, by_rank;
      for (const Item& it : all) {
        if (it.block >= k) left.push_back(it);
      }
      Rank(left, nullptr, &by_rank);
      double bound = best_cost_;
      size_t next = 0;  // the items before it are taken whole
      int64_t saved = 0, cost = 0;
      for (const auto& [need, x] : by_need) {
        int64_t rest = 0;
        if (need > 0) {
          for (; next < by_rank.size() && saved + by_rank[next].s < need; ++next) {
            saved += by_rank[next].s;
            cost += by_rank[next].c;
          }
          if (next == by_rank.size()) break;  // nor can any state after it
          rest = cost + MulDivCeil(need - saved, by_rank[next].c, by_rank[next].s);
        }
        const double from = std::max(Drained(*x), blocks_[k].now);
        bound = std::min(bound, x->cost + static_cast<double>(rest) -
                                    price * std::max(0.0, forward_ns - from));
      }
      return bound;
    };
    auto priced = [&](double price) { return least(HullItems(price), price); };
    return std::max({BestPrice(priced).first, priced(0), least(items_, 0)});
  }

  // The highest of `bound`, a bound on plans for each price of copy-engine
  // time in [0, 1] (one concave in the price: a least of functions linear
  // in it), and the price it is at: a golden-section search, to a price
  // within 1% of the best.
  template <typename Bound>
  static std::pair<double, double> BestPrice(const Bound& bound) {
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
  // those items. Step's other bound relaxes every need ahead to the
  // largest, met by every block left, so a cheap block above that need's
  // moment (the last MLP below a head) counts towards it, and Relax's
  // items let a block count twice. This one does neither: on the bench's
  // slowest 96-block chains it is higher by up to half a block's cost.
  void PrepareTop() {
    top_prepared_ = true;
    std::vector<Item> hull = HullItems(0);
    std::vector<int> rank_of;
    std::vector<Item> by_rank;
    Rank(hull, &rank_of, &by_rank);
    LpBound lp(by_rank);  // the items below j
    int64_t highest = 0;
    size_t next = 0;
    for (int j = 1; j < n_; ++j) {
      for (; next < hull.size() && hull[next].block < j; ++next) lp.Add(rank_of[next], +1);
      const int64_t bound = lp.LowerBound(need_[j]);
      if (bound > highest && bound < kInf) {
        highest = bound;
        top_ = j;
      }
    }
    hull.erase(std::remove_if(hull.begin(), hull.end(),
                              [&](const Item& it) { return it.block >= top_; }),
               hull.end());
    top_items_ = std::move(hull);
    Rank(top_items_, &top_rank_of_, &top_by_rank_);
  }

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

  // The whole-block bounds, on chains of up to kMaxWholeBlocks: for the
  // top (PrepareTop's) and for the largest need, which is higher whole
  // where the LP at the top's is higher fractionally (on the bench's
  // 96-block chains with a link, either bounds some chain's root closer).
  void PrepareWholes() {
    whole_prepared_ = true;
    if (n_ > kMaxWholeBlocks || top_ <= 0) return;
    price_ = RootPrice();
    wholes_.push_back({top_});
    PrepareWhole(top_, &wholes_.back());
    const int largest = static_cast<int>(
        std::max_element(need_.begin(), need_.begin() + n_) - need_.begin());
    if (largest != top_ && largest > 0) {
      wholes_.push_back({largest});
      PrepareWhole(largest, &wholes_.back());
    }
  }

  // The price of copy-engine time (ns of cost per ns a copy out takes,
  // in [0, 1], see HullItems) at which the LP over HullItems bounds the
  // root highest: 0 unless the link is busy enough to bind.
  double RootPrice() const {
    const double forward_ns = blocks_[n_ - 1].now;
    auto value = [&](double price) {
      std::vector<Item> items = HullItems(price), by_rank;
      Rank(items, nullptr, &by_rank);
      LpBound lp(by_rank);
      lp.AddAll();
      const int64_t v = lp.LowerBound(need_[top_]);
      if (v >= kInf) return -std::numeric_limits<double>::infinity();
      return static_cast<double>(v) - price * forward_ns;
    };
    const auto [highest, price] = BestPrice(value);
    return highest > value(0) ? price : 0.0;
  }

  // The blocks from k up to `top`, whole: per block k and whether it is
  // recomputed (which hides more of the copy back of the block below), the
  // Pareto points (what blocks [k, top) save, the least they cost). A
  // relaxation that keeps what the LPs lose: blocks come whole, and the
  // wait for a copy back depends on the action of the block above. It
  // drops the copies in flight, the order of the link's queue and every
  // need but the top's (as need_ does); a copy out costs RootPrice() for
  // each ns it takes, which the bound takes back for the ns of forward
  // left (HullItems says why that holds). Built down from the top; a point
  // goes when even the LP over the blocks below cannot complete it under
  // the plan to beat, and the building stops (w->from) past
  // kMaxWholePoints. On the bench's three slowest 96-block chains with a
  // link the better of PrepareWholes' two bounds the root 0.007, 0.07 and
  // 0.03 ms below the optimum, where the LP's is 1.0, 1.7 and 0.34 ms
  // below it.
  void PrepareWhole(int top, Whole* w) {
    std::vector<std::array<std::vector<WholePoint>, 2>>& levels = w->points;
    const double forward_ns = blocks_[n_ - 1].now;
    levels.assign(top + 1, {});
    levels[top][0] = {{0, 0.0}};
    if (blocks_[top].can_r || blocks_[top].can_ro) levels[top][1] = {{0, 0.0}};
    w->from = top;
    const int64_t need = need_[top];
    // The LP of the blocks below k, for the points of block k in order of
    // what they leave to save, least first: one sweep of the items by rank.
    std::vector<Item> by_rank;
    Rank(HullItems(0), nullptr, &by_rank);
    size_t points = 0;
    struct Stream {
      const std::vector<WholePoint>* points;
      int64_t saving;
      double cost;
      size_t left;  // its points not merged yet: the first `left`
    };
    std::vector<Stream> streams;
    // The points of `streams` (each sorted by saving, shifted by its saving
    // and cost), merged from the most saving down: a point cheaper than
    // every one that saves more, savings past the need counted as the need.
    auto merge = [&](std::vector<WholePoint>* out) {
      out->clear();
      size_t total = 0;
      for (const Stream& st : streams) total += st.left;
      out->reserve(total);  // (no copies as it grows)
      double least = std::numeric_limits<double>::infinity();
      for (;;) {
        Stream* pick = nullptr;
        WholePoint top_point{0, 0};  // the most saving left, then cheapest
        for (Stream& st : streams) {
          if (st.left == 0) continue;
          const WholePoint& p = (*st.points)[st.left - 1];
          const WholePoint q{std::min(need, p.saving + st.saving), p.cost + st.cost};
          if (pick == nullptr || q.saving > top_point.saving ||
              (q.saving == top_point.saving && q.cost < top_point.cost)) {
            pick = &st;
            top_point = q;
          }
        }
        if (pick == nullptr) return;
        --pick->left;
        if (top_point.cost < least) {
          least = top_point.cost;
          out->push_back(top_point);
        }
      }
    };
    std::vector<WholePoint> either;  // block k+1's points of either kind
    for (int k = top - 1; k >= 0; --k) {
      const OffloadBlock& x = blocks_[k];
      // KEEP and RECOMPUTE cost the same whatever block k+1 does: their
      // points come from those of block k+1 of either kind, merged once.
      streams.clear();
      for (const std::vector<WholePoint>& f : levels[k + 1]) {
        if (!f.empty()) streams.push_back({&f, 0, 0.0, f.size()});
      }
      merge(&either);
      std::reverse(either.begin(), either.end());
      for (int recomputed = 0; recomputed < 2; ++recomputed) {
        // Block k's actions of this kind: the points above shifted by the
        // action's saving and cost (a copy's after each kind of block
        // above, whose action hides its copy back more or less).
        streams.clear();
        if (!recomputed) {
          streams.push_back({&either, 0, 0.0, either.size()});
        } else if (x.can_r) {
          streams.push_back({&either, x.s, static_cast<double>(x.c), either.size()});
        }
        for (int above = 0; above < 2; ++above) {
          const std::vector<WholePoint>& f = levels[k + 1][above];
          if (f.empty()) continue;
          if (!recomputed && x.can_o) {
            streams.push_back({&f, x.t, BackWait(k, x.back_ns, above) + price_ * x.out_ns, f.size()});
          }
          if (recomputed && x.can_ro) {
            streams.push_back({&f, x.s + x.ro,
                               static_cast<double>(x.c) + BackWait(k, x.ro_back_ns, above) +
                                   price_ * x.ro_out_ns,
                               f.size()});
          }
        }
        // Then those that the blocks below can complete under the plan to
        // beat (a point dropped so has every point it kept out of the front
        // dropped too).
        std::vector<WholePoint>& out = levels[k][recomputed];
        merge(&out);
        const double unpriced = price_ * std::max(0.0, forward_ns - x.now);
        size_t r = 0;  // the items of rank below r are taken whole
        int64_t saved = 0, cost = 0;
        out.erase(std::remove_if(out.begin(), out.end(),
                                 [&](const WholePoint& p) {
                                   const int64_t d = need - p.saving;
                                   double rest = 0;
                                   if (d > 0) {
                                     for (; r < by_rank.size() &&
                                            (by_rank[r].block >= k || saved + by_rank[r].s < d);
                                          ++r) {
                                       if (by_rank[r].block >= k) continue;
                                       saved += by_rank[r].s;
                                       cost += by_rank[r].c;
                                     }
                                     if (r == by_rank.size()) return true;
                                     // (In doubles, unrounded: a little lower
                                     // than the LP's integer bound, and cheaper.)
                                     rest = static_cast<double>(cost) +
                                            static_cast<double>(d - saved) *
                                                static_cast<double>(by_rank[r].c) /
                                                static_cast<double>(by_rank[r].s);
                                   }
                                   return p.cost + rest - unpriced > best_cost_ + kCostSlackNs;
                                 }),
                  out.end());
        std::reverse(out.begin(), out.end());
        points += out.size();
      }
      if (points > kMaxWholePoints) break;
      w->from = k;
    }
  }

  // The least cost of the points of `f` (saving up) that save at least g.
  static double LeastCovering(const std::vector<WholePoint>& f, int64_t g) {
    const auto it = std::lower_bound(
        f.begin(), f.end(), g, [](const WholePoint& p, int64_t v) { return p.saving < v; });
    return it == f.end() ? std::numeric_limits<double>::infinity() : it->cost;
  }

  // What the blocks from k+1 to the top add at least to the cost of `c`
  // (which decided block k, and k+1 >= w->from): their least points
  // that save what the top still needs, with what block k's copy back
  // waits beyond its least wait (if it sent one) given block k+1's kind.
  double WholeBound(const Whole& w, const OffloadState& c, int k) const {
    const int64_t g = need_[w.top] - c.sigma;
    double least = std::numeric_limits<double>::infinity();
    for (int above = 0; above < 2; ++above) {
      least = std::min(least, LeastCovering(w.points[k + 1][above], g) +
                                  (Sends(c.last) ? ExtraWait(k, c.last, above) : 0.0));
    }
    const double from = std::max(Drained(c), blocks_[k + 1].now);
    return least - price_ * std::max(0.0, blocks_[n_ - 1].now - from);
  }

  // Whether some block may send something to host (else every plan left
  // is one of KEEP and RECOMPUTE alone).
  bool can_send() const {
    return std::any_of(blocks_.begin(), blocks_.end(), [](const OffloadBlock& x) {
      return x.can_o || x.can_ro;
    });
  }

  // Relax's covering problem (SolveCover): its items, and its needs,
  // req[p] for the items below p (the needs of the blocks from item p-1's
  // up to item p's).
  const std::vector<Item>& items() const { return items_; }
  std::vector<int64_t> RelaxedNeeds() const {
    std::vector<int64_t> req(items_.size() + 1, -kInf);
    size_t p = 0;  // the items below block k
    for (int k = 0; k < n_; ++k) {
      while (p < items_.size() && items_[p].block < k) ++p;
      req[p] = std::max(req[p], need_[k]);
    }
    return req;
  }

  // Whether the search found a plan better than the one to beat.
  bool found() const { return best_node_ != -2; }
  double best_cost() const { return best_cost_; }
  double lower_bound() const { return lower_bound_; }

  // The best plan found by the search (found() true).
  std::vector<Action> BestActions() const {
    std::vector<Action> actions(n_, Action::kKeep);
    for (int32_t node = best_node_; node >= 0; node = arena_[node].parent) {
      actions[arena_[node].block] = arena_[node].action;
    }
    return actions;
  }

 private:
  // items_: a relaxation of the problem as a covering one, for the LP
  // bound and for SolveCover. Needs as need_ has them (the copies in
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
  void Relax() {
    auto wait = [&](int k, double back_ns, bool above_recomputed) {
      const OffloadBlock& up = blocks_[k + 1];
      const double hides =
          up.bns + (above_recomputed ? static_cast<double>(up.c) : 0.0);
      return static_cast<int64_t>(std::floor(std::max(0.0, back_ns - hides)));
    };
    auto add = [&](int k, int64_t saving, int64_t cost) {
      if (saving > 0) items_.push_back({k, saving, cost});
    };
    for (int k = 0; k + 1 < n_; ++k) {
      const OffloadBlock& x = blocks_[k];
      const OffloadBlock& up = blocks_[k + 1];
      if (x.can_r) add(k, x.s, x.c);
      // A sender of `saving` at `cost` before its wait, alone and paired.
      auto sender = [&](int64_t saving, int64_t cost, double back_ns) {
        add(k, saving, cost + wait(k, back_ns, false));
        const int64_t paired = cost + wait(k, back_ns, true);
        if (up.can_r && up.s > 0) add(k, saving + up.s, paired + up.c);
        if (up.can_ro && up.s + up.ro > 0) {
          add(k, saving + up.s + up.ro,
              paired + up.c + static_cast<int64_t>(std::floor(up.ro_least_wait)));
        }
      };
      if (x.can_o) sender(x.t, 0, x.back_ns);
      if (x.can_ro) sender(x.s + x.ro, x.c, x.ro_back_ns);
    }
  }

  // A second relaxation as LP items, for StoppedBound: per block, the
  // lower convex hull of what its actions save against what they cost, as
  // increments (their ratios rise, so the LP takes a block's increments in
  // order and no block counts twice; Relax's pairs let a block both
  // recompute and send, which is cheap where the link is busy and so puts
  // that bound blocks' cost low). A send costs its least wait, plus `price`
  // for each ns its copy out takes:
  //
  // the copies out of the blocks from k on start no earlier than block k's
  // end, nor before the copies already queued land (at `drained`), and run
  // one after another, so the wait at the end of forward they add is at
  // least their time less the forward left after max(drained, block k's
  // end); for any price in [0, 1], at least price times that.
  std::vector<Item> HullItems(double price) const {
    std::vector<Item> out;
    std::vector<std::pair<int64_t, int64_t>> options, hull;
    auto priced = [&](double wait, double out_ns) {
      return static_cast<int64_t>(std::floor(wait + price * out_ns));
    };
    for (int k = 0; k + 1 < n_; ++k) {
      const OffloadBlock& x = blocks_[k];
      options.clear();
      if (x.can_r) options.push_back({x.s, x.c});
      if (x.can_o) options.push_back({x.t, priced(x.least_wait, x.out_ns)});
      if (x.can_ro && x.s + x.ro > 0) {
        options.push_back({x.s + x.ro, x.c + priced(x.ro_least_wait, x.ro_out_ns)});
      }
      // Saving up, then cost up; from (0, 0), keep the points below the
      // line through their neighbours. Costs are >= 0, so the first slope
      // is too and every kept point costs more than the one before.
      std::sort(options.begin(), options.end());
      hull.assign(1, {0, 0});
      for (const auto& o : options) {
        if (o.first <= 0 || o.first == hull.back().first) continue;
        while (hull.size() >= 2) {
          const auto& p0 = hull[hull.size() - 2];
          const auto& p1 = hull.back();
          const __int128 turn =
              static_cast<__int128>(p1.first - p0.first) * (o.second - p0.second) -
              static_cast<__int128>(p1.second - p0.second) * (o.first - p0.first);
          if (turn > 0) break;
          hull.pop_back();
        }
        hull.push_back(o);
      }
      for (size_t i = 1; i < hull.size(); ++i) {
        out.push_back({k, hull[i].first - hull[i - 1].first,
                       hull[i].second - hull[i - 1].second});
      }
    }
    return out;
  }

  // The items by rank in cost/saving order, for LpBound, and (unless null)
  // the rank of each (1-based).
  static void Rank(const std::vector<Item>& items, std::vector<int>* rank_of,
                   std::vector<Item>* by_rank) {
    const int m = static_cast<int>(items.size());
    std::vector<int> order(m);
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](int x, int y) {
      const __int128 lhs = static_cast<__int128>(items[x].c) * items[y].s;
      const __int128 rhs = static_cast<__int128>(items[y].c) * items[x].s;
      return lhs != rhs ? lhs < rhs : x < y;
    });
    by_rank->resize(m);
    if (rank_of != nullptr) rank_of->resize(m);
    for (int r = 0; r < m; ++r) {
      (*by_rank)[r] = items[order[r]];
      if (rank_of != nullptr) (*rank_of)[order[r]] = r + 1;
    }
  }

  // The copies of `x` still in flight after `time`: their total bytes, and
  // (when `nodes` is not null) their nodes, newest first.
  int64_t InFlight(const OffloadState& x, double time,
                   std::vector<int32_t>* nodes) const {
    int64_t bytes = 0;
    for (int32_t node = x.off_node; node >= 0; node = arena_[node].prev_off) {
      const OffloadNode& o = arena_[node];
      if (!(o.landed > time)) break;  // first in first out: the rest landed
      bytes += Moved(o);
      if (nodes != nullptr) nodes->push_back(node);
    }
    return bytes;
  }

  // The bytes a node's copy moves.
  int64_t Moved(const OffloadNode& o) const {
    return o.action == Action::kOffload ? blocks_[o.block].t
                                        : blocks_[o.block].ro;
  }

  // What block k, decided last by `x`, holds more during the backward of
  // block k+1: its copy back, prefetched whole.
  int64_t Prefetched(const OffloadState& x, int k) const {
    if (x.last == kLastOffload) return blocks_[k].t;
    if (x.last == kLastRo) return blocks_[k].ro;
    return 0;
  }

  // What the future of a state depends on besides its saving and cost:
  // the action of the block just decided, and the copies in flight
  // as (bytes, landing time) from the oldest (which blocks they are does
  // not matter: identical layers offloaded at the same moments merge).
  // Equal queues get equal ids (interned), so the key is one integer.
  uint64_t KeyOf(const OffloadState& x, double time) {
    flight_.clear();
    InFlight(x, time, &flight_);
    uint32_t queue = 0;  // the empty queue
    for (size_t i = flight_.size(); i-- > 0;) {
      const OffloadNode& o = arena_[flight_[i]];
      const QueueEntry entry{queue, Moved(o), o.landed};
      const auto [it, inserted] = queue_ids_.try_emplace(
          entry, static_cast<uint32_t>(queue_ids_.size() + 1));
      queue = it->second;
    }
    return (static_cast<uint64_t>(queue) << 2) | x.last;
  }

  // When the copies out of `x` are all landed (0: none queued).
  double Drained(const OffloadState& x) const {
    return x.off_node >= 0 ? arena_[x.off_node].landed : 0;
  }

  // The wait at the end of forward for the copies out (charged as each
  // copy is queued: later copies only add to it).
  double DrainWait(double drained) const {
    return std::max(0.0, drained - blocks_[n_ - 1].now);
  }

  // What the wait for block k's copy back (of kind `last`: a copy that
  // Sends) costs beyond its least wait (charged already), given block
  // k+1's action.
  double ExtraWait(int k, uint8_t last, bool above_recomputed) const {
    const OffloadBlock& x = blocks_[k];
    const bool ro = last == kLastRo;
    return BackWait(k, ro ? x.ro_back_ns : x.back_ns, above_recomputed) -
           (ro ? x.ro_least_wait : x.least_wait);
  }

  // The wait for a copy of `back_ns` back to block k, issued when the
  // backward of block k+1 begins: what that backward, and block k+1's
  // recompute if it has one, leave unhidden.
  double BackWait(int k, double back_ns, bool above_recomputed) const {
    const OffloadBlock& up = blocks_[k + 1];
    return std::max(0.0, back_ns - up.bns -
                             (above_recomputed ? static_cast<double>(up.c) : 0.0));
  }

  // The cost of `x` finished with every block above k kept.
  double Finished(const OffloadState& x, int k) const {
    return x.cost + (Sends(x.last) ? ExtraWait(k, x.last, false) : 0.0);
  }

  void Offer(double cost, int64_t count, int32_t node) {
    if (cost < best_cost_ || (cost == best_cost_ && count < best_count_)) {
      best_cost_ = cost;
      best_count_ = count;
      best_node_ = node;
    }
  }

  // Decides block k for every state of `front` (the states before it);
  // leaves the states before block k + 1 there.
  void Step(int k, std::vector<OffloadState>& front, const LpBound& lp,
            const LpBound& top_lp) {
    const OffloadBlock& x = blocks_[k];
    children_.clear();
    for (const OffloadState& st : front) {
      // (Block k's own checkpoint, if it sends it, is back in its
      // backward: held still counts it.)
      const int64_t held = x.below - st.sigma;
      if (held + InFlight(st, x.start, nullptr) + x.a > limit_) continue;
      if (held + x.bwd + (k > 0 ? Prefetched(st, k - 1) : 0) > limit_) continue;
      // The wait for block k-1's copy back, hidden by block k's backward.
      auto wait_below = [&](bool recompute) {
        return Sends(st.last) ? ExtraWait(k - 1, st.last, recompute) : 0.0;
      };
      children_.push_back({st.sigma, st.cost + wait_below(false), st.count,
                           st.node, st.off_node, kLastKeep});
      if (x.can_r) {
        arena_.push_back({k, Action::kRecompute, st.node, -1, 0});
        children_.push_back({st.sigma + x.s,
                             st.cost + static_cast<double>(x.c) +
                                 wait_below(true),
                             st.count + 1,
                             static_cast<int32_t>(arena_.size() - 1),
                             st.off_node, kLastRecompute});
      }
      // A copy out of `bytes` queued at the end of block k's forward.
      auto send = [&](Action action, int64_t saving, double cost,
                      double out_ns, uint8_t last) {
        const double drained = Drained(st);
        const double landed = std::max(x.now, drained) + out_ns;
        arena_.push_back({k, action, st.node, st.off_node, landed});
        const int32_t id = static_cast<int32_t>(arena_.size() - 1);
        children_.push_back({st.sigma + saving,
                             cost + DrainWait(landed) - DrainWait(drained),
                             st.count + 1, id, id, last});
      };
      if (x.can_o) {
        send(Action::kOffload, x.t,
             st.cost + wait_below(false) + x.least_wait, x.out_ns,
             kLastOffload);
      }
      if (x.can_ro && (st.last == kLastRecompute || st.last == kLastRo)) {
        send(Action::kRecomputeOffload, x.s + x.ro,
             st.cost + static_cast<double>(x.c) + wait_below(true) +
                 x.ro_least_wait,
             x.ro_out_ns, kLastRo);
      }
    }
    st_->nodes += static_cast<int64_t>(children_.size());
    // Finish, prune, then group by what the future depends on.
    front.clear();
    keyed_.clear();
    for (const OffloadState& c : children_) {
      if (k + 1 == n_) {
        Offer(Finished(c, k), c.count, c.node);
        continue;
      }
      const int64_t in_flight = InFlight(c, x.now, nullptr);
      if (c.sigma >= ahead_[k + 1] + in_flight + Prefetched(c, k)) {
        Offer(Finished(c, k), c.count, c.node);  // nothing more is needed
        continue;
      }
      if (c.sigma < reach_[k + 1]) continue;
      int64_t rest = lp.LowerBound(ahead_[k + 1] - c.sigma);
      if (top_ > k + 1) rest = std::max(rest, top_lp.LowerBound(need_[top_] - c.sigma));
      if (rest >= kInf) continue;
      // (A state that is not done may still finish with every block kept,
      // its copies landing in time: no count added.)
      const double bound = c.cost + static_cast<double>(rest);
      if (bound > best_cost_ || (bound == best_cost_ && c.count >= best_count_)) {
        continue;
      }
      if (std::any_of(wholes_.begin(), wholes_.end(), [&](const Whole& w) {
            return k + 1 >= w.from && k + 1 <= w.top &&
                   c.cost + WholeBound(w, c, k) > best_cost_ + kCostSlackNs;
          })) {
        continue;
      }
      // Copies that land before the next block's forward starts change no
      // later moment, landing time or wait: the state is keyed, and its
      // saving guaranteed, from then on. Its next copy starts no earlier
      // than the next block's end.
      keyed_.push_back({KeyOf(c, x.now), c, c.sigma - in_flight,
                        std::max(blocks_[k + 1].now, Drained(c))});
    }
    // Within a group: more saving first; keep a state only if it is
    // cheaper (cost, then count) than every one with more saving.
    std::sort(keyed_.begin(), keyed_.end(), [](const Keyed& p, const Keyed& q) {
      if (p.key != q.key) return p.key < q.key;
      if (p.state.sigma != q.state.sigma) return p.state.sigma > q.state.sigma;
      if (p.state.cost != q.state.cost) return p.state.cost < q.state.cost;
      return p.state.count < q.state.count;
    });
    survivors_.clear();
    for (size_t i = 0; i < keyed_.size();) {
      size_t j = i;
      double seen_cost = std::numeric_limits<double>::infinity();
      int64_t seen_count = kInf;
      for (; j < keyed_.size() && keyed_[j].key == keyed_[i].key; ++j) {
        const OffloadState& c = keyed_[j].state;
        if (c.cost < seen_cost || (c.cost == seen_cost && c.count < seen_count)) {
          seen_cost = c.cost;
          seen_count = c.count;
          survivors_.push_back(j);
        }
      }
      i = j;
    }
    DropDominated(front, x.now);
  }

  // Across groups: X dominates Y when X's saving with every copy in flight
  // at the next block's start counted as never landing is at least Y's
  // saving, X's copy engine is free no later, X did not offload block k
  // unless Y did too (kAsGood), and X costs
  // less (cost, then count). Then every completion of Y fits for X too
  // (its moments hold no more; its later copies land no later) and costs
  // X no more (the waits depend on the actions alone, the wait at the end
  // of forward grows no faster from an earlier free time). A sweep by
  // saving with a Fenwick tree over free times holding the least cost.
  void DropDominated(std::vector<OffloadState>& front, double next_start) {
    const size_t m = survivors_.size();
    std::vector<double> times;
    times.reserve(m);
    for (size_t i : survivors_) times.push_back(keyed_[i].free_at);
    std::sort(times.begin(), times.end());
    times.erase(std::unique(times.begin(), times.end()), times.end());
    const int nt = static_cast<int>(times.size());
    using Cost = std::pair<double, int64_t>;
    const Cost none{std::numeric_limits<double>::infinity(), kInf};
    // Per Last: the states that decided block k so.
    std::vector<Cost> least[4];
    for (std::vector<Cost>& tree : least) tree.assign(nt + 1, none);
    // Which last actions leave a future at least as good as Y's: no more
    // held or waited for at block k+1 and no choice fewer (only a block
    // after a recomputed one may send its checkpoint).
    static constexpr bool kAsGood[4][4] = {
        // X:  keep   recompute offload ro      Y:
        {true, true, false, false},   // keep
        {false, true, false, false},  // recompute
        {true, true, true, false},    // offload
        {false, true, false, true},   // ro
    };
    free_rank_.resize(keyed_.size());
    // The second test's trees: a leaf per state, in the order of free
    // times (those of rank r from ranked_[r] on).
    ranked_.assign(nt + 2, 0);
    for (size_t i : survivors_) {
      free_rank_[i] = static_cast<int>(std::lower_bound(times.begin(), times.end(),
                                                        keyed_[i].free_at) -
                                       times.begin()) + 1;
      ++ranked_[free_rank_[i]];
    }
    std::partial_sum(ranked_.begin(), ranked_.end(), ranked_.begin());
    leaf_of_.resize(keyed_.size());
    for (size_t i : survivors_) leaf_of_[i] = --ranked_[free_rank_[i]];
    ranked_[nt + 1] = static_cast<int>(m);
    kept_.clear();
    kept_begin_.assign(1, 0);
    tree_leaves_ = 1;
    while (tree_leaves_ < static_cast<int>(m)) tree_leaves_ *= 2;
    for (std::vector<Cost>& tree : tree_least_) tree.assign(2 * tree_leaves_, none);
    leaf_state_.resize(tree_leaves_);
    auto insert = [&](std::vector<Cost>& tree, int r, Cost c) {
      for (; r <= nt; r += r & -r) tree[r] = std::min(tree[r], c);
    };
    auto query = [&](const std::vector<Cost>& tree, int r) {
      Cost c = none;
      for (; r > 0; r -= r & -r) c = std::min(c, tree[r]);
      return c;
    };
    std::vector<size_t> by_guaranteed(survivors_), by_saving(survivors_);
    std::sort(by_guaranteed.begin(), by_guaranteed.end(), [&](size_t a, size_t b) {
      return keyed_[a].guaranteed > keyed_[b].guaranteed;
    });
    std::sort(by_saving.begin(), by_saving.end(), [&](size_t a, size_t b) {
      return keyed_[a].state.sigma > keyed_[b].state.sigma;
    });
    size_t next = 0;
    for (size_t y : by_saving) {
      const Keyed& ky = keyed_[y];
      for (; next < m && keyed_[by_guaranteed[next]].guaranteed >= ky.state.sigma;
           ++next) {
        const Keyed& kx = keyed_[by_guaranteed[next]];
        insert(least[kx.state.last], free_rank_[by_guaranteed[next]],
               {kx.state.cost, kx.state.count});
      }
      const int r = free_rank_[y];
      Cost best = none;
      for (int x = 0; x < 4; ++x) {
        if (kAsGood[ky.state.last][x]) best = std::min(best, query(least[x], r));
      }
      // Strictly cheaper: a state never drops itself.
      if (best < Cost{ky.state.cost, ky.state.count}) continue;
      // The same test with the copies in flight as they land: X dominates
      // Y too when at every block start from the next one on, X's saving
      // less its copies then in flight is at least Y's (the moments at the
      // ends of forward hold no more; those of backward, when every copy
      // has landed, see the savings). Tried against the states kept so far
      // (they have at least Y's saving) that cost less, are free no later
      // and whose last action is as good (kAsGood), found through a tree
      // per last action over free times with the least cost under each
      // node: up to kProfileTries of them, as the work of this test is not
      // bounded otherwise. On chains where the link is busy, this is the
      // test that keeps fronts small: on the hardest of the bench's 48-block
      // chains the optimum is proven after 0.59 million states, where the
      // 16 cheapest states as candidates stopped at the work limit (2^20)
      // with a plan 2.8% dearer.
      InFlightProfile(ky.state, next_start, &profile_);
      const bool* as_good = kAsGood[ky.state.last];
      const Cost cy{ky.state.cost, ky.state.count};
      // The leaves of the states free no later than Y.
      const int upto = ranked_[r + 1];
      int tries = kProfileTries;
      auto dominates = [&](size_t x) {
        return LandsAsMuch(front[x].sigma, KeptProfile(x), ky.state.sigma, profile_,
                           next_start);
      };
      // (With no copies of Y's in flight, the first test said it all.)
      bool dominated = false;
      for (int last = 0; last < 4 && !dominated && !profile_.empty(); ++last) {
        dominated = as_good[last] && AnyCheaper(tree_least_[last], 1, 0, tree_leaves_,
                                                upto, cy, &tries, dominates);
      }
      if (dominated) continue;
      front.push_back(ky.state);
      kept_.insert(kept_.end(), profile_.begin(), profile_.end());
      kept_begin_.push_back(kept_.size());
      leaf_state_[leaf_of_[y]] = front.size() - 1;
      std::vector<Cost>& tree = tree_least_[ky.state.last];
      for (int node = tree_leaves_ + leaf_of_[y]; node > 0 && cy < tree[node];
           node /= 2) {
        tree[node] = cy;
      }
    }
  }

  // The copies in flight of the state kept at position x of the front.
  ProfileView KeptProfile(size_t x) const {
    return ProfileView(kept_.data() + kept_begin_[x],
                       kept_begin_[x + 1] - kept_begin_[x]);
  }

  // Whether `dominates` holds for one of the first *tries states kept at
  // leaves before `upto` that cost less than `cost`: a descent of `tree`
  // (node covers leaves [lo, hi)) that skips the subtrees with no state
  // that cheap.
  template <typename Dominates>
  bool AnyCheaper(const std::vector<std::pair<double, int64_t>>& tree, int node,
                  int lo, int hi, int upto, const std::pair<double, int64_t>& cost,
                  int* tries, Dominates& dominates) const {
    if (*tries <= 0 || lo >= upto || !(tree[node] < cost)) return false;
    if (hi - lo == 1) {
      --*tries;
      return dominates(leaf_state_[lo]);
    }
    const int mid = (lo + hi) / 2;
    return AnyCheaper(tree, 2 * node, lo, mid, upto, cost, tries, dominates) ||
           AnyCheaper(tree, 2 * node + 1, mid, hi, upto, cost, tries, dominates);
  }

  // The copies of `x` in flight at `next` (the next block's start) as
  // (landing time, bytes), the first to land first.
  void InFlightProfile(const OffloadState& x, double next,
                       Profile* profile) {
    flight_.clear();
    InFlight(x, next, &flight_);
    profile->clear();
    for (size_t i = flight_.size(); i-- > 0;) {
      const OffloadNode& o = arena_[flight_[i]];
      profile->push_back({o.landed, Moved(o)});
    }
  }

  // Whether a saving of `sx` with the copies `px` in flight is at least
  // `sy` with `py` at the start of every block from the one that starts at
  // `next` on: the moments that count copies in flight are the ends of
  // forward, and each counts those not landed by its block's start (the
  // copies that land after the last block's start count at none). The
  // profiles are in the order they land; a merge of the two.
  bool LandsAsMuch(int64_t sx, ProfileView px, int64_t sy, ProfileView py,
                   double next) const {
    for (const auto& copy : px) sx -= copy.second;
    for (const auto& copy : py) sy -= copy.second;
    size_t ix = 0, iy = 0;
    for (double t = next;;) {
      for (; ix < px.size() && !(px[ix].first > t); ++ix) sx += px[ix].second;
      for (; iy < py.size() && !(py[iy].first > t); ++iy) sy += py[iy].second;
      if (sx < sy) return false;
      // The next block start at which a copy has landed since.
      double landed = std::numeric_limits<double>::infinity();
      if (ix < px.size()) landed = px[ix].first;
      if (iy < py.size()) landed = std::min(landed, py[iy].first);
      const auto it = std::lower_bound(
          blocks_.begin(), blocks_.end(), landed,
          [](const OffloadBlock& b, double time) { return b.start < time; });
      if (it == blocks_.end()) return true;
      t = it->start;
    }
  }

  struct Keyed {
    uint64_t key;  // KeyOf
    OffloadState state;
    int64_t guaranteed;  // sigma less the copies in flight at the next
                         // block's start
    double free_at;      // when the copy engine takes the next copy
  };

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
  std::vector<OffloadBlock> blocks_;
  std::vector<int64_t> need_, ahead_, reach_;
  std::vector<Item> items_, by_rank_;
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
  std::vector<Keyed> keyed_;
  // Interned queues of copies in flight (KeyOf): the queue below the
  // newest copy, and the newest copy's bytes and landing time.
  struct QueueEntry {
    uint32_t older;
    int64_t bytes;
    double landed;
    bool operator==(const QueueEntry& o) const {
      return older == o.older && bytes == o.bytes && landed == o.landed;
    }
    template <typename H>
    friend H AbslHashValue(H h, const QueueEntry& e) {
      return H::combine(std::move(h), e.older, e.bytes, e.landed);
    }
  };
  absl::flat_hash_map<QueueEntry, uint32_t> queue_ids_;
  std::vector<int32_t> flight_;
  std::vector<size_t> survivors_;  // of keyed_, Pareto within their group
  std::vector<int> free_rank_;     // of keyed_: rank of free_at (1-based)
  // DropDominated's second test: the copies in flight of every state kept
  // so far (by position in the front), and per Last a tree with a leaf per
  // state in the order of free times (leaves from tree_leaves_ on), the
  // least (cost, count) of those kept under each node.
  Profile kept_;                   // their profiles, one after another
  std::vector<size_t> kept_begin_;  // where each state's starts in kept_
  std::vector<int> ranked_;   // the first leaf of each free rank
  std::vector<int> leaf_of_;  // of keyed_: its leaf
  int tree_leaves_ = 1;
  std::vector<std::pair<double, int64_t>> tree_least_[4];  // per Last
  std::vector<size_t> leaf_state_;  // the state kept at each leaf
  // The most states each state is compared with by DropDominated's
  // second test (those free earliest first): a bound on its work.
  static constexpr int kProfileTries = 8;
  Profile profile_;
  double best_cost_ = std::numeric_limits<double>::infinity();
  int64_t best_count_ = kInf;
  int32_t best_node_ = -2;  // -2: the plan to beat, not found here
  double lower_bound_ = 0;
};

// `actions` with every checkpoint sent to host that can be: each
// RECOMPUTE after a recomputed block becomes a RECOMPUTE_OFFLOAD, where the
// problem allows them. At no moment does a sent checkpoint hold more than
// a kept one, so the peak is never higher.
std::vector<Action> WithCheckpointsSent(const PlanProblem& problem,
                                        std::vector<Action> actions) {
  if (!problem.offload_checkpoints) return actions;
  for (size_t i = 1; i < actions.size(); ++i) {
    if (actions[i] == Action::kRecompute && Recomputes(actions[i - 1])) {
      actions[i] = Action::kRecomputeOffload;
    }
  }
  return actions;
}

int64_t NotKept(const std::vector<Action>& actions) {
  return std::count_if(actions.begin(), actions.end(),
                       [](Action a) { return a != Action::kKeep; });
}

// A plan's cost as SimulateStep has it: recompute plus exposed transfer.
int64_t CostNs(const StepSimulation& sim) {
  return sim.recompute_ns + sim.exposed_transfer_ns;
}

// A local improvement for a plan the search has not proven: in forward
// order, each recomputed block offloads instead where the plan still fits
// and costs less. Long chains at tight budgets, where the link is what
// limits offloading, are the search's hardest: its fronts grow too large
// to reach the many offloads the best plans hold (the recompute plan, or
// one of a few of them), while the link carries a copy of most of the
// cheap blocks in time. *cost_ns: the plan's cost, before and after. It
// stops at `deadline` (ExactOptions::time_limit).
void OffloadWhereCheaper(const PlanProblem& problem,
                         std::chrono::steady_clock::time_point deadline,
                         std::vector<Action>* actions, int64_t* cost_ns) {
  const size_t n = actions->size();
  for (size_t k = 0; k + 1 < n && std::chrono::steady_clock::now() < deadline; ++k) {
    const BlockCost& b = problem.blocks[k];
    if ((*actions)[k] != Action::kRecompute || !b.checkpointable) continue;
    const BlockMemory m = MemoryOf(problem, k);
    if (m.transfer_bytes <= 0) continue;
    // The copy back waits at least what the backward above (and its
    // recompute) leaves unhidden: no cheaper than this recompute, skip.
    const BlockCost& up = problem.blocks[k + 1];
    const double hides =
        static_cast<double>(MemoryOf(problem, k + 1).backward_ns) +
        (Recomputes((*actions)[k + 1]) ? static_cast<double>(up.forward_ns) : 0.0);
    const double back_ns =
        static_cast<double>(m.transfer_bytes) / problem.h2d_bytes_per_s * 1e9;
    if (back_ns - hides >= static_cast<double>(b.forward_ns)) continue;
    (*actions)[k] = Action::kOffload;
    const StepSimulation sim = SimulateStep(problem, *actions);
    if (sim.peak_bytes <= problem.limit_bytes() && CostNs(sim) < *cost_ns) {
      *cost_ns = CostNs(sim);
    } else {
      (*actions)[k] = Action::kRecompute;
    }
  }
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
  // The relaxation's optimum (OffloadSearch::Relax) bounds every plan's
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
