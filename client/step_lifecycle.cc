#include "client/step_lifecycle.h"

#include <algorithm>
#include <cstdio>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"

namespace remat {
namespace {

bool SendsCopies(const std::vector<Action>& actions) {
  return std::any_of(actions.begin(), actions.end(), [](Action a) {
    return a == Action::kOffload || a == Action::kRecomputeOffload;
  });
}

}  // namespace

StepLifecycle::StepLifecycle(Planner* planner, PlanChooser* chooser,
                             StepLifecycleOptions options)
    : planner_(planner), chooser_(chooser), options_(options) {}

void StepLifecycle::WarnReport(const absl::Status& status) {
  if (status.ok() || warned_report_) return;
  warned_report_ = true;
  std::fprintf(stderr,
               "remat: reporting step results for model '%s' failed (%s); "
               "training continues. Further failures are not logged.\n",
               chooser_->model().name.c_str(), status.ToString().c_str());
}

absl::StatusOr<std::unique_ptr<StepSession>> StepLifecycle::Begin(
    const Features& features, int64_t budget_bytes, int64_t held_bytes) {
  if (held_bytes < 0 || held_bytes >= budget_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "held_bytes: ", held_bytes, " is outside [0, budget_bytes = ",
        budget_bytes, "); pass the bytes of the gradients earlier "
        "micro-batches accumulated"));
  }
  if (pending_outcome_) {
    WarnReport(planner_->ReportOutcome(*pending_outcome_));
    pending_outcome_.reset();
    chooser_->InvalidatePlans();
  }
  PlanChoice choice = chooser_->Choose(features, budget_bytes - held_bytes);
  if (choice.smallest_peak_bytes) {
    *choice.smallest_peak_bytes += held_bytes;
    if (options_.over_budget == StepLifecycleOptions::OverBudget::kRaise) {
      return WithSmallestPeakBytes(
          absl::ResourceExhaustedError(absl::StrCat(
              choice.planner_status.message(),
              "; or split it into micro-batches (FitBatch; in Python "
              "handle.fit_batch), or let such steps run over budget "
              "(over_budget run)")),
          *choice.smallest_peak_bytes);
    }
    if (!warned_over_budget_) {
      warned_over_budget_ = true;
      std::fprintf(stderr,
                   "remat: model '%s': %s; running the %s plan over budget "
                   "(over_budget run). Further such steps are not logged.\n",
                   chooser_->model().name.c_str(),
                   std::string(choice.planner_status.message()).c_str(),
                   PlanSourceName(choice.source));
    }
  }
  const bool warmup = steps_started_ < options_.warmup_steps;
  ++steps_started_;
  return std::unique_ptr<StepSession>(
      new StepSession(this, features, std::move(choice), budget_bytes,
                      held_bytes, warmup || held_bytes > 0));
}

absl::StatusOr<std::unique_ptr<StepSession>> StepLifecycle::Retry(
    const StepSession& failed) {
  // After a plan of the planner's: its next plan, once it differs.
  std::vector<int64_t> bucket = failed.choice_.bucket;
  if (failed.choice_.source != PlanSource::kSafe) {
    absl::StatusOr<std::unique_ptr<StepSession>> next =
        Begin(failed.features_, failed.budget_bytes_, failed.held_bytes_);
    if (!next.ok() || (*next)->choice_.actions != failed.choice_.actions) {
      return next;
    }
  }
  // The plan that failed again, or the safe plan failed (an error that
  // may not recur: the caller bounds the retries): the safe plan, with
  // every checkpoint it can send to host sent.
  const PlanChooserOptions& o = chooser_->options();
  std::vector<Action> safest = SafeActions(chooser_->model());
  if (o.offload && o.offload_checkpoints) {
    for (Action& a : safest) {
      if (a == Action::kRecompute) a = Action::kRecomputeOffload;
    }
  }
  PlanChoice choice;
  choice.actions = std::move(safest);
  choice.source = PlanSource::kSafe;
  choice.bucket = std::move(bucket);
  choice.planner_status = absl::ResourceExhaustedError(
      "the planner's plan ran out of memory");
  return std::unique_ptr<StepSession>(new StepSession(
      this, failed.features_, std::move(choice), failed.budget_bytes_,
      failed.held_bytes_, /*warmup=*/true));
}

StepSession::StepSession(StepLifecycle* owner, Features features,
                         PlanChoice choice, int64_t budget_bytes,
                         int64_t held_bytes, bool warmup)
    : owner_(owner),
      features_(std::move(features)),
      choice_(std::move(choice)),
      budget_bytes_(budget_bytes),
      held_bytes_(held_bytes),
      warmup_(warmup) {}

BlockSampler* StepSession::Start(int64_t resident_bytes) {
  if (started_ || finished_) return nullptr;
  started_ = true;
  start_ = std::chrono::steady_clock::now();
  MemorySource* memory = owner_->options_.memory;
  if (memory == nullptr) return nullptr;
  ooms_at_start_ = memory->out_of_memory_count();
  attachment_ = memory->Attach();
  if (!memory->absolute()) resident_bytes_ = resident_bytes;
  if (choice_.collect()) {
    sampler_ = std::make_unique<BlockSampler>(
        memory, static_cast<int>(choice_.actions.size()));
    sampler_->BeginStep(resident_bytes_);
    return sampler_.get();
  }
  memory->reset_peak();
  begin_bytes_ = memory->current_bytes();
  reserved_at_start_ = memory->reserved_peak_bytes();
  return nullptr;
}

absl::Status StepSession::Measure(int64_t copy_wait_ns, bool unwinding,
                                  std::optional<Outcome>* outcome) {
  finished_ = true;
  if (!started_) return absl::OkStatus();
  const int64_t step_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                              std::chrono::steady_clock::now() - start_)
                              .count();
  MemorySource* memory = owner_->options_.memory;
  const bool oom = out_of_memory_ || (memory != nullptr &&
                                      memory->out_of_memory_count() >
                                          ooms_at_start_);
  absl::Status status;
  if (sampler_ != nullptr && !oom && !unwinding) {
    absl::StatusOr<Sample> sample = sampler_->EndStep(features_);
    if (sample.ok()) {
      sample_ = *std::move(sample);
      sample_->device = owner_->chooser_->options().device;
      peak_bytes_ = sample_->peak_bytes;
    } else {
      status = sample.status();
    }
  } else if (memory != nullptr && (sampler_ == nullptr || oom)) {
    auto counted = [&](int64_t bytes) {
      return memory->absolute() ? bytes : resident_bytes_ + bytes - begin_bytes_;
    };
    peak_bytes_ = counted(memory->peak_bytes());
    // Only a step that made the allocator reserve more from the device
    // shows what it needs beyond what is allocated; its cache served the
    // others (and holds what earlier, larger steps left).
    std::optional<int64_t> reserved = memory->reserved_peak_bytes();
    if (reserved && reserved_at_start_ && *reserved > *reserved_at_start_) {
      reserved_bytes_ = counted(*reserved);
    }
  }
  // An allocation failed: the step needed more than it held when it did,
  // so what was measured until then is a lower bound of its peak, and
  // reported as one (0 without a memory source: counted, not calibrated).
  // Not the budget: an error the plan did not cause (memory held outside
  // the step, fragmentation, a fault injected) would otherwise raise
  // calibration for every batch until nothing fits; the retry is made
  // safer by Retry, not by calibration.
  if (oom) peak_bytes_ = peak_bytes_.value_or(0);
  attachment_.reset();
  if ((!choice_.collect() || oom) && owner_->options_.report_outcomes &&
      peak_bytes_.has_value()) {
    Outcome o;
    o.model = owner_->chooser_->model().name;
    o.device = owner_->chooser_->options().device;
    o.features = features_;
    o.actions = choice_.actions;
    // As the plan predicted it: without what the step held from before.
    o.measured_peak_bytes = std::max<int64_t>(0, *peak_bytes_ - held_bytes_);
    // The planner keeps reserved over allocated free below later budgets.
    if (reserved_bytes_ && o.measured_peak_bytes > 0) {
      o.reserved_peak_bytes =
          std::max(o.measured_peak_bytes, *reserved_bytes_ - held_bytes_);
    }
    o.step_ns = step_ns;
    o.out_of_memory = oom;
    o.plan_source = choice_.source;
    // Only a plan that sends copies to host can wait for them.
    if (SendsCopies(o.actions)) o.copy_wait_ns = std::min(copy_wait_ns, step_ns);
    *outcome = std::move(o);
  }
  return status;
}

void StepSession::MeasureLink(const LinkProbe& probe) {
  StepLifecycle& owner = *owner_;
  const int64_t bytes = owner.options_.link_probe_bytes;
  if (!probe || bytes <= 0 ||
      owner.link_probes_ >= owner.options_.link_probe_steps) {
    return;
  }
  ++owner.link_probes_;
  absl::StatusOr<kernels::LinkBandwidth> link = probe(bytes);
  // A link that could not be measured (a full host pool) leaves the
  // sample without it; the sample itself is still good.
  if (!link.ok()) return;
  // A copy too fast for the clock would read beyond the planner's range.
  sample_->d2h_bytes_per_s = std::min(link->d2h_bytes_per_s, kMaxLinkBytesPerS);
  sample_->h2d_bytes_per_s = std::min(link->h2d_bytes_per_s, kMaxLinkBytesPerS);
}

absl::Status StepSession::Finish(int64_t copy_wait_ns, const LinkProbe& probe) {
  if (finished_) return absl::OkStatus();
  std::optional<Outcome> outcome;
  absl::Status status = Measure(copy_wait_ns, /*unwinding=*/false, &outcome);
  return Report(std::move(status), probe, outcome);
}

absl::Status StepSession::FailOutOfMemory(int64_t copy_wait_ns) {
  if (finished_) return absl::OkStatus();
  out_of_memory_ = true;
  std::optional<Outcome> outcome;
  absl::Status status = Measure(copy_wait_ns, /*unwinding=*/true, &outcome);
  return Report(std::move(status), nullptr, outcome);
}

absl::Status StepSession::Report(absl::Status status, const LinkProbe& probe,
                                 const std::optional<Outcome>& outcome) {
  StepLifecycle& owner = *owner_;
  if (sample_ && !warmup_) {
    MeasureLink(probe);
    status = owner.planner_->ReportSamples(owner.chooser_->model().name,
                                           {*sample_});
    // The planner refit: ask it again rather than reuse older plans.
    owner.chooser_->InvalidatePlans();
    if (owner.options_.trace != nullptr) {
      absl::Status traced = owner.options_.trace->Record(*sample_);
      if (status.ok()) status = traced;
    }
  }
  if (outcome) {
    status = owner.planner_->ReportOutcome(*outcome);
    // The planner recalibrates on a peak above its prediction (or an out
    // of memory); plans cached here were sized without that, so ask it
    // again from the next step on.
    if (outcome->out_of_memory ||
        (choice_.predicted_peak_bytes > 0 &&
         outcome->measured_peak_bytes > choice_.predicted_peak_bytes)) {
      owner.chooser_->InvalidatePlans();
    }
  }
  owner.WarnReport(status);
  return status;
}

void StepSession::Unwind(int64_t copy_wait_ns) {
  if (finished_) return;
  std::optional<Outcome> outcome;
  Measure(copy_wait_ns, /*unwinding=*/true, &outcome).IgnoreError();
  if (outcome) owner_->pending_outcome_ = std::move(outcome);
}

void StepSession::Discard() {
  finished_ = true;
  attachment_.reset();
  sampler_.reset();
}

}  // namespace remat
