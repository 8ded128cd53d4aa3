// The exact solver, under the memory model v2 (plan.h, SimulateStep), over
// KEEP and RECOMPUTE.
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
// Search: a dynamic programme over the candidate blocks in chain order.
// A state is (S, cost, count) for a choice among the blocks decided so
// far; before deciding the blocks at or above k, states with S < need_k
// are dropped. A state dominates another with no more saving, no lower
// cost and no fewer blocks, so each front is a Pareto front: saving up,
// (cost, count) up. Savings above every need still ahead are worth nothing
// more and are capped there, which merges states. A state is dropped when
// it cannot reach a later need with every block left recomputed, or when
// its cost plus the LP bound on covering its largest remaining shortfall
// with the blocks left (cheapest per byte first, a Fenwick tree over cost
// per byte) exceeds the best plan found. The best plan starts as a greedy
// one (recompute the cheapest per byte until every need is met, then drop
// what is not needed, dearest first) and improves whenever a state meets
// every need ahead. Bytes are never rounded. States of equal saving
// keep only the cheapest: structurally identical layers have equal
// savings, so without that a front grows with the number of ways to reach
// the same saving (seconds at 1000 blocks; milliseconds with it).
// Before the search, reduced-cost fixing (see below) decides the
// candidates whose deviation from the LP's choice alone would cost more
// than the gap between the greedy plan and the LP bound.
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
#include "planner/exact_solver.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <numeric>
#include <tuple>

namespace remat {
namespace internal {
namespace {

constexpr int64_t kInf = std::numeric_limits<int64_t>::max() / 4;
// The largest problem the planner builds (MakePlanProblem: base and
// calibration, plus kMaxBlocks blocks at the estimator's largest
// prediction, and one block's backward terms) stays below the sentinel, so
// no real need or cost reads as "infinite" and no sum of two overflows.
static_assert(kMaxQuantity + kMaxCalibrationBytes +
                      int64_t{kMaxBlocks} * kMaxQuantity + 4 * kMaxQuantity <
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

// One front state.
struct State {
  int64_t sigma;  // savings so far, capped at the largest need ahead
  int64_t cost;   // total forward_ns
  int32_t count;  // number of items
  int32_t node;   // last chosen item in the node arena, -1 for none
};

// Parent-linked list of chosen items.
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

// What the items in chain order must save. saved[p]: the savings of every
// item before p; reach[p] + saved[p]: the least saving a state before item
// p needs to meet every need ahead even with every later item taken;
// ahead[p]: the largest need ahead (more saving is worth nothing).
struct Needs {
  std::vector<int64_t> req, saved, reach, ahead;
};

Needs NeedsOf(const std::vector<Item>& items, std::vector<int64_t> req) {
  const size_t m = items.size();
  Needs n{std::move(req), std::vector<int64_t>(m + 1, 0),
          std::vector<int64_t>(m + 1), std::vector<int64_t>(m + 1)};
  for (size_t p = 0; p < m; ++p) n.saved[p + 1] = n.saved[p] + items[p].s;
  n.reach[m] = n.req[m] - n.saved[m];
  n.ahead[m] = n.req[m];
  for (size_t p = m; p-- > 0;) {
    n.reach[p] = std::max(n.reach[p + 1], n.req[p] - n.saved[p]);
    n.ahead[p] = std::max(n.ahead[p + 1], n.req[p]);
  }
  return n;
}

// The best plan known: its (cost, count) and how to rebuild it.
struct Best {
  int64_t cost = kInf;
  int64_t count = kInf;
  int32_t node = -2;  // -2: the greedy plan (chosen); else a node chain
};

// The dynamic programme over the items in chain order.
class Search {
 public:
  Search(const std::vector<Item>& items, const std::vector<Item>& by_rank,
         const std::vector<int>& rank_of, const std::vector<int8_t>& fixed,
         int64_t max_nodes,
         std::chrono::nanoseconds time_limit, ExactStats* st)
      : items_(items),
        by_rank_(by_rank),
        rank_of_(rank_of),
        fixed_(fixed),
        max_nodes_(max_nodes),
        time_limit_(time_limit),
        start_(std::chrono::steady_clock::now()),
        st_(st) {}

  // Decides the items in chain order under `needs`. Improves `best`;
  // false when the work or time limit stopped it.
  bool Run(const Needs& needs, Best* best) {
    const int m = static_cast<int>(items_.size());
    LpBound lp(by_rank_);
    for (int p = 0; p < m; ++p) {
      if (fixed_[p] >= 0) lp.Add(rank_of_[p], +1);
    }
    std::vector<State> front = {{0, 0, 0, -1}};
    for (int p = 0; p < m && !front.empty(); ++p) {
      if (st_->nodes > max_nodes_ ||
          (time_limit_.count() > 0 &&
           std::chrono::steady_clock::now() - start_ >= time_limit_)) {
        st_->stopped_at_limit = true;
        // A cheaper plan extends some state of the front: each costs at
        // least its own bound (lp holds the items still undecided).
        int64_t bound = best->cost;
        for (const State& x : front) {
          const int64_t rest = lp.LowerBound(needs.ahead[p] - x.sigma);
          if (rest < kInf) bound = std::min(bound, x.cost + rest);
        }
        st_->lower_bound_ns = bound;
        return false;
      }
      ++st_->steps;
      const int item = p;
      const Item& it = items_[item];
      if (fixed_[item] >= 0) lp.Add(rank_of_[item], -1);  // decided now
      const int64_t ahead = needs.ahead[p + 1];
      const int64_t least = needs.reach[p + 1] + needs.saved[p + 1];
      keep_.clear();
      take_.clear();
      for (const State& x : front) {
        if (fixed_[item] <= 0) {
          keep_.push_back({std::min(x.sigma, ahead), x.cost, x.count, x.node});
        }
        if (x.sigma < ahead && fixed_[item] >= 0) {  // saving can matter
          arena_.push_back({item, x.node});
          take_.push_back({std::min(x.sigma + it.s, ahead), x.cost + it.c,
                           x.count + 1,
                           static_cast<int32_t>(arena_.size() - 1)});
        }
      }
      st_->nodes += static_cast<int64_t>(keep_.size() + take_.size());
      // Merge by saving (both lists ascend), then sweep from the largest
      // saving down, keeping a state only if it is cheaper than all with
      // more saving, and only if it can still meet every need and beat
      // the best plan.
      merged_.resize(keep_.size() + take_.size());
      std::merge(keep_.begin(), keep_.end(), take_.begin(), take_.end(),
                 merged_.begin(), [](const State& x, const State& y) {
                   return x.sigma < y.sigma;
                 });
      front.clear();
      int64_t seen_cost = kInf, seen_count = kInf;
      for (size_t q = merged_.size(); q-- > 0;) {
        const State& x = merged_[q];
        if (x.sigma < least) break;  // it, and every state below, falls short
        if (!LexLess(x.cost, x.count, seen_cost, seen_count)) continue;
        seen_cost = x.cost;
        seen_count = x.count;
        if (x.sigma >= ahead) {  // meets every need ahead as it is
          if (LexLess(x.cost, x.count, best->cost, best->count)) {
            *best = {x.cost, x.count, x.node};
          }
          continue;  // more items only cost more
        }
        // At least one more item, at least the LP bound's cost.
        const int64_t bound = lp.LowerBound(ahead - x.sigma);
        if (bound >= kInf ||
            !LexLess(x.cost + bound, x.count + 1, best->cost, best->count)) {
          continue;
        }
        // Equal savings: the cheaper replaces the state already kept
        // (the merge leaves ties in either order).
        if (!front.empty() && front.back().sigma == x.sigma) {
          front.back() = x;
        } else {
          front.push_back(x);
        }
      }
      std::reverse(front.begin(), front.end());
      st_->states += static_cast<int64_t>(front.size());
      st_->max_front =
          std::max<int64_t>(st_->max_front, static_cast<int64_t>(front.size()));
    }
    return true;
  }

  // Marks the items of a node chain.
  void Mark(int32_t node, std::vector<char>* chosen) const {
    for (; node >= 0; node = arena_[node].parent) {
      (*chosen)[arena_[node].item] = 1;
    }
  }

 private:
  const std::vector<Item>& items_;
  const std::vector<Item>& by_rank_;
  const std::vector<int>& rank_of_;
  const std::vector<int8_t>& fixed_;
  const int64_t max_nodes_;
  const std::chrono::nanoseconds time_limit_;
  const std::chrono::steady_clock::time_point start_;
  ExactStats* st_;
  std::vector<Node> arena_;
  std::vector<State> keep_, take_, merged_;
};

}  // namespace

std::vector<Action> SolveExact(const PlanProblem& problem,
                               const ExactOptions& options,
                               ExactStats* stats) {
  ExactStats local_stats;
  ExactStats& st = stats != nullptr ? *stats : local_stats;
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

  const Needs needs = NeedsOf(items, std::move(req));
  if (needs.ahead[0] <= 0) {
    st.keep_all_fits = true;
    return actions;
  }
  if (needs.reach[0] > 0) {  // even every item leaves a need unmet
    st.infeasible = true;
    for (const Item& it : items) actions[it.block] = Action::kRecompute;
    return actions;
  }

  // Ranks in cost/saving order (cheaper per byte first; then larger
  // saving, then chain position) for the LP bounds and the greedy plan.
  std::vector<int> by_ratio(m);
  std::iota(by_ratio.begin(), by_ratio.end(), 0);
  std::sort(by_ratio.begin(), by_ratio.end(), [&](int x, int y) {
    const __int128 lhs = static_cast<__int128>(items[x].c) * items[y].s;
    const __int128 rhs = static_cast<__int128>(items[y].c) * items[x].s;
    if (lhs != rhs) return lhs < rhs;
    if (items[x].s != items[y].s) return items[x].s > items[y].s;
    return x < y;
  });
  std::vector<int> rank_of(m);
  std::vector<Item> by_rank(m);
  for (int r = 0; r < m; ++r) {
    rank_of[by_ratio[r]] = r + 1;
    by_rank[r] = items[by_ratio[r]];
  }

  // The greedy plan: cheapest per byte until every need is met, then drop
  // what is not needed, dearest first.
  std::vector<char> best_chosen(m, 0);
  for (int r = 0; r < m && !MeetsNeeds(items, best_chosen, needs.req); ++r) {
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
      if (!MeetsNeeds(items, best_chosen, needs.req)) best_chosen[p] = 1;
    }
  }
  int64_t best_cost = 0;
  int64_t best_count = 0;
  for (int p = 0; p < m; ++p) {
    if (best_chosen[p]) {
      best_cost += items[p].c;
      ++best_count;
    }
  }
  st.heuristic_cost_ns = best_cost;
  Best best{best_cost, best_count, -2};

  LpBound lp(by_rank);
  for (int r = 1; r <= m; ++r) lp.Add(r, +1);
  st.root_bound_ns = lp.LowerBound(needs.ahead[0]);

  // Reduced-cost fixing. With lambda = c_b / s_b of the LP's break item
  // for the largest need D (the covering LP over every item, a relaxation),
  // any plan x costs at least LB + sum of |r_i| over the items where x
  // differs from the LP's choice, r_i = c_i - lambda s_i and
  // LB = lambda D + sum of the negative r_i. An item whose |r_i| alone
  // exceeds best - LB is where every cheaper plan agrees with the LP: in
  // when r_i < 0, out when r_i > 0. In units of s_b, exactly.
  std::vector<int8_t> fixed(m, 0);
  {
    int b = 0;
    int64_t covered = 0;
    while (b + 1 < m && covered + by_rank[b].s < needs.ahead[0]) {
      covered += by_rank[b++].s;
    }
    const __int128 cb = by_rank[b].c, sb = by_rank[b].s;
    __int128 lb = cb * needs.ahead[0];
    std::vector<__int128> r(m);
    for (int p = 0; p < m; ++p) {
      r[p] = static_cast<__int128>(items[p].c) * sb - cb * items[p].s;
      if (r[p] < 0) lb += r[p];
    }
    const __int128 slack = sb * best.cost - lb;
    for (int p = 0; p < m; ++p) {
      if (r[p] > slack) fixed[p] = -1;
      if (-r[p] > slack) fixed[p] = +1;
      st.fixed += fixed[p] != 0;
    }
  }

  Search search(items, by_rank, rank_of, fixed,
                std::min<int64_t>(options.max_nodes, 1 << 30),
                options.time_limit, &st);
  if (search.Run(needs, &best)) st.lower_bound_ns = best.cost;
  st.cost_ns = best.cost;
  std::vector<char> chosen(m, 0);
  if (best.node == -2) {
    chosen = best_chosen;
  } else {
    search.Mark(best.node, &chosen);
  }
  for (int p = 0; p < m; ++p) {
    if (chosen[p]) actions[items[p].block] = Action::kRecompute;
  }
  return actions;
}

std::vector<Action> SolveExact(const PlanProblem& problem, ExactStats* stats) {
  return SolveExact(problem, ExactOptions(), stats);
}

}  // namespace internal
}  // namespace remat
