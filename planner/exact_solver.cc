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
// Search: a dynamic programme over the candidate blocks in chain order.
// A state is (S, cost, count) for a choice among the blocks decided so
// far; before deciding the blocks at or above k, states with S < need_k
// are dropped. A state dominates another with no more saving, no lower
// cost and no fewer blocks, so each front is a Pareto front: saving up,
// (cost, count) up. Savings above every need still ahead are worth nothing
// more and are capped there, which merges states. A state is dropped when
// it cannot reach a later need with every block left recomputed, or when
// its cost plus a lower bound on what the blocks left must still cost
// reaches the best plan found: the larger of the LP bound on covering its
// largest remaining shortfall (cheapest per byte first, a Fenwick tree
// over cost per byte) and the Lagrangian bound over every need ahead
// (PrefixBound). The best plan starts as a greedy
// one (recompute the cheapest per byte until every need is met, then drop
// what is not needed, dearest first) and improves whenever a state meets
// every need ahead. Bytes are never rounded. States of equal saving
// keep only the cheapest: structurally identical layers have equal
// savings, so without that a front grows with the number of ways to reach
// the same saving (seconds at 1000 blocks; milliseconds with it).
// Before the search, reduced-cost fixing (see below) decides the
// candidates whose deviation from the LP's choice alone would cost more
// than the gap between the greedy plan and the LP bound (with the largest
// need's price, and with the prices of every need).
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
// to fewer blocks not kept, and when no plan fits the answer is still the
// smallest peak without offloading.
#include "planner/exact_solver.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <numeric>
#include <tuple>

#include "absl/container/flat_hash_map.h"

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

// A lower bound that sees every need at once, not only the largest one
// ahead: the Lagrangian of the prefix constraints. With prices mu_p >= 0 on
// "the items before p save at least R_p" (R_p: the largest need up to p,
// at least 0, which every plan that meets the needs also meets) and
// M_q = sum_{p > q} mu_p the price a byte saved by item q earns, any plan
// that extends a state before item p (saving sigma, cost) costs at least
//
//   cost + sum_{p' > p} mu_p' (R_p' - sigma) + sum_{q >= p} min(0, c_q - s_q M_q)
//
// (weak duality; valid for any non-increasing M >= 0). The prices are the
// LP's optimal ones, found once: the dual is the maximum over non-increasing
// M of sum_q [M_q d_q - s_q max(0, M_q - c_q / s_q)] (d_q = R_{q+1} - R_q,
// the need that first appears after item q), a separable concave objective
// under an order constraint, which pool-adjacent-violators solves: a block
// of items sharing one price is best at the price where the savings of its
// items cheaper per byte first cover its need. Per state the bound is then
// linear in sigma: cost + Offset(p) - sigma * Price(p). It is computed in
// doubles and lowered by a safety slack, so rounding never makes it exceed
// the true bound. Where the needs bind only at the end (one constraint),
// it equals the LP bound the search already uses; near the end of a chain
// under a tight budget, where later blocks cannot help earlier needs, it is
// up to a block's cost higher.
class PrefixBound {
 public:
  PrefixBound(const std::vector<Item>& items, const std::vector<int64_t>& req) {
    const size_t m = items.size();
    // R and the need each item is the last one before.
    std::vector<double> r(m + 1, 0), d(m, 0);
    double run = 0;
    for (size_t p = 0; p <= m; ++p) {
      run = std::max(run, static_cast<double>(req[p]));
      r[p] = run;
    }
    for (size_t q = 0; q < m; ++q) d[q] = r[q + 1] - r[q];
    // Pool adjacent violators: blocks of items in chain order, prices
    // non-increasing from block to block. A block's price is the cost per
    // byte at which its items, cheaper per byte first, cover its need: a
    // weighted quantile over a range of the chain, which a persistent
    // segment tree over the items' ranks in cost-per-byte order answers in
    // O(log m) (version q holds the items before q). The prices need not
    // be exact to keep the bound valid (any non-increasing M is), so
    // doubles do.
    std::vector<size_t> order(m);
    std::iota(order.begin(), order.end(), 0);
    std::vector<double> ratio(m);
    for (size_t q = 0; q < m; ++q) {
      ratio[q] = static_cast<double>(items[q].c) / items[q].s;
    }
    std::sort(order.begin(), order.end(),
              [&](size_t x, size_t y) { return ratio[x] < ratio[y]; });
    std::vector<int> rank(m);
    for (size_t r = 0; r < m; ++r) rank[order[r]] = static_cast<int>(r);
    struct Node {
      int left, right;
      double sum;
    };
    std::vector<Node> tree = {{0, 0, 0}};  // node 0: the empty tree
    tree.reserve(1 + m * 2 * (1 + static_cast<size_t>(std::log2(m + 1) + 1)));
    std::vector<int> root(m + 1, 0);
    const int ranks = static_cast<int>(std::max<size_t>(m, 1));
    for (size_t q = 0; q < m; ++q) {
      // A copy of the path to rank[q], each node's sum grown by s_q.
      int from = root[q], lo = 0, hi = ranks - 1;
      root[q + 1] = static_cast<int>(tree.size());
      tree.push_back(tree[from]);
      for (int at = root[q + 1];;) {
        tree[at].sum += static_cast<double>(items[q].s);
        if (lo == hi) break;
        const int mid = (lo + hi) / 2;
        const bool go_left = rank[q] <= mid;
        from = go_left ? tree[from].left : tree[from].right;
        const int child = static_cast<int>(tree.size());
        tree.push_back(tree[from]);
        (go_left ? tree[at].left : tree[at].right) = child;
        at = child;
        (go_left ? hi : lo) = go_left ? mid : mid + 1;
      }
    }
    // The price of items [first, last] for `need`; infinite when they
    // cannot cover it.
    auto price_of = [&](size_t first, size_t last, double need) {
      if (need <= 0) return 0.0;
      int a = root[last + 1], b = root[first];
      if (tree[a].sum - tree[b].sum < need) {
        return std::numeric_limits<double>::infinity();
      }
      int lo = 0, hi = ranks - 1;
      while (lo < hi) {
        const int mid = (lo + hi) / 2;
        const double left = tree[tree[a].left].sum - tree[tree[b].left].sum;
        if (left >= need) {
          a = tree[a].left;
          b = tree[b].left;
          hi = mid;
        } else {
          need -= left;
          a = tree[a].right;
          b = tree[b].right;
          lo = mid + 1;
        }
      }
      return ratio[order[lo]];
    };
    struct Block {
      size_t first, last;  // items [first, last]
      double need;
      double price;
    };
    std::vector<Block> blocks;
    for (size_t q = 0; q < m; ++q) {
      Block b{q, q, d[q], price_of(q, q, d[q])};
      while (!blocks.empty() && blocks.back().price < b.price) {
        b.first = blocks.back().first;
        b.need += blocks.back().need;
        b.price = price_of(b.first, b.last, b.need);
        blocks.pop_back();
      }
      blocks.push_back(b);
    }
    price_.assign(m + 1, 0);
    for (const Block& b : blocks) {
      // An infinite price only when the first block alone cannot meet its
      // need, which the search rules out before it starts; keep M finite.
      const double price = std::isfinite(b.price) ? b.price : 0;
      for (size_t q = b.first; q <= b.last; ++q) price_[q] = price;
    }
    // Offset(p) = sum_{p' > p} mu_p' R_p' + sum_{q >= p} min(0, c_q - s_q M_q),
    // mu_p' = M_{p'-1} - M_p' (M_m = 0).
    offset_.assign(m + 1, 0);
    slack_.assign(m + 1, 0);
    double magnitude = 0;
    for (size_t p = m; p-- > 0;) {
      const double mu = price_[p] - price_[p + 1];
      const double reduced =
          static_cast<double>(items[p].c) - items[p].s * price_[p];
      offset_[p] = offset_[p + 1] + mu * r[p + 1] + std::min(0.0, reduced);
      magnitude += std::abs(mu * r[p + 1]) + std::abs(reduced);
      slack_[p] = 1e-9 * (magnitude + price_[p] * r[m]) + 4;
    }
  }

  // The price a byte saved by item q earns (M_q).
  double Price(size_t q) const { return price_[q]; }
  // Rest(0, 0) is the LP bound on the whole problem, less the slack; a
  // reduced cost c_q - s_q M_q computed in doubles is within Slack(0) of
  // its true value.
  double Slack(size_t p) const { return slack_[p]; }

  // The bound on what a state before item p, saving sigma, still costs.
  int64_t Rest(size_t p, int64_t sigma) const {
    const double v = offset_[p] - static_cast<double>(sigma) * price_[p] -
                     slack_[p];
    if (v <= 0) return 0;
    return v >= static_cast<double>(kInf) ? kInf : static_cast<int64_t>(v);
  }

 private:
  std::vector<double> price_;   // M_q
  std::vector<double> offset_;  // Offset(p)
  std::vector<double> slack_;   // rounding allowance of Offset(p)
};

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
         const PrefixBound& prefix, int64_t max_nodes,
         std::chrono::nanoseconds time_limit, ExactStats* st)
      : items_(items),
        by_rank_(by_rank),
        rank_of_(rank_of),
        fixed_(fixed),
        prefix_(prefix),
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
          if (rest < kInf) {
            bound = std::min(
                bound, x.cost + std::max(rest, prefix_.Rest(p, x.sigma)));
          }
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
        const int64_t bound = std::max(lp.LowerBound(ahead - x.sigma),
                                       prefix_.Rest(p + 1, x.sigma));
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
  const PrefixBound& prefix_;
  const int64_t max_nodes_;
  const std::chrono::nanoseconds time_limit_;
  const std::chrono::steady_clock::time_point start_;
  ExactStats* st_;
  std::vector<Node> arena_;
  std::vector<State> keep_, take_, merged_;
};

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
    }
  }
  // The same with the prices of every need (PrefixBound), which fixes more
  // where needs other than the largest bind. Either fixing alone is valid;
  // where they disagree no plan is cheaper than the best one already
  // known, which the search keeps.
  const PrefixBound prefix(items, needs.req);
  st.root_bound_ns =
      std::max(lp.LowerBound(needs.ahead[0]), prefix.Rest(0, 0));
  {
    const double slack =
        static_cast<double>(best.cost) - prefix.Rest(0, 0) + prefix.Slack(0);
    for (int p = 0; p < m; ++p) {
      const double r = static_cast<double>(items[p].c) -
                       static_cast<double>(items[p].s) * prefix.Price(p);
      if (fixed[p] == 0 && r > slack) fixed[p] = -1;
      if (fixed[p] == 0 && -r > slack) fixed[p] = +1;
      st.fixed += fixed[p] != 0;
    }
  }

  Search search(items, by_rank, rank_of, fixed, prefix,
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

// The search with OFFLOAD (the problem has a link). Memory model v2 as
// SimulateStep has it, restated for a search along the chain in forward
// order. Forward times do not depend on the plan (block k's forward ends
// at now_k, the sum of forward_ns up to k), so neither do the landing
// times of the copies out: first in first out, block i's copy lands at
// L_i = max(now_i, L of the copy before) + T_i. Before block k is decided,
// with sigma the savings of the blocks below k (a_i - o_i recomputed, t_i
// offloaded, whether landed or not), A_k = base + the a_i below k and
// inflight_k the t_i of copies not landed by now_k:
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
// copies still in flight when the next block's forward ends (their bytes
// and landing times: what the future moments depend on; which blocks they
// are does not matter, so identical layers merge). States with the same
// copies in flight and the same last action compare on (sigma, cost,
// count) alone: a Pareto front per
// such group, as in the recompute search, and across groups as
// DropDominated says. Pruned as there: a state that cannot reach a later
// need even with every block left at its larger saving; a state whose cost
// plus the LP bound over the items left (each block's recompute at
// forward_ns, its offload at the least wait it can expose) reaches the
// best plan; a state that meets every need ahead whatever comes (it
// finishes with every block left kept). An offload's least wait is charged
// when it is chosen and the wait at the end of forward as each copy is
// queued, so a state's cost is already most of what it will cost. The
// last block is never recomputed or offloaded (neither lowers any moment),
// nor is a block whose saving is not positive, nor offloaded a block whose
// recompute is never worse (see the constructor). Times are doubles, as in
// SimulateStep; a plan's cost here can differ from SimulateStep's by a
// rounding, never more.
// The most states the search with OFFLOAD examines, whatever
// ExactOptions::max_nodes says: each keeps a node (32 bytes) and costs
// up to 2 microseconds of bookkeeping (its copies in flight), so this
// bounds the search to about 2 seconds and 100 MiB.
constexpr int64_t kMaxOffloadNodes = int64_t{1} << 20;

struct OffloadBlock {
  int64_t below = 0;  // A_k: base plus the a_i of the blocks below
  int64_t a = 0, s = 0, t = 0, bwd = 0, c = 0;
  int64_t ro = 0;  // RECOMPUTE_OFFLOAD's copy: o_{k-1}, its checkpoint
  double bns = 0, now = 0;
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
        max_nodes_(std::min<int64_t>(options.max_nodes, kMaxOffloadNodes)),
        time_limit_(options.time_limit),
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
    // The LP items: each block's recompute and offloads, at the least each
    // can cost, rounded down (a recompute that saves nothing is none).
    for (int k = 0; k < n_; ++k) {
      const OffloadBlock& x = blocks_[k];
      if (x.can_r && x.s > 0) items_.push_back({k, x.s, x.c});
      if (x.can_o) {
        items_.push_back(
            {k, x.t, static_cast<int64_t>(std::floor(x.least_wait))});
      }
      if (x.can_ro && x.s + x.ro > 0) {
        items_.push_back(
            {k, x.s + x.ro,
             x.c + static_cast<int64_t>(std::floor(x.ro_least_wait))});
      }
    }
    const int m = static_cast<int>(items_.size());
    std::vector<int> order(m);
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](int x, int y) {
      const __int128 lhs = static_cast<__int128>(items_[x].c) * items_[y].s;
      const __int128 rhs = static_cast<__int128>(items_[y].c) * items_[x].s;
      return lhs != rhs ? lhs < rhs : x < y;
    });
    rank_of_.resize(m);
    by_rank_.resize(m);
    for (int r = 0; r < m; ++r) {
      rank_of_[order[r]] = r + 1;
      by_rank_[r] = items_[order[r]];
    }
  }

  // Searches from the empty plan; `best_cost` / `best_count`: the plan to
  // beat (kInf: none known). Returns false when a limit stopped it.
  bool Run(double best_cost, int64_t best_count) {
    best_cost_ = best_cost;
    best_count_ = best_count;
    LpBound lp(by_rank_);
    for (int r = 1; r <= static_cast<int>(items_.size()); ++r) lp.Add(r, +1);
    size_t next_item = 0;  // items of blocks below the current one removed
    std::vector<OffloadState> front = {{0, 0, 0, -1, -1, kLastKeep}};
    for (int k = 0; k < n_ && !front.empty(); ++k) {
      if (st_->nodes > max_nodes_ ||
          (time_limit_.count() > 0 &&
           std::chrono::steady_clock::now() - start_ >= time_limit_)) {
        st_->stopped_at_limit = true;
        // A cheaper plan extends some state of the front (lp holds the
        // items of block k and above).
        double bound = best_cost_;
        for (const OffloadState& x : front) {
          const int64_t rest = lp.LowerBound(ahead_[k] - x.sigma);
          if (rest < kInf) bound = std::min(bound, x.cost + rest);
        }
        lower_bound_ = bound;
        return false;
      }
      // The items of block k are decided now.
      for (; next_item < items_.size() && items_[next_item].block <= k;
           ++next_item) {
        lp.Add(rank_of_[next_item], -1);
      }
      ++st_->steps;
      Step(k, front, lp);
      st_->states += static_cast<int64_t>(front.size());
      st_->max_front =
          std::max<int64_t>(st_->max_front, static_cast<int64_t>(front.size()));
    }
    lower_bound_ = best_cost_;
    return true;
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
    const OffloadBlock& up = blocks_[k + 1];
    const bool ro = last == kLastRo;
    const double wait = std::max(
        0.0, (ro ? x.ro_back_ns : x.back_ns) - up.bns -
                 (above_recomputed ? static_cast<double>(up.c) : 0.0));
    return wait - (ro ? x.ro_least_wait : x.least_wait);
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
  void Step(int k, std::vector<OffloadState>& front, const LpBound& lp) {
    const OffloadBlock& x = blocks_[k];
    children_.clear();
    for (const OffloadState& st : front) {
      // (Block k's own checkpoint, if it sends it, is back in its
      // backward: held still counts it.)
      const int64_t held = x.below - st.sigma;
      if (held + InFlight(st, x.now, nullptr) + x.a > limit_) continue;
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
      const int64_t rest = lp.LowerBound(ahead_[k + 1] - c.sigma);
      if (rest >= kInf) continue;
      // (A state that is not done may still finish with every block kept,
      // its copies landing in time: no count added.)
      const double bound = c.cost + static_cast<double>(rest);
      if (bound > best_cost_ || (bound == best_cost_ && c.count >= best_count_)) {
        continue;
      }
      // Copies that land before the next block's forward ends change no
      // later moment, landing time or wait: the state is keyed, and its
      // saving guaranteed, from then on.
      const double next = blocks_[k + 1].now;
      keyed_.push_back({KeyOf(c, next), c, c.sigma - InFlight(c, next, nullptr),
                        std::max(next, Drained(c))});
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
    DropDominated(front);
  }

  // Across groups: X dominates Y when X's saving with every copy in flight
  // at the next block's end counted as never landing is at least Y's
  // saving, X's copy engine is free no later, X did not offload block k
  // unless Y did too (kAsGood), and X costs
  // less (cost, then count). Then every completion of Y fits for X too
  // (its moments hold no more; its later copies land no later) and costs
  // X no more (the waits depend on the actions alone, the wait at the end
  // of forward grows no faster from an earlier free time). A sweep by
  // saving with a Fenwick tree over free times holding the least cost.
  void DropDominated(std::vector<OffloadState>& front) {
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
    for (size_t i : survivors_) {
      free_rank_[i] = static_cast<int>(std::lower_bound(times.begin(), times.end(),
                                                        keyed_[i].free_at) -
                                       times.begin()) + 1;
    }
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
      front.push_back(ky.state);
    }
  }

  struct Keyed {
    uint64_t key;  // KeyOf
    OffloadState state;
    int64_t guaranteed;  // sigma less the copies in flight at the next
                         // block's end
    double free_at;      // when the copy engine takes the next copy
  };

  const int n_;
  const int64_t limit_;
  const int64_t max_nodes_;
  const std::chrono::nanoseconds time_limit_;
  const std::chrono::steady_clock::time_point start_;
  ExactStats* st_;
  std::vector<OffloadBlock> blocks_;
  std::vector<int64_t> need_, ahead_, reach_;
  std::vector<Item> items_, by_rank_;
  std::vector<int> rank_of_;
  std::vector<OffloadNode> arena_;
  std::vector<OffloadState> children_;
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
  double best_cost_ = std::numeric_limits<double>::infinity();
  int64_t best_count_ = kInf;
  int32_t best_node_ = -2;  // -2: the plan to beat, not found here
  double lower_bound_ = 0;
};

}  // namespace

std::vector<Action> SolveExact(const PlanProblem& problem,
                               const ExactOptions& options,
                               ExactStats* stats) {
  const auto start = std::chrono::steady_clock::now();
  ExactStats local_stats;
  ExactStats& st = stats != nullptr ? *stats : local_stats;
  std::vector<Action> actions = SolveRecompute(problem, options, st);
  if (!problem.has_link() || st.keep_all_fits) return actions;
  // The recompute plan is the one to beat (when it fits); the search with
  // OFFLOAD starts its count of work afresh.
  const StepSimulation base = SimulateStep(problem, actions);
  const bool base_fits = !st.infeasible;
  const double base_cost = base_fits ? static_cast<double>(base.recompute_ns +
                                                           base.exposed_transfer_ns)
                                     : std::numeric_limits<double>::infinity();
  int64_t base_count = 0;
  for (Action a : actions) base_count += a != Action::kKeep;
  const int64_t heuristic = st.cost_ns;
  st = ExactStats();
  st.heuristic_cost_ns = heuristic;
  OffloadSearch search(problem, options, start, &st);
  const bool complete = search.Run(base_cost, base_fits ? base_count : kInf);
  st.infeasible = !base_fits && !search.found();
  if (st.infeasible) {
    // No plan fits: the smallest peak without offloading (recompute-only
    // search's answer), lower still with every checkpoint it can send on
    // host (at no moment does a sent checkpoint hold more than a kept one).
    if (problem.offload_checkpoints) {
      std::vector<Action> sending = actions;
      for (size_t i = 1; i < sending.size(); ++i) {
        if (sending[i] == Action::kRecompute && Recomputes(sending[i - 1])) {
          sending[i] = Action::kRecomputeOffload;
        }
      }
      if (PredictedPeakBytes(problem, sending) <
          PredictedPeakBytes(problem, actions)) {
        return sending;
      }
    }
    return actions;
  }
  if (search.found()) actions = search.BestActions();
  st.cost_ns = static_cast<int64_t>(std::ceil(search.best_cost()));
  st.lower_bound_ns = static_cast<int64_t>(std::floor(
      complete ? search.best_cost() : search.lower_bound()));
  return actions;
}

std::vector<Action> SolveExact(const PlanProblem& problem, ExactStats* stats) {
  return SolveExact(problem, ExactOptions(), stats);
}

}  // namespace internal
}  // namespace remat
