// The collect-then-plan transition with the real planning core: a model
// starts unknown, its first steps COLLECT (safe plan, measured during
// recompute), the samples refit the estimator, and later steps get plans
// from the solver that fit the budget.
#include <cstdint>
#include <string>
#include <vector>

// LibTorch first: Debian's build pulls in glog, whose CHECK macro would
// otherwise replace Catch's.
#include <torch/torch.h>
#undef CHECK
#include <catch2/catch.hpp>

#include "client/planner.h"
#include "client/runtime.h"
#include "collector/cpu_memory_tracker.h"

namespace remat {

// Catch prints failed comparisons of action vectors.
std::ostream& operator<<(std::ostream& out, Action action) {
  return out << ActionName(action);
}

namespace {

struct MlpImpl : torch::nn::Module {
  explicit MlpImpl(int64_t d)
      : a(register_module("a", torch::nn::Linear(d, 4 * d))),
        b(register_module("b", torch::nn::Linear(4 * d, d))) {}
  torch::Tensor forward(const torch::Tensor& x) {
    return x + b(torch::relu(a(x)));
  }
  torch::nn::Linear a;
  torch::nn::Linear b;
};
TORCH_MODULE(Mlp);

CheckpointedSequential MakeModel() {
  torch::manual_seed(0);
  auto seq = CheckpointedSequential(
      RuntimeOptions().model_name("mlp_chain").feature_names({"batch"}));
  for (int i = 0; i < 6; ++i)
    seq->push_back("mlp" + std::to_string(i), Mlp(64));
  return seq;
}

absl::Status RunStep(PlannedModel::Step& step, int64_t batch) {
  torch::manual_seed(batch);
  step.forward(torch::randn({batch, 64})).sum().backward();
  return step.Finish();
}

TEST_CASE("steps collect until the estimator is trusted, then plan") {
  LocalPlanner planner;  // default CoreOptions: degree-2 fit over "batch"
  CpuMemoryTracker tracker;
  PlannedModel planned(MakeModel(), &planner,
                       PlannedModelOptions().memory(&tracker));
  const int64_t huge = int64_t{1} << 40;

  // Distinct batch sizes spanning what later steps ask for.
  int collects = 0;
  for (int64_t batch : {16, 24, 32, 40, 48, 56, 64, 72}) {
    auto step = planned.BeginStep({double(batch)}, huge);
    if (!step->choice().collect()) break;
    ++collects;
    REQUIRE(RunStep(*step, batch).ok());
    REQUIRE(step->sample().has_value());
    CHECK(step->sample()->blocks.size() == 6);
  }
  REQUIRE(collects >= 1);
  // The tracker measures the CPU: the samples are its profile's.
  auto state = planner.core().GetModelState("mlp_chain", "cpu");
  REQUIRE(state.ok());
  // Every collect step's sample but the warm-up step's (the first).
  CHECK(state->num_samples == static_cast<size_t>(collects) - 1);

  // Trusted now: a plan, and with room to spare it keeps everything.
  // (The loop above may have asked for batch 40 already, so the answer can
  // come from the local cache.)
  auto roomy = planned.BeginStep({40}, huge);
  const PlanSource source = roomy->choice().source;
  REQUIRE(
      (source == PlanSource::kPlanner || source == PlanSource::kLocalCache));
  CHECK(roomy->choice().actions == std::vector<Action>(6, Action::kKeep));
  REQUIRE(RunStep(*roomy, 40).ok());
  const int64_t keep_peak = *roomy->measured_peak_bytes();

  // A budget between the safe plan's peak and keeping everything: the
  // solver recomputes some blocks, and the step fits.
  const int64_t budget = keep_peak * 3 / 4;
  std::unique_ptr<PlannedModel::Step> tight;
  try {
    tight = planned.BeginStep({40}, budget);
  } catch (const BudgetError& e) {
    // The planner judged the budget infeasible: the step is refused before
    // it runs, with the least peak any plan reaches.
    CHECK(e.smallest_peak_bytes() > budget);
    return;
  }
  REQUIRE(tight->choice().source == PlanSource::kPlanner);
  int recomputed = 0;
  for (Action a : tight->choice().actions)
    recomputed += a == Action::kRecompute;
  CHECK(recomputed >= 1);
  REQUIRE(RunStep(*tight, 40).ok());
  CHECK(*tight->measured_peak_bytes() <= budget);
}

}  // namespace
}  // namespace remat
