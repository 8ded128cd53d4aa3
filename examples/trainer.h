// The demo trainer: trains one of the demo's models (models.h: the
// encoder classifier, the GPT-like decoder, the ResNet-like CNN) on the synthetic workload
// (workload.h) through the checkpoint runtime, one plan per batch, and
// records what each step did. Shared by the `train` binary
// and the end-to-end strategy benchmark.
//
// Memory is measured by the device's memory source: on CPU the CPU tracker
// (exact bytes from LibTorch's allocator), on CUDA the caching allocator's
// statistics (a build with --config=cuda). A step's peak counts the
// parameters, their gradients and the batch plus everything allocated
// during forward and backward; the budget applies to that number.
#ifndef REMAT_EXAMPLES_TRAINER_H_
#define REMAT_EXAMPLES_TRAINER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "client/planner.h"
#include "examples/models.h"
#include "examples/workload.h"

namespace remat {

// The default budget: this fraction of the no-checkpoint peak at the
// longest sequence, so long batches must recompute and short ones need not.
inline constexpr double kDefaultBudgetFraction = 0.45;

// The default budget fraction for the demo model `model_name`: 0.45, or
// 0.75 for the cnn, whose safe plan (every block recomputed) needs 0.67
// of its no-checkpoint peak at the largest image.
double DefaultBudgetFraction(const std::string& model_name);

struct TrainerOptions {
  // The model to train (DemoModelNames: "encoder", "decoder") and its
  // sizes. The constructor throws on an unknown name.
  std::string model_name = "encoder";
  TransformerOptions model;
  CnnOptions cnn;
  // Where the model trains: "cpu", or "cuda" / "cuda:N" (needs a build
  // with --config=cuda and a GPU; the constructor throws otherwise).
  std::string device = "cpu";
  WorkloadOptions workload;
  double learning_rate = 0.05;  // SGD: no optimizer state to account for
  uint64_t seed = 1;            // model initialisation and token data
  // The solver the planner is asked for (empty: the planner's default).
  std::string solver;
  // An emulated host link for OFFLOAD (CPU only), GB/s per direction: the
  // model gets a CPU copy engine held to that bandwidth, which collect
  // steps measure for the planner. 0: no engine on the CPU; plans never
  // offload there. On a GPU the model always has the CUDA engine.
  double host_link_gb_per_s = 0;
  // False: no copy engine on any device; plans never offload.
  bool offload = true;
  // When set, collected samples are written to this trace CSV, replacing
  // it (the format bench:estimator_accuracy --trace replays).
  std::string trace_path;
  // A batch no plan fits (or whose collect step the planner's estimate
  // puts over the budget) runs as micro-batches that fit (FitBatch).
  // False (benchmarks: every strategy runs the same batches): it runs
  // whole, over budget where need be, as the budget-blind strategies do.
  bool split_batches = false;
  // Every this many steps (0: never), the step's first run throws
  // c10::OutOfMemoryError after its forward, as an allocator out of
  // memory would: the runtime runs it again (PlannedModel::RunStep).
  int inject_oom_every = 0;
};

// What one training step did.
struct StepRecord {
  int step = 0;
  int64_t batch = 0;
  int64_t seq = 0;     // 0 for images
  int64_t height = 0;  // images only
  int64_t width = 0;
  std::string plan;  // "collect", the solver's name, "safe", "last_good"
  bool collect = false;
  int recomputed_blocks = 0;
  int offloaded_blocks = 0;
  // RECOMPUTE_OFFLOAD blocks that sent their checkpoint to host (counted
  // in recomputed_blocks too).
  int checkpoints_sent = 0;
  int blocks = 0;
  // The plan, a letter per block from the first: K keep, R recompute,
  // O offload, S recompute and send the checkpoint to host.
  std::string actions;
  int64_t predicted_peak_bytes = 0;  // 0 when the plan has no prediction
  int64_t measured_peak_bytes = 0;
  // The allocator's reserved peak (allocated plus its cache) of a planned
  // step on a GPU; 0 where the memory source cannot tell.
  int64_t reserved_peak_bytes = 0;
  // Reserved over allocated that the planner keeps free below the budget
  // after the step, where the strategy's planner says (1: none).
  double reserved_ratio = 1;
  int64_t budget_bytes = 0;
  double step_ms = 0;  // forward + backward + optimizer, planning included
  double plan_ms = 0;  // choosing the plan and reporting results
  double loss = 0;
  // How long forward waited before blocks for copies to host its plan
  // counted landed: overlap the estimates promised and the device did not
  // give (CheckpointedSequential::last_copy_wait_ns).
  double copy_wait_ms = 0;
  // A batch no plan fits runs as this many micro-batches (gradient
  // accumulation); the peaks are the largest of theirs, the plan the
  // last one's.
  int micro_batches = 1;
  // Runs that ran out of memory and ran again (over its micro-batches).
  int retries = 0;
  bool over_budget() const { return measured_peak_bytes > budget_bytes; }
};

class Trainer {
 public:
  // `planner` must outlive the trainer.
  Trainer(const TrainerOptions& options, Planner* planner);
  ~Trainer();

  // Runs one training step on a fresh batch of `shape` under `budget_bytes`.
  StepRecord Step(const BatchShape& shape, int64_t budget_bytes);

  // The measured peak of one step at `shape` with no checkpointing, without
  // updating the model: what a budget is a fraction of.
  int64_t NoCheckpointPeakBytes(const BatchShape& shape);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// A planner for the budget-blind strategies ("none", "all", "sqrt"): it
// answers every request with that solver's plan and never collects.
class FixedPlanner final : public Planner {
 public:
  explicit FixedPlanner(std::string solver);
  absl::Status RegisterModel(const ModelSpec& spec) override;
  absl::StatusOr<PlanResult> GetPlan(const PlanRequest& request) override;
  absl::Status ReportSamples(const std::string&,
                             const std::vector<Sample>&) override {
    return absl::OkStatus();
  }
  absl::Status ReportOutcome(const Outcome&) override {
    return absl::OkStatus();
  }

 private:
  std::string solver_;
  ModelSpec spec_;
};

// One line per step for people: features, plan, predicted vs measured peak,
// time, loss, and a loud mark when the step broke the budget.
std::string FormatStep(const StepRecord& r, int total_steps);

}  // namespace remat

#endif  // REMAT_EXAMPLES_TRAINER_H_
