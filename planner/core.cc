#include "planner/core.h"

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <exception>
#include <map>
#include <mutex>
#include <shared_mutex>
#include <unordered_map>
#include <utility>

#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "planner/exact_solver.h"
#include "planner/reserved_margin.h"
#include "planner/solver.h"
#include "planner/units.h"

namespace remat {
namespace {

absl::Status NotRegistered(const std::string& model) {
  return absl::NotFoundError(absl::StrCat(
      "model: \"", model, "\" is not registered; register it first"));
}

bool SameShape(const ModelSpec& a, const ModelSpec& b) {
  if (a.feature_names != b.feature_names) return false;
  if (a.blocks.size() != b.blocks.size()) return false;
  for (size_t i = 0; i < a.blocks.size(); ++i) {
    if (a.blocks[i].name != b.blocks[i].name ||
        a.blocks[i].checkpointable != b.blocks[i].checkpointable) {
      return false;
    }
  }
  return true;
}

// Everything ReportOutcome needs to hold before it changes anything: after
// this, calibration cannot refuse the report.
constexpr char kSmallestPeakPayload[] = "remat/smallest_peak_bytes";

absl::Status ValidateOutcome(const ModelSpec& spec, const Outcome& outcome) {
  if (auto s = ValidateFeatures(spec, outcome.features); !s.ok()) return s;
  if (outcome.actions.size() != spec.blocks.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "actions: has ", outcome.actions.size(), " entries; model \"",
        spec.name, "\" has ", spec.blocks.size(), " blocks"));
  }
  for (size_t i = 0; i < outcome.actions.size(); ++i) {
    if (!IsKnownAction(outcome.actions[i])) {
      return absl::InvalidArgumentError(
          absl::StrCat("actions[", i, "]: unknown action"));
    }
  }
  if (outcome.measured_peak_bytes < 0 ||
      outcome.measured_peak_bytes > kMaxPeakBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("measured_peak_bytes: ", outcome.measured_peak_bytes,
                     " is outside [0, 2^60]"));
  }
  if (outcome.reserved_peak_bytes &&
      (*outcome.reserved_peak_bytes < outcome.measured_peak_bytes ||
       *outcome.reserved_peak_bytes > kMaxPeakBytes)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "reserved_peak_bytes: ", *outcome.reserved_peak_bytes,
        " is outside [measured_peak_bytes = ", outcome.measured_peak_bytes,
        ", 2^60]; give what the allocator held (allocated plus its cache) at "
        "the step's peak, or leave it unset"));
  }
  if (outcome.step_ns < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "step_ns: ", outcome.step_ns, " is outside [0, 2^63)"));
  }
  if (outcome.copy_wait_ns &&
      (*outcome.copy_wait_ns < 0 || *outcome.copy_wait_ns > outcome.step_ns)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "copy_wait_ns: ", *outcome.copy_wait_ns, " is outside [0, step_ns = ",
        outcome.step_ns,
        "]; give the time the step waited for its copies to host, or leave "
        "it unset"));
  }
  return absl::OkStatus();
}

// The solvers that search (and can say that no plan fits); the others are
// budget-blind or greedy baselines that answer at once.
bool IsExactSolver(const std::string& name) {
  return name == "exact" || name == "static_max";
}

absl::Status DeadlinePassed(const std::string& what) {
  return absl::DeadlineExceededError(absl::StrCat(
      "the request's deadline passed ", what,
      "; the plan was not solved for it (ask again, or allow more time)"));
}

// A batch of samples judged and logged, waiting for a refit.
struct StagedBatch {
  uint64_t ticket = 0;
  std::vector<Sample> samples;
  SampleVerdict verdict;
};

bool FitsEverySample(const SampleVerdict& v) {
  return !v.release_quarantine &&
         std::none_of(v.quarantined.begin(), v.quarantined.end(),
                      [](bool q) { return q; });
}

// A sample's measured step peak ran the safe plan (that is how samples are
// collected): it calibrates the memory model like an outcome does, so the
// first real plan already accounts for what the model misses.
absl::Status CalibrateFromSamples(Estimator& estimator,
                                  const StagedBatch& batch) {
  const std::vector<Action> safe = SafeActions(estimator.model());
  for (size_t i = 0; i < batch.samples.size(); ++i) {
    const Sample& sample = batch.samples[i];
    if (!batch.verdict.quarantined.empty() && batch.verdict.quarantined[i]) {
      continue;
    }
    if (!sample.peak_bytes || *sample.peak_bytes == 0) continue;
    if (auto s = estimator.ReportPeak(sample.features, safe, *sample.peak_bytes);
        !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

// Applies `batches` (in log order) to `estimator` as replaying their log
// records does (rematd's replay): consecutive batches that fit every
// sample as one AddSamples (one refit), the others alone; then each
// batch's peaks feed calibration. One status per batch; a group that fails
// is applied again one batch at a time, so a batch's error is its own.
std::vector<absl::Status> FitBatches(Estimator& estimator,
                                     const std::vector<StagedBatch>& batches) {
  std::vector<absl::Status> status(batches.size());
  size_t i = 0;
  while (i < batches.size()) {
    size_t j = i + 1;
    if (FitsEverySample(batches[i].verdict)) {
      while (j < batches.size() && FitsEverySample(batches[j].verdict)) ++j;
    }
    if (j - i > 1) {
      std::vector<Sample> merged;
      for (size_t k = i; k < j; ++k) {
        merged.insert(merged.end(), batches[k].samples.begin(),
                      batches[k].samples.end());
      }
      if (estimator.AddSamples(merged, SampleVerdict()).ok()) {
        for (size_t k = i; k < j; ++k) {
          status[k] = CalibrateFromSamples(estimator, batches[k]);
        }
        i = j;
        continue;
      }
    }
    for (size_t k = i; k < j; ++k) {
      status[k] = estimator.AddSamples(batches[k].samples, batches[k].verdict);
      if (status[k].ok()) {
        status[k] = CalibrateFromSamples(estimator, batches[k]);
      }
    }
    i = j;
  }
  return status;
}

// A step's measured peak, as ReportOutcome feeds it to calibration.
struct ReportedPeak {
  Features features;
  std::vector<Action> actions;
  int64_t measured_peak_bytes = 0;
  bool outlier = false;  // held, not calibrated with
};

// The safe plan a COLLECT answer carries; with `send_checkpoints` every
// recomputed block after the first of a run sends its checkpoint to host
// (RECOMPUTE_OFFLOAD): less memory, measured the same way.
std::shared_ptr<const Plan> CollectPlan(const ModelSpec& spec,
                                        const std::string& reason,
                                        bool send_checkpoints) {
  Plan plan = SafePlan(spec, "collect", reason);
  if (send_checkpoints) {
    for (Action& a : plan.actions) {
      if (a == Action::kRecompute) a = Action::kRecomputeOffload;
    }
  }
  return std::make_shared<Plan>(std::move(plan));
}

}  // namespace

struct PlannerCore::Impl {
  explicit Impl(CoreOptions o)
      : options(std::move(o)), cache(options.plan_cache_capacity) {
    for (const std::string& name : SolverNames()) {
      solvers.emplace(name, *NewSolver(name));
    }
  }

  // One registered model. `mu` serialises its estimator. Plans are solved
  // outside it, from a problem built under it; `generation` counts the
  // changes that invalidate its plans, so a plan solved from an older
  // estimate is never cached.
  //
  // Refits are group commits: AddSamples judges and logs its batch under
  // `mu` and stages it; one call at a time (`fitting`) then refits a copy
  // of the estimator outside `mu` with every batch staged by then, and
  // swaps it in. So N trainers reporting at once cost about one refit
  // rather than N one after another, and plans keep being predicted (from
  // the last fit) while a refit runs.
  struct Model {
    std::shared_ptr<const ModelSpec> spec;  // never null; never changes
    std::string device;  // the profile's device type
    std::vector<double> granularity;  // per feature
    std::unique_ptr<Estimator> estimator;
    std::mutex mu;
    uint64_t generation = 0;  // under mu
    uint64_t outcomes = 0;
    uint64_t out_of_memory = 0;
    uint64_t outcomes_quarantined = 0;
    ReservedMargin reserved;  // under mu
    // Group commit, all under mu. Tickets count staged batches; every
    // batch up to fitted_ticket is in `estimator`.
    std::vector<StagedBatch> staged;
    size_t staged_samples = 0;
    uint64_t last_ticket = 0;
    uint64_t fitted_ticket = 0;
    bool fitting = false;
    std::map<uint64_t, absl::Status> failed;  // until its caller reads it
    // Peaks reported while a refit runs: they calibrated `estimator` and
    // calibrate its replacement too before the swap.
    std::vector<ReportedPeak> peaks_while_fitting;
    std::condition_variable fitted;
  };

  // One solve that identical concurrent misses wait for.
  struct Flight {
    std::mutex mu;
    std::condition_variable landed;
    std::optional<absl::StatusOr<PlanResult>> result;  // under mu
  };

  const CoreOptions options;
  // One of each: solvers keep no state between Solve calls.
  std::map<std::string, std::unique_ptr<const Solver>> solvers;
  PlanCache cache;
  mutable std::shared_mutex models_mu;  // guards the map, not the models
  // Every profile, by model name and device type; a registered model has
  // its ("" device) profile from its registration on.
  using ProfileKey = std::pair<std::string, std::string>;
  mutable std::map<ProfileKey, std::shared_ptr<Model>> models;  // Find adds
  size_t num_models = 0;  // registered names, under models_mu
  std::mutex flights_mu;
  std::unordered_map<PlanKey, std::shared_ptr<Flight>, PlanKeyHash> flights;

  // The profile of model `name` for `device`. A device the model has no
  // profile for gets an empty one: kept (RESOURCE_EXHAUSTED past
  // max_devices_per_model) when `create`, else only returned, so that
  // reads of a device never measured change nothing. Call `create` only
  // once the request is valid.
  absl::StatusOr<std::shared_ptr<Model>> Find(const std::string& name,
                                              const std::string& device = "",
                                              bool create = false) const {
    if (auto s = ValidateDevice(device); !s.ok()) return s;
    std::shared_ptr<const Model> registered;
    {
      std::shared_lock lock(models_mu);
      if (auto it = models.find({name, device}); it != models.end()) {
        return it->second;
      }
      auto it = models.find({name, ""});
      if (it == models.end()) {
        return NotRegistered(name);
      }
      registered = it->second;
    }
    auto profile = NewProfile(registered->spec, registered->granularity, device);
    if (!profile.ok() || !create) return profile;
    std::unique_lock lock(models_mu);
    // Another call may have made it meanwhile.
    if (auto it = models.find({name, device}); it != models.end()) {
      return it->second;
    }
    int held = 0;
    for (auto it = models.lower_bound({name, ""});
         it != models.end() && it->first.first == name; ++it) {
      ++held;
    }
    if (held >= options.max_devices_per_model) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "device: model \"", name, "\" has profiles for ", held,
          " device types already (max_devices_per_model); \"", device,
          "\" would be one more"));
    }
    models.emplace(ProfileKey{name, device}, *profile);
    return profile;
  }

  absl::StatusOr<std::shared_ptr<Model>> NewProfile(
      std::shared_ptr<const ModelSpec> spec, std::vector<double> granularity,
      const std::string& device) const {
    auto estimator = NewEstimator(*spec);
    if (!estimator.ok()) return estimator.status();
    auto model = std::make_shared<Model>();
    model->spec = std::move(spec);
    model->device = device;
    model->granularity = std::move(granularity);
    model->estimator = *std::move(estimator);
    return model;
  }

  absl::StatusOr<std::unique_ptr<Estimator>> NewEstimator(
      const ModelSpec& spec) const {
    if (options.estimator_kind == "mimose") {
      return NewMimoseEstimator(spec, options.estimator);
    }
    return NewRematEstimator(spec, options.estimator);
  }

  // A validated plan request: its model, its resolved solver and its
  // plan-cache key (features bucketed).
  struct Request {
    std::shared_ptr<Model> model;  // never null
    std::string solver_name;
    const Solver* solver = nullptr;  // never null; one of `solvers`
    PlanKey key;
  };

  // Finds the request's model, validates the request against it and
  // resolves its solver name (the default when empty).
  absl::StatusOr<Request> Prepare(const PlanRequest& r) const {
    auto found = Find(r.model, r.device);
    if (!found.ok()) return found.status();
    Request out;
    out.model = *std::move(found);
    if (auto s = ValidateFeatures(*out.model->spec, r.features); !s.ok()) {
      return s;
    }
    if (auto s = ValidateBudget(r.budget_bytes); !s.ok()) return s;
    out.solver_name = r.solver.empty() ? options.default_solver : r.solver;
    auto it = solvers.find(out.solver_name);
    if (it == solvers.end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "solver: ", NewSolver(out.solver_name).status().message()));
    }
    out.solver = it->second.get();
    out.key = PlanKey{r.model,
                      BucketFeatures(r.features, out.model->granularity),
                      r.budget_bytes, out.solver_name, r.offload,
                      r.offload && r.offload_checkpoints, r.device};
    return out;
  }

  // What a solve needs, taken from the model under m.mu: the bucket's
  // prediction as a problem, and the generation it was predicted at.
  struct Estimate {
    PlanResult result;  // bucket and collect set; plan set once solved
    PlanProblem problem;
    uint64_t generation = 0;
    bool no_samples = false;  // nothing to predict from: no problem either
    // The estimate says something of a collect step: from a fit with the
    // evidence to plan on, or for features within what was measured.
    bool informative = false;
  };

  // Predicts for `bucket` (call under m.mu). static_max plans for the
  // largest input observed (and at least this bucket), once per budget.
  absl::StatusOr<Estimate> Predict(Model& m, const PlanRequest& r,
                                   const std::string& solver_name,
                                   std::vector<int64_t> bucket) const {
    Estimate e;
    e.generation = m.generation;
    e.result.bucket = std::move(bucket);
    if (m.estimator->num_samples() == 0) {
      e.no_samples = true;
      e.result.collect = true;
      e.result.collect_reason =
          m.device.empty()
              ? "no samples yet"
              : absl::StrCat("no samples yet for device \"", m.device, "\"");
      return e;
    }
    Features at(e.result.bucket.begin(), e.result.bucket.end());
    if (solver_name == "static_max") {
      for (const FeatureRange& range : m.estimator->ObservedRange()) {
        auto i = FeatureIndex(*m.spec, range.feature);
        if (i) at[*i] = std::max(at[*i], range.max);
      }
    }
    auto prediction = m.estimator->Predict(at);
    if (!prediction.ok()) return prediction.status();
    if (!prediction->trusted) {
      e.result.collect = true;
      e.result.collect_reason = prediction->untrusted_reason;
    }
    e.informative = prediction->fit_trusted || prediction->in_range;
    const int64_t margin_bytes =
        static_cast<int64_t>(
            std::ceil(options.margin_fraction * r.budget_bytes)) +
        m.reserved.MarginBytes(r.budget_bytes);
    e.problem =
        MakePlanProblem(*m.spec, *prediction, r.budget_bytes, margin_bytes);
    if (options.host_link_bytes_per_s > 0) {
      e.problem.d2h_bytes_per_s = options.host_link_bytes_per_s;
      e.problem.h2d_bytes_per_s = options.host_link_bytes_per_s;
    }
    if (!r.offload) e.problem.d2h_bytes_per_s = e.problem.h2d_bytes_per_s = 0;
    e.problem.offload_checkpoints = r.offload && r.offload_checkpoints;
    return e;
  }

  // Solves a predicted problem, holding no lock: an exact search within
  // the configured limits and the request's deadline.
  Plan RunSolver(const Request& prepared, const PlanRequest& r,
                 const PlanProblem& problem) const {
    if (!IsExactSolver(prepared.solver_name)) {
      return prepared.solver->Solve(problem);
    }
    internal::ExactOptions limits;
    limits.max_nodes = options.solve_max_nodes;
    using std::chrono::nanoseconds;
    nanoseconds time_limit(
        static_cast<int64_t>(options.solve_time_limit_ms * 1e6));
    if (r.deadline) {
      const nanoseconds left = std::max(
          nanoseconds(1), std::chrono::duration_cast<nanoseconds>(
                              *r.deadline - std::chrono::steady_clock::now()));
      if (time_limit.count() == 0 || left < time_limit) time_limit = left;
    }
    limits.time_limit = time_limit;
    return internal::NewExactSolver(limits, prepared.solver_name)
        ->Solve(problem);
  }

  // Predicts under m.mu, then solves outside it: always when `explain`,
  // else only what the estimator vouches for (a COLLECT answer needs no
  // solve). Without samples there is nothing to solve.
  absl::StatusOr<Estimate> PredictAndSolve(const Request& prepared,
                                           const PlanRequest& r,
                                           bool explain) const {
    Model& m = *prepared.model;
    absl::StatusOr<Estimate> e;
    {
      std::lock_guard lock(m.mu);
      e = Predict(m, r, prepared.solver_name, prepared.key.bucket);
    }
    if (!e.ok() || e->no_samples || (e->result.collect && !explain)) return e;
    e->result.plan = std::make_shared<Plan>(RunSolver(prepared, r, e->problem));
    return e;
  }

  // The cached plan for a prepared request; nullopt on a miss.
  std::optional<PlanResult> Cached(const Request& prepared,
                                   bool count_miss = true) {
    auto plan = cache.Lookup(prepared.key, count_miss);
    if (plan == nullptr) return std::nullopt;
    PlanResult result;
    result.plan = std::move(plan);
    result.from_cache = true;
    result.bucket = prepared.key.bucket;
    return result;
  }

  // GetPlan past the cache for a prepared request: estimates, solves, and
  // caches the plan; identical concurrent misses wait for the first.
  absl::StatusOr<PlanResult> SolveAndCache(Request& prepared,
                                           const PlanRequest& request) {
    const auto now = std::chrono::steady_clock::now();
    if (request.deadline && *request.deadline <= now) {
      return DeadlinePassed("before its solve began");
    }
    std::shared_ptr<Flight> flight;
    bool leader = false;
    {
      std::lock_guard lock(flights_mu);
      auto [it, inserted] =
          flights.try_emplace(prepared.key, std::make_shared<Flight>());
      flight = it->second;
      leader = inserted;
    }
    if (leader) {
      // The plan may have landed while this request queued for a worker.
      if (auto cached = Cached(prepared, /*count_miss=*/false)) {
        Land(prepared.key, flight, *cached);
        return *std::move(cached);
      }
    } else {
      std::unique_lock lock(flight->mu);
      auto landed = [&] { return flight->result.has_value(); };
      if (request.deadline) {
        if (!flight->landed.wait_until(lock, *request.deadline, landed)) {
          return DeadlinePassed("while an identical request's solve ran");
        }
      } else {
        flight->landed.wait(lock, landed);
      }
      return *flight->result;
    }
    absl::StatusOr<PlanResult> result = SolveMiss(prepared, request);
    Land(prepared.key, flight, result);
    return result;
  }

  // Ends a flight: later misses start their own; its waiters get `result`.
  void Land(const PlanKey& key, const std::shared_ptr<Flight>& flight,
            const absl::StatusOr<PlanResult>& result) {
    {
      std::lock_guard lock(flights_mu);
      flights.erase(key);
    }
    {
      std::lock_guard lock(flight->mu);
      flight->result = result;
    }
    flight->landed.notify_all();
  }

  // RESOURCE_EXHAUSTED for a request that no plan fits; `least` is the
  // exact solver's plan with the smallest reachable peak, `margin_bytes`
  // what plans keep free below the budget.
  static absl::Status NoPlanFits(const PlanRequest& request, const Plan& least,
                                 int64_t margin_bytes) {
    const int64_t peak = least.predicted_peak_bytes;
    const std::string margin =
        margin_bytes == 0
            ? ""
            : absl::StrCat(" less the ", FormatBytes(margin_bytes),
                           " kept free (margin_fraction, and what the "
                           "allocator reserves beyond allocated bytes)");
    return WithSmallestPeakBytes(
        absl::ResourceExhaustedError(absl::StrCat(
            "budget_bytes: no plan fits ", FormatBytes(request.budget_bytes),
            margin, " for features [", absl::StrJoin(request.features, ", "),
            "]; the smallest reachable peak is ", FormatBytes(peak), " (",
            peak, " bytes); raise the budget or shrink the batch")),
        peak);
  }

  absl::StatusOr<PlanResult> SolveMiss(const Request& prepared,
                                       const PlanRequest& request) {
    auto e = PredictAndSolve(prepared, request, /*explain=*/false);
    if (!e.ok()) return e.status();
    PlanResult& result = e->result;
    if (result.collect) {
      // A caller that can send checkpoints to host collects so when
      // recomputing every block may not fit: before any sample (nothing
      // is known), or when the estimate's recompute-all peak is over.
      const bool send =
          request.offload && request.offload_checkpoints &&
          (e->no_samples ||
           PredictedPeakBytes(e->problem,
                              SafeActions(*prepared.model->spec)) >
               e->problem.limit_bytes());
      result.plan = CollectPlan(
          *prepared.model->spec,
          absl::StrCat("collect: ", result.collect_reason,
                       send ? "; checkpoints to host: recomputing every block "
                              "may not fit the budget"
                            : ""),
          send);
      if (e->informative) {
        // The estimate is untrusted, but from a fit with evidence, or for
        // features within what was measured, it is what the planner knows:
        // a caller sizing batches (FitBatch) can tell a collect that would
        // break the budget. (An early fit's guess beyond what was measured
        // says nothing.)
        Plan estimated = *result.plan;
        ScorePlan(e->problem, &estimated);
        result.plan = std::make_shared<Plan>(std::move(estimated));
      }
      return result;
    }
    const Plan& plan = *result.plan;
    // Only the exact solvers can say that no plan fits. The baselines'
    // plans are returned as they are (feasible false when the memory model
    // says they break the budget), so they run as their authors meant.
    if (!plan.feasible && IsExactSolver(prepared.solver_name)) {
      return NoPlanFits(request, plan, e->problem.margin_bytes);
    }
    Model& m = *prepared.model;
    {
      std::lock_guard lock(m.mu);
      if (m.generation == e->generation) cache.Insert(prepared.key, result.plan);
    }
    return result;
  }

  // Fits every batch staged on `m` so far (call with `lock` holding m.mu,
  // m.fitting false and a batch staged): copies the estimator, refits the
  // copy outside the lock, swaps it in, and wakes the waiting callers (one
  // of those whose batch was staged meanwhile fits the next round).
  void FitRound(Model& m, std::unique_lock<std::mutex>& lock) {
    m.fitting = true;
    std::vector<StagedBatch> batches = std::move(m.staged);
    m.staged.clear();
    std::unique_ptr<Estimator> next;
    std::vector<absl::Status> status;
    try {
      next = m.estimator->Clone();
      lock.unlock();
      status = FitBatches(*next, batches);
      lock.lock();
    } catch (const std::exception& e) {
      // Out of memory, say: the batches fail, the last fit stays, and the
      // callers waiting for them are still woken.
      if (!lock.owns_lock()) lock.lock();
      next.reset();
      status.assign(batches.size(),
                    absl::InternalError(absl::StrCat(
                        "refitting the model failed: ", e.what())));
    }
    if (next != nullptr) {
      for (const ReportedPeak& p : m.peaks_while_fitting) {
        // Validated when reported; a failure leaves calibration as it was,
        // as on the estimator this one replaces.
        next->ReportPeak(p.features, p.actions, p.measured_peak_bytes,
                         p.outlier)
            .IgnoreError();
      }
      m.estimator = std::move(next);
    }
    m.peaks_while_fitting.clear();
    for (size_t k = 0; k < batches.size(); ++k) {
      m.staged_samples -= batches[k].samples.size();
      if (!status[k].ok()) m.failed.emplace(batches[k].ticket, status[k]);
    }
    m.fitted_ticket = batches.back().ticket;
    Invalidate(m);
    m.fitting = false;
    m.fitted.notify_all();
  }

  // Drops the model's cached plans after a change to its estimate (call
  // under m.mu): solves in flight from before it will not be cached.
  void Invalidate(Model& m) {
    ++m.generation;
    cache.InvalidateModel(m.spec->name, m.device);
  }
};

PlannerCore::PlannerCore(CoreOptions options)
    : impl_(std::make_unique<Impl>(std::move(options))) {}

PlannerCore::~PlannerCore() = default;

absl::Status PlannerCore::RegisterModel(const ModelSpec& spec,
                                        const CommitHook& commit) {
  if (auto s = ValidateModelSpec(spec); !s.ok()) return s;
  // Checked under the map's lock, committed outside it (a log sync must not
  // hold every other call's lookups), then checked again on insert.
  auto check = [&]() -> absl::Status {
    auto it = impl_->models.find({spec.name, ""});
    if (it != impl_->models.end()) {
      if (SameShape(*it->second->spec, spec)) return absl::OkStatus();
      return absl::AlreadyExistsError(absl::StrCat(
          "model: \"", spec.name,
          "\" is registered with different blocks or features; register the "
          "new shape under a new name"));
    }
    if (static_cast<int>(impl_->num_models) >= impl_->options.max_models) {
      return absl::ResourceExhaustedError(
          absl::StrCat("model: at most ", impl_->options.max_models,
                       " models may be registered"));
    }
    return absl::NotFoundError("");  // not registered: go on
  };
  {
    std::shared_lock lock(impl_->models_mu);
    if (absl::Status s = check(); !absl::IsNotFound(s)) return s;
  }
  std::vector<double> granularity;
  for (const std::string& f : spec.feature_names) {
    auto g = impl_->options.granularity.find(f);
    granularity.push_back(g != impl_->options.granularity.end()
                              ? g->second
                              : impl_->options.default_granularity);
  }
  auto model = impl_->NewProfile(std::make_shared<const ModelSpec>(spec),
                                 std::move(granularity), "");
  if (!model.ok()) return model.status();
  if (commit) {
    if (auto s = commit(); !s.ok()) return s;
  }
  std::unique_lock lock(impl_->models_mu);
  // A concurrent registration of the same name may have won: the same shape
  // is then this one's too.
  if (absl::Status s = check(); !absl::IsNotFound(s)) return s;
  impl_->models.emplace(Impl::ProfileKey{spec.name, ""}, *std::move(model));
  ++impl_->num_models;
  return absl::OkStatus();
}

absl::Status PlannerCore::AddSamples(const std::string& model,
                                     const std::vector<Sample>& samples,
                                     const AddSamplesOptions& options) {
  if (options.quarantined != nullptr) *options.quarantined = 0;
  auto spec = GetModelSpec(model);
  if (!spec.ok()) return spec.status();
  // The batch's profile is made only for a valid batch.
  const std::string device = samples.empty() ? "" : samples[0].device;
  for (size_t i = 0; i < samples.size(); ++i) {
    const std::string field = absl::StrCat("samples[", i, "].");
    if (auto s = ValidateSample(**spec, samples[i]); !s.ok()) {
      return Prefixed(field, s);
    }
    if (samples[i].device != device) {
      return InvalidField(
          field + "device",
          absl::StrCat("\"", samples[i].device, "\" differs from samples[0]'s \"",
                       device, "\"; report each device's samples in a "
                       "request of its own"));
    }
  }
  if (options.hold != nullptr && options.hold->size() != samples.size()) {
    return InvalidField("hold", absl::StrCat(options.hold->size(),
                                             " flags for ", samples.size(),
                                             " samples; give one per sample"));
  }
  if (samples.size() >
      static_cast<size_t>(impl_->options.max_samples_per_model)) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "samples: ", samples.size(), " samples exceed the ",
        impl_->options.max_samples_per_model, " a model may hold"));
  }
  auto m = impl_->Find(model, device, /*create=*/true);
  if (!m.ok()) return m.status();
  Impl::Model& found = **m;
  std::unique_lock lock(found.mu);
  const size_t limit = impl_->options.max_samples_per_model;
  const size_t held = found.estimator->num_samples() +
                      found.estimator->num_quarantined() +
                      found.staged_samples;
  if (held + samples.size() > limit) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "samples: model \"", model, "\" would exceed ", limit,
        " samples; it already has plenty to fit on"));
  }
  // Judge validates every sample; past it, nothing can fail on this batch
  // (a valid sample's peak is a valid report). It judges against the last
  // fit: batches staged before this one and not yet fitted do not count.
  absl::StatusOr<SampleVerdict> verdict;
  if (options.verdict != nullptr) {
    verdict = *options.verdict;
  } else {
    verdict = found.estimator->Judge(samples);
  }
  if (!verdict.ok()) return verdict.status();
  if (options.hold != nullptr) {
    verdict->quarantined.resize(samples.size(), false);
    for (size_t i = 0; i < samples.size(); ++i) {
      if ((*options.hold)[i]) verdict->quarantined[i] = true;
    }
  }
  if (options.commit) {
    if (auto s = options.commit(*verdict); !s.ok()) return s;
  }
  const uint64_t ticket = ++found.last_ticket;
  found.staged.push_back({ticket, samples, *verdict});
  found.staged_samples += samples.size();
  while (found.fitted_ticket < ticket) {
    if (found.fitting) {
      found.fitted.wait(lock);
    } else {
      impl_->FitRound(found, lock);
    }
  }
  if (auto it = found.failed.find(ticket); it != found.failed.end()) {
    absl::Status s = std::move(it->second);
    found.failed.erase(it);
    return s;
  }
  if (options.quarantined != nullptr) {
    *options.quarantined = static_cast<size_t>(std::count(
        verdict->quarantined.begin(), verdict->quarantined.end(), true));
  }
  return absl::OkStatus();
}

absl::StatusOr<PlanResult> PlannerCore::GetPlan(const PlanRequest& request) {
  auto prepared = impl_->Prepare(request);
  if (!prepared.ok()) return prepared.status();
  if (auto cached = impl_->Cached(*prepared)) return *std::move(cached);
  return impl_->SolveAndCache(*prepared, request);
}

std::optional<absl::StatusOr<PlanResult>> PlannerCore::GetPlanIfCached(
    const PlanRequest& request) {
  auto prepared = impl_->Prepare(request);
  if (!prepared.ok()) return prepared.status();
  return impl_->Cached(*prepared);
}

absl::StatusOr<PlanResult> PlannerCore::GetPlanUncached(
    const PlanRequest& request) {
  auto prepared = impl_->Prepare(request);
  if (!prepared.ok()) return prepared.status();
  return impl_->SolveAndCache(*prepared, request);
}

absl::Status WithSmallestPeakBytes(absl::Status status, int64_t bytes) {
  status.SetPayload(kSmallestPeakPayload, absl::Cord(absl::StrCat(bytes)));
  return status;
}

std::optional<int64_t> SmallestPeakBytes(const absl::Status& status) {
  if (!absl::IsResourceExhausted(status)) return std::nullopt;
  const auto payload =
      status.GetPayload(kSmallestPeakPayload);
  int64_t bytes = 0;
  if (!payload || !absl::SimpleAtoi(std::string(*payload), &bytes)) {
    return std::nullopt;
  }
  return bytes;
}

absl::StatusOr<PlanResult> PlannerCore::Explain(const PlanRequest& request) {
  auto prepared = impl_->Prepare(request);
  if (!prepared.ok()) return prepared.status();
  auto e = impl_->PredictAndSolve(*prepared, request, /*explain=*/true);
  if (!e.ok()) return e.status();
  if (e->no_samples) {
    return absl::FailedPreconditionError(absl::StrCat(
        "model: \"", request.model,
        "\" has no samples yet; run a few training steps (they collect) "
        "first"));
  }
  return std::move(e->result);
}

absl::Status PlannerCore::AddOutcomeCounts(const std::string& model,
                                           uint64_t outcomes,
                                           uint64_t out_of_memory,
                                           uint64_t quarantined,
                                           const std::string& device) {
  if (auto s = GetModelSpec(model); !s.ok()) return s.status();
  for (auto [field, part] : {std::pair{"out_of_memory", out_of_memory},
                             std::pair{"quarantined", quarantined}}) {
    if (part > outcomes) {
      return absl::InvalidArgumentError(absl::StrCat(
          field, ": ", part, " exceeds outcomes (", outcomes,
          "); they are outcomes too"));
    }
  }
  auto found = impl_->Find(model, device, /*create=*/true);
  if (!found.ok()) return found.status();
  std::lock_guard lock((*found)->mu);
  if ((*found)->outcomes + outcomes < outcomes) {
    return absl::InvalidArgumentError("outcomes: the count would overflow");
  }
  (*found)->outcomes += outcomes;
  (*found)->out_of_memory += out_of_memory;
  (*found)->outcomes_quarantined += quarantined;
  return absl::OkStatus();
}

absl::Status PlannerCore::ReportOutcome(const Outcome& outcome,
                                       const CommitHook& commit) {
  ReportOutcomeOptions options;
  if (commit) options.commit = [&commit](bool) { return commit(); };
  return ReportOutcome(outcome, options);
}

absl::Status PlannerCore::ReportOutcome(const Outcome& outcome,
                                       const ReportOutcomeOptions& options) {
  auto spec = GetModelSpec(outcome.model);
  if (!spec.ok()) return spec.status();
  if (auto s = ValidateOutcome(**spec, outcome); !s.ok()) return s;
  auto found = impl_->Find(outcome.model, outcome.device, /*create=*/true);
  if (!found.ok()) return found.status();
  Impl::Model& m = **found;
  std::lock_guard lock(m.mu);
  // Nothing to calibrate against yet, or no peak: nothing to judge.
  const bool calibrates =
      outcome.measured_peak_bytes > 0 && m.estimator->num_samples() > 0;
  bool outlier = false;
  if (options.outlier != nullptr) {
    outlier = *options.outlier;
  } else if (calibrates) {
    absl::StatusOr<bool> judged = m.estimator->JudgePeak(
        outcome.features, outcome.actions, outcome.measured_peak_bytes);
    if (!judged.ok()) return judged.status();
    outlier = *judged;
  }
  if (options.commit) {
    if (auto s = options.commit(outlier); !s.ok()) return s;
  }
  if (options.held != nullptr) *options.held = outlier;
  ++m.outcomes;
  if (outcome.out_of_memory) ++m.out_of_memory;
  if (outlier) ++m.outcomes_quarantined;
  if (outcome.measured_peak_bytes == 0) return absl::OkStatus();
  if (!outlier) {
    // The same outcomes as calibration's window (and the log's, compacted).
    const double ratio = m.reserved.ratio();
    m.reserved.Report(outcome.features, outcome.measured_peak_bytes,
                      outcome.reserved_peak_bytes);
    if (m.reserved.ratio() != ratio) impl_->Invalidate(m);
  }
  if (m.fitting) {
    m.peaks_while_fitting.push_back({outcome.features, outcome.actions,
                                     outcome.measured_peak_bytes, outlier});
  }
  if (m.estimator->num_samples() == 0) return absl::OkStatus();
  auto before = m.estimator->Predict(outcome.features);
  if (auto s = m.estimator->ReportPeak(outcome.features, outcome.actions,
                                       outcome.measured_peak_bytes, outlier);
      !s.ok()) {
    return s;
  }
  auto after = m.estimator->Predict(outcome.features);
  // Cached plans were sized without the new calibration: drop them only
  // when it moved, so steady reports keep the cache warm.
  if (!before.ok() || !after.ok() ||
      before->calibration_bytes != after->calibration_bytes) {
    impl_->Invalidate(m);
  }
  return absl::OkStatus();
}

std::vector<std::string> PlannerCore::ListModels() const {
  std::shared_lock lock(impl_->models_mu);
  std::vector<std::string> names;
  for (const auto& [key, model] : impl_->models) {
    if (key.second.empty()) names.push_back(key.first);
  }
  return names;
}

absl::StatusOr<std::vector<std::string>> PlannerCore::ListDevices(
    const std::string& model) const {
  std::shared_lock lock(impl_->models_mu);
  std::vector<std::string> devices;
  for (auto it = impl_->models.lower_bound({model, ""});
       it != impl_->models.end() && it->first.first == model; ++it) {
    devices.push_back(it->first.second);
  }
  if (devices.empty()) {
    return NotRegistered(model);
  }
  return devices;
}

absl::StatusOr<ProfileSamples> PlannerCore::GetProfileSamples(
    const std::string& model, const std::string& device) const {
  auto found = impl_->Find(model, device);
  if (!found.ok()) return found.status();
  Impl::Model& m = **found;
  std::lock_guard lock(m.mu);
  return ProfileSamples{m.spec, m.estimator->FittedSamples(),
                        m.estimator->QuarantinedSamples()};
}

absl::StatusOr<ModelState> PlannerCore::GetModelState(
    const std::string& model, const std::string& device) const {
  auto found = impl_->Find(model, device);
  if (!found.ok()) return found.status();
  Impl::Model& m = **found;
  std::lock_guard lock(m.mu);
  ModelState state;
  state.spec = *m.spec;
  state.device = m.device;
  state.num_samples = m.estimator->num_samples();
  state.num_quarantined = m.estimator->num_quarantined();
  if (state.num_samples > 0) {
    state.fit_quality = m.estimator->FitQuality();
    state.observed_range = m.estimator->ObservedRange();
  }
  state.outcomes = m.outcomes;
  state.out_of_memory = m.out_of_memory;
  state.outcomes_quarantined = m.outcomes_quarantined;
  state.reserved_ratio = m.reserved.ratio();
  state.reserved_outcomes = m.reserved.reserved_outcomes();
  return state;
}

absl::StatusOr<std::shared_ptr<const ModelSpec>> PlannerCore::GetModelSpec(
    const std::string& model) const {
  std::shared_lock lock(impl_->models_mu);
  auto it = impl_->models.find({model, ""});
  if (it == impl_->models.end()) {
    return NotRegistered(model);
  }
  return it->second->spec;
}

PlanCacheStats PlannerCore::cache_stats() const { return impl_->cache.stats(); }

}  // namespace remat
