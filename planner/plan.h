// Plans and the memory model: the one place that says how much memory a plan
// needs. Every solver, test and benchmark calls SimulateStep (or
// PredictedPeakBytes, its peak).
//
// Thread safety: plain values and pure functions.
#ifndef REMAT_PLANNER_PLAN_H_
#define REMAT_PLANNER_PLAN_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "planner/model.h"

namespace remat {

// What happens to one block's activations between forward and backward.
enum class Action : uint8_t {
  kKeep = 0,       // run normally; its activations stay until backward
  kRecompute = 1,  // keep only its input; rerun forward during backward
  kOffload = 2,    // copy activations to host, prefetch before backward
  // RECOMPUTE whose checkpoint (its input: the output of the block below)
  // waits on host between forward and backward: DeepSpeed's "CPU
  // checkpointing", what takes a step below recompute-all's peak. It acts
  // only after a block that is itself recomputed (either kind), whose
  // output nothing else keeps; after any other block (whose saved tensors
  // may hold that output), for the first block (whose input is the batch)
  // and without a host link it is plain RECOMPUTE (EffectiveAction).
  kRecomputeOffload = 3,
};

// Every action and its name, the one list of them: ActionName and
// ParseAction, the wire enum (whose values carry the same names:
// planner/service/convert.cc) and the Python enum (client/python) read it.
struct ActionInfo {
  Action action;
  const char* name;
};
inline constexpr ActionInfo kActions[] = {
    {Action::kKeep, "KEEP"},
    {Action::kRecompute, "RECOMPUTE"},
    {Action::kOffload, "OFFLOAD"},
    {Action::kRecomputeOffload, "RECOMPUTE_OFFLOAD"},
};

// Whether `a` is one of the actions above (a value from outside, cast,
// may not be).
inline bool IsKnownAction(Action a) {
  for (const ActionInfo& info : kActions) {
    if (info.action == a) return true;
  }
  return false;
}

// Whether the block reruns its forward in backward (RECOMPUTE or
// RECOMPUTE_OFFLOAD).
inline bool Recomputes(Action a) {
  return a == Action::kRecompute || a == Action::kRecomputeOffload;
}

// "KEEP", "RECOMPUTE", "OFFLOAD", "RECOMPUTE_OFFLOAD".
const char* ActionName(Action action);
// Parses ActionName's output; false on anything else.
bool ParseAction(const std::string& name, Action* action);

// A quantity a BlockCost may leave unknown (older callers, traces and
// instance files): the memory model then uses the default it documents.
inline constexpr int64_t kUnknown = -1;

// What a solver knows about one block for one batch (usually the
// estimator's upper bounds).
struct BlockCost {
  std::string name;
  // a_i: what the block's forward leaves allocated when it KEEPs: its saved
  // tensors plus its output (the collector measures it so).
  int64_t act_bytes = 0;
  // x_i: its input, the previous block's output (the batch for block 0).
  int64_t input_bytes = 0;
  int64_t forward_ns = 0;  // c_i: one forward, the price of a recompute
  bool checkpointable = true;
  // o_i: its output. Unknown: the next block's input_bytes (the output is
  // that input), as it is, even above act_bytes; for the last block
  // min(its own input_bytes, act_bytes).
  int64_t output_bytes = kUnknown;
  // w_i: transient memory of its backward beyond its saved tensors and the
  // gradients of its output and input. Unknown: 0.
  int64_t workspace_bytes = kUnknown;
  // Its backward time. Unknown: twice forward_ns.
  int64_t backward_ns = kUnknown;
  // t_i: what OFFLOAD copies to host and back: the saved tensors without
  // the output (which the next block holds). Unknown: max(act_bytes - o_i,
  // 0). A value above act_bytes is taken as act_bytes (a copy never moves
  // more than the block holds).
  int64_t transfer_bytes = kUnknown;
};

// One planning question: a chain of blocks, what is alive before forward,
// and the budget the step must fit in.
struct PlanProblem {
  int64_t base_bytes = 0;    // parameters, grads, optimizer state, batch
  int64_t budget_bytes = 0;  // the device memory the step may use
  int64_t margin_bytes = 0;  // kept free below the budget (fragmentation)
  std::vector<BlockCost> blocks;
  // The host link's bandwidth per direction (device to host, host to
  // device). 0: no link known; an OFFLOAD block then never leaves the
  // device (it holds what KEEP holds) and solvers do not choose OFFLOAD.
  double d2h_bytes_per_s = 0;
  double h2d_bytes_per_s = 0;
  // Solvers may choose RECOMPUTE_OFFLOAD (with a link): the runtime that
  // runs the plan can move checkpoints to host. Off for callers that
  // cannot (older clients).
  bool offload_checkpoints = false;

  // What a plan's peak must not exceed: budget_bytes - margin_bytes.
  int64_t limit_bytes() const { return budget_bytes - margin_bytes; }
  bool has_link() const { return d2h_bytes_per_s > 0 && h2d_bytes_per_s > 0; }
};

// A solver's answer for one problem.
struct Plan {
  std::vector<Action> actions;       // one per block, in forward order
  std::vector<std::string> reasons;  // one per block, for people
  bool feasible = false;             // predicted_peak_bytes <= limit_bytes()
  int64_t predicted_peak_bytes = 0;  // PredictedPeakBytes(problem, actions)
  int64_t recompute_ns = 0;          // RecomputeNs(problem, actions)
  // Transfer time that compute does not hide (SimulateStep).
  int64_t exposed_transfer_ns = 0;
  // Per block (empty: none): before the block's forward the runtime waits
  // until every copy out of the blocks below this index has landed. The
  // memory model counts those bytes off the device from there on
  // (StepSimulation::copies_out_landed), so the wait is what makes the
  // prediction hold when a step computes faster than its estimates.
  std::vector<int32_t> copies_out_landed;
  std::string solver;                // the solver that made it
  // Exact solvers only: how much cheaper (recompute_ns plus
  // exposed_transfer_ns) a fitting plan could still be; 0 when proven optimal, more when the search stopped at
  // its work or time limit. Unset for heuristics, which prove nothing.
  std::optional<int64_t> optimality_gap_ns;
};

// The memory model, version 2 (DESIGN.md, "Memory model"): the step
// simulated in the order it runs, one moment per block end.
//
// Forward, blocks 0..L-1. Block i leaves allocated until backward:
//   KEEP       a_i (its saved tensors and its output);
//   RECOMPUTE  o_i (its output: the next block's input, held by the next
//              block or as its checkpoint; its own input is the previous
//              block's output, already counted there, or the batch, which
//              is in base);
//   OFFLOAD    a_i until its copy to host completes, then a_i - t_i (t_i:
//              transfer_bytes). Copies run on one device-to-host engine,
//              first in first out, each starting when its block's forward
//              ends (or when the engine is free) and taking t_i / bandwidth.
// The moment at the end of block k's forward holds base, every earlier
// block's share as of the start of block k's forward, and a_k: a copy
// landed by then is off the device for the whole block, because the
// runtime waits for it there (Plan::copies_out_landed). The clock is the
// estimates' forward times, which a real step may beat: the wait, not the
// clock, keeps the device within this moment.
// Backward, blocks L-1..0. During block j's backward the blocks above j
// have freed what they held; block j has a_j materialised (kept, rebuilt
// by its recompute, or prefetched back), the gradient of its output (o_j),
// the gradient of its input (x_j) and its workspace (w_j); every block
// below j holds its forward share. A recomputed last block also still has
// its original output (the loss holds it), so recomputing it never lowers
// the peak. Backward begins once every copy out has landed (the runtime
// waits at the end of forward; a wait there is exposed), so copies out
// never overlap backward. An offloaded block's copy back starts on the
// host-to-device engine when the backward of the block above it starts
// (one block of prefetch; at the start of backward for the last block),
// so its t_i is also held during the backward of the block above it; a
// backward that must wait for its copy back exposes that wait. (That
// engine is then idle: the previous copy back has landed, since its
// block's backward waited for it.)
// RECOMPUTE_OFFLOAD on block i, where it acts (see Action): block i holds
// o_i as RECOMPUTE does, and its checkpoint o_{i-1} (which block i-1
// holds as a recomputed block) is copied to host like an offload's t_i: in
// the same first-in-first-out queue from the end of block i's forward,
// off the device once landed, and back from the start of the backward of
// the block above (one block of prefetch), held through block i's
// backward, which waits for it.
// The peak is the largest moment. Without a link (has_link() false)
// OFFLOAD holds what KEEP holds and costs nothing.
//
// Time: recompute_ns (the forwards of recomputed blocks) plus
// exposed_transfer_ns; the rest of the step does not depend on the plan.
// The clock, exactly (SimulateStep; a reimplementation that follows these
// rules reproduces its peaks and costs to the byte and nanosecond):
//  * Times are doubles in ns. A copy of b bytes at r bytes/s takes
//    b / r * 1e9. exposed_transfer_ns is the sum of the exposed waits,
//    rounded up once, at the end.
//  * Forward: block k starts at the sum of forward_ns below it. A copy out
//    starts at max(its block's forward end, the end of the copy before
//    it). A copy whose end equals a block's start has landed there (only
//    an end later than the start is in flight). Backward starts at
//    max(forward end, the last copy out's end); the difference is exposed.
//  * Backward, j = L-1..0: block j begins at max(the end of the block
//    above, its copy back's end) (the difference is exposed) and lasts
//    its backward_ns, plus its forward_ns when it recomputes (either
//    kind). The copy back of block j-1 (an OFFLOAD's t, or a
//    checkpoint sent) starts when block j begins, after j has waited for
//    its own copy back, so it is hidden by j's backward and recompute.
//    The last block's copy back starts when backward starts.
struct StepSimulation {
  int64_t peak_bytes = 0;
  // Where the peak is: the block, and whether in its backward (else at the
  // end of its forward). -1 for an empty chain.
  int peak_block = -1;
  bool peak_in_backward = false;
  int64_t recompute_ns = 0;
  int64_t exposed_transfer_ns = 0;
  // Per block: the copies out that have landed by the start of its
  // forward, as a count of leading blocks (every copy out of blocks
  // 0..copies_out_landed[k]-1 has landed; first in first out).
  std::vector<int32_t> copies_out_landed;
};
// Precondition: actions.size() == problem.blocks.size().
StepSimulation SimulateStep(const PlanProblem& problem,
                            const std::vector<Action>& actions);

// SimulateStep(...).peak_bytes: the one memory model.
int64_t PredictedPeakBytes(const PlanProblem& problem,
                           const std::vector<Action>& actions);

// The first memory model, kept only so benchmarks can show how far it was
// off: base + sum_{i in K} a_i + sum_{i in R} x_i
//        + max(max_{j in R} (a_j - x_j), max_{j in O} a_j).
int64_t PredictedPeakBytesV1(const PlanProblem& problem,
                             const std::vector<Action>& actions);

// Whether block i's checkpoint goes to host where a copy engine (a link)
// exists: a RECOMPUTE_OFFLOAD after a recomputed block (see Action). The
// one statement of that rule, for the memory model and the runtime.
inline bool SendsCheckpoint(const std::vector<Action>& actions, size_t i) {
  return actions[i] == Action::kRecomputeOffload && i > 0 &&
         Recomputes(actions[i - 1]);
}

// `actions[i]`, except RECOMPUTE where a RECOMPUTE_OFFLOAD does not act
// (see Action): what the memory model and the runtime do for block i.
Action EffectiveAction(const PlanProblem& problem,
                       const std::vector<Action>& actions, size_t i);

// Sum of forward_ns over recomputed blocks (either kind): the extra
// backward time.
int64_t RecomputeNs(const PlanProblem& problem,
                    const std::vector<Action>& actions);

// One block's quantities with the defaults filled in (what SimulateStep
// uses; the exact solver reads the same numbers).
struct BlockMemory {
  int64_t keep_bytes = 0;       // a_i
  int64_t recompute_bytes = 0;  // o_i: held under RECOMPUTE
  int64_t output_bytes = 0;     // o_i
  // a_j + o_j + x_j + w_j: what block j's backward adds to the blocks
  // below it.
  int64_t backward_bytes = 0;
  int64_t transfer_bytes = 0;  // t_i
  int64_t backward_ns = 0;
};
BlockMemory MemoryOf(const PlanProblem& problem, size_t i);

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
