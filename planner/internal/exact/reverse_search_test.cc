// The search without OFFLOAD (reverse_search.h): unstopped it finds the
// cheapest selection that meets every need; its beam pass, a search
// stopped at its limit and the bound over plan counts it prepares leave
// valid plans and bounds. Against every selection of small problems.
#include "planner/internal/exact/reverse_search.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdint>
#include <random>
#include <vector>

#include "planner/internal/exact/brute_force_for_test.h"
#include "planner/internal/exact/cover.h"

namespace remat {
namespace internal {
namespace exact {
namespace {

using testing::ChainKind;

// A covering problem some selection solves: a random chain's, at a limit
// between its least peak and its keep-all peak.
struct Instance {
  PlanProblem problem;
  Cover cover;
  testing::CoverOptimum optimum;
};

bool Draw(std::mt19937_64& rng, int iter, Instance* out) {
  const int n = 3 + static_cast<int>(rng() % 12);  // 3..14 blocks
  PlanProblem p = testing::RandomChain(rng, n, static_cast<ChainKind>(iter % 3));
  const int64_t keep_all = testing::KeepAllPeak(p);
  std::vector<Action> all(n, Action::kKeep);
  for (int k = 0; k + 1 < n; ++k) {
    if (p.blocks[k].checkpointable) all[k] = Action::kRecompute;
  }
  const int64_t least = PredictedPeakBytes(p, all);
  if (least >= keep_all) return false;
  p.budget_bytes = std::uniform_int_distribution<int64_t>(least, keep_all - 1)(rng);
  out->cover = RecomputeCover(p);
  out->problem = std::move(p);
  out->optimum = testing::CheapestCover(out->cover.items, out->cover.req);
  return out->optimum.found;
}

int64_t LargestNeed(const std::vector<int64_t>& req) {
  int64_t largest = 0;
  for (int64_t need : req) largest = std::max(largest, need);
  return largest;
}

// The selection `best` stands for, its cost and count; and whether it
// meets every need.
bool Selected(const ReverseSearch& search, const Best& best,
              const std::vector<Item>& items, const std::vector<int64_t>& req,
              int64_t* cost, int64_t* count) {
  std::vector<char> chosen(items.size(), 0);
  search.Mark(best, &chosen);
  *cost = *count = 0;
  for (size_t p = 0; p < items.size(); ++p) {
    if (chosen[p]) {
      *cost += items[p].c;
      ++*count;
    }
  }
  return MeetsNeeds(items, chosen, req);
}

TEST_CASE("the search finds the cheapest selection, at any price per byte") {
  std::mt19937_64 rng(909);
  int solved = 0, with_tail = 0, with_body = 0;
  for (int iter = 0; iter < 400; ++iter) {
    Instance in;
    if (!Draw(rng, iter, &in)) continue;
    const std::vector<Item>& items = in.cover.items;
    const std::vector<int64_t>& req = in.cover.req;
    const double price = testing::LpPrice(items, req);
    for (double lambda : {price, price * static_cast<double>(rng() % 300) / 100}) {
      ExactStats st;
      ReverseSearch search(items, req, lambda, int64_t{1} << 30,
                           std::chrono::nanoseconds(0), &st);
      INFO("iter " << iter << " items " << items.size() << " lambda " << lambda);
      // The root bound: every need relaxed to the largest.
      CHECK(search.Bound(0, LargestNeed(req), 0) <= in.optimum.cost);
      Best best;
      REQUIRE(search.Run(0, &best));
      CHECK_FALSE(st.stopped_at_limit);
      CHECK(best.cost == in.optimum.cost);
      CHECK(best.count == in.optimum.count);
      int64_t cost = 0, count = 0;
      CHECK(Selected(search, best, items, req, &cost, &count));
      CHECK(cost == best.cost);
      CHECK(count == best.count);
      ++solved;
      with_tail += search.tail() > 0;
      with_body += search.tail() < static_cast<int>(items.size());
    }
  }
  CHECK(solved > 400);
  CHECK(with_tail > 100);
  CHECK(with_body > 100);
}

TEST_CASE("a beam pass, a stopped search and the count bound stay valid") {
  std::mt19937_64 rng(1010);
  int beams = 0, stopped = 0, in_tail = 0, counted = 0;
  for (int iter = 0; iter < 400; ++iter) {
    Instance in;
    if (!Draw(rng, iter, &in)) continue;
    const std::vector<Item>& items = in.cover.items;
    const std::vector<int64_t>& req = in.cover.req;
    const double lambda = testing::LpPrice(items, req);
    INFO("iter " << iter << " items " << items.size());
    {
      // The heuristic pass: a plan that meets every need, if any found.
      ExactStats st;
      ReverseSearch search(items, req, lambda, int64_t{1} << 30,
                           std::chrono::nanoseconds(0), &st);
      Best best;
      search.Run(0, &best, /*beam=*/2);
      if (best.node != -2 || best.from >= 0) {
        int64_t cost = 0, count = 0;
        CHECK(Selected(search, best, items, req, &cost, &count));
        CHECK(cost == best.cost);
        CHECK_FALSE(LexLess(best.cost, best.count, in.optimum.cost, in.optimum.count));
        ++beams;
      }
      CHECK(st.nodes <= 2 * 2 * static_cast<int64_t>(items.size()) + 2);
    }
    {
      // A search stopped after a few states, in the tail or below it: its
      // lower bound is one.
      ExactStats st;
      ReverseSearch search(items, req, lambda, static_cast<int64_t>(rng() % 12),
                           std::chrono::nanoseconds(0), &st);
      Best best;
      const int64_t root = std::min(search.Bound(0, LargestNeed(req), 0), in.optimum.cost);
      if (!search.Run(root, &best)) {
        CHECK(st.stopped_at_limit);
        INFO("stopped at " << st.steps << ", tail " << search.tail());
        CHECK(st.lower_bound_ns <= in.optimum.cost);
        CHECK(st.lower_bound_ns >= root);
        ++stopped;
        in_tail += st.steps < search.tail();
      }
      if (best.node != -2 || best.from >= 0) {
        int64_t cost = 0, count = 0;
        CHECK(Selected(search, best, items, req, &cost, &count));
      }
    }
    {
      // The bound over plan counts, prepared from a plan a little above
      // the optimum: no plan better than that costs less than its root.
      ExactStats st;
      ReverseSearch search(items, req, lambda, int64_t{1} << 30,
                           std::chrono::nanoseconds(0), &st);
      Best best{in.optimum.cost + static_cast<int64_t>(rng() % 40),
                in.optimum.count + 1, -2, -1};
      const int64_t root = search.PrepareCounts(&best);
      // (It may improve the plan on the way; SolveCover takes the least.)
      CHECK(std::min(root, best.cost) <= in.optimum.cost);
      // Then the search, with the bound, still finds the optimum.
      REQUIRE(search.Run(0, &best));
      CHECK(best.cost == in.optimum.cost);
      CHECK(best.count == in.optimum.count);
      ++counted;
    }
  }
  CHECK(beams > 100);
  CHECK(stopped > 50);
  CHECK(in_tail >= 5);  // stops in the tail are among them
  CHECK(counted > 100);
}

TEST_CASE("a search stopped in the tail bounds the optimum from below") {
  // Stops in the tail are rare on the instances above: many small ones,
  // each stopped after a few states.
  std::mt19937_64 rng(4242);
  int in_tail = 0;
  for (int iter = 0; iter < 4000; ++iter) {
    Instance in;
    if (!Draw(rng, iter, &in)) continue;
    const double lambda = testing::LpPrice(in.cover.items, in.cover.req);
    ExactStats st;
    ReverseSearch search(in.cover.items, in.cover.req, lambda,
                         static_cast<int64_t>(rng() % 6),
                         std::chrono::nanoseconds(0), &st);
    if (search.tail() == 0) continue;
    Best best;
    if (search.Run(0, &best) || st.steps >= search.tail()) continue;
    INFO("iter " << iter << " stopped at " << st.steps << ", tail "
                 << search.tail());
    CHECK(st.lower_bound_ns <= in.optimum.cost);
    ++in_tail;
  }
  CHECK(in_tail > 100);
}

}  // namespace
}  // namespace exact
}  // namespace internal

}  // namespace remat
