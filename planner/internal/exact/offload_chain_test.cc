// The chain as the search with OFFLOAD sees it (offload_chain.h): its
// blocks restate the memory model's quantities, every plan that fits
// meets its needs, and the actions it leaves out never make a plan
// cheaper. Against every plan of small chains with a link.
#include "planner/internal/exact/offload_chain.h"

#include <algorithm>
#include <catch2/catch.hpp>
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

// What block k's action saves before block k+1 (sigma's share): a - o
// recomputed, t offloaded, and with the checkpoint sent o_{k-1} more.
int64_t Saving(const PlanProblem& p, const std::vector<Action>& actions, size_t k) {
  const BlockMemory m = MemoryOf(p, k);
  switch (EffectiveAction(p, actions, k)) {
    case Action::kKeep:
      return 0;
    case Action::kRecompute:
      return m.keep_bytes - m.recompute_bytes;
    case Action::kOffload:
      return m.transfer_bytes;
    case Action::kRecomputeOffload:
      return m.keep_bytes - m.recompute_bytes + MemoryOf(p, k - 1).output_bytes;
  }
  return 0;
}

// Whether the chain allows `actions`: each action one its block may take,
// a checkpoint sent only after a recomputed block.
bool Allowed(const OffloadChain& chain, const std::vector<Action>& actions) {
  for (size_t k = 0; k < actions.size(); ++k) {
    const OffloadBlock& x = chain.blocks[k];
    switch (actions[k]) {
      case Action::kKeep:
        break;
      case Action::kRecompute:
        if (!x.can_r) return false;
        break;
      case Action::kOffload:
        if (!x.can_o) return false;
        break;
      case Action::kRecomputeOffload:
        if (!x.can_ro || k == 0 || !Recomputes(actions[k - 1])) return false;
        break;
    }
  }
  return true;
}

TEST_CASE("the chain's blocks restate the memory model") {
  std::mt19937_64 rng(1414);
  for (int iter = 0; iter < 200; ++iter) {
    const int n = static_cast<int>(rng() % 9);
    PlanProblem p = testing::RandomLinkChain(rng, n, static_cast<ChainKind>(iter % 3),
                                             iter % 2 == 0);
    p.budget_bytes = testing::KeepAllPeak(p) - static_cast<int64_t>(rng() % 1000);
    const OffloadChain chain = MakeOffloadChain(p);
    REQUIRE(chain.blocks.size() == static_cast<size_t>(n));
    REQUIRE(chain.need.size() == static_cast<size_t>(n + 1));
    REQUIRE(chain.ahead.size() == static_cast<size_t>(n + 1));
    REQUIRE(chain.reach.size() == static_cast<size_t>(n + 1));
    int64_t below = p.base_bytes;
    double now = 0;
    for (int k = 0; k < n; ++k) {
      INFO("iter " << iter << " block " << k << " of " << n);
      const OffloadBlock& x = chain.blocks[k];
      const BlockMemory m = MemoryOf(p, k);
      CHECK(x.below == below);
      CHECK(x.a == m.keep_bytes);
      CHECK(x.s == m.keep_bytes - m.recompute_bytes);
      CHECK(x.t == m.transfer_bytes);
      CHECK(x.bwd == m.backward_bytes);
      CHECK(x.c == p.blocks[k].forward_ns);
      CHECK(x.start == now);
      now += static_cast<double>(p.blocks[k].forward_ns);
      CHECK(x.now == now);
      CHECK(chain.need[k] == below + std::max(x.a, x.bwd) - p.limit_bytes());
      below += m.keep_bytes;
      // Nothing on the last block, nor on one that cannot be checkpointed.
      if (k + 1 == n || !p.blocks[k].checkpointable) {
        CHECK_FALSE(x.can_r);
        CHECK_FALSE(x.can_o);
        CHECK_FALSE(x.can_ro);
      }
      if (!p.offload_checkpoints) CHECK_FALSE(x.can_ro);
      CHECK(x.least_wait >= 0);
      CHECK(x.ro_least_wait >= 0);
      CHECK(chain.ahead[k] == std::max(chain.ahead[k + 1], chain.need[k]));
      CHECK(chain.reach[k] >= chain.need[k]);
    }
    CHECK(chain.need[n] == -kInf);
  }
}

TEST_CASE("every plan that fits meets the chain's needs and reaches") {
  std::mt19937_64 rng(1515);
  int fitting = 0;
  testing::ForEachLinkChainLimit(
      rng, 150, 1, 2,
      [&](int iter, const PlanProblem& p, const std::vector<testing::ScoredPlan>& plans) {
        const int n = static_cast<int>(p.blocks.size());
        const OffloadChain chain = MakeOffloadChain(p);
        for (const testing::ScoredPlan& s : plans) {
          if (s.peak > p.budget_bytes) continue;
          ++fitting;
          int64_t sigma = 0;
          int short_at = -1;  // the first block whose need or reach it misses
          for (int k = 0; k < n && short_at < 0; ++k) {
            if (sigma < chain.need[k] || sigma < chain.reach[k]) short_at = k;
            sigma += Saving(p, s.actions, k);
          }
          INFO("iter " << iter << " limit " << p.budget_bytes << " short at block "
                       << short_at);
          CHECK(short_at == -1);
        }
      });
  CHECK(fitting > 10000);
}

TEST_CASE("the actions the chain leaves out never make a plan cheaper") {
  std::mt19937_64 rng(1616);
  int compared = 0, pruned_offload = 0;
  testing::ForEachLinkChainLimit(
      rng, 150, 1, 3,
      [&](int iter, const PlanProblem& p, const std::vector<testing::ScoredPlan>& plans) {
        const int n = static_cast<int>(p.blocks.size());
        const testing::Optimum all = testing::Cheapest(plans, p.budget_bytes);
        if (!all.found) return;
        const OffloadChain chain = MakeOffloadChain(p);
        std::vector<testing::ScoredPlan> allowed;
        for (const testing::ScoredPlan& s : plans) {
          if (Allowed(chain, s.actions)) allowed.push_back(s);
        }
        for (int k = 0; k + 1 < n; ++k) {
          pruned_offload += p.blocks[k].checkpointable &&
                            MemoryOf(p, k).transfer_bytes > 0 && !chain.blocks[k].can_o;
        }
        const testing::Optimum best = testing::Cheapest(allowed, p.budget_bytes);
        INFO("iter " << iter << " n=" << n << " limit " << p.budget_bytes);
        REQUIRE(best.found);
        CHECK(best.cost == all.cost);
        CHECK(best.count == all.count);
        ++compared;
      });
  CHECK(compared > 300);
  CHECK(pruned_offload > 50);
}

TEST_CASE("copies in flight, waits for copies back and the work limit") {
  PlanProblem p;
  p.d2h_bytes_per_s = p.h2d_bytes_per_s = 1e9;  // 1 byte per ns
  for (int k = 0; k < 4; ++k) {
    BlockCost b;
    b.act_bytes = 100;
    b.input_bytes = 10;
    b.forward_ns = 50;
    b.backward_ns = 30;
    b.transfer_bytes = 80;
    p.blocks.push_back(b);
  }
  p.budget_bytes = 1 << 20;
  const OffloadChain chain = MakeOffloadChain(p);
  // Blocks 0 and 1 offloaded: copies of 80 ns from 50 and from 130.
  const std::vector<OffloadNode> arena = {
      {0, Action::kOffload, -1, -1, 130.0},
      {1, Action::kOffload, 0, 0, 210.0},
  };
  const OffloadState state{160, 0.0, 2, 1, 1, kLastOffload};
  std::vector<int32_t> nodes;
  CHECK(InFlight(chain.blocks, arena, state, 100.0, &nodes) == 160);
  CHECK(nodes == std::vector<int32_t>{1, 0});  // newest first
  CHECK(InFlight(chain.blocks, arena, state, 130.0, nullptr) == 80);  // landed
  CHECK(InFlight(chain.blocks, arena, state, 210.0, nullptr) == 0);
  CHECK(Moved(chain.blocks, arena[0]) == 80);
  // Back: 80 ns, hidden by the backward above (30) and its recompute (50).
  CHECK(BackWait(chain.blocks, 0, 80.0, false) == 50.0);
  CHECK(BackWait(chain.blocks, 0, 80.0, true) == 0.0);
  CHECK(Sends(kLastOffload));
  CHECK(Sends(kLastRo));
  CHECK_FALSE(Sends(kLastKeep));
  CHECK_FALSE(Sends(kLastRecompute));

  ExactOptions options;
  CHECK(OffloadNodeLimit(options, 10) == kMaxOffloadNodes);
  CHECK(OffloadNodeLimit(options, 1000) == kOffloadBlockNodes / 1000);
  options.max_nodes = 5;
  CHECK(OffloadNodeLimit(options, 10) == 5);
}

}  // namespace
}  // namespace exact
}  // namespace internal
}  // namespace remat
