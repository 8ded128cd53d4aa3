// A small trainer built with CMake against an installed remat: a chain of
// two residual MLP blocks trained on batches of varying size under a
// budget, measured on the CPU, with the in-process planner or, given
// `--planner ADDRESS` ("host:port" or "unix:/path"), rematd's. The first
// steps collect; then every step runs a plan. Exits 1 when no step ran a
// planner's plan or a planned step went over its budget, 2 on a bad
// argument.
#include <torch/torch.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>

#include "client/planner.h"
#include "client/remote_planner.h"
#include "client/runtime.h"
#include "collector/cpu_memory_tracker.h"

namespace {

struct BlockImpl : torch::nn::Module {
  explicit BlockImpl(int64_t width)
      : up(register_module("up", torch::nn::Linear(width, 4 * width))),
        down(register_module("down", torch::nn::Linear(4 * width, width))) {}
  torch::Tensor forward(const torch::Tensor& x) {
    return x + down(torch::gelu(up(x)));
  }
  torch::nn::Linear up, down;
};
TORCH_MODULE(Block);

}  // namespace

int main(int argc, char** argv) {
  std::unique_ptr<remat::Planner> planner;
  if (argc == 3 && std::string(argv[1]) == "--planner") {
    remat::RemotePlannerOptions options;
    options.address = argv[2];
    planner = std::make_unique<remat::RemotePlanner>(options);
  } else if (argc == 1) {
    planner = std::make_unique<remat::LocalPlanner>();
  } else {
    std::fprintf(stderr, "usage: %s [--planner ADDRESS]\n", argv[0]);
    return 2;
  }
  constexpr int64_t kWidth = 64;
  torch::manual_seed(0);
  auto model = remat::CheckpointedSequential(
      remat::RuntimeOptions().model_name("cmake_mlp").feature_names({"batch"}));
  model->push_back("block0", Block(kWidth));
  model->push_back("block1", Block(kWidth));
  torch::optim::SGD optimizer(model->parameters(), /*lr=*/0.01);

  remat::CpuMemoryTracker memory;
  remat::PlannedModel planned(model, planner.get(),
                              remat::PlannedModelOptions().memory(&memory));
  // What the largest batch (512 rows) needs with the smallest plan, the
  // parameters and their gradients included, is 3.1 MiB with LibTorch 1.13
  // (less with 2.x): a budget a little above it, which plans meet.
  const int64_t budget_bytes = 3584 << 10;
  int collected = 0, planned_steps = 0, fallbacks = 0, over = 0,
      recomputed = 0;
  int64_t max_peak = 0;
  const int64_t sizes[] = {64, 256, 128, 512, 192, 384, 96, 320};
  for (int step_index = 0; step_index < 40; ++step_index) {
    const int64_t batch = sizes[step_index % 8];
    auto step = planned.BeginStep({static_cast<double>(batch)}, budget_bytes);
    torch::Tensor x = torch::randn({batch, kWidth});
    torch::Tensor loss = step->forward(x).pow(2).mean();
    loss.backward();
    if (auto s = step->Finish(); !s.ok()) {
      std::fprintf(stderr, "step %d: %s\n", step_index, s.ToString().c_str());
      return 1;
    }
    optimizer.step();
    optimizer.zero_grad();
    if (step->choice().collect()) {
      ++collected;
      continue;
    }
    ++planned_steps;
    // A plan the planner could not give in time (the safe plan, or the
    // last good one): counted, not fatal.
    fallbacks += step->choice().source == remat::PlanSource::kLastGood ||
                 step->choice().source == remat::PlanSource::kSafe;
    const int64_t peak = step->measured_peak_bytes().value_or(0);
    max_peak = std::max(max_peak, peak);
    if (peak > budget_bytes) ++over;
    for (remat::Action a : step->choice().actions) {
      recomputed += a == remat::Action::kRecompute;
    }
  }
  std::printf("cmake example: %d steps collected, %d planned (%d blocks "
              "recomputed in all, %d fallbacks), %d over the %lld-byte "
              "budget (max %lld)\n",
              collected, planned_steps, recomputed, fallbacks, over,
              static_cast<long long>(budget_bytes),
              static_cast<long long>(max_peak));
  return planned_steps > fallbacks && over == 0 ? 0 : 1;
}
