// The LP bound (lp_bound.h): the LP of the items present, rounded up, and
// so never above the cheapest selection of them that saves as much.
#include "planner/internal/exact/lp_bound.h"

#include <catch2/catch.hpp>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "planner/internal/exact/brute_force_for_test.h"

namespace remat {
namespace internal {
namespace exact {
namespace {

TEST_CASE("Rank orders the items by cost per byte, the ties by position") {
  std::mt19937_64 rng(404);
  for (int iter = 0; iter < 200; ++iter) {
    const std::vector<Item> items = testing::RandomItems(
        rng, static_cast<int>(rng() % 20), 1 + rng() % 1000, rng() % 100, iter % 2);
    std::vector<int> rank_of;
    std::vector<Item> by_rank;
    Rank(items, &rank_of, &by_rank);
    REQUIRE(by_rank.size() == items.size());
    REQUIRE(rank_of.size() == items.size());
    for (size_t i = 0; i < items.size(); ++i) {
      REQUIRE(rank_of[i] >= 1);
      REQUIRE(rank_of[i] <= static_cast<int>(items.size()));
      CHECK(by_rank[rank_of[i] - 1].block == items[i].block);
    }
    for (size_t r = 1; r < by_rank.size(); ++r) {
      const __int128 lhs = static_cast<__int128>(by_rank[r - 1].c) * by_rank[r].s;
      const __int128 rhs = static_cast<__int128>(by_rank[r].c) * by_rank[r - 1].s;
      CHECK(lhs <= rhs);
      if (lhs == rhs) CHECK(by_rank[r - 1].block < by_rank[r].block);
    }
    std::vector<Item> again;
    Rank(items, nullptr, &again);
    CHECK(again.size() == by_rank.size());
  }
}

TEST_CASE("LowerBound is the LP of the items present, never above a selection") {
  std::mt19937_64 rng(505);
  int bounded = 0, infinite = 0, tight = 0;
  for (int iter = 0; iter < 400; ++iter) {
    const int m = 1 + static_cast<int>(rng() % 12);
    const std::vector<Item> items =
        testing::RandomItems(rng, m, 1 + rng() % 500, rng() % 100, iter % 2);
    std::vector<int> rank_of;
    std::vector<Item> by_rank;
    Rank(items, &rank_of, &by_rank);
    LpBound lp(by_rank);
    std::vector<char> present(m, 0);
    if (iter % 3 == 0) {
      lp.AddAll();
      present.assign(m, 1);
    }
    for (int round = 0; round < 6; ++round) {
      // Some items in or out.
      for (int i = 0; i < m; ++i) {
        if (rng() % 3 == 0) {
          lp.Add(rank_of[i], present[i] ? -1 : +1);
          present[i] ^= 1;
        }
      }
      std::vector<int> ids;
      int64_t total = 0;
      for (int i = 0; i < m; ++i) {
        if (present[i]) {
          ids.push_back(i);
          total += items[i].s;
        }
      }
      CHECK(lp.LowerBound(0) == 0);
      CHECK(lp.LowerBound(-5) == 0);
      for (int q = 0; q < 8; ++q) {
        const int64_t d = 1 + static_cast<int64_t>(rng() % (total + 50));
        const int64_t bound = lp.LowerBound(d);
        INFO("m=" << m << " d=" << d << " total " << total);
        if (d > total) {
          CHECK(bound == kInf);
          ++infinite;
          continue;
        }
        const int64_t cheapest =
            testing::CheapestSaving(items, ids, 0, static_cast<int>(ids.size()), d);
        REQUIRE(cheapest < kInf);
        CHECK(bound <= cheapest);
        // The LP exactly: whole items cheapest per byte first, then the
        // fraction of the next, rounded up.
        int64_t saved = 0, cost = 0, lp_value = -1;
        for (const Item& it : by_rank) {
          if (!present[it.block]) continue;
          if (saved + it.s >= d) {
            lp_value = cost + MulDivCeil(d - saved, it.c, it.s);
            break;
          }
          saved += it.s;
          cost += it.c;
        }
        CHECK(bound == lp_value);
        ++bounded;
        tight += bound == cheapest;
      }
    }
  }
  CHECK(bounded > 5000);
  CHECK(infinite > 100);
  CHECK(tight > 500);
}

}  // namespace
}  // namespace exact
}  // namespace internal
}  // namespace remat
