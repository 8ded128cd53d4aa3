#include "planner/internal/exact/solve_cover.h"

#include <algorithm>
#include <numeric>

#include "planner/internal/exact/reverse_search.h"

namespace remat {
namespace internal {
namespace exact {

std::vector<char> SolveCover(const std::vector<Item>& items,
                             const std::vector<int64_t>& req,
                             const ExactOptions& options, ExactStats& st,
                             const CostCount* below) {
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
  const std::vector<char> best_chosen = GreedyCover(items, req, by_ratio);
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

}  // namespace exact
}  // namespace internal
}  // namespace remat
