// The dominance front of the search with OFFLOAD (offload_front.h): the
// states it keeps are states offered, each once, by saving; each state it
// drops is dominated, by the rules as stated, by another state offered
// (checked one pair at a time from the copies in flight); and the search
// that prunes with it still reaches the optimum of every plan where the
// link is busy.
#include "planner/internal/exact/offload_front.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdint>
#include <limits>
#include <random>
#include <tuple>
#include <vector>

#include "planner/internal/exact/brute_force_for_test.h"
#include "planner/internal/exact/cover.h"
#include "planner/internal/exact/offload_search.h"

namespace remat {
namespace internal {
namespace exact {
namespace {

using testing::ChainKind;

// Which last actions of X leave a future at least as good as Y's
// (offload_front.h): [Y's][X's].
constexpr bool kAsGood[4][4] = {
    // X:  keep   recompute offload ro      Y:
    {true, true, false, false},   // keep
    {false, true, false, false},  // recompute
    {true, true, true, false},    // offload
    {false, true, false, true},   // ro
};

auto Fields(const OffloadState& x) {
  return std::make_tuple(x.sigma, x.cost, x.count, x.node, x.off_node, x.last);
}

bool CheaperOrEqual(const OffloadState& x, const OffloadState& y) {
  return std::make_pair(x.cost, x.count) <= std::make_pair(y.cost, y.count);
}
bool Cheaper(const OffloadState& x, const OffloadState& y) {
  return std::make_pair(x.cost, x.count) < std::make_pair(y.cost, y.count);
}

// A state offered, with what the rules read.
struct Offered {
  OffloadState state;
  std::vector<std::pair<int64_t, double>> queue;  // in flight at the next start
  int64_t guaranteed;
  double free_at;
};

// A random partial plan of blocks 0..k, its nodes in `arena` as the search
// builds them, at a cost drawn from few values (so that costs tie).
OffloadState RandomPrefix(std::mt19937_64& rng, const OffloadChain& chain, int k,
                          std::vector<OffloadNode>* arena) {
  OffloadState x{0, 0.0, 0, -1, -1, kLastKeep};
  for (int j = 0; j <= k; ++j) {
    const OffloadBlock& b = chain.blocks[j];
    std::vector<uint8_t> choices = {kLastKeep};
    if (b.can_r) choices.push_back(kLastRecompute);
    if (b.can_o) choices.push_back(kLastOffload);
    if (b.can_ro && (x.last == kLastRecompute || x.last == kLastRo)) {
      choices.push_back(kLastRo);
    }
    const uint8_t last = choices[rng() % choices.size()];
    x.last = last;
    if (last == kLastKeep) continue;
    ++x.count;
    if (last == kLastRecompute) {
      arena->push_back({j, Action::kRecompute, x.node, -1, 0});
      x.node = static_cast<int32_t>(arena->size() - 1);
      x.sigma += b.s;
      continue;
    }
    const bool ro = last == kLastRo;
    const double drained = x.off_node >= 0 ? (*arena)[x.off_node].landed : 0;
    const double landed = std::max(b.now, drained) + (ro ? b.ro_out_ns : b.out_ns);
    arena->push_back({j, ro ? Action::kRecomputeOffload : Action::kOffload, x.node,
                      x.off_node, landed});
    x.node = x.off_node = static_cast<int32_t>(arena->size() - 1);
    x.sigma += ro ? b.s + b.ro : b.t;
  }
  x.cost = static_cast<double>(rng() % 12) + (rng() % 2 ? 0.5 : 0.0);
  return x;
}

TEST_CASE("the front drops only states another one dominates") {
  std::mt19937_64 rng(2626);
  int fronts = 0, by_group = 0, by_guaranteed = 0, by_landing = 0, kept_total = 0;
  for (int iter = 0; iter < 300; ++iter) {
    const int n = 3 + static_cast<int>(rng() % 6);
    PlanProblem p = testing::RandomLinkChain(rng, n, static_cast<ChainKind>(iter % 3),
                                             iter % 2 == 0);
    // Slow links, large copies: many copies in flight.
    p.d2h_bytes_per_s = p.h2d_bytes_per_s = iter % 3 == 0 ? 5e8 : 2e9;
    p.budget_bytes = testing::KeepAllPeak(p);
    const OffloadChain chain = MakeOffloadChain(p);
    std::vector<OffloadNode> arena;
    DominanceFront front_of(chain.blocks, arena);
    for (int round = 0; round < 3; ++round) {
      const int k = static_cast<int>(rng() % (n - 1));  // states before block k+1
      const double next_start = chain.blocks[k].now;
      std::vector<Offered> offered;
      front_of.Clear();
      const int count = 5 + static_cast<int>(rng() % 60);
      for (int i = 0; i < count; ++i) {
        Offered o;
        o.state = RandomPrefix(rng, chain, k, &arena);
        std::vector<int32_t> nodes;
        const int64_t in_flight = InFlight(chain.blocks, arena, o.state, next_start, &nodes);
        for (size_t j = nodes.size(); j-- > 0;) {
          o.queue.push_back({Moved(chain.blocks, arena[nodes[j]]), arena[nodes[j]].landed});
        }
        o.guaranteed = o.state.sigma - in_flight;
        o.free_at = std::max(chain.blocks[k + 1].now,
                             o.state.off_node >= 0 ? arena[o.state.off_node].landed : 0.0);
        front_of.Add(o.state, next_start, o.guaranteed, o.free_at);
        offered.push_back(o);
      }
      std::vector<OffloadState> front;
      front_of.Reduce(front, next_start);
      ++fronts;
      kept_total += static_cast<int>(front.size());
      INFO("iter " << iter << " round " << round << " block " << k + 1 << ": "
                   << offered.size() << " offered, " << front.size() << " kept");
      // Kept: states offered, each once, the most saving first.
      for (size_t i = 0; i < front.size(); ++i) {
        CHECK(std::any_of(offered.begin(), offered.end(), [&](const Offered& o) {
          return Fields(o.state) == Fields(front[i]);
        }));
        for (size_t j = 0; j < i; ++j) CHECK(Fields(front[j]) != Fields(front[i]));
        if (i > 0) CHECK(front[i - 1].sigma >= front[i].sigma);
      }
      auto index_of = [&](const OffloadState& x) {
        for (size_t i = 0; i < offered.size(); ++i) {
          if (Fields(offered[i].state) == Fields(x)) return i;
        }
        return offered.size();
      };
      // Within a group the kept states are a Pareto front.
      for (size_t i = 0; i < front.size(); ++i) {
        for (size_t j = 0; j < front.size(); ++j) {
          const Offered& x = offered[index_of(front[i])];
          const Offered& y = offered[index_of(front[j])];
          if (i == j || x.state.last != y.state.last || x.queue != y.queue) continue;
          CHECK_FALSE((x.state.sigma >= y.state.sigma && CheaperOrEqual(x.state, y.state)));
        }
      }
      // Each state dropped: dominated by another one offered.
      for (size_t yi = 0; yi < offered.size(); ++yi) {
        const Offered& y = offered[yi];
        if (std::any_of(front.begin(), front.end(), [&](const OffloadState& x) {
              return Fields(x) == Fields(y.state);
            })) {
          continue;
        }
        int rule = 0;
        for (size_t xi = 0; xi < offered.size() && rule == 0; ++xi) {
          const Offered& x = offered[xi];
          if (xi == yi) continue;
          // Same group: as much saving, no dearer.
          if (x.state.last == y.state.last && x.queue == y.queue &&
              x.state.sigma >= y.state.sigma && CheaperOrEqual(x.state, y.state)) {
            rule = 1;
            break;
          }
          if (!kAsGood[y.state.last][x.state.last] || x.free_at > y.free_at ||
              !Cheaper(x.state, y.state)) {
            continue;
          }
          // Its copies counted as never landing, as much saving.
          if (x.guaranteed >= y.state.sigma) {
            rule = 2;
            break;
          }
          // As much saving, less the copies then in flight, at the start
          // of every block from the next one on.
          bool lands = x.state.sigma >= y.state.sigma;
          for (int j = k + 1; j < n && lands; ++j) {
            const double t = chain.blocks[j].start;
            lands = x.state.sigma - InFlight(chain.blocks, arena, x.state, t, nullptr) >=
                    y.state.sigma - InFlight(chain.blocks, arena, y.state, t, nullptr);
          }
          if (lands) rule = 3;
        }
        INFO("dropped: sigma " << y.state.sigma << " cost " << y.state.cost << " count "
                               << y.state.count << " last " << int{y.state.last});
        CHECK(rule != 0);
        by_group += rule == 1;
        by_guaranteed += rule == 2;
        by_landing += rule == 3;
      }
    }
  }
  CHECK(fronts == 900);
  CHECK(by_group > 1000);
  CHECK(by_guaranteed > 500);
  CHECK(by_landing > 20);
  CHECK(kept_total > 1000);
}

TEST_CASE("with the front, the search still reaches the optimum on busy links") {
  std::mt19937_64 rng(2727);
  int solved = 0;
  for (int iter = 0; iter < 200; ++iter) {
    const bool checkpoints = iter % 2 == 0;
    const int n = 2 + static_cast<int>(rng() % (checkpoints ? 5 : 6));
    PlanProblem p = testing::RandomLinkChain(rng, n, static_cast<ChainKind>(iter % 3),
                                             checkpoints);
    // The link binds: copies take about as long as the forward.
    p.d2h_bytes_per_s = iter % 3 == 0 ? 5e8 : 2e9;
    p.h2d_bytes_per_s = rng() % 2 ? p.d2h_bytes_per_s : 1e10;
    const std::vector<testing::ScoredPlan> plans = testing::EveryPlan(p, checkpoints ? 4 : 3);
    for (int64_t limit : testing::Limits(rng, testing::LeastPeak(plans),
                                         testing::KeepAllPeak(p), 2)) {
      p.budget_bytes = limit;
      const testing::Optimum opt = testing::Cheapest(plans, limit);
      if (!opt.found) continue;
      ExactStats st;
      OffloadSearch search(p, ExactOptions(), std::chrono::steady_clock::now(), &st);
      search.Beat(std::numeric_limits<double>::infinity(), kInf);
      REQUIRE(search.RunDeepening());
      REQUIRE(search.found());
      const StepSimulation sim = SimulateStep(p, search.BestActions());
      INFO("iter " << iter << " n=" << n << " limit " << limit << " optimum " << opt.cost);
      CHECK(sim.peak_bytes <= limit);
      CHECK(sim.recompute_ns + sim.exposed_transfer_ns <= opt.cost + 1);
      ++solved;
    }
  }
  CHECK(solved > 600);
}

}  // namespace
}  // namespace exact
}  // namespace internal
}  // namespace remat
