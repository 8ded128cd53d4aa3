// The cheapest cover (solve_cover.h): on small problems the selection of
// every one that meets every need, in (cost, count) order; on chains long
// enough for the deepening search and the bound over plan counts, the
// optimum of a dynamic programme over the bytes saved; a stopped solve
// still answers a selection that meets every need.
#include "planner/internal/exact/solve_cover.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <random>
#include <utility>
#include <vector>

#include "planner/internal/exact/brute_force_for_test.h"
#include "planner/internal/exact/cover.h"

namespace remat {
namespace internal {
namespace exact {
namespace {

using testing::ChainKind;

// A random chain's covering problem at a limit some plan fits under
// (false: none below the keep-all peak).
bool Draw(std::mt19937_64& rng, int n, ChainKind kind, Cover* out) {
  PlanProblem p = testing::RandomChain(rng, n, kind);
  const int64_t keep_all = testing::KeepAllPeak(p);
  std::vector<Action> all(n, Action::kKeep);
  for (int k = 0; k + 1 < n; ++k) {
    if (p.blocks[k].checkpointable) all[k] = Action::kRecompute;
  }
  const int64_t least = PredictedPeakBytes(p, all);
  if (least >= keep_all) return false;
  p.budget_bytes = std::uniform_int_distribution<int64_t>(least, keep_all - 1)(rng);
  *out = RecomputeCover(p);
  return true;
}

// The selection's cost and count; false when it misses a need.
bool Score(const std::vector<Item>& items, const std::vector<int64_t>& req,
           const std::vector<char>& chosen, int64_t* cost, int64_t* count) {
  REQUIRE(chosen.size() == items.size());
  *cost = *count = 0;
  for (size_t p = 0; p < items.size(); ++p) {
    if (chosen[p]) {
      *cost += items[p].c;
      ++*count;
    }
  }
  return MeetsNeeds(items, chosen, req);
}

// The optimum by a dynamic programme over the saving so far (capped at
// the largest need), from the bottom of the chain up.
std::pair<int64_t, int64_t> ByProgramme(const std::vector<Item>& items,
                                        const std::vector<int64_t>& req) {
  int64_t top = 0;
  for (int64_t need : req) top = std::max(top, need);
  const std::pair<int64_t, int64_t> none{kInf, kInf};
  std::vector<std::pair<int64_t, int64_t>> best(top + 1, none), next;
  best[0] = {0, 0};
  for (size_t p = 0; p <= items.size(); ++p) {
    for (int64_t saved = 0; saved <= top; ++saved) {
      if (saved < req[p]) best[saved] = none;
    }
    if (p == items.size()) break;
    next = best;
    for (int64_t saved = 0; saved <= top; ++saved) {
      if (best[saved] == none) continue;
      const int64_t to = std::min(top, saved + items[p].s);
      next[to] = std::min(next[to], std::make_pair(best[saved].first + items[p].c,
                                                   best[saved].second + 1));
    }
    best = std::move(next);
  }
  return *std::min_element(best.begin(), best.end());
}

TEST_CASE("SolveCover finds the cheapest selection of small problems") {
  std::mt19937_64 rng(1111);
  int solved = 0;
  for (int iter = 0; iter < 500; ++iter) {
    Cover cover;
    const int n = 2 + static_cast<int>(rng() % 14);
    if (!Draw(rng, n, static_cast<ChainKind>(iter % 3), &cover)) continue;
    const testing::CoverOptimum opt = testing::CheapestCover(cover.items, cover.req);
    REQUIRE(opt.found);
    INFO("iter " << iter << " items " << cover.items.size());
    ExactStats st;
    const std::vector<char> chosen = SolveCover(cover.items, cover.req, ExactOptions(), st);
    int64_t cost = 0, count = 0;
    CHECK(Score(cover.items, cover.req, chosen, &cost, &count));
    CHECK(cost == opt.cost);
    CHECK(count == opt.count);
    CHECK(st.cost_ns == opt.cost);
    CHECK(st.lower_bound_ns == opt.cost);
    CHECK(st.root_bound_ns <= opt.cost);
    CHECK(st.heuristic_cost_ns >= opt.cost);
    CHECK_FALSE(st.stopped_at_limit);
    ++solved;

    // Asked only for a selection under a given one: under the optimum
    // there is none, so it is the optimum again; under a dearer one, any
    // selection below it, and the LP's bound.
    ExactStats below_st;
    const CostCount at_optimum{opt.cost, opt.count};
    const std::vector<char> again =
        SolveCover(cover.items, cover.req, ExactOptions(), below_st, &at_optimum);
    CHECK(Score(cover.items, cover.req, again, &cost, &count));
    CHECK(cost == opt.cost);
    CHECK(count == opt.count);
    const CostCount dearer{opt.cost + static_cast<int64_t>(rng() % 30) + 1, 0};
    ExactStats dearer_st;
    const std::vector<char> under =
        SolveCover(cover.items, cover.req, ExactOptions(), dearer_st, &dearer);
    CHECK(Score(cover.items, cover.req, under, &cost, &count));
    CHECK(LexLess(cost, count, dearer.cost, dearer.count));
    CHECK(dearer_st.cost_ns == cost);
    CHECK(dearer_st.lower_bound_ns <= opt.cost);
  }
  CHECK(solved > 300);
}

TEST_CASE("a SolveCover stopped at its work limit answers a selection that fits") {
  std::mt19937_64 rng(1212);
  int stopped = 0;
  for (int iter = 0; iter < 300; ++iter) {
    Cover cover;
    const int n = 6 + static_cast<int>(rng() % 10);
    if (!Draw(rng, n, static_cast<ChainKind>(iter % 3), &cover)) continue;
    const testing::CoverOptimum opt = testing::CheapestCover(cover.items, cover.req);
    ExactOptions options;
    options.max_nodes = static_cast<int64_t>(rng() % 8);
    ExactStats st;
    const std::vector<char> chosen = SolveCover(cover.items, cover.req, options, st);
    int64_t cost = 0, count = 0;
    INFO("iter " << iter << " items " << cover.items.size());
    CHECK(Score(cover.items, cover.req, chosen, &cost, &count));
    CHECK(cost == st.cost_ns);
    CHECK_FALSE(LexLess(cost, count, opt.cost, opt.count));
    if (st.stopped_at_limit) {
      ++stopped;
      // (Stopped in the tail the search's bound does not hold: see
      // reverse_search.h.)
      if (st.steps >= st.tail) CHECK(st.lower_bound_ns <= opt.cost);
    } else {
      CHECK(cost == opt.cost);
    }
  }
  CHECK(stopped > 50);
}

TEST_CASE("on long chains the deepening search finds the programme's optimum") {
  // 128 candidates or more: a plain search first (or none, with
  // plain_search_nodes 0), then the bound over plan counts and targets
  // deepened from the root bound.
  std::mt19937_64 rng(1313);
  int solved = 0, counted = 0;
  for (int iter = 0; iter < 12; ++iter) {
    Cover cover;
    const int n = 150 + static_cast<int>(rng() % 100);
    if (!Draw(rng, n, iter % 3 ? ChainKind::kTransformer : ChainKind::kRandom,
              &cover)) {
      continue;
    }
    if (static_cast<int>(cover.items.size()) < kDeepenItems) continue;
    const auto [opt_cost, opt_count] = ByProgramme(cover.items, cover.req);
    REQUIRE(opt_cost < kInf);
    for (int64_t plain : {int64_t{0}, ExactOptions().plain_search_nodes}) {
      ExactOptions options;
      options.plain_search_nodes = plain;
      ExactStats st;
      const std::vector<char> chosen = SolveCover(cover.items, cover.req, options, st);
      int64_t cost = 0, count = 0;
      INFO("iter " << iter << " items " << cover.items.size() << " plain " << plain);
      CHECK(Score(cover.items, cover.req, chosen, &cost, &count));
      CHECK(cost == opt_cost);
      CHECK(count == opt_count);
      CHECK(st.lower_bound_ns == opt_cost);
      CHECK(st.root_bound_ns <= opt_cost);
      CHECK_FALSE(st.stopped_at_limit);
      ++solved;
      // (At once, the bound over plan counts prunes from the start.)
      counted += plain == 0 && st.count_pruned > 0;
    }
  }
  CHECK(solved >= 10);
  CHECK(counted >= 5);
}

}  // namespace
}  // namespace exact
}  // namespace internal
}  // namespace remat
