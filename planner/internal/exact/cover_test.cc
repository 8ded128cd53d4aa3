// The covering problem of KEEP and RECOMPUTE (cover.h): its needs say
// exactly which plans fit, and its items are every block worth recomputing.
#include "planner/internal/exact/cover.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <numeric>
#include <random>
#include <utility>
#include <vector>

#include "planner/internal/exact/brute_force_for_test.h"
#include "planner/plan.h"

namespace remat {
namespace internal {
namespace exact {
namespace {

using testing::ChainKind;

TEST_CASE("a plan of the items fits exactly when it meets every need") {
  std::mt19937_64 rng(101);
  int fits = 0, does_not = 0;
  for (int iter = 0; iter < 300; ++iter) {
    const int n = static_cast<int>(rng() % 11);  // 0..10 blocks
    PlanProblem p = testing::RandomChain(rng, n, static_cast<ChainKind>(iter % 3));
    const int64_t keep_all = testing::KeepAllPeak(p);
    for (int64_t limit : {keep_all, keep_all - 1, keep_all / 2,
                          keep_all - static_cast<int64_t>(rng() % 2000)}) {
      p.margin_bytes = static_cast<int64_t>(rng() % 3) * 50;
      p.budget_bytes = limit + p.margin_bytes;
      const Cover cover = RecomputeCover(p);
      const std::vector<Item>& items = cover.items;
      REQUIRE(cover.req.size() == items.size() + 1);
      for (size_t i = 0; i < items.size(); ++i) {
        INFO("item " << i);
        CHECK(items[i].s > 0);
        CHECK(items[i].block + 1 < n);
        CHECK(p.blocks[items[i].block].checkpointable);
        if (i > 0) CHECK(items[i].block > items[i - 1].block);
        const BlockMemory m = MemoryOf(p, items[i].block);
        CHECK(items[i].s == m.keep_bytes - m.recompute_bytes);
        CHECK(items[i].c == p.blocks[items[i].block].forward_ns);
      }
      std::vector<char> chosen(items.size());
      for (uint32_t mask = 0; mask < (1u << items.size()); ++mask) {
        std::vector<Action> actions(p.blocks.size(), Action::kKeep);
        for (size_t i = 0; i < items.size(); ++i) {
          chosen[i] = (mask >> i) & 1;
          if (chosen[i]) actions[items[i].block] = Action::kRecompute;
        }
        const bool fit = PredictedPeakBytes(p, actions) <= p.limit_bytes();
        INFO("n=" << n << " limit " << p.limit_bytes() << " mask " << mask);
        REQUIRE(MeetsNeeds(items, chosen, cover.req) == fit);
        (fit ? fits : does_not) += 1;
      }
    }
  }
  CHECK(fits > 1000);
  CHECK(does_not > 1000);
}

TEST_CASE("recomputing a block that is not an item never lowers the peak") {
  // So the cheapest plan over the items is the cheapest over every plan
  // of KEEP and RECOMPUTE.
  std::mt19937_64 rng(202);
  int checked = 0;
  for (int iter = 0; iter < 200; ++iter) {
    const int n = 1 + static_cast<int>(rng() % 9);
    PlanProblem p = testing::RandomChain(rng, n, static_cast<ChainKind>(iter % 3));
    p.budget_bytes = testing::KeepAllPeak(p);
    const Cover cover = RecomputeCover(p);
    std::vector<char> item_block(n, 0);
    for (const Item& it : cover.items) item_block[it.block] = 1;
    for (const testing::ScoredPlan& s : testing::EveryPlan(p, 2)) {
      std::vector<Action> items_only = s.actions;
      for (int k = 0; k < n; ++k) {
        if (!item_block[k]) items_only[k] = Action::kKeep;
      }
      CHECK(PredictedPeakBytes(p, items_only) <= s.peak);
      ++checked;
    }
  }
  CHECK(checked > 3000);
}

TEST_CASE("MulDivCeil, PrefixSums and LexLess") {
  std::mt19937_64 rng(303);
  for (int i = 0; i < 2000; ++i) {
    const int64_t a = static_cast<int64_t>(rng() % (int64_t{1} << 48));
    const int64_t b = static_cast<int64_t>(rng() % (int64_t{1} << 40));
    const int64_t d = 1 + static_cast<int64_t>(rng() % (int64_t{1} << 45));
    const __int128 num = static_cast<__int128>(a) * b;
    const int64_t q = MulDivCeil(a, b, d);
    // The least q with q * d >= a * b.
    CHECK(static_cast<__int128>(q) * d >= num);
    CHECK(static_cast<__int128>(q - 1) * d < num);
  }
  CHECK(MulDivCeil(0, 7, 3) == 0);
  CHECK(MulDivCeil(7, 1, 7) == 1);
  CHECK(MulDivCeil(8, 1, 7) == 2);

  std::vector<int64_t> sums;
  PrefixSums({5, -2, 7}, &sums);
  CHECK(sums == std::vector<int64_t>{0, 5, 3, 10});
  PrefixSums({}, &sums);
  CHECK(sums == std::vector<int64_t>{0});

  CHECK(LexLess(1, 9, 2, 0));
  CHECK(LexLess(2, 0, 2, 1));
  CHECK_FALSE(LexLess(2, 1, 2, 1));
  CHECK_FALSE(LexLess(3, 0, 2, 9));
}

TEST_CASE("MeetsNeeds counts the items below each need") {
  const std::vector<Item> items = {{0, 10, 1}, {2, 5, 1}};
  // Before item 0, between the items, after item 1.
  const std::vector<int64_t> req = {0, 10, 12};
  CHECK(MeetsNeeds(items, {1, 1}, req));
  CHECK_FALSE(MeetsNeeds(items, {1, 0}, req));   // 10 < 12 at the top
  CHECK_FALSE(MeetsNeeds(items, {0, 1}, req));   // 0 < 10 below item 1
  CHECK_FALSE(MeetsNeeds(items, {1, 1}, {1, 10, 12}));  // nothing below item 0
  CHECK(MeetsNeeds({}, {}, {-kInf}));
}

// GreedyCover's definition, step by step with MeetsNeeds: O(items^2).
std::vector<char> GreedyByDefinition(const std::vector<Item>& items,
                                     const std::vector<int64_t>& req,
                                     const std::vector<int>& order) {
  const int m = static_cast<int>(items.size());
  std::vector<char> chosen(m, 0);
  for (int r = 0; r < m && !MeetsNeeds(items, chosen, req); ++r) {
    chosen[order[r]] = 1;
  }
  // Dearest first, the later of equal cost first.
  std::vector<std::pair<int64_t, int>> dearest;
  for (int p = 0; p < m; ++p) dearest.push_back({items[p].c, p});
  std::sort(dearest.rbegin(), dearest.rend());
  for (const auto& [cost, p] : dearest) {
    if (!chosen[p]) continue;
    chosen[p] = 0;
    if (!MeetsNeeds(items, chosen, req)) chosen[p] = 1;
  }
  return chosen;
}

TEST_CASE("GreedyCover takes what its definition takes") {
  std::mt19937_64 rng(404);
  int met = 0, unmet = 0, partial = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    const int m = static_cast<int>(rng() % 40);
    const std::vector<Item> items =
        testing::RandomItems(rng, m, 100, 20, iter % 2 == 0);
    // Needs up to what the items below can save, some unset (-kInf), and
    // in every fourth problem one that they cannot meet.
    std::vector<int64_t> req(m + 1);
    int64_t below = 0;
    for (int p = 0; p <= m; ++p) {
      req[p] = rng() % 8 == 0
                   ? -kInf
                   : static_cast<int64_t>(rng() % (below + 1)) - 30;
      if (p < m) below += items[p].s;
    }
    if (iter % 4 == 0) {
      const int p = static_cast<int>(rng() % (m + 1));
      int64_t s = 0;
      for (int q = 0; q < p; ++q) s += items[q].s;
      req[p] = s + 1;
    }
    std::vector<int> order(m);
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);
    const std::vector<char> want = GreedyByDefinition(items, req, order);
    INFO("iter " << iter << " m " << m);
    REQUIRE(GreedyCover(items, req, order) == want);
    const bool meets = MeetsNeeds(items, want, req);
    (meets ? met : unmet) += 1;
    // A cover that leaves some items out.
    partial += meets && std::count(want.begin(), want.end(), 1) < m;
  }
  CHECK(met > 1000);
  CHECK(unmet > 500);
  CHECK(partial > 1500);
  CHECK(GreedyCover({}, {-kInf}, {}).empty());
}

}  // namespace
}  // namespace exact
}  // namespace internal
}  // namespace remat
