// The whole-block bounds (split_bound.h): CoverBound's LP and count
// bounds, and SplitBound's over a split of the undecided items, are never
// above the cheapest selection that saves as much; SplitBound's shortcuts
// (Enough) answer less only where it does not matter.
#include "planner/internal/exact/split_bound.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "planner/internal/exact/brute_force_for_test.h"

namespace remat {
namespace internal {
namespace exact {
namespace {

constexpr double kInfinity = std::numeric_limits<double>::infinity();

// At most `exact` (an integer cost, or kInf), with room for the doubles'
// rounding.
bool NotAbove(double bound, int64_t exact) {
  if (exact >= kInf) return true;
  return bound <= static_cast<double>(exact) * (1 + 1e-12) + 1e-9;
}

TEST_CASE("CoverBound's LP and count bounds are never above a selection") {
  std::mt19937_64 rng(707);
  int checked = 0, tight = 0;
  CoverBound cover;  // reused, as SplitBound does
  for (int iter = 0; iter < 300; ++iter) {
    const int m = 1 + static_cast<int>(rng() % 12);
    const std::vector<Item> items =
        testing::RandomItems(rng, m, 1 + rng() % 400, rng() % 80, iter % 2);
    std::vector<int> ids(m);
    std::iota(ids.begin(), ids.end(), 0);
    std::shuffle(ids.begin(), ids.end(), rng);
    const int first = static_cast<int>(rng() % m);
    const int last = first + 1 + static_cast<int>(rng() % (m - first));
    cover.Build(items, ids, first, last);
    int64_t total = 0;
    for (int i = first; i < last; ++i) total += items[ids[i]].s;
    CHECK(cover.total() == total);
    CHECK(cover.Lp(0) == 0);
    CHECK(cover.Counted(-3) == 0);
    CHECK(cover.Lp(total + 1) == kInfinity);
    CHECK(cover.Counted(total + 1) == kInfinity);
    for (int q = 0; q < 10; ++q) {
      const int64_t x = 1 + static_cast<int64_t>(rng() % total);
      const int64_t cheapest = testing::CheapestSaving(items, ids, first, last, x);
      INFO("m=" << m << " [" << first << ", " << last << ") x=" << x);
      CHECK(NotAbove(cover.Lp(x), cheapest));
      CHECK(NotAbove(cover.Counted(x), cheapest));
      tight += std::max(cover.Lp(x), cover.Counted(x)) >= static_cast<double>(cheapest) - 1e-9;
      ++checked;
    }
  }
  CHECK(checked == 3000);
  CHECK(tight > 300);
}

TEST_CASE("SplitBound bounds the rest of every state, as it moves on") {
  std::mt19937_64 rng(808);
  int checked = 0, applies = 0, short_answers = 0;
  for (int iter = 0; iter < 250; ++iter) {
    const int m = 2 + static_cast<int>(rng() % 11);  // 2..12 items
    const std::vector<Item> items =
        testing::RandomItems(rng, m, 10 + rng() % 400, 1 + rng() % 80, iter % 3 != 0);
    // r as the search has it, at the LP's price of some need.
    int64_t total = 0;
    for (const Item& it : items) total += it.s;
    const int64_t need = 1 + static_cast<int64_t>(rng() % total);
    const double lambda = testing::LpPrice(items, {need});
    std::vector<double> r(m);
    for (int p = 0; p < m; ++p) {
      r[p] = static_cast<double>(items[p].c) - lambda * static_cast<double>(items[p].s);
    }
    // The undecided items in the order of |r| / s, as the body has them.
    std::vector<int> order(m);
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](int x, int y) {
      const double ax = std::abs(r[x]) / static_cast<double>(items[x].s);
      const double ay = std::abs(r[y]) / static_cast<double>(items[y].s);
      return ax != ay ? ax < ay : x < y;
    });
    const int from = static_cast<int>(rng() % m);
    int64_t left = 0;
    for (int t = from; t < m; ++t) left += items[order[t]].s;
    const int64_t g = 1 + static_cast<int64_t>(rng() % (left + 20));
    SplitBound split;
    CHECK_FALSE(split.active());
    const double prepared = split.Prepare(items, order, r, from, g);
    INFO("iter " << iter << " m=" << m << " from " << from << " g=" << g);
    CHECK(split.active());
    CHECK(NotAbove(prepared, testing::CheapestSaving(items, order, from, m, g)));
    // Then item by item, as the search decides them.
    for (int t = from; t < m; ++t) {
      if (t > from) split.Advance(t);
      int hint = -1;
      int64_t rest_left = 0;
      for (int u = t; u < m; ++u) rest_left += items[order[u]].s;
      std::vector<int64_t> needs;
      for (int q = 0; q < 6; ++q) {
        needs.push_back(1 + static_cast<int64_t>(rng() % (rest_left + 10)));
      }
      std::sort(needs.begin(), needs.end());  // states in the order of g
      for (int64_t x : needs) {
        const int64_t cheapest = testing::CheapestSaving(items, order, t, m, x);
        const double exact = split.Rest(t, x, nullptr, SplitBound::kExact);
        const double hinted = split.Rest(t, x, &hint, SplitBound::kExact);
        INFO("t=" << t << " x=" << x << " cheapest " << cheapest);
        CHECK(NotAbove(exact, cheapest));
        CHECK(NotAbove(hinted, cheapest));
        ++checked;
        if (exact == -kInfinity) continue;  // not for this state
        ++applies;
        // Shortcuts: a smaller answer only where both fall below low or
        // both reach high.
        for (double width : {0.5, 5.0, 50.0}) {
          const double centre = std::isfinite(exact)
                                    ? exact + std::uniform_real_distribution<double>(
                                                  -2 * width, 2 * width)(rng)
                                    : 1e6;
          const SplitBound::Enough enough{centre - width, centre + width};
          const double answer = split.Rest(t, x, nullptr, enough);
          CHECK(answer <= exact);
          if (answer != exact) {
            ++short_answers;
            CHECK(((answer >= enough.high && exact >= enough.high) ||
                   (answer < enough.low && exact < enough.low)));
          }
        }
      }
    }
  }
  CHECK(checked > 5000);
  CHECK(applies > 1000);
  CHECK(short_answers > 10);
}

}  // namespace
}  // namespace exact
}  // namespace internal
}  // namespace remat
