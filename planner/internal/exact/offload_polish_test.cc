// The polish passes (offload_polish.h): sending checkpoints never raises
// the peak of a plan without OFFLOAD (the recompute plan it is given), and
// offloading where cheaper never makes a plan dearer nor one that fits not
// fit. On every plan of small chains with a link.
#include "planner/internal/exact/offload_polish.h"

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdint>
#include <random>
#include <vector>

#include "planner/internal/exact/brute_force_for_test.h"

namespace remat {
namespace internal {
namespace exact {
namespace {

using testing::ChainKind;

TEST_CASE("checkpoints sent never raise the peak of a plan without OFFLOAD") {
  // (With OFFLOADs in the plan a checkpoint's copy can delay theirs in the
  // queue and so raise a forward moment: on chains like these, about one
  // plan in a thousand. The solver sends the checkpoints of the recompute
  // plan alone.)
  std::mt19937_64 rng(2020);
  int plans = 0, changed = 0;
  for (int iter = 0; iter < 200; ++iter) {
    const int n = 1 + static_cast<int>(rng() % 8);
    PlanProblem p = testing::RandomLinkChain(rng, n, static_cast<ChainKind>(iter % 3),
                                             /*checkpoints=*/iter % 4 != 0);
    p.budget_bytes = testing::KeepAllPeak(p);
    for (const testing::ScoredPlan& s : testing::EveryPlan(p, 2)) {
      const std::vector<Action> sent = WithCheckpointsSent(p, s.actions);
      REQUIRE(sent.size() == s.actions.size());
      bool ok = PredictedPeakBytes(p, sent) <= s.peak;
      for (size_t i = 0; i < sent.size(); ++i) {
        if (sent[i] == s.actions[i]) continue;
        // Only a RECOMPUTE after a recomputed block, into one that acts.
        ok = ok && p.offload_checkpoints && s.actions[i] == Action::kRecompute &&
             sent[i] == Action::kRecomputeOffload && SendsCheckpoint(sent, i) &&
             EffectiveAction(p, sent, i) == Action::kRecomputeOffload;
      }
      // Every checkpoint that can be sent is.
      for (size_t i = 1; i < sent.size() && p.offload_checkpoints; ++i) {
        ok = ok && !(sent[i] == Action::kRecompute && Recomputes(sent[i - 1]));
      }
      ok = ok && WithCheckpointsSent(p, sent) == sent;
      INFO("iter " << iter << " n=" << n);
      CHECK(ok);
      ++plans;
      changed += sent != s.actions;
    }
  }
  CHECK(plans > 5000);
  CHECK(changed > 1000);
}

TEST_CASE("offloading where cheaper never makes a plan dearer or not fit") {
  std::mt19937_64 rng(2121);
  int tried = 0, cheaper = 0;
  const auto never = std::chrono::steady_clock::time_point::max();
  testing::ForEachLinkChainLimit(
      rng, 120, 2, 1,
      [&](int iter, const PlanProblem& p, const std::vector<testing::ScoredPlan>& plans) {
        const int64_t limit = p.budget_bytes;
        for (const testing::ScoredPlan& s : plans) {
          if (s.peak > limit || rng() % 4 != 0) continue;  // a sample of those that fit
          std::vector<Action> actions = s.actions;
          int64_t cost = s.cost;
          OffloadWhereCheaper(p, never, &actions, &cost);
          const StepSimulation sim = SimulateStep(p, actions);
          bool ok = sim.peak_bytes <= limit && cost <= s.cost && cost == CostNs(sim);
          for (size_t k = 0; k < actions.size(); ++k) {
            // Only recomputes turned into offloads.
            ok = ok && (actions[k] == s.actions[k] ||
                        (s.actions[k] == Action::kRecompute && actions[k] == Action::kOffload));
          }
          INFO("iter " << iter << " n=" << p.blocks.size() << " limit " << limit);
          CHECK(ok);
          ++tried;
          cheaper += cost < s.cost;
          // Past its deadline it changes nothing.
          std::vector<Action> late = s.actions;
          int64_t late_cost = s.cost;
          OffloadWhereCheaper(p, std::chrono::steady_clock::time_point::min(), &late,
                              &late_cost);
          CHECK((late == s.actions && late_cost == s.cost));
        }
      });
  CHECK(tried > 5000);
  CHECK(cheaper > 300);
}

TEST_CASE("a plan's cost and the blocks it does not keep") {
  StepSimulation sim;
  sim.recompute_ns = 40;
  sim.exposed_transfer_ns = 2;
  CHECK(CostNs(sim) == 42);
  CHECK(NotKept({}) == 0);
  CHECK(NotKept({Action::kKeep, Action::kRecompute, Action::kOffload,
                 Action::kRecomputeOffload, Action::kKeep}) == 3);
  PlanProblem p;
  p.blocks.resize(3);
  const std::vector<Action> r3(3, Action::kRecompute);
  CHECK(WithCheckpointsSent(p, r3) == r3);  // not allowed: unchanged
  p.offload_checkpoints = true;
  CHECK(WithCheckpointsSent(p, r3) ==
        std::vector<Action>{Action::kRecompute, Action::kRecomputeOffload,
                            Action::kRecomputeOffload});
}

}  // namespace
}  // namespace exact
}  // namespace internal
}  // namespace remat
