#include "planner/plan_cache.h"

#include <cmath>
#include <functional>
#include <list>
#include <unordered_map>
#include <utility>

#include "absl/synchronization/mutex.h"

namespace remat {

std::vector<int64_t> BucketFeatures(const Features& features,
                                    const std::vector<double>& granularity) {
  std::vector<int64_t> bucket(features.size());
  for (size_t i = 0; i < features.size(); ++i) {
    double g = i < granularity.size() ? granularity[i] : 1.0;
    if (!(g > 0) || !std::isfinite(g)) g = 1.0;  // contract violation: be safe
    // The relative slack absorbs floating-point noise (0.3 / 0.1 is
    // 2.9999999999999996), so an exact multiple stays in its own bucket.
    const double steps = std::ceil(features[i] / g - 1e-9);
    double rounded = std::ceil(steps * g - 1e-9);
    // A granularity tiny next to the feature overflows the division; a huge
    // one either rounds past int64 or, with the slack, down to 0. Then the
    // bucket is the feature itself rounded up: never below the feature.
    if (!(rounded >= features[i] * (1 - 1e-12) &&
          rounded <= 4611686018427387904.0)) {  // 2^62
      rounded = std::ceil(features[i]);
    }
    bucket[i] = static_cast<int64_t>(rounded);
  }
  return bucket;
}

bool PlanKey::operator==(const PlanKey& other) const {
  return budget_bytes == other.budget_bytes && model == other.model &&
         solver == other.solver && offload == other.offload &&
         offload_checkpoints == other.offload_checkpoints &&
         bucket == other.bucket && device == other.device;
}

size_t PlanKeyHash::operator()(const PlanKey& key) const {
  size_t h = std::hash<std::string>()(key.model);
  auto mix = [&h](size_t v) {
    h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  };
  for (int64_t b : key.bucket) mix(std::hash<int64_t>()(b));
  mix(std::hash<int64_t>()(key.budget_bytes));
  mix(std::hash<std::string>()(key.solver));
  mix(std::hash<std::string>()(key.device));
  mix(key.offload);
  mix(key.offload_checkpoints);
  return h;
}

struct PlanCache::Impl {
  using Entry = std::pair<PlanKey, std::shared_ptr<const Plan>>;
  using List = std::list<Entry>;  // front: most recently used

  explicit Impl(size_t cap) : capacity(cap < 1 ? 1 : cap) {}

  const size_t capacity;
  mutable absl::Mutex mu;
  List lru ABSL_GUARDED_BY(mu);
  std::unordered_map<PlanKey, List::iterator, PlanKeyHash> index
      ABSL_GUARDED_BY(mu);
  PlanCacheStats stats ABSL_GUARDED_BY(mu);
};

PlanCache::PlanCache(size_t capacity) : impl_(new Impl(capacity)) {}

PlanCache::~PlanCache() = default;

std::shared_ptr<const Plan> PlanCache::Lookup(const PlanKey& key,
                                             bool count_miss) {
  absl::MutexLock lock(&impl_->mu);
  auto it = impl_->index.find(key);
  if (it == impl_->index.end()) {
    if (count_miss) ++impl_->stats.misses;
    return nullptr;
  }
  ++impl_->stats.hits;
  impl_->lru.splice(impl_->lru.begin(), impl_->lru, it->second);
  return it->second->second;
}

void PlanCache::Insert(const PlanKey& key, std::shared_ptr<const Plan> plan) {
  std::shared_ptr<const Plan> dropped;  // released outside the lock
  absl::MutexLock lock(&impl_->mu);
  auto it = impl_->index.find(key);
  if (it != impl_->index.end()) {
    dropped = std::move(it->second->second);
    it->second->second = std::move(plan);
    impl_->lru.splice(impl_->lru.begin(), impl_->lru, it->second);
    return;
  }
  impl_->lru.emplace_front(key, std::move(plan));
  impl_->index.emplace(key, impl_->lru.begin());
  if (impl_->lru.size() > impl_->capacity) {
    auto last = std::prev(impl_->lru.end());
    impl_->index.erase(last->first);
    dropped = std::move(last->second);
    impl_->lru.pop_back();
    ++impl_->stats.evictions;
  }
}

void PlanCache::InvalidateModel(const std::string& model,
                                const std::string& device) {
  absl::MutexLock lock(&impl_->mu);
  for (auto it = impl_->lru.begin(); it != impl_->lru.end();) {
    if (it->first.model == model && it->first.device == device) {
      impl_->index.erase(it->first);
      it = impl_->lru.erase(it);
      ++impl_->stats.invalidations;
    } else {
      ++it;
    }
  }
}

PlanCacheStats PlanCache::stats() const {
  absl::MutexLock lock(&impl_->mu);
  PlanCacheStats s = impl_->stats;
  s.size = impl_->lru.size();
  return s;
}

}  // namespace remat
