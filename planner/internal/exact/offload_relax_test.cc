// The relaxations of the search with OFFLOAD (offload_relax.h): the
// covering problem's optimum, the LPs over the hull items and the
// whole-block points never bound above the cheapest plan that fits.
// Against every plan of small chains with a link.
#include "planner/internal/exact/offload_relax.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "planner/internal/exact/brute_force_for_test.h"
#include "planner/internal/exact/cover.h"
#include "planner/internal/exact/lp_bound.h"
#include "planner/internal/exact/solve_cover.h"

namespace remat {
namespace internal {
namespace exact {
namespace {

// The LP over `items` (those of blocks below `below`) of saving `need`.
int64_t Lp(const std::vector<Item>& items, int64_t need, int below) {
  std::vector<Item> kept, by_rank;
  for (const Item& it : items) {
    if (it.block < below) kept.push_back(it);
  }
  Rank(kept, nullptr, &by_rank);
  LpBound lp(by_rank);
  lp.AddAll();
  return lp.LowerBound(need);
}

struct Case {
  PlanProblem problem;
  testing::Optimum optimum;  // over every plan
};

// Small chains with a link at limits some plan fits under.
std::vector<Case> Cases(uint64_t seed, int chains) {
  std::mt19937_64 rng(seed);
  std::vector<Case> out;
  testing::ForEachLinkChainLimit(
      rng, chains, 2, 3,
      [&](int, const PlanProblem& p, const std::vector<testing::ScoredPlan>& plans) {
        Case c{p, testing::Cheapest(plans, p.budget_bytes)};
        if (c.optimum.found) out.push_back(std::move(c));
      });
  return out;
}

TEST_CASE("the relaxation's cover is never dearer than a plan that fits") {
  int checked = 0, tight = 0;
  for (const Case& c : Cases(1717, 160)) {
    const OffloadChain chain = MakeOffloadChain(c.problem);
    const OffloadRelaxation relax(chain);
    const std::vector<Item> items = relax.Items();
    const std::vector<int64_t> req = relax.RelaxedNeeds(items);
    REQUIRE(req.size() == items.size() + 1);
    for (size_t i = 0; i < items.size(); ++i) {
      CHECK(items[i].s > 0);
      CHECK(items[i].c >= 0);
      if (i > 0) CHECK(items[i].block >= items[i - 1].block);
    }
    // Every item together meets every need (a plan fits).
    REQUIRE(MeetsNeeds(items, std::vector<char>(items.size(), 1), req));
    ExactStats st;
    const std::vector<char> chosen = SolveCover(items, req, ExactOptions(), st);
    const int64_t count = std::count(chosen.begin(), chosen.end(), 1);
    INFO("blocks " << c.problem.blocks.size() << " limit " << c.problem.limit_bytes()
                   << " optimum " << c.optimum.cost << "/" << c.optimum.count
                   << " relaxed " << st.cost_ns << "/" << count);
    CHECK_FALSE(LexLess(c.optimum.cost, c.optimum.count, st.cost_ns, count));
    ++checked;
    tight += st.cost_ns == c.optimum.cost;
  }
  CHECK(checked > 500);
  CHECK(tight > 200);
}

TEST_CASE("the LPs over the hull items bound every plan, at any price") {
  int checked = 0;
  for (const Case& c : Cases(1818, 160)) {
    const OffloadChain chain = MakeOffloadChain(c.problem);
    const OffloadRelaxation relax(chain);
    const int n = static_cast<int>(chain.blocks.size());
    const double opt = static_cast<double>(c.optimum.cost);
    // The forward after block 0's end: what the copies out may overlap.
    const double overlap = std::max(0.0, chain.blocks[n - 1].now - chain.blocks[0].now);
    for (double price : {0.0, 0.25, 0.5, 1.0}) {
      const std::vector<Item> hull = relax.HullItems(price);
      for (size_t i = 0; i < hull.size(); ++i) {
        CHECK(hull[i].s > 0);
        if (i > 0 && hull[i].block == hull[i - 1].block) {
          // A block's increments, their cost per byte rising.
          CHECK(static_cast<__int128>(hull[i - 1].c) * hull[i].s <=
                static_cast<__int128>(hull[i].c) * hull[i - 1].s);
        }
      }
      const int64_t root = Lp(hull, chain.ahead[0], n);
      INFO("price " << price << " LP " << root << " optimum " << opt);
      if (root < kInf) CHECK(static_cast<double>(root) - price * overlap <= opt);
      ++checked;
    }
    // The blocks below j alone, for j's need (PrepareTop's).
    const std::vector<Item> hull = relax.HullItems(0);
    for (int j = 1; j < n; ++j) {
      const int64_t below = Lp(hull, chain.need[j], j);
      if (below < kInf) CHECK(static_cast<double>(below) <= opt);
    }
  }
  CHECK(checked > 2000);
}

TEST_CASE("the whole-block points bound every plan cheaper than the one to beat") {
  int checked = 0, reached = 0, tight = 0;
  for (const Case& c : Cases(1919, 160)) {
    const OffloadChain chain = MakeOffloadChain(c.problem);
    const OffloadRelaxation relax(chain);
    const int n = static_cast<int>(chain.blocks.size());
    const double opt = static_cast<double>(c.optimum.cost);
    const double overlap = std::max(0.0, chain.blocks[n - 1].now - chain.blocks[0].now);
    for (int top = 1; top < n; ++top) {
      for (double price : {0.0, 0.5}) {
        for (double beat : {std::numeric_limits<double>::infinity(), opt + 1}) {
          Whole w{top};
          relax.PrepareWhole(top, price, beat, &w);
          ++checked;
          REQUIRE(w.points.size() == static_cast<size_t>(top + 1));
          for (const auto& kinds : w.points) {
            for (const std::vector<WholePoint>& f : kinds) {
              for (size_t i = 1; i < f.size(); ++i) {
                // Cost up, saving never down (savings past the need
                // count as the need): the first that saves g is the
                // cheapest that does.
                CHECK(f[i - 1].saving <= f[i].saving);
                CHECK(f[i - 1].cost < f[i].cost);
              }
            }
          }
          if (w.from != 0) continue;
          ++reached;
          const double least = std::min(LeastCovering(w.points[0][0], chain.need[top]),
                                        LeastCovering(w.points[0][1], chain.need[top]));
          const double bound = least - price * overlap;
          INFO("top " << top << " price " << price << " beat " << beat << " bound "
                      << bound << " optimum " << opt);
          CHECK(bound <= opt + kCostSlackNs);
          tight += bound > opt - 1;
        }
      }
    }
  }
  CHECK(checked > 5000);
  CHECK(reached > 5000);
  CHECK(tight > 100);
}

TEST_CASE("BestPrice finds the highest of a concave bound on [0, 1]") {
  for (double peak : {0.0, 0.1, 0.37, 0.5, 0.9, 1.0}) {
    auto bound = [&](double price) { return 10 - 7 * std::abs(price - peak); };
    const auto [highest, price] = BestPrice(bound);
    INFO("peak " << peak);
    CHECK(std::abs(price - peak) <= 0.01);
    CHECK(highest == bound(price));
    CHECK(highest >= 10 - 0.07);
  }
  CHECK(LeastCovering({{5, 1.0}, {9, 2.5}}, 6) == 2.5);
  CHECK(LeastCovering({{5, 1.0}, {9, 2.5}}, 5) == 1.0);
  CHECK(LeastCovering({{5, 1.0}}, 6) == std::numeric_limits<double>::infinity());
}

}  // namespace
}  // namespace exact
}  // namespace internal
}  // namespace remat
