#include "planner/plan.h"

#include <algorithm>
#include <cmath>

namespace remat {

const char* ActionName(Action action) {
  for (const ActionInfo& info : kActions) {
    if (info.action == action) return info.name;
  }
  return "UNKNOWN";
}

bool ParseAction(const std::string& name, Action* action) {
  for (const ActionInfo& info : kActions) {
    if (name == info.name) {
      *action = info.action;
      return true;
    }
  }
  return false;
}

BlockMemory MemoryOf(const PlanProblem& problem, size_t i) {
  const std::vector<BlockCost>& blocks = problem.blocks;
  const BlockCost& b = blocks[i];
  BlockMemory m;
  m.keep_bytes = b.act_bytes;
  int64_t output = b.output_bytes;
  if (output < 0) {
    output = i + 1 < blocks.size() ? blocks[i + 1].input_bytes
                                   : std::min(b.input_bytes, b.act_bytes);
  }
  m.output_bytes = output;
  m.recompute_bytes = output;
  m.backward_bytes = b.act_bytes + output + b.input_bytes +
                     std::max<int64_t>(b.workspace_bytes, 0);
  m.transfer_bytes = b.transfer_bytes >= 0
                         ? std::min(b.transfer_bytes, b.act_bytes)
                         : std::max<int64_t>(b.act_bytes - output, 0);
  m.backward_ns = b.backward_ns >= 0 ? b.backward_ns : 2 * b.forward_ns;
  return m;
}

namespace {

// ns to move `bytes` at `bytes_per_s`.
double TransferNs(int64_t bytes, double bytes_per_s) {
  return static_cast<double>(bytes) / bytes_per_s * 1e9;
}

}  // namespace

Action EffectiveAction(const PlanProblem& problem,
                       const std::vector<Action>& actions, size_t i) {
  if (actions[i] != Action::kRecomputeOffload) return actions[i];
  return problem.has_link() && SendsCheckpoint(actions, i)
             ? Action::kRecomputeOffload
             : Action::kRecompute;
}

StepSimulation SimulateStep(const PlanProblem& problem,
                            const std::vector<Action>& actions) {
  const size_t n = problem.blocks.size();
  const bool link = problem.has_link();
  std::vector<BlockMemory> mem(n);
  // What each block holds once its forward is done and any copy out has
  // landed; a block whose copy out has not landed holds moved[i] more
  // until then. A checkpoint sent to host by block i is o_{i-1}, held by
  // block i-1: block i's share is o_i less it.
  std::vector<int64_t> share(n);
  std::vector<bool> offloaded(n);  // a copy out and back (either kind)
  std::vector<int64_t> moved(n, 0);
  StepSimulation sim;
  for (size_t i = 0; i < n; ++i) mem[i] = MemoryOf(problem, i);
  for (size_t i = 0; i < n; ++i) {
    const Action action = EffectiveAction(problem, actions, i);
    if (Recomputes(action)) sim.recompute_ns += problem.blocks[i].forward_ns;
    switch (action) {
      case Action::kKeep:
        share[i] = mem[i].keep_bytes;
        break;
      case Action::kRecompute:
        share[i] = mem[i].recompute_bytes;
        break;
      case Action::kOffload:
        offloaded[i] = link;
        moved[i] = link ? mem[i].transfer_bytes : 0;
        share[i] = mem[i].keep_bytes - moved[i];
        break;
      case Action::kRecomputeOffload:
        offloaded[i] = true;
        moved[i] = mem[i - 1].output_bytes;
        share[i] = mem[i].recompute_bytes - moved[i];
        break;
    }
  }
  auto moment = [&](int64_t bytes, size_t block, bool backward) {
    if (sim.peak_block < 0 || bytes > sim.peak_bytes) {
      sim.peak_bytes = bytes;
      sim.peak_block = static_cast<int>(block);
      sim.peak_in_backward = backward;
    }
  };
  std::vector<size_t> offloads;  // the offloaded blocks, in chain order
  for (size_t i = 0; i < n; ++i) {
    if (offloaded[i]) offloads.push_back(i);
  }
  std::vector<double> copied_out(n, 0);  // when each copy out lands

  // Forward.
  double now = 0, d2h_free = 0;
  int64_t held = problem.base_bytes;  // base plus the shares of blocks < k
  std::vector<int64_t> below(n + 1);  // base plus the shares of blocks < j
  sim.copies_out_landed.assign(n, 0);
  for (size_t k = 0; k < n; ++k) {
    below[k] = held;
    // A copy counts as landed at block k's end only if it has landed by
    // the block's start (`now`), where the runtime waits for it: then no
    // error of the clock puts more on the device than this moment holds.
    // copies_out_landed[k]: one past the last block whose copy has landed
    // by then (first in first out, so every earlier copy has too, and the
    // later ones below k are in flight).
    int32_t landed = 0;
    int64_t in_flight = 0;
    for (size_t i : offloads) {
      if (i >= k) break;
      if (copied_out[i] > now) {
        in_flight += moved[i];
      } else {
        landed = static_cast<int32_t>(i) + 1;
      }
    }
    sim.copies_out_landed[k] = landed;
    moment(held + in_flight + mem[k].keep_bytes, k, false);
    now += static_cast<double>(problem.blocks[k].forward_ns);
    if (offloaded[k]) {
      d2h_free = std::max(now, d2h_free) +
                 TransferNs(moved[k], problem.d2h_bytes_per_s);
      copied_out[k] = d2h_free;
    }
    held += share[k];
  }
  below[n] = held;
  // Backward begins once every copy out has landed (the runtime waits at
  // the end of forward), so no copy out overlaps it.
  double exposed = std::max(0.0, d2h_free - now);
  now = std::max(now, d2h_free);

  // Backward. A copy back starts as soon as it is asked for: the previous
  // one has landed by then (its block's backward waited for it).
  std::vector<double> arrives(n, 0);  // when each copy back lands
  auto prefetch = [&](size_t i, double issued) {
    arrives[i] =
        issued + TransferNs(moved[i], problem.h2d_bytes_per_s);
  };
  if (n > 0 && offloaded[n - 1]) prefetch(n - 1, now);
  for (size_t j = n; j-- > 0;) {
    double begin = now;
    if (offloaded[j] && arrives[j] > begin) {
      exposed += arrives[j] - begin;
      begin = arrives[j];
    }
    if (j > 0 && offloaded[j - 1]) prefetch(j - 1, begin);
    // (A checkpoint block j sent to host is back: below[j] counts it.)
    int64_t bytes = below[j] + mem[j].backward_bytes;
    // The last block's original output is still held (by the loss) while
    // a recompute rebuilds it (measured: collector_torch_test).
    const bool recomputes = Recomputes(actions[j]);
    if (j + 1 == n && recomputes) bytes += mem[j].output_bytes;
    // The block below, prefetched during this backward, is back whole.
    if (j > 0 && offloaded[j - 1]) bytes += moved[j - 1];
    moment(bytes, j, true);
    now = begin + static_cast<double>(mem[j].backward_ns) +
          (recomputes ? static_cast<double>(problem.blocks[j].forward_ns) : 0);
  }
  if (n == 0) sim.peak_bytes = problem.base_bytes;
  sim.exposed_transfer_ns = static_cast<int64_t>(std::ceil(exposed));
  return sim;
}

int64_t PredictedPeakBytes(const PlanProblem& problem,
                           const std::vector<Action>& actions) {
  return SimulateStep(problem, actions).peak_bytes;
}

int64_t PredictedPeakBytesV1(const PlanProblem& problem,
                             const std::vector<Action>& actions) {
  int64_t retained = 0;
  int64_t rematerialised = 0;  // the max term
  for (size_t i = 0; i < problem.blocks.size(); ++i) {
    const BlockCost& b = problem.blocks[i];
    switch (actions[i]) {
      case Action::kKeep:
        retained += b.act_bytes;
        break;
      case Action::kRecompute:
      case Action::kRecomputeOffload:
        retained += b.input_bytes;
        rematerialised = std::max(rematerialised, b.act_bytes - b.input_bytes);
        break;
      case Action::kOffload:
        rematerialised = std::max(rematerialised, b.act_bytes);
        break;
    }
  }
  return problem.base_bytes + retained + rematerialised;
}

int64_t RecomputeNs(const PlanProblem& problem,
                    const std::vector<Action>& actions) {
  int64_t ns = 0;
  for (size_t i = 0; i < problem.blocks.size(); ++i) {
    if (Recomputes(actions[i])) ns += problem.blocks[i].forward_ns;
  }
  return ns;
}

void ScorePlan(const PlanProblem& problem, Plan* plan) {
  const StepSimulation sim = SimulateStep(problem, plan->actions);
  plan->predicted_peak_bytes = sim.peak_bytes;
  plan->recompute_ns = sim.recompute_ns;
  plan->exposed_transfer_ns = sim.exposed_transfer_ns;
  plan->copies_out_landed = sim.copies_out_landed;
  plan->feasible = plan->predicted_peak_bytes <= problem.limit_bytes();
}

std::vector<Action> SafeActions(const ModelSpec& model) {
  std::vector<Action> actions;
  actions.reserve(model.blocks.size());
  for (const BlockSpec& b : model.blocks) {
    actions.push_back(b.checkpointable ? Action::kRecompute : Action::kKeep);
  }
  return actions;
}

Plan SafePlan(const ModelSpec& model, const std::string& solver,
              const std::string& reason) {
  Plan plan;
  plan.solver = solver;
  plan.actions = SafeActions(model);
  for (const BlockSpec& b : model.blocks) {
    plan.reasons.push_back(b.checkpointable ? reason : "not checkpointable");
  }
  plan.feasible = false;
  plan.predicted_peak_bytes = 0;
  return plan;
}

const char* PlanSourceName(PlanSource source) {
  switch (source) {
    case PlanSource::kLocalCache:
      return "local_cache";
    case PlanSource::kPlanner:
      return "planner";
    case PlanSource::kCollect:
      return "collect";
    case PlanSource::kLastGood:
      return "last_good";
    case PlanSource::kSafe:
      return "safe";
  }
  return "unknown";
}

}  // namespace remat
