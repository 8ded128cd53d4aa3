// PlanChooser: picks the actions for one batch, in front of a Planner.
// No LibTorch: the runtime (runtime.h) calls it once per step.
//
// Order of preference:
//   1. the local cache (an LRU of plans keyed by bucketed features and
//      budget): a repeat costs no planner call;
//   2. the planner's answer: a plan (cached locally when the planner's
//      bucket equals the local one), or COLLECT (run the safe plan and
//      measure; never cached);
//   3. when the planner fails (unavailable, deadline, no plan fits, a
//      malformed plan): the last good plan for this bucket and budget, or
//      for the tightest bucket that covers it (each bucketed feature >=
//      this one's: a plan sized for a larger batch fits a smaller one),
//      else the safe plan (every checkpointable block recomputed), with
//      source kLastGood or kSafe and the reason in planner_status. The
//      first fallback is logged to stderr; later ones are only counted.
//      This is the only fallback layer: planners (RemotePlanner included)
//      return their errors.
//
// The planner is called without holding the chooser's lock: one slow
// answer never holds another thread's local hits.
//
// The local bucket rounds each feature up to a multiple of its granularity
// with the planner's own function (BucketFeatures, plan_cache.h). Set the
// granularities to the planner's (CoreOptions::granularity); when they
// differ, the planner's plans are still used but not cached locally, so a
// mismatch costs calls, never correctness: a plan is only ever reused for
// the bucket it was sized for.
//
// Thread safety: thread-safe.
#ifndef REMAT_CLIENT_PLAN_CHOOSER_H_
#define REMAT_CLIENT_PLAN_CHOOSER_H_

#include <cstdint>
#include <list>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "client/batch_fit.h"
#include "client/planner.h"
#include "planner/model.h"
#include "planner/plan.h"
#include "planner/plan_cache.h"

namespace remat {

struct PlanChooserOptions {
  // Plans kept locally (and, separately, last good plans). >= 1.
  size_t cache_capacity = 256;
  // Bucket granularity per feature name; others use default_granularity
  // (CoreOptions' default too).
  std::map<std::string, double> granularity;
  double default_granularity = kDefaultGranularity;
  // Passed to the planner; empty means the planner's default solver.
  std::string solver;
  // The runtime can run OFFLOAD (it has a copy engine). Otherwise the
  // planner is asked for plans without it (PlanRequest::offload), and a
  // plan that offloads anyway is refused like any plan the runtime cannot
  // run.
  bool offload = false;
  // With `offload`: the runtime can also send checkpoints to host
  // (RECOMPUTE_OFFLOAD), and the planner is asked for plans that may.
  bool offload_checkpoints = false;
  // The device type the steps run on (MemorySource::device_type): plans
  // come from its profile, and samples and outcomes join it. Empty: not
  // said.
  std::string device;
};

struct PlanChoice {
  std::vector<Action> actions;  // one per block; OFFLOAD only if allowed
  // Where the runtime waits for copies to host (Plan::copies_out_landed);
  // empty for none.
  std::vector<int32_t> copies_out_landed;
  PlanSource source = PlanSource::kSafe;
  // The plan's predicted peak and solver, when a planner made it (also for
  // cached and last good plans); 0 and empty for collect and safe plans.
  int64_t predicted_peak_bytes = 0;
  std::string solver;
  bool collect() const { return source == PlanSource::kCollect; }
  std::vector<int64_t> bucket;  // the local bucket of the features
  absl::Status planner_status;  // why the planner was not used, if it failed
  // Set when the planner said no plan fits these features under this
  // budget: the least peak any plan reaches (the actions are then a
  // fallback's, which may run over the budget).
  std::optional<int64_t> smallest_peak_bytes;
};

struct PlanChooserStats {
  uint64_t local_hits = 0;
  uint64_t planner_calls = 0;
  uint64_t collects = 0;
  uint64_t fallbacks_last_good = 0;
  uint64_t fallbacks_safe = 0;
};

class PlanChooser {
 public:
  // `planner` must outlive the chooser. The model is registered with the
  // planner on first use (and again after a failed registration).
  PlanChooser(Planner* planner, ModelSpec model,
              PlanChooserOptions options = {});

  // Never fails: the worst answer is the safe plan. Features are checked
  // (ValidateFeatures); bad ones also get the safe plan, with the reason in
  // planner_status.
  PlanChoice Choose(const Features& features, int64_t budget_bytes);

  // The largest batch of these features (the batch in
  // features[batch_feature]) that fits `budget_bytes`, and the split into
  // micro-batches that does (batch_fit.h), asking the planner as Choose
  // does (same solver and offload flags; local plans are not consulted).
  // A planner error (unreachable) is returned, not fallen back from.
  absl::StatusOr<BatchFit> FitBatch(const Features& features,
                                    int64_t budget_bytes,
                                    size_t batch_feature);

  // The least peak any plan reaches for these features, as the planner
  // estimates it (asked with a budget no plan fits); nullopt when it cannot
  // say (no trusted estimate yet, or unreachable). For error messages.
  std::optional<int64_t> SmallestPeakBytes(const Features& features);

  // The planner's model changed (samples were reported): drop local plans
  // so the next batches ask again. Plans stay available as last good ones.
  void InvalidatePlans();

  // OK when `actions` can run on this model: one per block, no recompute
  // of a non-checkpointable block, OFFLOAD only with `offload`,
  // RECOMPUTE_OFFLOAD only with both flags. INVALID_ARGUMENT otherwise.
  static absl::Status CheckActions(const ModelSpec& model,
                                   const std::vector<Action>& actions,
                                   bool offload = false,
                                   bool offload_checkpoints = false);

  std::vector<int64_t> Bucket(const Features& features) const;
  const ModelSpec& model() const { return model_; }
  const PlanChooserOptions& options() const { return options_; }
  PlanChooserStats stats() const;

 private:
  using Key = std::pair<std::vector<int64_t>, int64_t>;  // bucket, budget

  // What is kept of a planner's plan.
  struct Cached {
    std::vector<Action> actions;
    std::vector<int32_t> copies_out_landed;
    int64_t predicted_peak_bytes = 0;
    std::string solver;
  };

  // A small LRU map; not thread-safe by itself (guarded by mu_).
  class Lru {
   public:
    explicit Lru(size_t capacity) : capacity_(capacity) {}
    const Cached* Get(const Key& key);
    // The entry for the same budget whose bucket covers key's (each value
    // >=) with the smallest sum, or null.
    const Cached* Covering(const Key& key);
    void Put(const Key& key, Cached plan);
    void MoveAllTo(Lru* other);

   private:
    using Entry = std::pair<Key, Cached>;
    size_t capacity_;
    std::list<Entry> order_;  // most recent first
    std::map<Key, std::list<Entry>::iterator> index_;
  };

  // The last good or safe plan for `key` when the planner failed (call
  // under mu_); Counted counts a fallback choice and warns once.
  PlanChoice Fallback(const Key& key, absl::Status why);
  PlanChoice Counted(PlanChoice choice);
  // The planner's request for `features` under `budget_bytes`.
  PlanRequest Request(const Features& features, int64_t budget_bytes) const;

  Planner* planner_;
  ModelSpec model_;
  PlanChooserOptions options_;
  std::vector<double> granularity_;  // per feature

  mutable std::mutex mu_;
  bool registered_ = false;
  bool warned_ = false;
  Lru cache_;
  Lru last_good_;
  PlanChooserStats stats_;
};

}  // namespace remat

#endif  // REMAT_CLIENT_PLAN_CHOOSER_H_
