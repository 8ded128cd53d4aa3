#include "planner/solver.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "planner/exact_solver.h"
#include "planner/units.h"

namespace remat {
namespace {

const char kNotCheckpointable[] = "kept: not checkpointable";

// What recomputing block i frees until backward (memory model v2).
int64_t SavingBytes(const PlanProblem& problem, size_t i) {
  const BlockMemory m = MemoryOf(problem, i);
  return m.keep_bytes - m.recompute_bytes;
}

std::string RecomputeReason(const PlanProblem& problem, size_t i) {
  return "recomputed: saves " + FormatBytes(SavingBytes(problem, i)) +
         " for " + FormatNs(problem.blocks[i].forward_ns);
}

// Scores the plan and writes one reason per block: non-checkpointable and
// recomputed blocks get the shared wording, kept ones `keep_reason(i)`.
template <typename KeepReason>
Plan Finish(const PlanProblem& problem, std::vector<Action> actions,
            const std::string& solver, KeepReason keep_reason) {
  Plan plan;
  plan.solver = solver;
  plan.actions = std::move(actions);
  plan.reasons.reserve(problem.blocks.size());
  for (size_t i = 0; i < problem.blocks.size(); ++i) {
    const BlockCost& b = problem.blocks[i];
    if (!b.checkpointable) {
      plan.actions[i] = Action::kKeep;  // the contract, whatever the solver
      plan.reasons.push_back(kNotCheckpointable);
    } else if (plan.actions[i] == Action::kRecompute) {
      plan.reasons.push_back(RecomputeReason(problem, i));
    } else if (plan.actions[i] == Action::kOffload) {
      plan.reasons.push_back(
          "offloaded: sends " +
          FormatBytes(MemoryOf(problem, i).transfer_bytes) +
          " to host and back");
    } else {
      plan.reasons.push_back(keep_reason(i));
    }
  }
  ScorePlan(problem, &plan);
  return plan;
}

// Keeps every block: the baseline with no recompute.
class NoneSolver final : public Solver {
 public:
  std::string name() const override { return "none"; }
  Plan Solve(const PlanProblem& problem) const override {
    return Finish(
        problem, std::vector<Action>(problem.blocks.size(), Action::kKeep),
        name(), [](size_t) { return "kept: solver keeps every block"; });
  }
};

// Recomputes every checkpointable block, whether or not it helps: what
// per-layer gradient checkpointing does.
class AllSolver final : public Solver {
 public:
  std::string name() const override { return "all"; }
  Plan Solve(const PlanProblem& problem) const override {
    std::vector<Action> actions(problem.blocks.size(), Action::kRecompute);
    return Finish(problem, std::move(actions), name(),
                  [](size_t) { return std::string(); });
  }
};

// Chen et al. 2016, "Training Deep Nets with Sublinear Memory Cost": split
// the chain into k = round(sqrt(n)) segments of ceil(n / k) blocks, store
// only the tensors at segment boundaries, and rerun each segment in
// backward. Mapped onto per-block actions: the last block of each segment
// KEEPs (its output is the stored boundary the next segment restarts
// from); every other checkpointable block of the segment RECOMPUTEs. The
// per-block model still counts each recomputed block's input x_i as kept
// (Chen's segment would rebuild those too), so the plan is scored as the
// runtime would run it block by block. Budget-blind by design.
class SqrtSolver final : public Solver {
 public:
  std::string name() const override { return "sqrt"; }
  Plan Solve(const PlanProblem& problem) const override {
    const size_t n = problem.blocks.size();
    std::vector<Action> actions(n, Action::kKeep);
    if (n > 0) {
      const size_t segments = std::max<size_t>(
          1, static_cast<size_t>(std::llround(std::sqrt(double(n)))));
      const size_t seg_len = (n + segments - 1) / segments;
      for (size_t i = 0; i < n; ++i) {
        const bool boundary = (i % seg_len == seg_len - 1) || i + 1 == n;
        if (!boundary) actions[i] = Action::kRecompute;
      }
    }
    return Finish(problem, std::move(actions), name(),
                  [](size_t) { return "kept: segment boundary"; });
  }
};

// A port of Mimose's greedy scheduler (arXiv 2209.02478; its public code,
// GreedyStrategy.get_checkpoint_module). Each checkpointable block's
// "memory" is what recomputing it frees, s_i = a_i - x_i. The deficit is
// the keep-everything peak minus the limit. Blocks are sorted by memory,
// largest first, and grouped: a group starts at a block and takes every
// following block with at least 90% of its memory; inside a group, later
// blocks come first. Then, until the deficit is covered: walk the list from
// its end (smallest group, earliest block) and take the first block whose
// memory covers the remaining deficit; if none does, take the list's last
// block (as the original does: the smallest group's earliest block, not
// the largest). Taken blocks leave the list.
//
// Known flaw, kept on purpose: the stopping rule is "the end of forward
// fits", P0 - sum s_i <= limit, as in the original. Under the memory model
// (plan.h) a block's backward holds everything below it plus its own
// activations and gradients, so which blocks are recomputed matters, not
// only how much they free: its plans can be over budget. They are scored
// by the shared ScorePlan, which reports that honestly.
class MimoseGreedySolver final : public Solver {
 public:
  std::string name() const override { return "mimose_greedy"; }
  Plan Solve(const PlanProblem& problem) const override {
    const size_t n = problem.blocks.size();
    std::vector<Action> actions(n, Action::kKeep);
    int64_t p0 = problem.base_bytes;
    for (const BlockCost& b : problem.blocks) p0 += b.act_bytes;
    const int64_t reduce = p0 - problem.limit_bytes();
    if (reduce > 0) {
      struct Entry {
        int64_t memory;
        size_t index;
      };
      std::vector<Entry> sorted;
      for (size_t i = 0; i < n; ++i) {
        const BlockCost& b = problem.blocks[i];
        if (b.checkpointable)
          sorted.push_back({b.act_bytes - b.input_bytes, i});
      }
      // module_memory.sort(reverse=True) on (memory, name) pairs.
      std::sort(sorted.begin(), sorted.end(),
                [](const Entry& x, const Entry& y) {
                  return x.memory != y.memory ? x.memory > y.memory
                                              : x.index > y.index;
                });
      // split_bucket: groups of near-equal memory, later blocks first.
      std::vector<Entry> list;
      for (size_t i = 0; i < sorted.size();) {
        const double threshold = static_cast<double>(sorted[i].memory) * 0.9;
        size_t end = i + 1;
        while (end < sorted.size() &&
               static_cast<double>(sorted[end].memory) >= threshold) {
          ++end;
        }
        std::vector<Entry> bucket(sorted.begin() + i, sorted.begin() + end);
        std::sort(
            bucket.begin(), bucket.end(),
            [](const Entry& x, const Entry& y) { return x.index > y.index; });
        list.insert(list.end(), bucket.begin(), bucket.end());
        i = end;
      }
      int64_t covered = 0;
      while (covered < reduce && !list.empty()) {
        size_t pick = list.size() - 1;  // get_fit_module's fallback
        for (size_t r = list.size(); r-- > 0;) {
          if (list[r].memory >= reduce - covered) {
            pick = r;
            break;
          }
        }
        covered += list[pick].memory;
        actions[list[pick].index] = Action::kRecompute;
        list.erase(list.begin() + static_cast<std::ptrdiff_t>(pick));
      }
    }
    return Finish(problem, std::move(actions), name(), [](size_t) {
      return "kept: not needed to cover the deficit (greedy)";
    });
  }
};

// DELTA's rule (Tang et al., "DELTA: Dynamically Optimizing GPU Memory
// beyond Tensor Recomputation"), as a baseline: release blocks in order of
// the memory they free per unit of cost until the step fits; a block is
// swapped (OFFLOAD) when its transfer, less what the backward of the block
// above can hide, costs less than its recompute, else recomputed. Greedy:
// it stops at the first plan that fits, and when none does it releases
// every candidate.
class DeltaSolver final : public Solver {
 public:
  std::string name() const override { return "delta"; }
  Plan Solve(const PlanProblem& problem) const override {
    const size_t n = problem.blocks.size();
    struct Candidate {
      size_t block;
      Action action;
      int64_t freed_bytes;
      double cost_ns;
    };
    std::vector<Candidate> candidates;
    for (size_t i = 0; i + 1 < n; ++i) {
      if (!problem.blocks[i].checkpointable) continue;
      const BlockMemory m = MemoryOf(problem, i);
      Candidate c{i, Action::kRecompute, m.keep_bytes - m.recompute_bytes,
                  static_cast<double>(problem.blocks[i].forward_ns)};
      if (problem.has_link() && m.transfer_bytes > 0) {
        const double back_ns = static_cast<double>(m.transfer_bytes) /
                               problem.h2d_bytes_per_s * 1e9;
        const double hidden_ns =
            static_cast<double>(MemoryOf(problem, i + 1).backward_ns);
        const double exposed_ns = std::max(0.0, back_ns - hidden_ns);
        if (exposed_ns < c.cost_ns) {
          c = {i, Action::kOffload, m.transfer_bytes, exposed_ns};
        }
      }
      if (c.freed_bytes > 0) candidates.push_back(c);
    }
    // Most bytes per ns first (a free release first of all).
    std::sort(candidates.begin(), candidates.end(),
              [](const Candidate& x, const Candidate& y) {
                const double lhs = static_cast<double>(x.freed_bytes) *
                                   std::max(y.cost_ns, 1e-9);
                const double rhs = static_cast<double>(y.freed_bytes) *
                                   std::max(x.cost_ns, 1e-9);
                return lhs != rhs ? lhs > rhs : x.block < y.block;
              });
    std::vector<Action> actions(n, Action::kKeep);
    for (const Candidate& c : candidates) {
      if (PredictedPeakBytes(problem, actions) <= problem.limit_bytes()) break;
      actions[c.block] = c.action;
    }
    return Finish(problem, std::move(actions), name(), [](size_t) {
      return "kept: not needed to fit (DELTA's order)";
    });
  }
};

// The exact solver (exact_solver.cc). `name` lets static_max share it.
class ExactSolver final : public Solver {
 public:
  ExactSolver(std::string name, const internal::ExactOptions& options)
      : name_(std::move(name)), options_(options) {}
  std::string name() const override { return name_; }
  Plan Solve(const PlanProblem& problem) const override {
    internal::ExactStats stats;
    std::vector<Action> actions =
        internal::SolveExact(problem, options_, &stats);
    const bool feasible = !stats.infeasible;
    Plan plan = Finish(problem, std::move(actions), name_, [&](size_t i) {
      if (SavingBytes(problem, i) <= 0 || i + 1 == problem.blocks.size()) {
        return "kept: recomputing would not lower the peak";
      }
      return feasible ? "kept: fits under budget"
                      : "kept: recomputing would not lower the peak";
    });
    plan.optimality_gap_ns =
        stats.stopped_at_limit
            ? std::max<int64_t>(0, plan.recompute_ns +
                                       plan.exposed_transfer_ns -
                                       stats.lower_bound_ns)
            : 0;
    if (stats.stopped_at_limit) {
      const std::string note = absl::StrCat(
          internal::kStoppedAtLimitNote, " (at most ", *plan.optimality_gap_ns,
          " ns above the best possible)");
      for (size_t i = 0; i < problem.blocks.size(); ++i) {
        if (problem.blocks[i].checkpointable) plan.reasons[i] += note;
      }
    }
    return plan;
  }

 private:
  std::string name_;
  internal::ExactOptions options_;
};

}  // namespace

namespace {

// Every solver, in the order SolverNames lists them: the one list.
struct SolverEntry {
  const char* name;
  std::unique_ptr<Solver> (*make)();
};
constexpr SolverEntry kSolvers[] = {
    {"none", [] { return std::unique_ptr<Solver>(new NoneSolver()); }},
    {"all", [] { return std::unique_ptr<Solver>(new AllSolver()); }},
    {"sqrt", [] { return std::unique_ptr<Solver>(new SqrtSolver()); }},
    {"static_max",
     [] {
       return std::unique_ptr<Solver>(
           new ExactSolver("static_max", internal::ExactOptions()));
     }},
    {"mimose_greedy",
     [] { return std::unique_ptr<Solver>(new MimoseGreedySolver()); }},
    {"delta", [] { return std::unique_ptr<Solver>(new DeltaSolver()); }},
    {"exact",
     [] {
       return std::unique_ptr<Solver>(
           new ExactSolver("exact", internal::ExactOptions()));
     }},
};

}  // namespace

std::vector<std::string> SolverNames() {
  std::vector<std::string> names;
  for (const SolverEntry& e : kSolvers) names.push_back(e.name);
  return names;
}

absl::StatusOr<std::unique_ptr<Solver>> NewSolver(const std::string& name) {
  for (const SolverEntry& e : kSolvers) {
    if (name == e.name) return e.make();
  }
  return absl::InvalidArgumentError(
      "unknown solver \"" + name +
      "\"; known solvers: " + absl::StrJoin(SolverNames(), ", "));
}

namespace internal {

std::unique_ptr<Solver> NewExactSolver(const ExactOptions& options,
                                       const std::string& name) {
  return std::unique_ptr<Solver>(new ExactSolver(name, options));
}

}  // namespace internal
}  // namespace remat
