// The one step lifecycle every runtime runs (the C++ PlannedModel, Python's
// PlannedModule and remat.torch.apply): plan, run, measure, report, fall
// back. A runtime runs the blocks under the plan (that is LibTorch's or
// PyTorch's business); this decides what a step measures and what it
// reports, so a fix to either lands once. No LibTorch here.
//
//   StepLifecycle lifecycle(&planner, &chooser, options);
//   std::unique_ptr<StepSession> step = lifecycle.Begin(features, budget);
//   BlockSampler* sampler = step->Start(resident_bytes);
//   ... forward (a COLLECT step observes its blocks with `sampler`) ...
//   ... backward ...
//   absl::Status s = step->Finish(copy_wait_ns, probe);
//
// A step an exception unwinds calls Unwind instead: it measures, and its
// outcome is reported by the next Begin (no planner call while unwinding).
// A step the runtime refuses (a block run out of order) calls Discard:
// nothing of it is reported.
//
// Thread safety: a StepLifecycle and its sessions are used by one training
// thread, one step at a time (a session's BlockSampler may be called from
// autograd's thread during backward, as BlockSampler allows).
#ifndef REMAT_CLIENT_STEP_LIFECYCLE_H_
#define REMAT_CLIENT_STEP_LIFECYCLE_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "client/plan_chooser.h"
#include "client/planner.h"
#include "collector/block_sampler.h"
#include "collector/memory_source.h"
#include "collector/trace_recorder.h"
#include "kernels/copy_engine.h"
#include "planner/model.h"

namespace remat {

struct StepLifecycleOptions {
  // Where step peaks and (on COLLECT) block sizes are measured. Not owned;
  // null: no measurement, so COLLECT steps run the safe plan and report
  // nothing, and outcomes carry no peak.
  MemorySource* memory = nullptr;
  // Collected samples are also appended here when set. Not owned.
  TraceRecorder* trace = nullptr;
  // Report each planned step's measured peak and time (calibration).
  bool report_outcomes = true;
  // With a link probe (Finish's), the samples of the first
  // link_probe_steps COLLECT steps also carry the host link's bandwidth:
  // one timed copy of link_probe_bytes each way, after the step's backward
  // (so the step's own times are unaffected). Either 0: none.
  int64_t link_probe_bytes = int64_t{16} << 20;
  int link_probe_steps = 8;
  // The first warmup_steps steps (>= 0) do not report what a COLLECT among
  // them measured: they run before the optimizer's state and the gradients
  // that every later step starts with exist, so their base (what is alive
  // before the step) is not the training's. Their outcomes are reported.
  int warmup_steps = 1;
  // When the planner says no plan fits a batch under its budget
  // (PlanChoice::smallest_peak_bytes): kRaise, Begin refuses the step
  // before anything runs (RESOURCE_EXHAUSTED naming the features, the
  // budget and the smallest reachable peak, which SmallestPeakBytes
  // reads), so the caller can split the batch (FitBatch, batch_fit.h);
  // kRun, the step runs the fallback plan over budget, warned about once.
  enum class OverBudget { kRaise, kRun };
  OverBudget over_budget = OverBudget::kRaise;
};

// Times the host link with `bytes` on the step's device (the runtime
// allocates the probe there: kernels::MeasureLink with its copy engine).
using LinkProbe =
    std::function<absl::StatusOr<kernels::LinkBandwidth>(int64_t bytes)>;

class StepSession;

class StepLifecycle {
 public:
  // `planner` and `chooser` (the chooser asks `planner` about its model)
  // must outlive this.
  StepLifecycle(Planner* planner, PlanChooser* chooser,
                StepLifecycleOptions options = {});

  // Starts a step: reports the outcome an unwound step left, then chooses
  // the plan for `features` under `budget_bytes` (PlanChooser: local cache,
  // planner, fallbacks). Fails only where no plan fits and over_budget is
  // kRaise (RESOURCE_EXHAUSTED, see StepLifecycleOptions).
  // `held_bytes`: what the step holds from before that a step of this
  // model does not (the gradients earlier micro-batches of its batch
  // accumulated, alive through its forward). The plan is chosen for
  // budget_bytes - held_bytes; the outcome reports the peak less
  // held_bytes, as the plan predicted it; a COLLECT sample is not
  // reported (its base is not the training's).
  absl::StatusOr<std::unique_ptr<StepSession>> Begin(const Features& features,
                                                     int64_t budget_bytes,
                                                     int64_t held_bytes = 0);

  // The same batch again after `failed` ran out of memory (and reported
  // so, FailOutOfMemory): after a plan of the planner's, its next plan
  // when the actions differ; else the safe plan with every checkpoint it
  // can send to host sent (with a copy engine, PlanChooserOptions::
  // offload_checkpoints). The caller bounds how often it retries. Fails
  // as Begin does (no plan fits).
  absl::StatusOr<std::unique_ptr<StepSession>> Retry(const StepSession& failed);

  const StepLifecycleOptions& options() const { return options_; }

 private:
  friend class StepSession;
  // Warns once, to stderr, that reporting failed; training goes on.
  void WarnReport(const absl::Status& status);

  Planner* const planner_;
  PlanChooser* const chooser_;
  const StepLifecycleOptions options_;
  bool warned_report_ = false;
  bool warned_over_budget_ = false;
  int link_probes_ = 0;     // COLLECT steps that measured the link
  int steps_started_ = 0;   // for warmup_steps
  // Left by a step an exception unwound; reported by the next Begin.
  std::optional<Outcome> pending_outcome_;
};

// One step of a StepLifecycle.
class StepSession {
 public:
  StepSession(const StepSession&) = delete;
  StepSession& operator=(const StepSession&) = delete;

  const PlanChoice& choice() const { return choice_; }
  const Features& features() const { return features_; }
  int64_t budget_bytes() const { return budget_bytes_; }

  // Starts measuring, once, just before the step's first allocation that
  // counts: the clock, the memory source's peak and, for a COLLECT step,
  // the sampler. `resident_bytes`: what was alive before the step that a
  // relative memory source cannot see (the model, the optimizer's state,
  // the batch); ignored by an absolute one. Returns the sampler a COLLECT
  // step observes its blocks with (null otherwise, or without a memory
  // source).
  BlockSampler* Start(int64_t resident_bytes);
  bool started() const { return started_; }

  // Ends a step that ran through: measures, then reports the sample of a
  // COLLECT step (after a warm-up step: not) or the outcome of a planned
  // one. A step during which the memory source saw an allocation fail
  // reports an outcome with out_of_memory set and the peak measured until
  // then. With a memory source that sees the allocator's reserved bytes
  // (CUDA), the outcome of a step during which the allocator reserved
  // more from the device carries the reserved peak too (a step its cache
  // served says nothing of fragmentation). `copy_wait_ns`: how long
  // forward waited for copies its plan counted landed (PlanChoice::copies_out_landed). `probe`: times the
  // host link for the first COLLECT steps (null: never). Errors from the
  // planner are returned and warned about once; training goes on.
  absl::Status Finish(int64_t copy_wait_ns, const LinkProbe& probe = nullptr);
  // Ends a step an exception unwound: measures; its outcome is reported by
  // the lifecycle's next Begin. No planner call.
  void Unwind(int64_t copy_wait_ns);
  // Ends a step whose forward or backward ran out of memory, caught by the
  // runtime after it released what the step held: measures and reports
  // the outcome now (out_of_memory set, the peak measured until then),
  // so that the planner's next plan (StepLifecycle::Retry) knows.
  absl::Status FailOutOfMemory(int64_t copy_wait_ns);
  // Ends a step the runtime refused: stops measuring, reports nothing.
  void Discard();
  bool finished() const { return finished_; }

  // The sample of a finished COLLECT step, if one was measured.
  const std::optional<Sample>& sample() const { return sample_; }
  // The step's measured peak (needs a memory source), once finished.
  std::optional<int64_t> measured_peak_bytes() const { return peak_bytes_; }
  // The allocator's reserved peak, counted as measured_peak_bytes, once a
  // planned step that made the allocator reserve more finished (CUDA).
  std::optional<int64_t> reserved_peak_bytes() const { return reserved_bytes_; }

 private:
  friend class StepLifecycle;
  StepSession(StepLifecycle* owner, Features features, PlanChoice choice,
              int64_t budget_bytes, int64_t held_bytes, bool warmup);
  // Reports what Measure left (the sample or `outcome`); `status`, or
  // what reporting returned when something was reported.
  absl::Status Report(absl::Status status, const LinkProbe& probe,
                      const std::optional<Outcome>& outcome);
  // Stops measuring; builds the sample or, in `outcome`, the outcome.
  absl::Status Measure(int64_t copy_wait_ns, bool unwinding,
                       std::optional<Outcome>* outcome);
  void MeasureLink(const LinkProbe& probe);

  StepLifecycle* const owner_;
  const Features features_;
  const PlanChoice choice_;
  const int64_t budget_bytes_;
  const int64_t held_bytes_;
  const bool warmup_;  // or held bytes: a sample is not the training's
  bool started_ = false;
  bool finished_ = false;
  bool out_of_memory_ = false;  // FailOutOfMemory
  std::unique_ptr<MemorySource::Attachment> attachment_;
  std::unique_ptr<BlockSampler> sampler_;
  int64_t ooms_at_start_ = 0;
  int64_t resident_bytes_ = 0;
  int64_t begin_bytes_ = 0;
  std::chrono::steady_clock::time_point start_;
  std::optional<Sample> sample_;
  std::optional<int64_t> peak_bytes_;
  // The allocator's reserved bytes when the step started (after the
  // peak's reset), and their peak, counted as peak_bytes_ is, when the
  // step made the allocator reserve more.
  std::optional<int64_t> reserved_at_start_;
  std::optional<int64_t> reserved_bytes_;
};

}  // namespace remat

#endif  // REMAT_CLIENT_STEP_LIFECYCLE_H_
