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
// Search.
//   1. Which j: if a block after j (larger saving) costs no more than j,
//      swapping it in for j keeps the plan feasible at no higher cost,
//      count or peak. So only "records" are tried: blocks strictly cheaper
//      than every later one (typically a handful), in order of a per-j
//      lower bound (c_j plus the LP relaxation over the blocks before j,
//      from a Fenwick tree), stopping once the bound exceeds the best plan.
//   2. For one j, an exact min-cost covering knapsack over the blocks
//      before j, solved like Pisinger's expanding-core dynamic programming:
//      start from the LP's break solution (the cheapest-per-byte prefix),
//      then decide blocks outward from the break item, nearest in cost per
//      byte first. States are exact (saving, cost, count) triples kept as a
//      Pareto front: a state with at least the saving and at most the cost
//      (then fewer blocks) of another replaces it. A state is dropped when
//      its cost plus an LP bound on what the undecided blocks can still
//      change (buy the shortfall from the right side, sell a surplus back
//      through the left side) exceeds the best plan. Bytes are never
//      rounded.
//   3. Two passes: first every j with a small core (a heuristic whose plans
//      are real), then exhaustively, so the exhaustive pass starts from a
//      best plan that is usually already optimal.
//
// Cost: a few microseconds to a few milliseconds for chains of up to
// thousands of blocks whose sizes repeat per block type (real layers). When
// every block's size differs slightly (noisy per-block estimates), the
// fronts grow and the search can take far longer (hundreds of milliseconds
// to seconds at a thousand blocks). Measured on such chains: the optimum
// sits 0.1% to 30% of one block's cost above the per-j LP bound, and a
// block type's blocks differ in cost per byte by only a few percent, so
// nearly the whole type is "core" and a partial state's LP bound stays
// within that gap until almost every block is decided (fronts of 10^5).
// What would separate the states is integrality per block type (how many
// blocks of each type), which LP bounds on cost per byte cannot see; a
// bound that counts blocks must also account for swaps of near-equal
// blocks, or it is unsound. Tried and rejected (no gain, or unsound):
// count bounds on the shortfall and surplus, an exchange-dominance
// (up-set) restriction, a forward sweep with count bounds, a beam-search
// first pass, and iteratively widened cutoffs.
//
// Work limit: ExactOptions::max_nodes caps the states the merges examine.
// Past it the search stops and returns the best plan found so far, which
// fits whenever any plan fits (the first candidate is the min-peak plan,
// and every later one fits), flagged in ExactStats::stopped_at_limit and in
// the plan's reasons (solver.cc). It is never over budget, only possibly
// not the cheapest.
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
// prediction) stays below the sentinel, so no real peak or cost reads as
// "infinite" and no sum of two of them overflows.
static_assert(kMaxQuantity + kMaxCalibrationBytes +
                      int64_t{kMaxBlocks} * kMaxQuantity <
                  kInf,
              "a planned problem can reach the solver's infinity");

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

std::vector<Action> SolveExact(const PlanProblem& problem,
                               const ExactOptions& options,
                               ExactStats* stats) {
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

  // Only "records" can be the optimal j: if a later block (larger saving)
  // costs no more, swapping it in for j keeps the plan feasible at no
  // higher cost, count or peak. So j is the last block or strictly cheaper
  // than every later one.
  std::vector<int> js;
  {
    int64_t later_min = kInf;
    for (int k = m - 1; k >= 0; --k) {
      if (items[k].c < later_min && lb_j[k] < kInf) js.push_back(k);
      later_min = std::min(later_min, items[k].c);
    }
  }
  std::sort(js.begin(), js.end(), [&](int x, int y) {
    return lb_j[x] != lb_j[y] ? lb_j[x] < lb_j[y] : x > y;
  });

  Key best;
  std::vector<int> best_set;  // sweep positions
  auto consider = [&](const Key& key, const std::vector<int>& set) {
    if (key < best) {
      best = key;
      best_set = set;
    }
  };
  // Always feasible here: every positive block.
  {
    std::vector<int> all(m);
    std::iota(all.begin(), all.end(), 0);
    consider(Key{total_c, m, p0 - (total_s - items.back().s)}, all);
  }

  std::vector<int> pool;  // P_j in cost/saving order (sweep positions)
  std::vector<Node> nodes;
  std::vector<State> front, next;
  std::vector<int64_t> ps, pc;
  // Two passes: first each j with a small core (a heuristic: every plan it
  // offers is real, and it usually finds the optimum), so that the second,
  // exhaustive pass starts from a best plan close to the bounds and prunes
  // hard.
  bool stopped = false;
  // Node ids are int32: the limit keeps the arena (at most one node per
  // state examined, plus two fronts past the limit) well inside them.
  const int64_t max_nodes = std::min<int64_t>(
      options.max_nodes, std::numeric_limits<int32_t>::max() / 2);
  const auto deadline = std::chrono::steady_clock::now() + options.time_limit;
  const bool timed = options.time_limit.count() > 0;
  for (const int max_core : {24, -1}) {
    if (max_core < 0) st.heuristic_cost_ns = best.cost;
    if (stopped) break;
    for (int j : js) {
      if (stopped) break;
      if (lb_j[j] > best.cost) break;  // sorted: no later j can do better
      ++st.steps;
      pool.clear();
      for (int r = 0; r < m; ++r) {
        if (by_ratio[r] < j) pool.push_back(by_ratio[r]);
      }
      const int np = static_cast<int>(pool.size());
      // The break item: the cheapest-per-byte prefix pool[0, b) falls short
      // of `need`, pool[0, b] covers it.
      int b = 0;
      int64_t sigma0 = 0, cost0 = 0;
      while (b < np && sigma0 + items[pool[b]].s < need) {
        sigma0 += items[pool[b]].s;
        cost0 += items[pool[b]].c;
        ++b;
      }
      if (b >= np) continue;  // cannot cover (lb_j would be kInf)
      const int64_t cj = items[j].c;

      // States are deviations from the break solution pool[0, b): items of
      // the core [lo, hi] have been decided, items left of it are in, items
      // right of it are out. Pisinger's expanding core with the simple
      // bound: covering a shortfall needs right items (cost per byte at
      // least that of pool[hi + 1]), a surplus can only be sold back through
      // left items (at most pool[lo - 1]'s cost per byte).
      nodes.clear();
      front.assign(1, State{sigma0, cost0, b, -1});
      int lo = b, hi = b - 1;
      // Prefix sums of saving and cost over the pool in cost/saving order,
      // for LP bounds on what is still undecided.
      ps.assign(np + 1, 0);
      pc.assign(np + 1, 0);
      for (int r = 0; r < np; ++r) {
        ps[r + 1] = ps[r] + items[pool[r]].s;
        pc[r + 1] = pc[r] + items[pool[r]].c;
      }
      auto bound = [&](const State& s) -> int64_t {
        if (s.sigma < need) {
          // Cover the shortfall with the cheapest-per-byte undecided right
          // items pool[hi + 1, np), the last one fractionally.
          const int h = hi + 1;
          const int64_t d = need - s.sigma;
          if (ps[np] - ps[h] < d) return kInf;
          // Smallest t with ps[t] - ps[h] >= d.
          const int t = static_cast<int>(std::lower_bound(ps.begin() + h + 1,
                                                          ps.begin() + np + 1,
                                                          ps[h] + d) -
                                         ps.begin());
          const Item& f = items[pool[t - 1]];
          return s.cost + (pc[t - 1] - pc[h]) +
                 MulDivCeil(d - (ps[t - 1] - ps[h]), f.c, f.s);
        }
        // Sell the surplus back through the dearest-per-byte undecided left
        // items pool[lo - 1], pool[lo - 2], ..., the last one fractionally.
        const int64_t e = s.sigma - need;
        if (lo <= 0 || e == 0) return s.cost;
        // Smallest t with ps[lo] - ps[t] <= e: pool[t, lo) sold whole.
        const int t = static_cast<int>(
            std::lower_bound(ps.begin(), ps.begin() + lo + 1, ps[lo] - e) -
            ps.begin());
        int64_t refund = pc[lo] - pc[t];
        if (t > 0) {
          const Item& f = items[pool[t - 1]];
          const __int128 num =
              static_cast<__int128>(e - (ps[lo] - ps[t])) * f.c;
          refund += static_cast<int64_t>(num / f.s);
        }
        return s.cost - refund;
      };
      auto materialize = [&](const State& s) {
        std::vector<char> in(m, 0);
        for (int r = 0; r < b; ++r) in[pool[r]] = 1;
        for (int node = s.node; node >= 0; node = nodes[node].parent) {
          in[nodes[node].pos] ^= 1;
        }
        in[j] = 1;
        std::vector<int> set;
        for (int pos = 0; pos < m; ++pos) {
          if (in[pos]) set.push_back(pos);
        }
        return set;
      };
      auto offer = [&](const State& s) {
        if (s.sigma < need) return;
        const Key key{s.cost + cj, s.count + 1, p0 - s.sigma};
        if (key < best) {
          best = key;
          best_set = materialize(s);
        }
      };
      // Expand the core toward whichever side's next item is closer to the
      // break item in cost per byte: those are the uncertain ones.
      const Item& brk = items[pool[b]];
      auto gap = [&](const Item& it) {
        // |c/s - c_b/s_b| compared without division: scaled by s * s_b.
        const __int128 x = static_cast<__int128>(it.c) * brk.s -
                           static_cast<__int128>(brk.c) * it.s;
        return static_cast<long double>(x < 0 ? -x : x) /
               static_cast<long double>(it.s);
      };
      int core = 0;
      while (!front.empty() && (lo > 0 || hi + 1 < np) &&
             (max_core < 0 || core++ < max_core)) {
        bool take_right;
        if (hi + 1 >= np) {
          take_right = false;
        } else if (lo <= 0) {
          take_right = true;
        } else {
          take_right = gap(items[pool[hi + 1]]) <= gap(items[pool[lo - 1]]);
        }
        const int pos = take_right ? pool[++hi] : pool[--lo];
        const int sign = take_right ? +1 : -1;
        const int64_t ds = sign * items[pos].s;
        const int64_t dc = sign * items[pos].c;
        // Merge the front (a) with its toggled copy (t), both by saving,
        // from the top: a state survives if it is strictly cheaper (cost,
        // then count) than every state with a larger saving.
        next.clear();
        int a = static_cast<int>(front.size()) - 1;
        int t = a;
        int64_t thr_cost = kInf, thr_count = kInf;
        while (a >= 0 || t >= 0) {
          bool toggled;
          if (t < 0) {
            toggled = false;
          } else if (a < 0) {
            toggled = true;
          } else {
            const int64_t st_sigma = front[t].sigma + ds;
            if (st_sigma != front[a].sigma) {
              toggled = st_sigma > front[a].sigma;
            } else {
              toggled = LexLess(front[t].cost + dc, front[t].count + sign,
                                front[a].cost, front[a].count);
            }
          }
          ++st.nodes;
          State cand;
          if (toggled) {
            const State& f = front[t--];
            cand = State{f.sigma + ds, f.cost + dc, f.count + sign, f.node};
          } else {
            cand = front[a--];
          }
          if (!LexLess(cand.cost, cand.count, thr_cost, thr_count)) continue;
          thr_cost = cand.cost;
          thr_count = cand.count;
          if (bound(cand) + cj > best.cost) continue;
          if (toggled) {
            nodes.push_back({pos, cand.node});
            cand.node = static_cast<int32_t>(nodes.size()) - 1;
          }
          offer(cand);
          next.push_back(cand);
        }
        std::reverse(next.begin(), next.end());
        front.swap(next);
        st.states += static_cast<int64_t>(front.size());
        st.max_front = std::max<int64_t>(st.max_front, front.size());
        // The work limit: checked once per core item, so a search overshoots
        // it by at most two fronts' worth of states.
        if (st.nodes > max_nodes ||
            (timed && std::chrono::steady_clock::now() > deadline)) {
          stopped = true;
          break;
        }
      }
    }
  }

  st.stopped_at_limit = stopped;
  st.root_bound_ns = *std::min_element(lb_j.begin(), lb_j.end());
  st.cost_ns = best.cost;
  for (int pos : best_set) actions[items[pos].block] = Action::kRecompute;
  return actions;
}
std::vector<Action> SolveExact(const PlanProblem& problem, ExactStats* stats) {
  return SolveExact(problem, ExactOptions(), stats);
}

}  // namespace internal
}  // namespace remat
