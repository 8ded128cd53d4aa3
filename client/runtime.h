// The checkpoint runtime: applies a plan to a model's blocks.
//
// CheckpointedSequential holds a model's blocks in forward order and runs
// them under a plan: KEEP blocks run normally, RECOMPUTE blocks run through
// Checkpoint (checkpoint.h). PlannedModel puts a Planner in front: per step
// it asks for a plan (PlanChooser: local cache, fallbacks), runs it, and on
// COLLECT measures every block with a BlockSampler and reports the sample.
//
//   auto seq = remat::CheckpointedSequential(
//       remat::RuntimeOptions().model_name("bert").feature_names({"batch",
//                                                                 "seq"}));
//   seq->push_back("embed", Embedding(...), /*checkpointable=*/false);
//   for (...) seq->push_back("layer" + i, EncoderLayer(...));
//   remat::PlannedModel planned(seq, &planner, PlannedModelOptions()
//                                                 .memory(&cuda_source));
//   auto step = planned.BeginStep({batch, seq_len}, budget_bytes);
//   torch::Tensor loss = step->forward(x).sum();  // or forward({x}, {mask})
//   loss.backward();
//   step->Finish();
//
// Blocks: any torch::nn module whose forward either takes one tensor and
// returns one, or is
//
//   remat::Tensors forward(const remat::Tensors& inputs,
//                          const remat::Tensors& side);
//
// taking the previous block's outputs (the step's inputs for the first
// block) and the step's side inputs (what every block reads: an attention
// mask, positions), and returning its outputs (hidden states, a residual
// stream beside them, a mask passed on). Side inputs are passed per step
// (forward(inputs, side, actions)); a one-tensor block does not see them.
// Inputs and side inputs that need gradients get them through every
// action; those that do not (integer ids, a boolean mask) pass through.
//
// Thread safety: a CheckpointedSequential is used by one training thread at
// a time. A PlannedModel runs one step at a time.
#ifndef REMAT_CLIENT_RUNTIME_H_
#define REMAT_CLIENT_RUNTIME_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <c10/core/TensorOptions.h>
#include <torch/arg.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/container/any.h>
#include <torch/nn/pimpl.h>

#include "absl/status/status.h"
#include "client/block_function.h"
#include "client/offload.h"
#include "client/plan_chooser.h"
#include "client/planner.h"
#include "client/step_lifecycle.h"
#include "collector/block_observer.h"
#include "collector/block_sampler.h"
#include "collector/memory_source.h"
#include "collector/trace_recorder.h"
#include "planner/model.h"
#include "planner/plan.h"

namespace remat {

struct RuntimeOptions {
  // Save and restore RNG state around recomputes (needed for dropout).
  TORCH_ARG(bool, preserve_rng) = true;
  // ModelSpec::name: how the planner knows this model.
  TORCH_ARG(std::string, model_name) = "model";
  // ModelSpec::feature_names: the batch features plans depend on.
  TORCH_ARG(std::vector<std::string>, feature_names) = {};
};

namespace internal {
// Whether module type M has forward(const Tensors&, const Tensors&)
// returning Tensors (a block of several tensors).
template <typename M, typename = void>
struct TakesTensors : std::false_type {};
template <typename M>
struct TakesTensors<M, std::void_t<decltype(std::declval<M&>().forward(
                           std::declval<const Tensors&>(),
                           std::declval<const Tensors&>()))>>
    : std::is_convertible<decltype(std::declval<M&>().forward(
                              std::declval<const Tensors&>(),
                              std::declval<const Tensors&>())),
                          Tensors> {};
}  // namespace internal

class CheckpointedSequentialImpl : public torch::nn::Module {
 public:
  explicit CheckpointedSequentialImpl(RuntimeOptions options = {});

  // Appends a block; `name` must be unique and non-empty (it is also the
  // submodule's name, so parameters read "name.weight").
  template <typename ModuleType>
  void push_back(const std::string& name, ModuleType module,
                 bool checkpointable = true) {
    static_assert(!std::is_same_v<ModuleType, torch::nn::AnyModule>,
                  "an AnyModule hides which forward it has: use "
                  "push_back(name, module, checkpointable, takes_tensors)");
    constexpr bool takes_tensors =
        internal::TakesTensors<typename ModuleType::ContainedType>::value;
    push_back(name, torch::nn::AnyModule(std::move(module)), checkpointable,
              takes_tensors);
  }
  // The same for a module already type-erased; `takes_tensors`: its
  // forward is forward(const Tensors&, const Tensors&) -> Tensors, else it
  // takes and returns one tensor.
  void push_back(const std::string& name, torch::nn::AnyModule module,
                 bool checkpointable, bool takes_tensors);

  // Runs the blocks under `actions` (one per block) on the step's `inputs`
  // and `side` inputs; returns the last block's outputs. TORCH_CHECK fails
  // on a wrong count, OFFLOAD without a copy engine, RECOMPUTE of a
  // non-checkpointable block, or a one-tensor block given several. With
  // grad mode off every block just runs: there is nothing to keep. An
  // OFFLOAD block's saved tensors go to host and are prefetched when the
  // backward of the block above it begins (at the end of forward for the
  // last block). Before block i's forward it waits until the copies to host
  // of every block below copies_out_landed[i] have landed (the plan's
  // Plan::copies_out_landed; empty: no such waits), and it returns once
  // every copy to host has landed, as the memory model has it (plan.h).
  Tensors forward(const Tensors& inputs, const Tensors& side,
                  const std::vector<Action>& actions,
                  const std::vector<int32_t>& copies_out_landed = {});
  // One tensor in, one out.
  torch::Tensor forward(const torch::Tensor& input,
                        const std::vector<Action>& actions);
  // Every block KEEP: the model without checkpointing.
  torch::Tensor forward(const torch::Tensor& input);

  // How long the last forward waited before blocks for copies to host its
  // copies_out_landed counted landed (not the wait at its end, which the
  // memory model predicts): time the estimates said those copies would
  // hide behind compute. 0 when it did not wait.
  int64_t last_copy_wait_ns() const { return last_copy_wait_ns_; }

  // The model as the planner sees it.
  ModelSpec spec() const;
  size_t size() const { return blocks_.size(); }
  const RuntimeOptions& options() const { return options_; }

  // Called around each KEEP block's forward and each RECOMPUTE block's
  // recompute in backward; null (default) for none. Not owned. Used for
  // collection: a step under the safe plan measures every block once.
  void set_observer(BlockObserver* observer) { observer_ = observer; }
  BlockObserver* observer() const { return observer_; }

  // Where OFFLOAD blocks send their saved tensors (client/offload.h); null
  // (default): a plan with OFFLOAD fails. Not owned; must outlive every
  // backward of a forward that offloaded.
  void set_copy_engine(kernels::CopyEngine* engine,
                       OffloadOptions options = {}) {
    copy_engine_ = engine;
    offload_options_ = options;
  }
  kernels::CopyEngine* copy_engine() const { return copy_engine_; }

  // Bytes of the model's parameters, their gradients and buffers (each
  // storage counted once): what a relative memory source cannot see.
  int64_t resident_bytes() const;

  // Runs block `index` alone (no checkpointing, no observer).
  Tensors forward_block(size_t index, const Tensors& inputs,
                        const Tensors& side = {});
  torch::Tensor forward_block(size_t index, const torch::Tensor& input);

 private:
  struct Block {
    std::string name;
    torch::nn::AnyModule module;
    bool checkpointable;
    bool takes_tensors;  // forward(Tensors, Tensors), else one tensor
  };
  // Block `block` on `inputs` and `side`.
  static Tensors Call(Block& block, const Tensors& inputs, const Tensors& side);

  RuntimeOptions options_;
  std::vector<Block> blocks_;
  BlockObserver* observer_ = nullptr;
  kernels::CopyEngine* copy_engine_ = nullptr;
  OffloadOptions offload_options_;
  int64_t last_copy_wait_ns_ = 0;  // see last_copy_wait_ns
};

TORCH_MODULE(CheckpointedSequential);

// What PlannedModel::BeginStep throws when no plan fits a batch under its
// budget (StepLifecycleOptions::OverBudget::kRaise): split the batch
// (FitBatch, batch_fit.h), raise the budget, or set over_budget kRun.
class BudgetError : public std::runtime_error {
 public:
  BudgetError(const std::string& message, int64_t smallest_peak_bytes)
      : std::runtime_error(message),
        smallest_peak_bytes_(smallest_peak_bytes) {}
  // The least peak any plan reaches for the batch.
  int64_t smallest_peak_bytes() const { return smallest_peak_bytes_; }

 private:
  int64_t smallest_peak_bytes_;
};

struct PlannedModelOptions {
  // Aliases: TORCH_ARG spells its setter's parameter `const T&`.
  using MemorySourcePtr = MemorySource*;
  using TraceRecorderPtr = TraceRecorder*;

  // Where step peaks and (on COLLECT) block sizes are measured. Not owned;
  // null: no measurement, so COLLECT steps run the safe plan and report
  // nothing, and outcomes carry no peak.
  TORCH_ARG(MemorySourcePtr, memory) = nullptr;
  // Collected samples are also appended here when set. Not owned.
  TORCH_ARG(TraceRecorderPtr, trace) = nullptr;
  TORCH_ARG(PlanChooserOptions, chooser) = {};
  // Report each planned step's measured peak and time (calibration).
  TORCH_ARG(bool, report_outcomes) = true;
  // With a copy engine (CheckpointedSequentialImpl::set_copy_engine), the
  // samples of the first link_probe_steps COLLECT steps also carry the
  // host link's bandwidth: one timed copy of link_probe_bytes each way,
  // after the step's backward (so the step's own times are unaffected), on
  // the input's device. Either 0: none.
  TORCH_ARG(int64_t, link_probe_bytes) = int64_t{16} << 20;
  TORCH_ARG(int, link_probe_steps) = 8;
  // The first steps whose COLLECT samples are not reported (>= 0;
  // StepLifecycleOptions::warmup_steps says why).
  TORCH_ARG(int, warmup_steps) = 1;
  // A step run by RunStep that runs out of memory (c10::OutOfMemoryError)
  // runs again under a safer plan, at most max_oom_retries times.
  TORCH_ARG(bool, retry_on_oom) = true;
  TORCH_ARG(int, max_oom_retries) = 2;
  // When no plan fits a batch (StepLifecycleOptions::over_budget):
  // BeginStep throws BudgetError (kRaise), or runs it over budget (kRun).
  TORCH_ARG(StepLifecycleOptions::OverBudget, over_budget) =
      StepLifecycleOptions::OverBudget::kRaise;
};

class PlannedModel {
 public:
  // `planner` must outlive this object.
  PlannedModel(CheckpointedSequential model, Planner* planner,
               PlannedModelOptions options = {});

  // One training step. Create with BeginStep, call forward (once), run
  // backward, then Finish. Destroying an unfinished step finishes it
  // (discarding the status). Must be created and destroyed on one thread.
  // What a step measures and reports is the StepLifecycle's
  // (step_lifecycle.h), the same for the Python package.
  class Step {
   public:
    ~Step();
    Step(const Step&) = delete;
    Step& operator=(const Step&) = delete;

    // The model's forward under this step's plan (once per step).
    Tensors forward(const Tensors& inputs, const Tensors& side = {});
    torch::Tensor forward(const torch::Tensor& input);
    // Ends measurement and reports: the sample for a COLLECT step, the
    // outcome otherwise (StepSession::Finish). A step during which the
    // memory source saw an allocation fail (out of memory, caught by the
    // trainer) reports an outcome with out_of_memory set and a peak of at
    // least the budget, so the planner's next plan for that bucket is
    // safer. Errors from the planner are returned (and never thrown);
    // training can go on regardless. The destructor finishes a step not
    // finished yet; while an exception unwinds it only records the
    // outcome, which the next BeginStep reports (no planner call during
    // unwinding).
    absl::Status Finish();

    const PlanChoice& choice() const { return session_->choice(); }
    // The sample of a finished COLLECT step, if one was measured.
    const std::optional<Sample>& sample() const { return session_->sample(); }
    // The step's measured peak (needs a memory source), after Finish.
    std::optional<int64_t> measured_peak_bytes() const {
      return session_->measured_peak_bytes();
    }
    // The allocator's reserved peak (CUDA), after Finish of a planned step.
    std::optional<int64_t> reserved_peak_bytes() const {
      return session_->reserved_peak_bytes();
    }
    // How often RunStep ran this step's batch again before it ran through.
    int retries() const { return retries_; }

   private:
    friend class PlannedModel;
    Step(PlannedModel* owner, std::unique_ptr<StepSession> session);
    // Ends a run that threw c10::OutOfMemoryError: reported now
    // (StepSession::FailOutOfMemory).
    void FailOutOfMemory();

    PlannedModel* owner_;
    std::unique_ptr<StepSession> session_;
    const int uncaught_at_start_;
    torch::TensorOptions input_options_;  // where the link probe lives
    int retries_ = 0;
  };

  std::unique_ptr<Step> BeginStep(const Features& features,
                                  int64_t budget_bytes);

  // `run(step)` (the model's forward through step.forward, then backward)
  // as one step, finished, and the step that ran through. With
  // retry_on_oom (the default), a run that throws c10::OutOfMemoryError
  // is not the end: what it held is freed as the exception leaves it
  // (its graph, saved tensors, copies to host), its outcome is reported,
  // the gradients are put back as they were before it and so is the RNG
  // state, and `run` runs again under a safer plan (StepLifecycle::Retry:
  // the planner's next, else the safe plan with checkpoints sent to
  // host), at most max_oom_retries times; then the error is rethrown.
  // `accumulate`: the step adds to gradients earlier micro-batches left,
  // kept as a host copy to put back; otherwise the step starts from none
  // or zeroed ones (zero_grad), and a failed run's are undone so. Throws
  // BudgetError as BeginStep does.
  std::unique_ptr<Step> RunStep(const Features& features, int64_t budget_bytes,
                                const std::function<void(Step&)>& run,
                                bool accumulate = false);

  CheckpointedSequential& model() { return model_; }
  PlanChooser& chooser() { return chooser_; }

 private:
  CheckpointedSequential model_;
  PlannedModelOptions options_;
  PlanChooser chooser_;
  StepLifecycle lifecycle_;
  // The chooser accepts OFFLOAD when the model has a copy engine (set it
  // before wrapping the model).
  static PlanChooserOptions ChooserOptions(
      const PlannedModelOptions& options,
      const CheckpointedSequentialImpl& model);
  static StepLifecycleOptions LifecycleOptions(
      const PlannedModelOptions& options);
};

}  // namespace remat

#endif  // REMAT_CLIENT_RUNTIME_H_
