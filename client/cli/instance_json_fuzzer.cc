// Fuzzes ParseInstanceJson (client/cli/instance_json.h): an instance that
// parses keeps every documented bound, and errors are INVALID_ARGUMENT. Then
// what `remat solve` does with it: every solver's plan has one action per
// block, keeps the non-checkpointable ones, and is scored consistently.
#include <cstdint>
#include <string>

#include "client/cli/instance_json.h"
#include "planner/model.h"
#include "planner/plan.h"
#include "planner/solver.h"
#include "planner/units.h"
#include "third_party/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto problem = remat::cli::ParseInstanceJson(text);
  if (!problem.ok()) {
    REMAT_FUZZ_CHECK(problem.status().code() ==
                     absl::StatusCode::kInvalidArgument);
    return 0;
  }
  auto in_range = [](int64_t v) {
    return v >= 0 && v <= remat::kMaxParsedBytes;
  };
  REMAT_FUZZ_CHECK(in_range(problem->base_bytes));
  REMAT_FUZZ_CHECK(in_range(problem->budget_bytes));
  REMAT_FUZZ_CHECK(in_range(problem->margin_bytes));
  REMAT_FUZZ_CHECK(problem->margin_bytes <= problem->budget_bytes);
  REMAT_FUZZ_CHECK(problem->blocks.size() <=
                   static_cast<size_t>(remat::kMaxBlocks));
  for (const remat::BlockCost& b : problem->blocks) {
    REMAT_FUZZ_CHECK(!b.name.empty() && b.name.size() <= remat::kMaxNameLength);
    REMAT_FUZZ_CHECK(in_range(b.act_bytes));
    REMAT_FUZZ_CHECK(in_range(b.input_bytes));
    REMAT_FUZZ_CHECK(b.forward_ns >= 0 && b.forward_ns <= (int64_t{1} << 50));
  }
  // Small instances only: a run must stay fast.
  if (problem->blocks.size() > 64) return 0;
  for (const std::string& name : remat::SolverNames()) {
    auto solver = remat::NewSolver(name);
    REMAT_FUZZ_CHECK(solver.ok());
    const remat::Plan plan = (*solver)->Solve(*problem);
    REMAT_FUZZ_CHECK(plan.actions.size() == problem->blocks.size());
    for (size_t i = 0; i < plan.actions.size(); ++i) {
      if (!problem->blocks[i].checkpointable) {
        REMAT_FUZZ_CHECK(plan.actions[i] == remat::Action::kKeep);
      }
    }
    REMAT_FUZZ_CHECK(plan.predicted_peak_bytes ==
                     remat::PredictedPeakBytes(*problem, plan.actions));
    REMAT_FUZZ_CHECK(plan.feasible ==
                     (plan.predicted_peak_bytes <= problem->limit_bytes()));
  }
  return 0;
}
