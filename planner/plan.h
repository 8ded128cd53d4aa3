// Plans and the memory model: the one place that says how much memory a plan
// needs. Every solver, test and benchmark calls PredictedPeakBytes.
//
// Thread safety: plain values and pure functions.
#ifndef REMAT_PLANNER_PLAN_H_
#define REMAT_PLANNER_PLAN_H_

#include <cstdint>
#include <string>
#include <vector>

#include "planner/model.h"

namespace remat {

// What happens to one block's activations between forward and backward.
enum class Action : uint8_t {
  kKeep = 0,       // run normally; its activations stay until backward
  kRecompute = 1,  // keep only its input; rerun forward during backward
  kOffload = 2,    // copy activations to host, prefetch before backward
};

// "KEEP", "RECOMPUTE", "OFFLOAD".
const char* ActionName(Action action);
// Parses ActionName's output; false on anything else.
bool ParseAction(const std::string& name, Action* action);

// What a solver knows about one block for one batch (usually the
// estimator's upper bounds).
struct BlockCost {
  std::string name;
  int64_t act_bytes = 0;    // a_i: retained for backward under KEEP
  int64_t input_bytes = 0;  // x_i: retained under RECOMPUTE
  int64_t forward_ns = 0;   // c_i: what one recompute costs
  bool checkpointable = true;
};

// One planning question: a chain of blocks, what is alive before forward,
// and the budget the step must fit in.
struct PlanProblem {
  int64_t base_bytes = 0;    // parameters, grads, optimizer state, batch
  int64_t budget_bytes = 0;  // the device memory the step may use
  int64_t margin_bytes = 0;  // kept free below the budget (fragmentation)
  std::vector<BlockCost> blocks;

  // What a plan's peak must not exceed: budget_bytes - margin_bytes.
  int64_t limit_bytes() const { return budget_bytes - margin_bytes; }
};

// A solver's answer for one problem.
struct Plan {
  std::vector<Action> actions;       // one per block, in forward order
  std::vector<std::string> reasons;  // one per block, for people
  bool feasible = false;             // predicted_peak_bytes <= limit_bytes()
  int64_t predicted_peak_bytes = 0;  // PredictedPeakBytes(problem, actions)
  int64_t recompute_ns = 0;          // RecomputeNs(problem, actions)
  std::string solver;                // the solver that made it
};

// The memory model (DESIGN.md). With R the recomputed blocks, O the
// offloaded ones and K the rest:
//
//   peak = base + sum_{i in K} a_i + sum_{i in R} x_i
//        + max( max_{j in R} (a_j - x_j), max_{j in O} a_j )
//
// The max term is the one block whose activations are materialised again
// during backward: a recompute rebuilds a_j while x_j is still held; an
// offloaded block's a_j is prefetched back. Offloaded activations occupy no
// device memory otherwise. Mimose's greedy leaves the max term out; remat
// does not. Precondition: actions.size() == problem.blocks.size().
int64_t PredictedPeakBytes(const PlanProblem& problem,
                           const std::vector<Action>& actions);

// Sum of forward_ns over recomputed blocks: the extra backward time.
int64_t RecomputeNs(const PlanProblem& problem,
                    const std::vector<Action>& actions);

// Fills predicted_peak_bytes, recompute_ns and feasible from the actions.
void ScorePlan(const PlanProblem& problem, Plan* plan);

// The plan that is always safe to run (the least memory without a memory
// model): every checkpointable block RECOMPUTE, the rest KEEP. One action
// per block of `model`, in order. Samples are collected under it.
std::vector<Action> SafeActions(const ModelSpec& model);

// SafeActions as a Plan, the one every layer hands out when it has no
// solved plan (COLLECT, or a client that cannot reach the planner):
// `solver` names who chose it ("collect", "safe"), every checkpointable
// block's reason is `reason`. Not known to fit: without an estimate there
// is no predicted peak (0) and feasible is false; it is still the least
// memory the runtime can run without offloading.
Plan SafePlan(const ModelSpec& model, const std::string& solver,
              const std::string& reason);

// Where a step's plan came from (the client's PlanChooser decides; an
// Outcome may say, for the daemon's metrics).
enum class PlanSource {
  kLocalCache,  // answered locally
  kPlanner,     // the planner's plan
  kCollect,     // the planner asked to collect: safe plan, measure
  kLastGood,    // planner failed; the last good plan for a covering bucket
  kSafe,        // planner failed; no good plan known: safe plan
};

inline constexpr PlanSource kAllPlanSources[] = {
    PlanSource::kLocalCache, PlanSource::kPlanner, PlanSource::kCollect,
    PlanSource::kLastGood, PlanSource::kSafe};

// "local_cache", "planner", "collect", "last_good", "safe".
const char* PlanSourceName(PlanSource source);

}  // namespace remat

#endif  // REMAT_PLANNER_PLAN_H_
