#include "planner/solver.h"

#include <algorithm>
#include <chrono>
#include <catch2/catch.hpp>
#include <cstdint>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "planner/exact_solver.h"
#include "planner/internal/exact/brute_force_for_test.h"
#include "planner/plan.h"

namespace remat {
namespace {

constexpr int64_t kInf = std::numeric_limits<int64_t>::max();

// Every subset of the checkpointable blocks, scored by the shared memory
// model. Keys order plans the way the exact solver promises to: recompute
// time, then number of recomputed blocks, then peak.
struct Scored {
  int64_t peak;
  int64_t cost;
  int64_t count;
};

std::vector<int> CheckpointableBlocks(const PlanProblem& p) {
  std::vector<int> ckpt;
  for (size_t i = 0; i < p.blocks.size(); ++i) {
    if (p.blocks[i].checkpointable) ckpt.push_back(static_cast<int>(i));
  }
  return ckpt;
}

std::vector<Scored> Enumerate(const PlanProblem& p) {
  const std::vector<int> ckpt = CheckpointableBlocks(p);
  std::vector<Scored> out;
  out.reserve(size_t{1} << ckpt.size());
  std::vector<Action> actions(p.blocks.size(), Action::kKeep);
  for (uint32_t mask = 0; mask < (1u << ckpt.size()); ++mask) {
    int64_t count = 0;
    for (size_t b = 0; b < ckpt.size(); ++b) {
      const bool on = (mask >> b) & 1;
      actions[ckpt[b]] = on ? Action::kRecompute : Action::kKeep;
      count += on;
    }
    out.push_back(
        {PredictedPeakBytes(p, actions), RecomputeNs(p, actions), count});
  }
  return out;
}

struct BruteForce {
  bool feasible = false;
  Scored best{kInf, kInf, kInf};
  int64_t min_peak = kInf;
};

BruteForce Best(const std::vector<Scored>& all, int64_t limit) {
  BruteForce bf;
  for (const Scored& s : all) {
    bf.min_peak = std::min(bf.min_peak, s.peak);
    if (s.peak > limit) continue;
    if (!bf.feasible ||
        std::tie(s.cost, s.count, s.peak) <
            std::tie(bf.best.cost, bf.best.count, bf.best.peak)) {
      bf.best = s;
      bf.feasible = true;
    }
  }
  return bf;
}

int64_t KeepAllPeak(const PlanProblem& p) {
  return PredictedPeakBytes(
      p, std::vector<Action>(p.blocks.size(), Action::kKeep));
}

// Checks every solver's contract on `p`.
void CheckContract(const PlanProblem& p, const Plan& plan,
                   const std::string& solver) {
  INFO("solver " << solver);
  REQUIRE(plan.actions.size() == p.blocks.size());
  REQUIRE(plan.reasons.size() == p.blocks.size());
  CHECK(plan.solver == solver);
  for (size_t i = 0; i < p.blocks.size(); ++i) {
    CHECK_FALSE(plan.reasons[i].empty());
    if (!p.blocks[i].checkpointable) CHECK(plan.actions[i] == Action::kKeep);
    CHECK(plan.actions[i] != Action::kOffload);
  }
  CHECK(plan.predicted_peak_bytes == PredictedPeakBytes(p, plan.actions));
  CHECK(plan.recompute_ns == RecomputeNs(p, plan.actions));
  CHECK(plan.feasible == (plan.predicted_peak_bytes <= p.limit_bytes()));
}

// Random chains, the exact solver's parts' tests' too.
using Kind = internal::exact::testing::ChainKind;
using internal::exact::testing::kSampleDivisor;

PlanProblem RandomProblem(std::mt19937_64& rng, int n, Kind kind) {
  return internal::exact::testing::RandomChain(rng, n, kind);
}

TEST_CASE("exact matches brute force on small instances") {
  std::mt19937_64 rng(12345);
  auto exact = NewSolver("exact");
  REQUIRE(exact.ok());
  int instances = 0, infeasible = 0, keep_all = 0;
  const int iterations = 1600 / kSampleDivisor;
  for (int iter = 0; iter < iterations; ++iter) {
    const int n = iter < iterations * 7 / 8 ? static_cast<int>(rng() % 12)
                              : 12 + static_cast<int>(rng() % 5);
    const Kind kind = static_cast<Kind>(iter % 3);
    PlanProblem p = RandomProblem(rng, n, kind);
    const std::vector<Scored> all = Enumerate(p);
    const int64_t p0 = KeepAllPeak(p);
    const int64_t min_peak = Best(all, kInf).min_peak;
    // Budgets from infeasible to loose, with margins on some.
    std::vector<int64_t> limits = {min_peak - 1, min_peak, p0, p0 - 1,
                                   (min_peak + p0) / 2};
    for (int r = 0; r < 3; ++r) {
      limits.push_back(
          std::uniform_int_distribution<int64_t>(min_peak - 50, p0 + 50)(rng));
    }
    for (int64_t limit : limits) {
      p.margin_bytes = static_cast<int64_t>(rng() % 3) * 100;
      p.budget_bytes = limit + p.margin_bytes;
      REQUIRE(p.limit_bytes() == limit);
      const BruteForce bf = Best(all, limit);
      const Plan plan = (*exact)->Solve(p);
      INFO("n=" << n << " kind=" << static_cast<int>(kind) << " limit=" << limit
                << " p0=" << p0);
      CheckContract(p, plan, "exact");
      REQUIRE(plan.feasible == bf.feasible);
      ++instances;
      if (bf.feasible) {
        CHECK(plan.predicted_peak_bytes <= limit);
        CHECK(plan.recompute_ns == bf.best.cost);
        const int64_t count = std::count(
            plan.actions.begin(), plan.actions.end(), Action::kRecompute);
        CHECK(count == bf.best.count);
        if (bf.best.count == 0) ++keep_all;
      } else {
        ++infeasible;
        CHECK(plan.predicted_peak_bytes == bf.min_peak);
      }
    }
  }
  // The mix really covers all three regimes.
  CHECK(instances > 10000 / kSampleDivisor);
  CHECK(infeasible > 1000 / kSampleDivisor);
  CHECK(keep_all > 1000 / kSampleDivisor);
  CHECK(instances - infeasible - keep_all > 3000 / kSampleDivisor);
}

// Every plan over KEEP, RECOMPUTE and OFFLOAD (and with `kinds` 4,
// RECOMPUTE_OFFLOAD) of the checkpointable blocks (kinds^n), scored by the
// shared memory model: peak, and cost = recompute plus exposed transfer
// time.
struct Scored3 {
  int64_t peak;
  int64_t cost;
  bool offloads;  // some block sends something to host
};

std::vector<Scored3> EnumerateActions(const PlanProblem& p, int kinds) {
  const std::vector<int> ckpt = CheckpointableBlocks(p);
  std::vector<Scored3> out;
  std::vector<Action> actions(p.blocks.size(), Action::kKeep);
  std::vector<int> digit(ckpt.size(), 0);
  while (true) {
    for (size_t b = 0; b < ckpt.size(); ++b) {
      actions[ckpt[b]] = static_cast<Action>(digit[b]);
    }
    bool offloads = false;
    for (size_t i = 0; i < actions.size(); ++i) {
      const Action a = EffectiveAction(p, actions, i);
      offloads = offloads || a == Action::kOffload ||
                 a == Action::kRecomputeOffload;
    }
    const StepSimulation sim = SimulateStep(p, actions);
    out.push_back({sim.peak_bytes, sim.recompute_ns + sim.exposed_transfer_ns,
                   offloads});
    size_t b = 0;
    while (b < digit.size() && ++digit[b] == kinds) digit[b++] = 0;
    if (b == digit.size()) break;
  }
  return out;
}

struct LinkCounts {
  int instances = 0, infeasible = 0, offloaded = 0, needs_offload = 0;
  int sends_checkpoints = 0;  // plans with a RECOMPUTE_OFFLOAD that acts
  int relaxation_proved = 0;  // no search with OFFLOAD needed
  // Nothing fits, and the least peak needs OFFLOAD or a checkpoint sent.
  int least_below_recompute = 0;
};

// Random instances with a host link, each solved at 9 budgets and compared
// with every plan over `kinds` actions (RECOMPUTE_OFFLOAD allowed with 4).
LinkCounts CheckLinkAgainstBruteForce(uint64_t seed, int iterations,
                                      int kinds) {
  std::mt19937_64 rng(seed);
  auto exact = NewSolver("exact");
  REQUIRE(exact.ok());
  LinkCounts counts;
  for (int iter = 0; iter < iterations; ++iter) {
    const int small = kinds == 4 ? 6 : 8;
    const int n = iter < iterations * 6 / 7
                      ? 1 + static_cast<int>(rng() % small)
                      : small + 1 + static_cast<int>(rng() % 2);
    PlanProblem p = RandomProblem(rng, n, static_cast<Kind>(iter % 3));
    p.offload_checkpoints = kinds == 4;
    // Links from "lands at once" to slower than the whole forward (bytes
    // are hundreds, forward times tens of ns), not always symmetric; some
    // blocks with measured transfer and backward times.
    static constexpr double kLinks[] = {1e15, 5e10, 1e10, 2e9, 5e8};
    p.d2h_bytes_per_s = kLinks[rng() % 5];
    p.h2d_bytes_per_s = rng() % 4 ? p.d2h_bytes_per_s : kLinks[rng() % 5];
    for (BlockCost& b : p.blocks) {
      if (rng() % 4 == 0) b.transfer_bytes = static_cast<int64_t>(rng() % 800);
      if (rng() % 4 == 0) b.backward_ns = static_cast<int64_t>(rng() % 200);
      if (kinds == 4 && rng() % 4 == 0) {
        b.output_bytes = static_cast<int64_t>(rng() % 400);
      }
    }
    const std::vector<Scored3> all = EnumerateActions(p, kinds);
    int64_t min_peak = kInf, min_peak_no_offload = kInf;
    for (const Scored3& s : all) {
      min_peak = std::min(min_peak, s.peak);
      if (!s.offloads) min_peak_no_offload = std::min(min_peak_no_offload, s.peak);
    }
    const int64_t p0 = KeepAllPeak(p);
    std::vector<int64_t> limits = {min_peak - 1, min_peak, min_peak_no_offload,
                                   min_peak_no_offload - 1, p0,
                                   (min_peak + p0) / 2};
    for (int r = 0; r < 3; ++r) {
      limits.push_back(
          std::uniform_int_distribution<int64_t>(min_peak - 50, p0 + 50)(rng));
    }
    for (int64_t limit : limits) {
      p.margin_bytes = 0;
      p.budget_bytes = std::max<int64_t>(1, limit);
      bool feasible = false;
      int64_t best = kInf;
      for (const Scored3& s : all) {
        if (s.peak > p.limit_bytes()) continue;
        feasible = true;
        best = std::min(best, s.cost);
      }
      INFO("iter " << iter << " n=" << n << " limit=" << p.limit_bytes()
                   << " link " << p.d2h_bytes_per_s << "/" << p.h2d_bytes_per_s
                   << " best " << best);
      const Plan plan = (*exact)->Solve(p);
      REQUIRE(plan.actions.size() == p.blocks.size());
      REQUIRE(plan.feasible == feasible);
      ++counts.instances;
      internal::ExactStats stats;
      internal::SolveExact(p, &stats);
      CHECK(stats.infeasible == !feasible);
      counts.relaxation_proved += stats.relaxation_proved;
      if (!feasible) {
        ++counts.infeasible;
        // The answer is the least peak of every plan.
        CHECK(plan.predicted_peak_bytes == min_peak);
        counts.least_below_recompute +=
            plan.predicted_peak_bytes < min_peak_no_offload;
        continue;
      }
      CHECK(plan.predicted_peak_bytes <= p.limit_bytes());
      // The search adds the same times in another order: a rounding apart.
      const int64_t cost = plan.recompute_ns + plan.exposed_transfer_ns;
      CHECK(cost >= best);
      CHECK(cost <= best + 1);
      CHECK(plan.optimality_gap_ns == 0);
      bool offloads = false, sends_checkpoint = false;
      for (size_t i = 0; i < plan.actions.size(); ++i) {
        if (kinds == 3) CHECK(plan.actions[i] != Action::kRecomputeOffload);
        const Action a = EffectiveAction(p, plan.actions, i);
        // The solver never asks for a RECOMPUTE_OFFLOAD that does not act.
        CHECK(a == plan.actions[i]);
        offloads = offloads || a == Action::kOffload;
        sends_checkpoint = sends_checkpoint || a == Action::kRecomputeOffload;
      }
      counts.offloaded += offloads || sends_checkpoint;
      counts.sends_checkpoints += sends_checkpoint;
      counts.needs_offload += p.limit_bytes() < min_peak_no_offload;
    }
  }
  return counts;
}

TEST_CASE("exact with a host link matches brute force over all 3^n plans") {
  const LinkCounts c =
      CheckLinkAgainstBruteForce(777, 700 / kSampleDivisor, 3);
  CHECK(c.instances > 5000 / kSampleDivisor);
  CHECK(c.infeasible > 500 / kSampleDivisor);
  CHECK(c.offloaded > 1000 / kSampleDivisor);
  CHECK(c.needs_offload > 150 / kSampleDivisor);  // fits only with OFFLOAD
  CHECK(c.least_below_recompute > 50 / kSampleDivisor);  // 113 at this seed
  CHECK(c.relaxation_proved > 300 / kSampleDivisor);
}

TEST_CASE("exact with checkpoints to host matches brute force over 4^n plans") {
  const LinkCounts c =
      CheckLinkAgainstBruteForce(4242, 700 / kSampleDivisor, 4);
  CHECK(c.instances > 5000 / kSampleDivisor);
  CHECK(c.infeasible > 300 / kSampleDivisor);
  CHECK(c.sends_checkpoints > 300 / kSampleDivisor);
  CHECK(c.needs_offload > 150 / kSampleDivisor);
  CHECK(c.least_below_recompute > 150 / kSampleDivisor);  // 347 at this seed
  CHECK(c.relaxation_proved > 300 / kSampleDivisor);
}

// An independent exact reference for larger chains whose savings are small
// integers: a DP along the chain over saving values (not subsets), with the
// needs of the memory model v2 written out from MemoryOf.
struct RefKey {
  int64_t cost = kInf;
  int64_t count = kInf;
};

RefKey ReferenceDp(const PlanProblem& p) {
  const size_t n = p.blocks.size();
  const int64_t limit = p.limit_bytes();
  // need[k]: the saving the blocks below k must have (k = n: end of
  // forward).
  std::vector<int64_t> need(n + 1);
  int64_t below = p.base_bytes;
  for (size_t k = 0; k < n; ++k) {
    need[k] = below + MemoryOf(p, k).backward_bytes - limit;
    below += MemoryOf(p, k).keep_bytes;
  }
  need[n] = below - limit;
  const int64_t top = std::max<int64_t>(
      0, *std::max_element(need.begin(), need.end()));
  // dp[v]: best (cost, count) with saving min(S, top) == v.
  std::vector<RefKey> dp(static_cast<size_t>(top) + 1);
  dp[0] = {0, 0};
  auto prune = [&](int64_t at_least) {
    for (int64_t v = 0; v < std::min(at_least, top + 1); ++v) {
      dp[static_cast<size_t>(v)] = RefKey();
    }
  };
  for (size_t k = 0; k < n; ++k) {
    prune(need[k]);
    const BlockMemory m = MemoryOf(p, k);
    const int64_t s = m.keep_bytes - m.recompute_bytes;
    if (!p.blocks[k].checkpointable || s <= 0) continue;
    std::vector<RefKey> next = dp;
    for (int64_t v = 0; v <= top; ++v) {
      const RefKey& from = dp[static_cast<size_t>(v)];
      if (from.cost == kInf) continue;
      const size_t to = static_cast<size_t>(std::min(top, v + s));
      const RefKey cand{from.cost + p.blocks[k].forward_ns, from.count + 1};
      if (std::tie(cand.cost, cand.count) <
          std::tie(next[to].cost, next[to].count)) {
        next[to] = cand;
      }
    }
    dp = std::move(next);
  }
  prune(need[n]);
  RefKey best;
  for (const RefKey& k : dp) {
    if (std::tie(k.cost, k.count) < std::tie(best.cost, best.count)) best = k;
  }
  return best;
}

TEST_CASE("exact matches a DP over savings on chains of up to 300 blocks") {
  std::mt19937_64 rng(777);
  auto exact = NewSolver("exact");
  REQUIRE(exact.ok());
  int counted = 0;  // searches where the bound over whole items pruned
  int by_count = 0;  // searches where the bound over plan counts pruned
  for (int iter = 0; iter < 120; ++iter) {
    const int n = 20 + static_cast<int>(rng() % 280);
    PlanProblem p;
    p.base_bytes = 100;
    const int64_t att = 20 + rng() % 30, mlp = 20 + rng() % 30;
    for (int i = 0; i < n; ++i) {
      BlockCost b;
      b.name = "b" + std::to_string(i);
      const bool random = iter % 2 == 0;
      b.act_bytes = random
                        ? 1 + static_cast<int64_t>(rng() % 60)
                        : (i % 2 ? mlp : att) + static_cast<int64_t>(rng() % 3);
      b.input_bytes = static_cast<int64_t>(rng() % 8);
      b.forward_ns = random ? static_cast<int64_t>(rng() % 1000)
                            : 500 + static_cast<int64_t>(rng() % 20);
      b.checkpointable = rng() % 10 != 0;
      p.blocks.push_back(b);
    }
    const int64_t p0 = KeepAllPeak(p);
    p.budget_bytes = p0 - static_cast<int64_t>(rng() % (p0 - 100) * 0.8);
    const RefKey ref = ReferenceDp(p);
    const Plan plan = (*exact)->Solve(p);
    internal::ExactStats st;
    internal::SolveExact(p, &st);
    counted += st.whole_pruned > 0;
    // Again with the bound over plan counts and the deepening from the
    // start (most of these chains end before them otherwise).
    internal::ExactOptions deepen;
    deepen.plain_search_nodes = 0;
    internal::ExactStats deepened;
    const std::vector<Action> actions = internal::SolveExact(p, deepen, &deepened);
    by_count += deepened.count_pruned > 0;
    INFO("iter " << iter << " n " << n);
    CheckContract(p, plan, "exact");
    REQUIRE(plan.feasible == (ref.cost < kInf));
    if (plan.feasible) {
      CHECK(plan.recompute_ns == ref.cost);
      CHECK(std::count(plan.actions.begin(), plan.actions.end(),
                       Action::kRecompute) == ref.count);
      CHECK(deepened.cost_ns == ref.cost);
      CHECK(deepened.lower_bound_ns == ref.cost);
      CHECK(std::count(actions.begin(), actions.end(), Action::kRecompute) ==
            ref.count);
      CHECK(PredictedPeakBytes(p, actions) <= p.limit_bytes());
    }
  }
  INFO("searches with the bound over whole items: " << counted
       << ", over plan counts: " << by_count);
  CHECK(counted >= 10);
  CHECK(by_count >= 10);
}

TEST_CASE("every solver keeps its contract") {
  std::mt19937_64 rng(99);
  for (const std::string& name : SolverNames()) {
    auto solver = NewSolver(name);
    REQUIRE(solver.ok());
    CHECK((*solver)->name() == name);
    for (int iter = 0; iter < 300; ++iter) {
      PlanProblem p = RandomProblem(rng, static_cast<int>(rng() % 40),
                                    static_cast<Kind>(iter % 3));
      const int64_t p0 = KeepAllPeak(p);
      p.budget_bytes = p.base_bytes + static_cast<int64_t>(rng() % (p0 + 1));
      CheckContract(p, (*solver)->Solve(p), name);
    }
  }
}

TEST_CASE("baselines do what their names say") {
  PlanProblem p;
  p.base_bytes = 0;
  p.budget_bytes = 1 << 20;
  for (int i = 0; i < 16; ++i) {
    p.blocks.push_back({"b" + std::to_string(i), 100, 10, 5, i != 3});
  }
  const Plan none = (*NewSolver("none"))->Solve(p);
  CHECK(std::count(none.actions.begin(), none.actions.end(), Action::kKeep) ==
        16);
  const Plan all = (*NewSolver("all"))->Solve(p);
  CHECK(std::count(all.actions.begin(), all.actions.end(),
                   Action::kRecompute) == 15);
  CHECK(all.actions[3] == Action::kKeep);
  // sqrt(16) = 4 segments of 4: the last block of each keeps.
  const Plan sq = (*NewSolver("sqrt"))->Solve(p);
  for (int i = 0; i < 16; ++i) {
    const bool keep = i % 4 == 3;
    CHECK((sq.actions[i] == Action::kKeep) == keep);
  }
  // Plenty of budget: exact keeps everything.
  const Plan ex = (*NewSolver("exact"))->Solve(p);
  CHECK(ex.feasible);
  CHECK(ex.recompute_ns == 0);
}

TEST_CASE("mimose greedy ignores when memory is freed and can overshoot") {
  // Savings 100, 100, 60 (inputs 0); keep-all 260, limit 200: a deficit
  // of 60. Mimose takes c, whose 60 covers it at the end of forward; but
  // during c's backward everything below c is still held (200) and c's
  // activations are back (60): 260. Recomputing a instead fits (160).
  PlanProblem p;
  p.base_bytes = 0;
  p.blocks = {{"a", 100, 0, 10}, {"b", 100, 0, 10}, {"c", 60, 0, 10}};
  p.budget_bytes = 200;
  const Plan greedy = (*NewSolver("mimose_greedy"))->Solve(p);
  CHECK(greedy.actions ==
        std::vector<Action>{Action::kKeep, Action::kKeep, Action::kRecompute});
  CHECK_FALSE(greedy.feasible);
  CHECK(greedy.predicted_peak_bytes == 260);
  const Plan exact = (*NewSolver("exact"))->Solve(p);
  CHECK(exact.feasible);
  CHECK(exact.actions ==
        std::vector<Action>{Action::kRecompute, Action::kKeep, Action::kKeep});
  CHECK(exact.predicted_peak_bytes == 160);
}

TEST_CASE("mimose greedy takes the smallest block that covers the deficit") {
  PlanProblem p;
  p.base_bytes = 0;
  // Savings 500, 300, 120, 100 (input 0). Deficit 110: 120 covers it.
  p.blocks = {
      {"a", 500, 0, 1}, {"b", 300, 0, 1}, {"c", 120, 0, 1}, {"d", 100, 0, 1}};
  p.budget_bytes = 1020 - 110;
  const Plan plan = (*NewSolver("mimose_greedy"))->Solve(p);
  CHECK(plan.actions == std::vector<Action>{Action::kKeep, Action::kKeep,
                                            Action::kRecompute, Action::kKeep});
}

TEST_CASE("delta releases the most bytes per ns, swapping when cheaper") {
  PlanProblem p;
  p.base_bytes = 0;
  p.blocks = {{"a", 100, 0, 10}, {"b", 100, 0, 1}, {"c", 60, 0, 10}};
  p.budget_bytes = 200;  // keep-all: c's backward holds 260
  const Plan plain = (*NewSolver("delta"))->Solve(p);
  // b frees as much as a for a tenth of the time.
  CHECK(plain.actions ==
        std::vector<Action>{Action::kKeep, Action::kRecompute, Action::kKeep});
  CHECK(plain.feasible);
  // With a link that hides every transfer, swapping a or b costs nothing;
  // a comes first (chain order breaks the tie) and alone fits: c's
  // backward holds b and c (160), b's holds a prefetched back and b (200).
  p.d2h_bytes_per_s = p.h2d_bytes_per_s = 1e15;
  const Plan swapped = (*NewSolver("delta"))->Solve(p);
  CHECK(swapped.actions ==
        std::vector<Action>{Action::kOffload, Action::kKeep, Action::kKeep});
  CHECK(swapped.feasible);
  CHECK(swapped.recompute_ns == 0);
  CHECK(swapped.exposed_transfer_ns == 0);
  CHECK(swapped.reasons[0].rfind("offloaded: sends 100 B", 0) == 0);
}

TEST_CASE("static_max solves like exact") {
  std::mt19937_64 rng(5);
  auto a = NewSolver("static_max");
  auto b = NewSolver("exact");
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  for (int iter = 0; iter < 100; ++iter) {
    PlanProblem p = RandomProblem(rng, 30, Kind::kTransformer);
    p.budget_bytes = KeepAllPeak(p) - static_cast<int64_t>(rng() % 5000);
    CHECK((*a)->Solve(p).actions == (*b)->Solve(p).actions);
  }
}

TEST_CASE("exact explains its choices") {
  PlanProblem p;
  p.base_bytes = 0;
  p.blocks = {{"a", 100 << 20, 0, 1300000},
              {"b", 100 << 20, 0, 1300000},
              {"c", 10 << 20, 0, 100, false}};
  p.budget_bytes = 120 << 20;
  const Plan plan = (*NewSolver("exact"))->Solve(p);
  CHECK(plan.feasible);
  CHECK(plan.reasons[0] == "recomputed: saves 100 MiB for 1.30 ms");
  CHECK(plan.reasons[2] == "kept: not checkpointable");
  CHECK(plan.actions[1] == Action::kKeep);  // a alone suffices
  p.budget_bytes = 1;
  const Plan bad = (*NewSolver("exact"))->Solve(p);
  CHECK_FALSE(bad.feasible);
  // Recomputing both: b's backward holds a's output (0) and b's 100 MiB.
  CHECK(bad.predicted_peak_bytes == (100 << 20));
}

// A chain whose sizes all differ slightly (1% noise), the hard case for the
// exact search: plenty of work for the limit to cut.
PlanProblem JitteredChain(std::mt19937_64& rng, int n) {
  std::normal_distribution<double> noise(1.0, 0.01);
  auto jitter = [&](double v) {
    return static_cast<int64_t>(v * noise(rng));
  };
  PlanProblem p;
  p.base_bytes = 1 << 30;
  for (int i = 0; i < n; ++i) {
    const bool attn = i % 2 == 0;
    p.blocks.push_back({"b" + std::to_string(i),
                        jitter(attn ? 300e6 : 200e6), jitter(16e6),
                        jitter(attn ? 3e6 : 1.5e6), true});
  }
  return p;
}

bool HasStopNote(const Plan& plan) {
  for (const std::string& r : plan.reasons) {
    if (r.find("work limit") != std::string::npos) return true;
  }
  return false;
}

TEST_CASE("identical layers: states of equal saving merge, work stays small") {
  // 1000 blocks of two kinds with equal sizes (times differ by 2%): the
  // savings a prefix can reach are few, and the search must not keep more
  // than one state per saving (it kept hundreds of thousands).
  std::mt19937_64 rng(99);
  std::normal_distribution<double> time_noise(1.0, 0.02);
  for (double fraction : {0.2, 0.5, 0.8}) {
    PlanProblem p;
    p.base_bytes = 1 << 30;
    for (int i = 0; i < 1000; ++i) {
      const bool attn = i % 2 == 0;
      p.blocks.push_back(
          {"b" + std::to_string(i), attn ? 300 << 20 : 200 << 20, 16 << 20,
           static_cast<int64_t>((attn ? 3e6 : 1.5e6) * time_noise(rng)),
           true});
    }
    const int64_t p0 = KeepAllPeak(p);
    p.budget_bytes = p0 - static_cast<int64_t>(fraction * (p0 - (1 << 30)));
    internal::ExactStats st;
    internal::SolveExact(p, &st);
    INFO("fraction " << fraction << " nodes " << st.nodes);
    CHECK_FALSE(st.stopped_at_limit);
    CHECK(st.max_front <= 1000);
    CHECK(st.nodes <= 2000000);
  }
}

TEST_CASE("the search's bound sees a need that binds before the end") {
  // Block 1's backward workspace (48 bytes) needs 50 bytes saved by the
  // blocks below it: only block 0 (forward 1000 ns) can, while the later
  // needs (3 bytes) could be met by block 1 for 10 ns. The LP on the
  // largest need alone would let block 1 cover all 50 bytes (a bound of
  // about 5 ns); once block 1 is decided (the tail, from the top down),
  // the need of 50 bytes falls on block 0 alone (1000 * 50 / 99, about
  // 505 ns), which a search stopped there reports.
  PlanProblem p;
  p.blocks = {{"b0", 100, 1, 1000, true},
              {"b1", 100, 1, 10, true},
              {"b2", 1, 1, 1, true}};
  p.blocks[1].workspace_bytes = 48;
  p.budget_bytes = 200;
  internal::ExactStats st;
  const std::vector<Action> actions = internal::SolveExact(p, &st);
  CHECK(actions == std::vector<Action>{Action::kRecompute, Action::kKeep,
                                       Action::kKeep});
  CHECK(st.cost_ns == 1000);
  CHECK(st.tail == 1);
  CHECK(st.root_bound_ns < 500);
  internal::ExactOptions one_step;
  one_step.max_nodes = 1;
  internal::ExactStats stopped;
  internal::SolveExact(p, one_step, &stopped);
  CHECK(stopped.stopped_at_limit);
  CHECK(stopped.lower_bound_ns >= 500);
  CHECK(stopped.lower_bound_ns <= 1000);
}

TEST_CASE("the bound that counts whole blocks closes the LP's gap") {
  // Twelve identical blocks whose recompute saves 99 bytes for 1000 ns,
  // and a budget 250 bytes below the keep-everything peak: the LP covers
  // it with 2.53 blocks (about 2525 ns), a plan takes 3 (3000 ns). A
  // search stopped once the body has begun reports the bound that counts
  // whole blocks: 3000, a proof that the plan it returns is optimal.
  PlanProblem p;
  for (int i = 0; i < 12; ++i) {
    p.blocks.push_back({"b" + std::to_string(i), 100, 1, 1000, true});
  }
  p.budget_bytes = KeepAllPeak(p) - 250;
  internal::ExactStats full;
  internal::SolveExact(p, &full);
  CHECK(full.cost_ns == 3000);
  CHECK(full.root_bound_ns < 2600);
  REQUIRE(full.tail <= 1);
  internal::ExactOptions options;
  options.max_nodes = 4;  // past the tail's step, not much further
  internal::ExactStats stopped;
  const Plan plan = internal::NewExactSolver(options)->Solve(p);
  internal::SolveExact(p, options, &stopped);
  CHECK(stopped.stopped_at_limit);
  CHECK(stopped.lower_bound_ns == 3000);
  CHECK(plan.recompute_ns == 3000);
  REQUIRE(plan.optimality_gap_ns.has_value());
  CHECK(*plan.optimality_gap_ns == 0);
}

// A transformer-like chain as bench:solver's (hidden 1024, 16 heads,
// fp16): an embedding, `layers` attention and MLP blocks, a head, for
// `batch` sequences of `seq` tokens. `bytes` and `ns` add the noise.
PlanProblem TransformerLikeChain(int layers, double batch, double seq,
                                 const std::function<int64_t(double)>& bytes,
                                 const std::function<int64_t(double)>& ns) {
  const double x = batch * seq * 1024 * 2;  // one hidden state
  const double scores = 2 * batch * 16 * seq * seq * 2;
  PlanProblem p;
  p.base_bytes = int64_t{4} << 30;
  p.blocks.push_back({"embed", bytes(x), bytes(batch * seq * 8), ns(4e-3 * x), false});
  for (int i = 0; i < layers; ++i) {
    p.blocks.push_back({"attn" + std::to_string(i), bytes(6 * x + scores), bytes(x),
                        ns(8e-3 * x + 8e-3 * scores), true});
    p.blocks.push_back(
        {"mlp" + std::to_string(i), bytes(13 * x), bytes(x), ns(16e-3 * x), true});
  }
  p.blocks.push_back({"head", bytes(2 * x), bytes(x), ns(16e-3 * x), true});
  return p;
}

// Transformer-like chains with noisy sizes (1%) and times (2%) on a busy
// 64 GB/s link, at budgets that need most blocks recomputed or sent: from
// recomputing every block but the first and last up to `spread_permille`
// thousandths of the way to keeping all. One stream of draws per seed.
class BusyLinkChains {
 public:
  explicit BusyLinkChains(uint64_t seed) : rng_(seed) {}

  PlanProblem Next(int layers, int spread_permille) {
    auto bytes = [&](double v) { return static_cast<int64_t>(v * size_noise_(rng_)); };
    auto ns = [&](double v) { return static_cast<int64_t>(v * time_noise_(rng_)); };
    const double batch = 4 + static_cast<double>(rng_() % 29);
    const double seq = 64 + static_cast<double>(rng_() % 449);
    PlanProblem p = TransformerLikeChain(layers, batch, seq, bytes, ns);
    p.d2h_bytes_per_s = p.h2d_bytes_per_s = 64e9;
    std::vector<Action> all(p.blocks.size(), Action::kRecompute);
    all.front() = all.back() = Action::kKeep;
    const int64_t lo = PredictedPeakBytes(p, all), hi = KeepAllPeak(p);
    p.budget_bytes =
        lo + static_cast<int64_t>(static_cast<double>(rng_() % spread_permille) /
                                  1000 * static_cast<double>(hi - lo));
    return p;
  }

 private:
  std::mt19937_64 rng_;
  std::normal_distribution<double> size_noise_{1.0, 0.01}, time_noise_{1.0, 0.02};
};

TEST_CASE("the bound over plan counts starts from the states the tail leaves") {
  // Transformer-like chains (hidden 1024, fp16): attention and MLP blocks
  // whose sizes differ by 1% and times by 2%, and a head. The last MLP's
  // own backward needs a little less than the head's: recomputing it
  // meets only that difference. Relaxing every need to the largest over
  // all the blocks lets it count its whole saving instead, and the counts
  // and prices of the bound over plan counts then leave up to a block's
  // cost between the root bound and the optimum. Bounding from the states
  // the tail leaves (that MLP recomputed or not, each with its own need)
  // closes most of that gap.
  std::mt19937_64 rng(2024);
  std::normal_distribution<double> size_noise(1.0, 0.01), time_noise(1.0, 0.02);
  auto bytes = [&](double v) { return static_cast<int64_t>(v * size_noise(rng)); };
  auto ns = [&](double v) { return static_cast<int64_t>(v * time_noise(rng)); };
  int searched = 0, close = 0;
  for (int iter = 0; iter < 30; ++iter) {
    const double batch = 4 + static_cast<double>(rng() % 29);
    const double seq = 64 + static_cast<double>(rng() % 449);
    PlanProblem p = TransformerLikeChain(149, batch, seq, bytes, ns);
    // Between the least peak (every block but the head recomputed) and
    // the keep-all peak.
    std::vector<Action> all(p.blocks.size(), Action::kRecompute);
    all.front() = all.back() = Action::kKeep;
    const int64_t lo = PredictedPeakBytes(p, all), hi = KeepAllPeak(p);
    p.budget_bytes =
        lo + static_cast<int64_t>(static_cast<double>(rng() % 1000) / 1000 *
                                  static_cast<double>(hi - lo));
    internal::ExactOptions deepen;
    deepen.plain_search_nodes = 0;  // the bound over plan counts from the start
    internal::ExactStats st;
    const std::vector<Action> actions = internal::SolveExact(p, deepen, &st);
    if (st.keep_all_fits || st.infeasible) continue;
    INFO("iter " << iter);
    REQUIRE_FALSE(st.stopped_at_limit);
    REQUIRE(PredictedPeakBytes(p, actions) <= p.limit_bytes());
    REQUIRE(st.root_bound_ns <= st.cost_ns);
    ++searched;
    const double gap_blocks = static_cast<double>(st.cost_ns - st.root_bound_ns) /
                              static_cast<double>(p.blocks[1].forward_ns);
    close += gap_blocks < 0.05;
  }
  CHECK(searched >= 25);
  CHECK(close >= searched * 9 / 10);
}

TEST_CASE("with a link, a stopped search still fits and bounds its gap") {
  std::mt19937_64 rng(99);
  int stopped = 0;
  for (int iter = 0; iter < 200; ++iter) {
    PlanProblem p = RandomProblem(rng, 10, static_cast<Kind>(iter % 3));
    p.d2h_bytes_per_s = p.h2d_bytes_per_s = iter % 2 ? 1e10 : 2e9;
    const int64_t p0 = KeepAllPeak(p);
    p.budget_bytes = p0 - static_cast<int64_t>(rng() % (p0 / 2 + 1));
    const Plan reference = (*NewSolver("exact"))->Solve(p);
    internal::ExactOptions options;
    options.max_nodes = static_cast<int64_t>(rng() % 40);
    internal::ExactStats st;
    internal::SolveExact(p, options, &st);
    const Plan plan = internal::NewExactSolver(options)->Solve(p);
    INFO("iter " << iter);
    // The plan to beat fits whenever a plan without OFFLOAD does.
    if (reference.feasible && reference.exposed_transfer_ns == 0 &&
        std::count(reference.actions.begin(), reference.actions.end(),
                   Action::kOffload) == 0) {
      CHECK(plan.feasible);
    }
    if (!plan.feasible) continue;
    REQUIRE(plan.optimality_gap_ns.has_value());
    const int64_t cost = plan.recompute_ns + plan.exposed_transfer_ns;
    const int64_t optimum =
        reference.recompute_ns + reference.exposed_transfer_ns;
    CHECK(cost + 1 >= optimum);
    CHECK(HasStopNote(plan) == st.stopped_at_limit);
    if (st.stopped_at_limit) {
      ++stopped;
      CHECK(*plan.optimality_gap_ns >= 0);
      CHECK(cost - *plan.optimality_gap_ns <= optimum + 1);
    } else {
      CHECK(*plan.optimality_gap_ns == 0);
    }
  }
  CHECK(stopped > 20);
}

TEST_CASE("with a busy link, a stopped search bounds its gap within two blocks") {
  // Transformer-like chains whose budgets need most blocks recomputed or
  // sent, on a link that carries fewer copies than the forward could
  // send. A state's LP over the pairing relaxation lets a block both
  // recompute and send (and copies cost nothing beyond their wait back),
  // so a search stopped at its work limit bounded its gap by 2 to 4
  // blocks' cost on these chains. With one action per block and the copy
  // engine priced, the bound it reports is 0.6 to 1.5 blocks' cost below
  // the optimum.
  BusyLinkChains chains(77);
  int stopped = 0, close = 0;
  for (int iter = 0; iter < 40; ++iter) {
    const PlanProblem p = chains.Next(11, 400);
    internal::ExactStats full;
    internal::SolveExact(p, &full);
    if (full.stopped_at_limit || full.infeasible || full.nodes < 2000) continue;
    internal::ExactOptions options;
    options.max_nodes = full.nodes / 4;
    internal::ExactStats st;
    internal::SolveExact(p, options, &st);
    INFO("iter " << iter << " nodes " << full.nodes);
    if (!st.stopped_at_limit) continue;
    ++stopped;
    REQUIRE(st.lower_bound_ns <= full.cost_ns);
    const double gap_blocks = static_cast<double>(full.cost_ns - st.lower_bound_ns) /
                              static_cast<double>(p.blocks[1].forward_ns);
    UNSCOPED_INFO("gap " << gap_blocks);
    close += gap_blocks < 2.0;
  }
  CHECK(stopped >= 8);
  CHECK(close >= stopped * 9 / 10);
}

TEST_CASE("busy link: a state saving no more than a cheaper one at each start goes") {
  // Transformer-like chains of 34 blocks with noisy sizes and times, at
  // budgets that need most blocks recomputed or sent, on a link slower
  // than the forward: copies queue, and states that differ in which
  // blocks they sent rarely share a queue. A state is dropped when a
  // cheaper one kept, free no later, has at least its saving at every
  // block start from the next on (its copies counted until they land).
  // Compared with only the 16 cheapest states kept, and at every moment
  // a copy lands rather than at block starts, the search examined 2.6
  // times as many states on these chains (1.84 million; the hardest 565
  // thousand, 4.3 times as many).
  BusyLinkChains chains(31);
  int64_t states = 0, most = 0;
  for (int iter = 0; iter < 30; ++iter) {
    const PlanProblem p = chains.Next(16, 450);
    internal::ExactStats st;
    internal::SolveExact(p, &st);
    REQUIRE_FALSE(st.stopped_at_limit);
    states += st.nodes;
    most = std::max(most, st.nodes);
  }
  INFO("states " << states << ", the most on one chain " << most);
  CHECK(states < 1000000);
  CHECK(most < 250000);
}

TEST_CASE("the work limit returns the best plan found, flagged, never over") {
  std::mt19937_64 rng(4242);
  int stopped = 0;
  for (int iter = 0; iter < 20; ++iter) {
    PlanProblem p = JitteredChain(rng, 200);
    const int64_t p0 = KeepAllPeak(p);
    p.budget_bytes = p0 - static_cast<int64_t>(rng() % (p0 / 2));
    internal::ExactStats full_stats;
    const std::vector<Action> full = internal::SolveExact(p, &full_stats);
    INFO("iter " << iter << " nodes " << full_stats.nodes);
    CHECK_FALSE(full_stats.stopped_at_limit);
    const Plan reference = (*NewSolver("exact"))->Solve(p);
    CHECK_FALSE(HasStopNote(reference));
    for (const int64_t max_nodes :
         {int64_t{0}, int64_t{100}, full_stats.nodes / 2}) {
      internal::ExactOptions options;
      options.max_nodes = max_nodes;
      internal::ExactStats st;
      internal::SolveExact(p, options, &st);
      const Plan plan = internal::NewExactSolver(options)->Solve(p);
      CheckContract(p, plan, "exact");
      // Stopping never costs feasibility: the plan fits whenever one does.
      CHECK(plan.feasible == reference.feasible);
      CHECK(plan.recompute_ns >= reference.recompute_ns);
      CHECK(st.stopped_at_limit == (full_stats.nodes > max_nodes));
      CHECK(HasStopNote(plan) == st.stopped_at_limit);
      // Work stays within the limit plus the last two fronts.
      REQUIRE(plan.optimality_gap_ns.has_value());
      if (st.stopped_at_limit) {
        ++stopped;
        CHECK(st.nodes <= max_nodes + 2 * st.max_front + 2);
        // The gap is a true bound: the optimum lies within it.
        CHECK(*plan.optimality_gap_ns >= 0);
        CHECK(plan.recompute_ns - *plan.optimality_gap_ns <=
              reference.recompute_ns);
        CHECK(st.lower_bound_ns >= full_stats.root_bound_ns);
      } else {
        CHECK(plan.recompute_ns == reference.recompute_ns);
        CHECK(*plan.optimality_gap_ns == 0);
      }
    }
    // A generous limit changes nothing.
    internal::ExactOptions generous;
    generous.max_nodes = full_stats.nodes;
    const Plan same = internal::NewExactSolver(generous)->Solve(p);
    CHECK(same.actions == reference.actions);
    CHECK_FALSE(HasStopNote(same));
  }
  CHECK(stopped >= 20);  // the limits really bit
}

TEST_CASE("the largest problem the planner builds solves without overflow") {
  // kMaxBlocks blocks at the estimator's largest prediction, on the largest
  // base and calibration: sums stay below the solver's sentinel (UBSan
  // checks the arithmetic under --config=asan).
  PlanProblem p;
  p.base_bytes = kMaxQuantity + kMaxCalibrationBytes;
  for (int i = 0; i < kMaxBlocks; ++i) {
    p.blocks.push_back({"b" + std::to_string(i), kMaxQuantity - i,
                        kMaxQuantity / 2, kMaxQuantity - 7 * i, i != 0});
  }
  const int64_t p0 = KeepAllPeak(p);
  REQUIRE(p0 > (int64_t{1} << 60));
  for (const int64_t budget : {p0, p0 - (int64_t{1} << 58), kMaxPeakBytes}) {
    p.budget_bytes = budget;
    internal::ExactOptions quick;
    quick.max_nodes = 1 << 16;
    const Plan plan = internal::NewExactSolver(quick)->Solve(p);
    INFO("budget " << budget);
    CheckContract(p, plan, "exact");
    CHECK(plan.predicted_peak_bytes > 0);
    CHECK(plan.feasible == (plan.predicted_peak_bytes <= budget));
  }
}

TEST_CASE("the time limit stops a search the same way") {
  std::mt19937_64 rng(777);
  int stopped = 0;
  for (int iter = 0; iter < 10; ++iter) {
    PlanProblem p = JitteredChain(rng, 200);
    const int64_t p0 = KeepAllPeak(p);
    p.budget_bytes = p0 - static_cast<int64_t>(rng() % (p0 / 2));
    const Plan reference = (*NewSolver("exact"))->Solve(p);
    // A limit that has passed by the first check: the search stops there,
    // with the best plan it has, which fits whenever one does.
    internal::ExactOptions now;
    now.time_limit = std::chrono::nanoseconds(1);
    internal::ExactStats st;
    internal::SolveExact(p, now, &st);
    const Plan plan = internal::NewExactSolver(now)->Solve(p);
    CheckContract(p, plan, "exact");
    CHECK(plan.feasible == reference.feasible);
    CHECK(plan.recompute_ns >= reference.recompute_ns);
    CHECK(HasStopNote(plan) == st.stopped_at_limit);
    stopped += st.stopped_at_limit;
    // An hour changes nothing.
    internal::ExactOptions hour;
    hour.time_limit = std::chrono::hours(1);
    const Plan same = internal::NewExactSolver(hour)->Solve(p);
    CHECK(same.actions == reference.actions);
    CHECK_FALSE(HasStopNote(same));
  }
  CHECK(stopped >= 5);  // searches with work left past the first item stop
}

TEST_CASE("a stopped search still matches brute force on feasibility") {
  std::mt19937_64 rng(31337);
  for (int iter = 0; iter < 300; ++iter) {
    const int n = 2 + static_cast<int>(rng() % 13);
    PlanProblem p = RandomProblem(rng, n, static_cast<Kind>(iter % 3));
    const std::vector<Scored> all = Enumerate(p);
    const int64_t p0 = KeepAllPeak(p);
    const int64_t min_peak = Best(all, kInf).min_peak;
    p.budget_bytes = std::uniform_int_distribution<int64_t>(
        min_peak - 20, p0 + 20)(rng);
    const BruteForce bf = Best(all, p.limit_bytes());
    for (const int64_t max_nodes : {int64_t{0}, int64_t{3}, int64_t{30}}) {
      internal::ExactOptions options;
      options.max_nodes = max_nodes;
      const Plan plan = internal::NewExactSolver(options, "static_max")
                            ->Solve(p);
      INFO("iter " << iter << " max_nodes " << max_nodes);
      CheckContract(p, plan, "static_max");
      REQUIRE(plan.feasible == bf.feasible);
      if (bf.feasible) {
        CHECK(plan.recompute_ns >= bf.best.cost);
        if (!HasStopNote(plan)) CHECK(plan.recompute_ns == bf.best.cost);
      } else {
        CHECK(plan.predicted_peak_bytes == bf.min_peak);
      }
    }
  }
}

TEST_CASE("with a link, the plan fits exactly when it is not flagged infeasible") {
  // Budgets around the least peak without offloading, where a plan that
  // fits must offload; longer chains than brute force reaches, some
  // searches stopped early.
  std::mt19937_64 rng(2718);
  int needs_offload = 0;
  for (int iter = 0; iter < 600; ++iter) {
    const int n = 8 + static_cast<int>(rng() % 33);
    PlanProblem p = RandomProblem(rng, n, static_cast<Kind>(iter % 3));
    p.offload_checkpoints = iter % 2 == 0;
    static constexpr double kLinks[] = {5e10, 1e10, 2e9};
    p.d2h_bytes_per_s = p.h2d_bytes_per_s = kLinks[rng() % 3];
    std::vector<Action> all(n, Action::kRecompute);
    all.back() = Action::kKeep;
    const int64_t least = PredictedPeakBytes(p, all);
    p.budget_bytes = std::uniform_int_distribution<int64_t>(least * 3 / 4, least)(rng);
    internal::ExactOptions options;
    if (iter % 3 == 0) options.max_nodes = 50;
    internal::ExactStats st;
    const std::vector<Action> actions = internal::SolveExact(p, options, &st);
    const bool fits = PredictedPeakBytes(p, actions) <= p.limit_bytes();
    INFO("iter " << iter << " n=" << n);
    CHECK(st.infeasible == !fits);
    needs_offload += fits;
  }
  CHECK(needs_offload > 100);
}

TEST_CASE("unknown solver names are rejected with the list") {
  auto s = NewSolver("optimal");
  REQUIRE_FALSE(s.ok());
  CHECK(s.status().code() == absl::StatusCode::kInvalidArgument);
  const std::string msg(s.status().message());
  for (const std::string& name : SolverNames()) {
    CHECK(msg.find(name) != std::string::npos);
  }
}

}  // namespace
}  // namespace remat
