// Passes that polish a plan of the search with OFFLOAD without searching:
// sending checkpoints to host where the problem allows it, and offloading
// recomputed blocks where that is cheaper; and the plan measures they
// and the orchestration use.
//
// Contract: WithCheckpointsSent never raises the peak (SimulateStep) of a
// plan without OFFLOAD, so such a plan that fits still fits; every
// RECOMPUTE_OFFLOAD it makes acts (EffectiveAction). OffloadWhereCheaper
// never makes a plan dearer (recompute plus exposed time) nor one that
// fits not fit: it keeps a change only where the plan then fits and costs
// less than *cost_ns.
//
// Cost: WithCheckpointsSent O(blocks); OffloadWhereCheaper a SimulateStep
// (O(blocks)) per recomputed block it tries, so O(blocks^2).
//
// Thread safety: pure functions.
#ifndef REMAT_PLANNER_INTERNAL_EXACT_OFFLOAD_POLISH_H_
#define REMAT_PLANNER_INTERNAL_EXACT_OFFLOAD_POLISH_H_

#include <chrono>
#include <cstdint>
#include <vector>

#include "planner/plan.h"

namespace remat {
namespace internal {
namespace exact {

// `actions` with every checkpoint sent to host that can be: each
// RECOMPUTE after a recomputed block becomes a RECOMPUTE_OFFLOAD, where the
// problem allows them. At no moment does a sent checkpoint hold more than
// a kept one, so the peak of a plan without OFFLOAD (the recompute plan
// the solver gives it) is never higher. (With OFFLOADs, a checkpoint's
// copy can delay theirs in the queue and so raise a forward moment.)
std::vector<Action> WithCheckpointsSent(const PlanProblem& problem,
                                        std::vector<Action> actions);

// The blocks not kept.
int64_t NotKept(const std::vector<Action>& actions);

// A plan's cost as SimulateStep has it: recompute plus exposed transfer.
int64_t CostNs(const StepSimulation& sim);

// A local improvement for a plan the search has not proven: in forward
// order, each recomputed block offloads instead where the plan still fits
// and costs less. Long chains at tight budgets, where the link is what
// limits offloading, are the search's hardest: its fronts grow too large
// to reach the many offloads the best plans hold (the recompute plan, or
// one of a few of them), while the link carries a copy of most of the
// cheap blocks in time. *cost_ns: the plan's cost, before and after. It
// stops at `deadline` (ExactOptions::time_limit).
void OffloadWhereCheaper(const PlanProblem& problem,
                         std::chrono::steady_clock::time_point deadline,
                         std::vector<Action>* actions, int64_t* cost_ns);

}  // namespace exact
}  // namespace internal
}  // namespace remat

#endif  // REMAT_PLANNER_INTERNAL_EXACT_OFFLOAD_POLISH_H_
