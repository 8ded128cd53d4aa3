// The exact solver.
//
// Model (plan.h, PredictedPeakBytes), with only KEEP and RECOMPUTE:
//
//   peak(R) = P0 - sum_{i in R} s_i + max_{j in R} s_j,   P0 = base + sum a_i
//
// where s_i = a_i - x_i is what recomputing block i frees. A block with
// s_i <= 0 never lowers the peak (it frees nothing and can only raise the
// max term), so it is never recomputed. Order the other checkpointable
// blocks by (s_i, index) and let j be the last recomputed block in that
// order: the one that sets the max term. Then
//
//   peak(R) <= limit  <=>  sum_{i in R, i != j} s_i >= D,   D = P0 - limit,
//
// with every other member of R ordered before j. For each j this is a
// min-cost covering knapsack over the blocks before j: choose blocks with
// total saving >= D at least total forward_ns. Adding c_j gives the plan's
// cost; the best j wins.
//
// Search: one sweep over the blocks in (s, index) order builds the Pareto
// front of (saving, cost) over subsets of the blocks seen so far, so the
// front for "blocks before j" is built once for all j. Savings are exact
// int64 bytes: nothing is rounded. Three things keep the front small:
//   * states that reach D are "complete" and only the best one is kept
//     (adding blocks to it only costs more);
//   * dominance: a state with at least the saving and at most the cost
//     (then fewer blocks) of another replaces it;
//   * bounds: a state whose cost plus a lower bound on any completion
//     (the cheapest possible j plus the LP relaxation of covering the rest
//     with the blocks still to come, from a Fenwick tree in cost/saving
//     order) exceeds the best plan found so far is dropped. The best plan
//     starts from greedy plans for the most promising j, and the sweep stops
//     once no later j can beat it (per-j LP lower bounds).
//
// Ties: among plans of equal recompute time, fewer recomputed blocks, then
// the lower peak. The search is exact in that whole order.
//
// Infeasible problems: the smallest reachable peak has a closed form.
// Recomputing every block with s_i > 0 gives P0 - (sum s_i - max s_i), and
// no plan does better: the blocks of R other than its largest are a subset
// of the positive blocks without the largest one. With two or more such
// blocks every one of them is needed to reach it, so that plan is the
// unique min-peak plan (with one, keeping everything reaches the same peak
// with fewer recomputes).
#include "planner/exact_solver.h"

#include <algorithm>
#include <limits>
#include <numeric>
#include <tuple>

namespace remat {
namespace internal {
namespace {

constexpr int64_t kInf = std::numeric_limits<int64_t>::max() / 4;

struct Item {
  int block;
  int64_t s;  // saving a - x, > 0
  int64_t c;  // forward_ns
};

// A plan's rank: lower is better.
struct Key {
  int64_t cost = kInf;
  int64_t count = kInf;
  int64_t peak = kInf;
  bool operator<(const Key& o) const {
    return std::tie(cost, count, peak) < std::tie(o.cost, o.count, o.peak);
  }
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

// One front state: a subset of the items swept so far.
struct State {
  int64_t sigma;  // total saving
  int64_t cost;   // total forward_ns
  int32_t count;  // number of items
  int32_t node;   // last chosen item in the node arena, -1 for none
};

// Parent-linked list of chosen items (positions in sweep order).
struct Node {
  int32_t pos;
  int32_t parent;
};

bool LexLess(int64_t c1, int64_t n1, int64_t c2, int64_t n2) {
  return c1 < c2 || (c1 == c2 && n1 < n2);
}

}  // namespace

std::vector<Action> SolveExact(const PlanProblem& problem, ExactStats* stats) {
  ExactStats local_stats;
  ExactStats& st = stats != nullptr ? *stats : local_stats;
  st = ExactStats();

  const size_t n = problem.blocks.size();
  std::vector<Action> actions(n, Action::kKeep);

  int64_t p0 = problem.base_bytes;
  std::vector<Item> items;
  for (size_t i = 0; i < n; ++i) {
    const BlockCost& b = problem.blocks[i];
    p0 += b.act_bytes;
    const int64_t s = b.act_bytes - b.input_bytes;
    if (b.checkpointable && s > 0) {
      items.push_back({static_cast<int>(i), s, b.forward_ns});
    }
  }
  const int64_t limit = problem.limit_bytes();
  st.candidates = static_cast<int>(items.size());
  if (p0 <= limit) {
    st.keep_all_fits = true;
    return actions;
  }
  const int64_t need = p0 - limit;  // D > 0

  // Sweep order: saving ascending, then block index.
  std::sort(items.begin(), items.end(), [](const Item& x, const Item& y) {
    return x.s != y.s ? x.s < y.s : x.block < y.block;
  });
  const int m = static_cast<int>(items.size());
  int64_t total_s = 0;
  int64_t total_c = 0;
  for (const Item& it : items) {
    total_s += it.s;
    total_c += it.c;
  }
  if (m < 2 || total_s - items.back().s < need) {
    st.infeasible = true;
    if (m >= 2) {
      for (const Item& it : items) actions[it.block] = Action::kRecompute;
    }
    return actions;
  }

  // Ranks in cost/saving order (cheaper per byte first; then larger saving,
  // then sweep position) for the LP bounds.
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

  // Per-j lower bounds: c_j + LP over the items before j.
  std::vector<int64_t> lb_j(m);
  {
    LpBound lp(by_rank);
    for (int k = 0; k < m; ++k) {
      const int64_t lp_cost = lp.LowerBound(need);
      lb_j[k] = lp_cost >= kInf ? kInf : items[k].c + lp_cost;
      lp.Add(rank_of[k], +1);
    }
  }
  std::vector<int64_t> suffix_min_lb(m + 1, kInf);
  std::vector<int64_t> suffix_min_c(m + 1, kInf);
  for (int k = m - 1; k >= 0; --k) {
    suffix_min_lb[k] = std::min(suffix_min_lb[k + 1], lb_j[k]);
    suffix_min_c[k] = std::min(suffix_min_c[k + 1], items[k].c);
  }

  // The best plan so far: either explicit positions, or (node, j).
  Key best;
  std::vector<int> best_explicit;
  int best_node = -2;  // -2: explicit
  int best_j = -1;

  auto consider_explicit = [&](std::vector<int> chosen) {
    Key key;
    key.cost = 0;
    key.count = static_cast<int64_t>(chosen.size());
    int64_t saved = 0;
    int64_t max_s = 0;
    for (int pos : chosen) {
      key.cost += items[pos].c;
      saved += items[pos].s;
      max_s = std::max(max_s, items[pos].s);
    }
    key.peak = p0 - saved + max_s;
    if (key.peak <= limit && key < best) {
      best = key;
      best_explicit = std::move(chosen);
      best_node = -2;
    }
  };

  // Always feasible here: every positive block.
  {
    std::vector<int> all(m);
    std::iota(all.begin(), all.end(), 0);
    consider_explicit(std::move(all));
  }
  // Greedy plans for the few most promising j: cheapest bytes first until
  // covered, then drop blocks that are no longer needed (dearest first).
  {
    std::vector<int> js(m);
    std::iota(js.begin(), js.end(), 0);
    const int tries = std::min(m, 4);
    std::partial_sort(js.begin(), js.begin() + tries, js.end(),
                      [&](int x, int y) { return lb_j[x] < lb_j[y]; });
    for (int t = 0; t < tries; ++t) {
      const int j = js[t];
      if (lb_j[j] >= kInf) break;
      std::vector<int> chosen;
      int64_t saved = 0;
      for (int r = 0; r < m && saved < need; ++r) {
        const int pos = by_ratio[r];
        if (pos >= j) continue;
        chosen.push_back(pos);
        saved += items[pos].s;
      }
      if (saved < need) continue;
      std::sort(chosen.begin(), chosen.end(), [&](int x, int y) {
        return items[x].c > items[y].c;
      });
      std::vector<int> kept;
      for (int pos : chosen) {
        if (saved - items[pos].s >= need) {
          saved -= items[pos].s;
        } else {
          kept.push_back(pos);
        }
      }
      kept.push_back(j);
      consider_explicit(std::move(kept));
    }
  }

  // The sweep.
  int kend = m - 1;
  while (kend > 0 && lb_j[kend] > best.cost) --kend;
  LpBound lp(by_rank);
  for (int k = 0; k <= kend; ++k) lp.Add(rank_of[k], +1);

  std::vector<Node> nodes;
  std::vector<State> front = {State{0, 0, 0, -1}};
  std::vector<State> next;
  bool has_complete = false;
  State complete{0, 0, 0, -1};

  for (int k = 0; k <= kend; ++k) {
    ++st.steps;
    const Item& item = items[k];
    // Item k as j: the complete state plus item k.
    if (has_complete && lb_j[k] <= best.cost) {
      Key key{complete.cost + item.c, complete.count + 1,
              p0 - complete.sigma};
      if (key < best) {
        best = key;
        best_node = complete.node;
        best_j = k;
      }
    }
    if (k == kend) break;
    // Shrink the range of useful j as the best plan improves.
    while (kend > k && lb_j[kend] > best.cost) {
      lp.Add(rank_of[kend], -1);
      --kend;
    }
    if (k == kend || suffix_min_lb[k + 1] > best.cost) break;
    // From here on, the front serves j in (k, kend]: item k joins the
    // subsets, and leaves the pool the bounds draw completions from.
    lp.Add(rank_of[k], -1);
    const int64_t min_cj = suffix_min_c[k + 1];

    // Complete states reached by adding item k: keep the best.
    int b = static_cast<int>(front.size()) - 1;
    for (; b >= 0 && front[b].sigma + item.s >= need; --b) {
      const State& f = front[b];
      const int64_t cost = f.cost + item.c;
      const int32_t count = f.count + 1;
      const int64_t sigma = f.sigma + item.s;
      if (!has_complete ||
          std::tie(cost, count) < std::tie(complete.cost, complete.count) ||
          (cost == complete.cost && count == complete.count &&
           sigma > complete.sigma)) {
        nodes.push_back({k, f.node});
        complete = State{sigma, cost, count,
                         static_cast<int32_t>(nodes.size()) - 1};
        has_complete = true;
      }
    }

    // Merge the unshifted front (a) with the shifted incomplete states (b),
    // walking down in saving; a state survives if it is strictly cheaper
    // (cost, then count) than everything with a larger saving, and its
    // bound does not exceed the best plan.
    next.clear();
    int a = static_cast<int>(front.size()) - 1;
    int64_t thr_cost = has_complete ? complete.cost : kInf;
    int64_t thr_count = has_complete ? complete.count : kInf;
    while (a >= 0 || b >= 0) {
      State cand;
      bool shifted;
      if (b < 0) {
        shifted = false;
      } else if (a < 0) {
        shifted = true;
      } else {
        const int64_t sb = front[b].sigma + item.s;
        if (sb != front[a].sigma) {
          shifted = sb > front[a].sigma;
        } else {
          shifted = LexLess(front[b].cost + item.c, front[b].count + 1,
                            front[a].cost, front[a].count);
        }
      }
      if (shifted) {
        const State& f = front[b--];
        cand = State{f.sigma + item.s, f.cost + item.c, f.count + 1, f.node};
      } else {
        cand = front[a--];
      }
      if (!LexLess(cand.cost, cand.count, thr_cost, thr_count)) continue;
      thr_cost = cand.cost;
      thr_count = cand.count;
      // A completion needs at least one more item before j, plus j.
      const int64_t lp_cost = lp.LowerBound(need - cand.sigma);
      if (lp_cost >= kInf) continue;
      const int64_t bound = cand.cost + min_cj + lp_cost;
      if (bound > best.cost ||
          (bound == best.cost && cand.count + 2 > best.count)) {
        continue;
      }
      if (shifted) {
        nodes.push_back({k, cand.node});
        cand.node = static_cast<int32_t>(nodes.size()) - 1;
      }
      next.push_back(cand);
    }
    std::reverse(next.begin(), next.end());
    front.swap(next);
    st.states += static_cast<int64_t>(front.size());
    st.max_front = std::max<int64_t>(st.max_front, front.size());
    if (front.empty() && !has_complete) break;
  }

  if (best_node == -2) {
    for (int pos : best_explicit) actions[items[pos].block] = Action::kRecompute;
  } else {
    actions[items[best_j].block] = Action::kRecompute;
    for (int node = best_node; node >= 0; node = nodes[node].parent) {
      actions[items[nodes[node].pos].block] = Action::kRecompute;
    }
  }
  (void)total_c;
  return actions;
}

}  // namespace internal
}  // namespace remat
