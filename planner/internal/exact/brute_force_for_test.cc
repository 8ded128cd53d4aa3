#include "planner/internal/exact/brute_force_for_test.h"

#include <algorithm>
#include <string>
#include <tuple>

namespace remat {
namespace internal {
namespace exact {
namespace testing {

PlanProblem RandomChain(std::mt19937_64& rng, int n, ChainKind kind) {
  auto uni = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  PlanProblem p;
  p.base_bytes = uni(0, 2000);
  const bool some_fixed = uni(0, 2) == 0;
  const int64_t att_a = uni(100, 1000), mlp_a = uni(100, 1000);
  const int64_t hidden = uni(0, 80);
  const int64_t att_c = uni(1, 100), mlp_c = uni(1, 100);
  for (int i = 0; i < n; ++i) {
    BlockCost b;
    b.name = "b" + std::to_string(i);
    switch (kind) {
      case ChainKind::kRandom:
        b.act_bytes = uni(0, 1000);
        // Sometimes the input is larger than what the block retains.
        b.input_bytes = uni(0, b.act_bytes + 200);
        b.forward_ns = uni(0, 100);
        break;
      case ChainKind::kTransformer:
        b.act_bytes = (i % 2 ? mlp_a : att_a) + uni(-3, 3);
        b.input_bytes = hidden;
        b.forward_ns = (i % 2 ? mlp_c : att_c) + uni(0, 2);
        break;
      case ChainKind::kEqual:
        b.act_bytes = att_a;
        b.input_bytes = hidden;
        b.forward_ns = att_c;
        break;
    }
    b.checkpointable = !(some_fixed && uni(0, 4) == 0);
    p.blocks.push_back(b);
  }
  return p;
}

PlanProblem RandomLinkChain(std::mt19937_64& rng, int n, ChainKind kind,
                            bool checkpoints) {
  PlanProblem p = RandomChain(rng, n, kind);
  p.offload_checkpoints = checkpoints;
  static constexpr double kLinks[] = {1e15, 5e10, 1e10, 2e9, 5e8};
  p.d2h_bytes_per_s = kLinks[rng() % 5];
  p.h2d_bytes_per_s = rng() % 4 ? p.d2h_bytes_per_s : kLinks[rng() % 5];
  for (BlockCost& b : p.blocks) {
    if (rng() % 4 == 0) b.transfer_bytes = static_cast<int64_t>(rng() % 800);
    if (rng() % 4 == 0) b.backward_ns = static_cast<int64_t>(rng() % 200);
    if (checkpoints && rng() % 4 == 0) {
      b.output_bytes = static_cast<int64_t>(rng() % 400);
    }
  }
  return p;
}

std::vector<ScoredPlan> EveryPlan(const PlanProblem& p, int kinds) {
  std::vector<int> free;
  for (size_t i = 0; i < p.blocks.size(); ++i) {
    if (p.blocks[i].checkpointable) free.push_back(static_cast<int>(i));
  }
  std::vector<ScoredPlan> out;
  std::vector<Action> actions(p.blocks.size(), Action::kKeep);
  std::vector<int> digit(free.size(), 0);
  while (true) {
    ScoredPlan s;
    for (size_t b = 0; b < free.size(); ++b) {
      actions[free[b]] = static_cast<Action>(digit[b]);
      s.count += digit[b] != 0;
    }
    const StepSimulation sim = SimulateStep(p, actions);
    s.actions = actions;
    s.peak = sim.peak_bytes;
    s.cost = sim.recompute_ns + sim.exposed_transfer_ns;
    out.push_back(std::move(s));
    size_t b = 0;
    while (b < digit.size() && ++digit[b] == kinds) digit[b++] = 0;
    if (b == digit.size()) break;
  }
  return out;
}

Optimum Cheapest(const std::vector<ScoredPlan>& plans, int64_t limit) {
  Optimum best;
  for (const ScoredPlan& s : plans) {
    if (s.peak > limit) continue;
    if (!best.found ||
        std::tie(s.cost, s.count) < std::tie(best.cost, best.count)) {
      best.found = true;
      best.cost = s.cost;
      best.count = s.count;
      best.actions = s.actions;
    }
  }
  return best;
}

int64_t LeastPeak(const std::vector<ScoredPlan>& plans) {
  int64_t least = kInf;
  for (const ScoredPlan& s : plans) least = std::min(least, s.peak);
  return least;
}

int64_t KeepAllPeak(const PlanProblem& p) {
  return PredictedPeakBytes(p, std::vector<Action>(p.blocks.size(), Action::kKeep));
}

std::vector<int64_t> Limits(std::mt19937_64& rng, int64_t least_peak,
                            int64_t keep_all_peak, int random) {
  std::vector<int64_t> limits = {least_peak - 1, least_peak, keep_all_peak,
                                 keep_all_peak - 1, (least_peak + keep_all_peak) / 2};
  for (int r = 0; r < random; ++r) {
    limits.push_back(std::uniform_int_distribution<int64_t>(
        least_peak - 50, keep_all_peak + 50)(rng));
  }
  return limits;
}

void ForEachLinkChainLimit(
    std::mt19937_64& rng, int chains, int min_blocks, int random_limits,
    const std::function<void(int iter, const PlanProblem& p,
                             const std::vector<ScoredPlan>& plans)>& visit) {
  for (int iter = 0; iter < chains; ++iter) {
    const bool checkpoints = iter % 2 == 0;
    const int max_blocks = checkpoints ? 6 : 7;
    const int n = min_blocks + static_cast<int>(rng() % (max_blocks - min_blocks + 1));
    PlanProblem p = RandomLinkChain(rng, n, static_cast<ChainKind>(iter % 3), checkpoints);
    const std::vector<ScoredPlan> plans = EveryPlan(p, checkpoints ? 4 : 3);
    for (int64_t limit : Limits(rng, LeastPeak(plans), KeepAllPeak(p), random_limits)) {
      p.budget_bytes = limit;
      visit(iter, p, plans);
    }
  }
}

CoverOptimum CheapestCover(const std::vector<Item>& items,
                           const std::vector<int64_t>& req) {
  const int m = static_cast<int>(items.size());
  CoverOptimum best;
  std::vector<char> chosen(m);
  for (uint32_t mask = 0; mask < (1u << m); ++mask) {
    int64_t cost = 0, count = 0;
    for (int p = 0; p < m; ++p) {
      chosen[p] = (mask >> p) & 1;
      if (chosen[p]) {
        cost += items[p].c;
        ++count;
      }
    }
    if (best.found && !LexLess(cost, count, best.cost, best.count)) continue;
    if (!MeetsNeeds(items, chosen, req)) continue;
    best = {true, cost, count};
  }
  return best;
}

int64_t CheapestSaving(const std::vector<Item>& items,
                       const std::vector<int>& ids, int first, int last,
                       int64_t x) {
  if (x <= 0) return 0;
  const int m = last - first;
  int64_t best = kInf;
  for (uint32_t mask = 0; mask < (1u << m); ++mask) {
    int64_t s = 0, c = 0;
    for (int i = 0; i < m; ++i) {
      if ((mask >> i) & 1) {
        s += items[ids[first + i]].s;
        c += items[ids[first + i]].c;
      }
    }
    if (s >= x) best = std::min(best, c);
  }
  return best;
}

double LpPrice(const std::vector<Item>& items, const std::vector<int64_t>& req) {
  int64_t largest_need = 0;
  for (int64_t need : req) largest_need = std::max(largest_need, need);
  std::vector<int> by_ratio(items.size());
  for (size_t i = 0; i < items.size(); ++i) by_ratio[i] = static_cast<int>(i);
  std::sort(by_ratio.begin(), by_ratio.end(), [&](int x, int y) {
    const __int128 lhs = static_cast<__int128>(items[x].c) * items[y].s;
    const __int128 rhs = static_cast<__int128>(items[y].c) * items[x].s;
    if (lhs != rhs) return lhs < rhs;
    if (items[x].s != items[y].s) return items[x].s > items[y].s;
    return x < y;
  });
  double lambda = 0;
  int64_t covered = 0;
  for (int r : by_ratio) {
    lambda = static_cast<double>(items[r].c) / static_cast<double>(items[r].s);
    covered += items[r].s;
    if (covered >= largest_need) break;
  }
  return lambda;
}

std::vector<Item> RandomItems(std::mt19937_64& rng, int m, int64_t max_s,
                              int64_t max_c, bool layered) {
  auto uni = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  const int64_t s0 = uni(1, max_s), s1 = uni(1, max_s);
  const int64_t c0 = uni(0, max_c), c1 = uni(0, max_c);
  std::vector<Item> items;
  for (int p = 0; p < m; ++p) {
    Item it{p, uni(1, max_s), uni(0, max_c)};
    if (layered && uni(0, 1) == 0) {
      it.s = std::max<int64_t>(1, (p % 2 ? s1 : s0) + uni(-2, 2));
      it.c = std::max<int64_t>(0, (p % 2 ? c1 : c0) + uni(0, 1));
    }
    items.push_back(it);
  }
  return items;
}

}  // namespace testing
}  // namespace exact
}  // namespace internal
}  // namespace remat
