// A bounded, thread-safe LRU cache of plans keyed by model, bucketed
// features, budget and solver.
#ifndef REMAT_PLANNER_PLAN_CACHE_H_
#define REMAT_PLANNER_PLAN_CACHE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "planner/model.h"
#include "planner/plan.h"

namespace remat {

// The bucket granularity of a feature none is given for, in the daemon
// (CoreOptions) and the client (PlanChooserOptions) alike: a plan per
// integer value. Equal granularities on both sides let the client cache
// the daemon's plans locally.
inline constexpr double kDefaultGranularity = 1;

// Rounds each feature up to a multiple of its granularity (> 0), so a plan
// cached for a bucket is sized for the bucket's largest member.
// Preconditions: granularity.size() == features.size(); every feature in
// ValidateFeatures' range.
std::vector<int64_t> BucketFeatures(const Features& features,
                                    const std::vector<double>& granularity);

struct PlanKey {
  std::string model;
  std::vector<int64_t> bucket;  // BucketFeatures' output
  int64_t budget_bytes = 0;
  std::string solver;
  bool offload = true;  // PlanRequest::offload
  bool offload_checkpoints = false;  // and PlanRequest::offload_checkpoints
  std::string device;  // PlanRequest::device: the model's profile
  bool operator==(const PlanKey& other) const;
};

struct PlanKeyHash {
  size_t operator()(const PlanKey& key) const;
};

struct PlanCacheStats {
  uint64_t hits = 0;
  uint64_t misses = 0;
  uint64_t evictions = 0;
  uint64_t invalidations = 0;  // entries dropped by InvalidateModel
  size_t size = 0;
};

// Thread-safe: every method may be called concurrently.
class PlanCache {
 public:
  explicit PlanCache(size_t capacity);  // capacity >= 1
  ~PlanCache();
  PlanCache(const PlanCache&) = delete;
  PlanCache& operator=(const PlanCache&) = delete;

  // The cached plan, or nullptr (counted as a miss unless `count_miss` is
  // false: a second look for a request whose miss was counted already).
  std::shared_ptr<const Plan> Lookup(const PlanKey& key,
                                     bool count_miss = true);
  // Inserts or replaces; evicts the least recently used beyond capacity.
  void Insert(const PlanKey& key, std::shared_ptr<const Plan> plan);
  // Drops every plan of `model`'s profile for `device` (its estimator was
  // refit).
  void InvalidateModel(const std::string& model,
                       const std::string& device = "");
  PlanCacheStats stats() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace remat

#endif  // REMAT_PLANNER_PLAN_CACHE_H_
