// PlannerCore: the whole planning pipeline behind one thread-safe object.
// Register models, feed samples, ask for a plan per batch, report outcomes.
// The in-process planner (client/) and the daemon (rematd) both wrap it; it
// has no LibTorch and no gRPC.
//
// A model's state is kept per device type (Sample::device): each
// (model, device) pair is a profile with its own samples, calibration and
// plans, and a plan for a device type comes only from samples measured on
// it. A request that names no device ("") has a profile of its own, so
// clients that never say keep working as before.
//
// GetPlan: validate -> bucket the features (round up) -> plan cache ->
// on a miss, the estimator's prediction -> if untrusted, COLLECT -> else
// the solver on the upper bounds -> cache.
#ifndef REMAT_PLANNER_CORE_H_
#define REMAT_PLANNER_CORE_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "planner/estimator.h"
#include "planner/model.h"
#include "planner/plan.h"
#include "planner/plan_cache.h"

namespace remat {

struct CoreOptions {
  EstimatorOptions estimator;
  // "remat" (default) or "mimose": the estimator every model gets.
  std::string estimator_kind = "remat";
  size_t plan_cache_capacity = 4096;  // plans, across all models
  // Bucket granularity per feature name; features not listed use
  // default_granularity. A plan is sized for its bucket's largest member,
  // so a coarser bucket trades headroom under the budget for cache hits:
  // on the demo encoder, buckets of 8 tokens put the step's predicted
  // peak a median 4.8% above the measured one, a plan per length 1.8%
  // (bench/README.md, bench:memory_model). A solve costs far less than a
  // recompute it saves, so by default every feature is bucketed in steps
  // of 1.
  // Mimose rounds sequence lengths up to 5 tokens.
  std::map<std::string, double> granularity;
  double default_granularity = kDefaultGranularity;
  // Kept free below every budget, as a fraction of it (fragmentation).
  double margin_fraction = 0.0;
  std::string default_solver = "exact";
  // How long one exact solve (exact, static_max) may search: past either
  // limit it returns the best plan found so far, which fits whenever any
  // plan fits, its reasons saying it is not proven optimal. The time limit
  // (0: none) is what rematd's core.solve_deadline_ms sets, so that a hard
  // request is answered within what its trainer waits; a request's own
  // deadline (PlanRequest::deadline) shortens it further.
  int64_t solve_max_nodes = int64_t{1} << 30;
  double solve_time_limit_ms = 0;
  // The host link's bandwidth in each direction, bytes per second, for
  // every problem planned (PlanProblem::d2h/h2d_bytes_per_s): with a link,
  // solvers that can offload (delta) weigh OFFLOAD against RECOMPUTE.
  // 0: each model's own measurement (the median of what its samples
  // measured, Prediction::d2h_bytes_per_s), or no link while none did.
  double host_link_bytes_per_s = 0;
  // Limits (RESOURCE_EXHAUSTED beyond them).
  int max_models = 256;
  int max_devices_per_model = 16;  // profiles per model
  int max_samples_per_model = 100000;
};

struct PlanRequest {
  std::string model;
  Features features;
  int64_t budget_bytes = 0;
  std::string solver;  // empty: CoreOptions::default_solver
  // False: no plan offloads (the caller has no copy engine), whatever link
  // the model measured or the options set.
  bool offload = true;
  // True: plans may send checkpoints to host (RECOMPUTE_OFFLOAD), which
  // the caller's runtime can run. Needs `offload` and a link.
  bool offload_checkpoints = false;
  // When the caller stops waiting (none: it waits). A miss whose deadline
  // has passed is not solved (DEADLINE_EXCEEDED), and a solve stops by it.
  std::optional<std::chrono::steady_clock::time_point> deadline;
  // The device type the plan is for (Sample::device): its profile's
  // samples are all it is planned from.
  std::string device;
};

struct PlanResult {
  // COLLECT: the estimator cannot vouch for these features yet; run the
  // batch with every checkpointable block recomputed and report samples.
  // `plan` is then that safe plan (solver "collect"), its predicted peak
  // and feasible flag from the untrusted estimate where it says something:
  // from a fit with the evidence to plan on, or for features within the
  // observed range (else 0 and false).
  bool collect = false;
  std::string collect_reason;
  std::shared_ptr<const Plan> plan;  // never null on success
  bool from_cache = false;
  std::vector<int64_t> bucket;  // the bucketed features the plan is sized for
};

// The smallest reachable peak that a GetPlan RESOURCE_EXHAUSTED ("no plan
// fits") carries, so a server can tell its caller without solving again;
// nullopt for other statuses.
std::optional<int64_t> SmallestPeakBytes(const absl::Status& status);
// `status` carrying `bytes` for SmallestPeakBytes (a client that learned
// the number from a daemon's trailer attaches it so).
absl::Status WithSmallestPeakBytes(absl::Status status, int64_t bytes);

struct Outcome {
  std::string model;
  Features features;
  std::vector<Action> actions;  // the plan the step ran
  // The step's measured peak. After an out-of-memory error, what was
  // measured until the failure: a lower bound on the true peak.
  int64_t measured_peak_bytes = 0;
  int64_t step_ns = 0;
  bool out_of_memory = false;
  // How the client chose the plan, when it says; only counted (metrics).
  std::optional<PlanSource> plan_source;
  // Time the forward waited for copies to host the plan counts landed,
  // when the client measured it; only counted (metrics).
  std::optional<int64_t> copy_wait_ns;
  // What the device's allocator held at the step's peak (allocated bytes
  // plus its cache; >= measured_peak_bytes), when the client measured it
  // (CUDA). Plans keep the ratio of the two free (ReservedMargin).
  std::optional<int64_t> reserved_peak_bytes;
  // The device type the step ran on (Sample::device): whose profile it
  // calibrates.
  std::string device;
};

struct ModelState {
  ModelSpec spec;
  std::string device;  // the profile's device type
  size_t num_samples = 0;      // fitted
  size_t num_quarantined = 0;  // held as outliers, not fitted
  std::vector<BlockFitQuality> fit_quality;
  std::vector<FeatureRange> observed_range;
  uint64_t outcomes = 0;
  uint64_t out_of_memory = 0;
  // Outcomes whose peak was held as an outlier (Estimator::JudgePeak), not
  // calibrated with.
  uint64_t outcomes_quarantined = 0;
  // Reserved over allocated bytes that plans keep free (ReservedMargin::
  // ratio; 1: none), and how many recent outcomes carried a reserved figure.
  double reserved_ratio = 1.0;
  size_t reserved_outcomes = 0;
};

// Called by a mutating call once the whole request is valid, before
// anything changes. A non-OK status aborts the call with that status and
// nothing changes. rematd writes its log here, so memory never holds what
// the log lacks. AddSamples and ReportOutcome run it under the model's lock
// (calls for the same model wait); RegisterModel outside every lock, so two
// concurrent registrations of one new name may both commit (rematd
// serialises registrations).
using CommitHook = std::function<absl::Status()>;

struct AddSamplesOptions {
  // CommitHook that also gets the estimator's verdict on the batch: rematd
  // logs it with the samples.
  std::function<absl::Status(const SampleVerdict&)> commit;
  // Replaying a log: apply this recorded verdict instead of judging the
  // batch again, so the model is rebuilt exactly.
  const SampleVerdict* verdict = nullptr;
  // Out: how many of the batch's samples are held as outliers.
  size_t* quarantined = nullptr;
  // One flag per sample, or null: the flagged samples are held as outliers
  // whatever the estimator's judgement (an imported profile's quarantine).
  const std::vector<bool>* hold = nullptr;
};

// What a profile holds, for moving it to another daemon.
struct ProfileSamples {
  std::shared_ptr<const ModelSpec> spec;  // never null
  std::vector<Sample> fitted;             // in the order they came
  std::vector<Sample> quarantined;        // held as outliers
};

struct ReportOutcomeOptions {
  // CommitHook that also gets the estimator's verdict on the outcome's peak
  // (true: held as an outlier): rematd logs it with the outcome.
  std::function<absl::Status(bool outlier)> commit;
  // Replaying a log: apply this recorded verdict instead of judging the
  // peak again, so calibration is rebuilt exactly.
  const bool* outlier = nullptr;
  // Out: whether the peak was held as an outlier.
  bool* held = nullptr;
};

// Thread-safe: every method may be called concurrently.
class PlannerCore {
 public:
  explicit PlannerCore(CoreOptions options = {});
  ~PlannerCore();

  // INVALID_ARGUMENT for a malformed spec; ALREADY_EXISTS when the name is
  // registered with a different shape; OK (idempotent, `commit` not called)
  // for the same shape; RESOURCE_EXHAUSTED past max_models.
  absl::Status RegisterModel(const ModelSpec& spec,
                             const CommitHook& commit = nullptr);

  // NOT_FOUND for an unknown model; INVALID_ARGUMENT naming the field
  // ("samples[i]...."; a batch's samples all name one device, the profile
  // they go to); RESOURCE_EXHAUSTED past max_samples_per_model, or past
  // max_devices_per_model for a device the model has no profile for. All
  // or nothing: the whole request is checked, and judged by the estimator
  // (Estimator::Judge: which samples it holds as outliers), before anything
  // changes. Then refits and invalidates the model's cached plans; returns
  // once the batch is fitted. A sample's peak_bytes is taken as measured
  // under the safe plan (every checkpointable block recomputed) and feeds
  // calibration, unless the sample is held as an outlier.
  // Batches of one model reported at once share a refit (a group commit:
  // each is judged and logged in turn, then one refit takes every batch
  // logged by then), which runs outside the model's lock: meanwhile plans
  // are predicted from the last fit and outcomes are taken. A batch is
  // judged against the last fit, not against batches logged before it
  // whose refit is still to come.
  absl::Status AddSamples(const std::string& model,
                          const std::vector<Sample>& samples,
                          const AddSamplesOptions& options = {});
  // NOT_FOUND, INVALID_ARGUMENT (features, budget, solver), or
  // RESOURCE_EXHAUSTED when no plan fits (exact and static_max), with the
  // smallest reachable peak in the message and, as a number, in the
  // status (SmallestPeakBytes). The baseline solvers' plans are
  // returned even when the memory model says they do not fit
  // (plan->feasible false). COLLECT is a successful result, not an error.
  // GetPlan = GetPlanIfCached, and GetPlanUncached on a miss.
  absl::StatusOr<PlanResult> GetPlan(const PlanRequest& request);
  // GetPlan's answer when it needs no estimate or solve: a cache hit, or a
  // request error. nullopt on a cache miss: then call GetPlanUncached. Never
  // waits for a solve in progress, so a server can answer it on its I/O
  // thread.
  std::optional<absl::StatusOr<PlanResult>> GetPlanIfCached(
      const PlanRequest& request);
  // GetPlan past the cache: estimates, solves, and caches the plan.
  // Identical concurrent misses (same model, bucket, budget and solver)
  // share one solve: the first solves, the others wait for it, each until
  // its own deadline (then DEADLINE_EXCEEDED). The solve itself holds no
  // lock that cache hits, other models or this model's reports need; a
  // plan solved before a refit is returned but not cached.
  absl::StatusOr<PlanResult> GetPlanUncached(const PlanRequest& request);

  // Like GetPlan, for explaining: returns the plan even when it does not fit
  // (plan->feasible false) and plans even when the estimator cannot vouch
  // for the features (collect true, collect_reason set, plan set).
  // FAILED_PRECONDITION when the model has no samples yet. Never cached.
  absl::StatusOr<PlanResult> Explain(const PlanRequest& request);

  // Feeds calibration with the outcome's measured peak, unless the
  // estimator holds it as an outlier (Estimator::JudgePeak: counted in
  // ModelState::outcomes_quarantined). NOT_FOUND / INVALID_ARGUMENT (the
  // whole outcome is checked, and its peak judged, before anything
  // changes).
  absl::Status ReportOutcome(const Outcome& outcome,
                             const ReportOutcomeOptions& options);
  absl::Status ReportOutcome(const Outcome& outcome,
                             const CommitHook& commit = nullptr);
  // Adds outcomes to the model's counters (ModelState) without feeding
  // calibration: what log compaction folded away. NOT_FOUND; INVALID_ARGUMENT
  // when out_of_memory or quarantined exceeds outcomes or a count would
  // overflow.
  absl::Status AddOutcomeCounts(const std::string& model, uint64_t outcomes,
                                uint64_t out_of_memory,
                                uint64_t quarantined = 0,
                                const std::string& device = "");

  std::vector<std::string> ListModels() const;
  // The device types `model` has a profile for, sorted ("" always: the
  // registration's). NOT_FOUND.
  absl::StatusOr<std::vector<std::string>> ListDevices(
      const std::string& model) const;
  // One profile's state (an empty one for a device never measured).
  absl::StatusOr<ModelState> GetModelState(
      const std::string& model, const std::string& device = "") const;
  // One profile's samples. NOT_FOUND for an unknown model; INVALID_ARGUMENT
  // for a bad device name.
  absl::StatusOr<ProfileSamples> GetProfileSamples(
      const std::string& model, const std::string& device) const;
  // Never null; shared, not copied: a spec never changes once registered.
  absl::StatusOr<std::shared_ptr<const ModelSpec>> GetModelSpec(
      const std::string& model) const;
  PlanCacheStats cache_stats() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace remat

#endif  // REMAT_PLANNER_CORE_H_
