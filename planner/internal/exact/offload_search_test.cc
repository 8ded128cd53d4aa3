// The search with OFFLOAD (offload_search.h): unstopped it finds the
// cheapest plan that fits over every action (a rounding apart), and
// nothing below the optimum; its beam pass, a search stopped at its work
// limit and the passes that finish it leave plans that fit and bounds that
// hold. Against every plan of small chains with a link.
#include "planner/internal/exact/offload_search.h"

#include <catch2/catch.hpp>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "planner/internal/exact/brute_force_for_test.h"
#include "planner/internal/exact/cover.h"

namespace remat {
namespace internal {
namespace exact {
namespace {

constexpr double kNone = std::numeric_limits<double>::infinity();

struct Case {
  PlanProblem problem;
  testing::Optimum optimum;  // over every plan; found false: none fits
};

std::vector<Case> Cases(uint64_t seed, int chains) {
  std::mt19937_64 rng(seed);
  std::vector<Case> out;
  testing::ForEachLinkChainLimit(
      rng, chains, 1, 2,
      [&](int, const PlanProblem& p, const std::vector<testing::ScoredPlan>& plans) {
        out.push_back({p, testing::Cheapest(plans, p.budget_bytes)});
      });
  return out;
}

// The cost of `actions` if it fits, else -1.
int64_t FitCost(const PlanProblem& p, const std::vector<Action>& actions) {
  const StepSimulation sim = SimulateStep(p, actions);
  if (sim.peak_bytes > p.limit_bytes()) return -1;
  return sim.recompute_ns + sim.exposed_transfer_ns;
}

TEST_CASE("the search finds the cheapest plan that fits") {
  int solved = 0, infeasible = 0, offloads = 0;
  for (const Case& c : Cases(2222, 220)) {
    const PlanProblem& p = c.problem;
    ExactStats st;
    OffloadSearch search(p, ExactOptions(), std::chrono::steady_clock::now(), &st);
    search.Beat(kNone, kInf);
    INFO("blocks " << p.blocks.size() << " limit " << p.limit_bytes() << " optimum "
                   << (c.optimum.found ? c.optimum.cost : -1));
    const double root = search.RootBound();
    REQUIRE(search.RunDeepening());
    CHECK_FALSE(st.stopped_at_limit);
    if (!c.optimum.found) {
      CHECK_FALSE(search.found());
      ++infeasible;
      continue;
    }
    const double opt = static_cast<double>(c.optimum.cost);
    REQUIRE(search.found());
    const std::vector<Action> actions = search.BestActions();
    const int64_t cost = FitCost(p, actions);
    // The search adds the same times in another order: a rounding apart.
    CHECK(cost >= c.optimum.cost);
    CHECK(cost <= c.optimum.cost + 1);
    CHECK(std::abs(search.best_cost() - opt) <= 1);
    CHECK(search.lower_bound() == search.best_cost());
    CHECK(root <= opt + kCostSlackNs);
    CHECK(search.RootBound() <= opt + kCostSlackNs);
    ++solved;
    for (Action a : actions) {
      offloads += a == Action::kOffload || a == Action::kRecomputeOffload;
    }
  }
  CHECK(solved > 500);
  CHECK(infeasible > 100);
  CHECK(offloads > 200);
}

TEST_CASE("the plan to beat: found only below it") {
  int above = 0, below = 0;
  for (const Case& c : Cases(2323, 120)) {
    if (!c.optimum.found) continue;
    const double opt = static_cast<double>(c.optimum.cost);
    {
      ExactStats st;
      OffloadSearch search(c.problem, ExactOptions(), std::chrono::steady_clock::now(), &st);
      search.Beat(opt + 0.5, kInf);  // just above the optimum
      REQUIRE(search.RunDeepening());
      REQUIRE(search.found());
      CHECK(FitCost(c.problem, search.BestActions()) <= c.optimum.cost + 1);
      ++above;
    }
    {
      ExactStats st;
      OffloadSearch search(c.problem, ExactOptions(), std::chrono::steady_clock::now(), &st);
      search.Beat(opt - 1.01, 0);  // below every plan
      REQUIRE(search.RunDeepening());
      CHECK_FALSE(search.found());
      CHECK(search.best_cost() == opt - 1.01);
      ++below;
    }
  }
  CHECK(above > 200);
  CHECK(below > 200);
}

TEST_CASE("a beam pass and a stopped search leave plans that fit") {
  std::mt19937_64 rng(2424);
  int beams = 0, stopped = 0, finished = 0;
  for (const Case& c : Cases(2525, 160)) {
    if (!c.optimum.found) continue;
    const double opt = static_cast<double>(c.optimum.cost);
    {
      ExactStats st;
      OffloadSearch search(c.problem, ExactOptions(), std::chrono::steady_clock::now(), &st);
      search.Beat(kNone, kInf);
      search.Run(/*beam=*/1 + rng() % 3);
      if (search.found()) {
        const int64_t cost = FitCost(c.problem, search.BestActions());
        CHECK(cost >= c.optimum.cost);
        ++beams;
      }
    }
    {
      ExactOptions options;
      options.max_nodes = static_cast<int64_t>(rng() % 12);
      ExactStats st;
      OffloadSearch search(c.problem, options, std::chrono::steady_clock::now(), &st);
      search.Beat(kNone, kInf);
      if (!search.RunDeepening()) {
        CHECK(st.stopped_at_limit);
        INFO("lower bound " << search.lower_bound() << " optimum " << opt);
        CHECK(search.lower_bound() <= opt + kCostSlackNs);
        ++stopped;
        search.FinishStopped();
      }
      if (search.found()) {
        const int64_t cost = FitCost(c.problem, search.BestActions());
        CHECK(cost >= c.optimum.cost);
        CHECK(std::abs(search.best_cost() - static_cast<double>(cost)) <= 1);
        ++finished;
      }
    }
  }
  CHECK(beams > 100);
  CHECK(stopped > 100);
  CHECK(finished > 100);
}

}  // namespace
}  // namespace exact
}  // namespace internal
}  // namespace remat
