#include "client/plan_chooser.h"

#include <cstdio>
#include <utility>

#include "planner/plan_cache.h"

namespace remat {

const PlanChooser::Cached* PlanChooser::Lru::Get(const Key& key) {
  auto it = index_.find(key);
  if (it == index_.end()) return nullptr;
  order_.splice(order_.begin(), order_, it->second);
  return &it->second->second;
}

void PlanChooser::Lru::Put(const Key& key, Cached plan) {
  auto it = index_.find(key);
  if (it != index_.end()) {
    it->second->second = std::move(plan);
    order_.splice(order_.begin(), order_, it->second);
    return;
  }
  order_.emplace_front(key, std::move(plan));
  index_[key] = order_.begin();
  while (order_.size() > capacity_) {
    index_.erase(order_.back().first);
    order_.pop_back();
  }
}

const PlanChooser::Cached* PlanChooser::Lru::Covering(const Key& key) {
  const Key* best = nullptr;
  int64_t best_size = 0;
  for (const auto& [candidate, entry] : index_) {
    if (candidate.second != key.second ||
        candidate.first.size() != key.first.size()) {
      continue;
    }
    bool covers = true;
    int64_t size = 0;
    for (size_t i = 0; i < key.first.size() && covers; ++i) {
      covers = candidate.first[i] >= key.first[i];
      size += candidate.first[i] / 2;  // halves: the sum cannot overflow
    }
    if (covers && (best == nullptr || size < best_size)) {
      best = &candidate;
      best_size = size;
    }
  }
  return best == nullptr ? nullptr : Get(*best);
}

void PlanChooser::Lru::MoveAllTo(Lru* other) {
  // Oldest first, so the most recent ends up most recent in `other`.
  for (auto it = order_.rbegin(); it != order_.rend(); ++it) {
    other->Put(it->first, it->second);
  }
  order_.clear();
  index_.clear();
}

PlanChooser::PlanChooser(Planner* planner, ModelSpec model,
                         PlanChooserOptions options)
    : planner_(planner),
      model_(std::move(model)),
      options_(std::move(options)),
      cache_(options_.cache_capacity < 1 ? 1 : options_.cache_capacity),
      last_good_(options_.cache_capacity < 1 ? 1 : options_.cache_capacity) {
  for (const std::string& name : model_.feature_names) {
    auto it = options_.granularity.find(name);
    double g = it != options_.granularity.end() ? it->second
                                                : options_.default_granularity;
    granularity_.push_back(g > 0 ? g : 1);
  }
}

absl::Status PlanChooser::CheckActions(const ModelSpec& model,
                                       const std::vector<Action>& actions,
                                       bool offload, bool offload_checkpoints) {
  if (actions.size() != model.blocks.size()) {
    return absl::InvalidArgumentError(
        "plan.actions has " + std::to_string(actions.size()) +
        " entries for a model of " + std::to_string(model.blocks.size()) +
        " blocks");
  }
  for (size_t i = 0; i < actions.size(); ++i) {
    const std::string field = "plan.actions[" + std::to_string(i) + "]";
    if (actions[i] == Action::kOffload && !offload) {
      return absl::InvalidArgumentError(
          field +
          " is OFFLOAD, and this runtime has no copy engine to offload with "
          "(CheckpointedSequential::set_copy_engine)");
    }
    if (actions[i] == Action::kRecomputeOffload &&
        !(offload && offload_checkpoints)) {
      return absl::InvalidArgumentError(
          field + " is RECOMPUTE_OFFLOAD, and this runtime does not send "
                  "checkpoints to host");
    }
    if (Recomputes(actions[i]) && !model.blocks[i].checkpointable) {
      return absl::InvalidArgumentError(field + " recomputes block '" +
                                        model.blocks[i].name +
                                        "', which is not checkpointable");
    }
  }
  return absl::OkStatus();
}

std::vector<int64_t> PlanChooser::Bucket(const Features& features) const {
  return BucketFeatures(features, granularity_);  // the planner's rule
}

PlanChooserStats PlanChooser::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

void PlanChooser::InvalidatePlans() {
  std::lock_guard<std::mutex> lock(mu_);
  cache_.MoveAllTo(&last_good_);
}

PlanChoice PlanChooser::Fallback(const Key& key, absl::Status why) {
  PlanChoice choice;
  choice.bucket = key.first;
  choice.planner_status = std::move(why);
  choice.smallest_peak_bytes = remat::SmallestPeakBytes(choice.planner_status);
  const Cached* good = last_good_.Get(key);
  if (good == nullptr) good = last_good_.Covering(key);
  if (good != nullptr) {
    choice.actions = good->actions;
    choice.copies_out_landed = good->copies_out_landed;
    choice.predicted_peak_bytes = good->predicted_peak_bytes;
    choice.solver = good->solver;
    choice.source = PlanSource::kLastGood;
  } else {
    choice.actions = SafeActions(model_);
    choice.source = PlanSource::kSafe;
  }
  return Counted(std::move(choice));
}

PlanChoice PlanChooser::Counted(PlanChoice choice) {
  if (choice.source == PlanSource::kLastGood) ++stats_.fallbacks_last_good;
  if (choice.source == PlanSource::kSafe) ++stats_.fallbacks_safe;
  // No plan fits: the planner answered; the step lifecycle says so.
  if (!warned_ && !choice.smallest_peak_bytes) {
    warned_ = true;
    std::fprintf(stderr,
                 "remat: planner unavailable for model '%s' (%s); using the "
                 "%s plan. Further fallbacks are counted, not logged.\n",
                 model_.name.c_str(), choice.planner_status.ToString().c_str(),
                 PlanSourceName(choice.source));
  }
  return choice;
}

PlanRequest PlanChooser::Request(const Features& features,
                                 int64_t budget_bytes) const {
  PlanRequest request;
  request.model = model_.name;
  request.features = features;
  request.budget_bytes = budget_bytes;
  request.solver = options_.solver;
  request.offload = options_.offload;
  request.offload_checkpoints = options_.offload_checkpoints;
  request.device = options_.device;
  return request;
}

absl::StatusOr<BatchFit> PlanChooser::FitBatch(const Features& features,
                                               int64_t budget_bytes,
                                               size_t batch_feature) {
  if (auto s = ValidateFeatures(model_, features); !s.ok()) return s;
  bool registered = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    registered = registered_;
  }
  if (!registered) {
    if (auto s = planner_->RegisterModel(model_); !s.ok()) return s;
    std::lock_guard<std::mutex> lock(mu_);
    registered_ = true;
  }
  return remat::FitBatch(
      features, batch_feature,
      [&](const Features& at) -> absl::StatusOr<FitProbe> {
        absl::StatusOr<PlanResult> r =
            planner_->GetPlan(Request(at, budget_bytes));
        if (r.ok()) return FitsOf(r->collect, *r->plan);
        if (std::optional<int64_t> peak = remat::SmallestPeakBytes(r.status())) {
          return FitProbe{false, *peak};
        }
        return r.status();
      });
}

std::optional<int64_t> PlanChooser::SmallestPeakBytes(
    const Features& features) {
  if (!ValidateFeatures(model_, features).ok()) return std::nullopt;
  return remat::SmallestPeakBytes(
      planner_->GetPlan(Request(features, /*budget_bytes=*/1)).status());
}

PlanChoice PlanChooser::Choose(const Features& features, int64_t budget_bytes) {
  absl::Status valid = ValidateFeatures(model_, features);
  const Key key{valid.ok() ? Bucket(features) : std::vector<int64_t>{},
                budget_bytes};
  bool registered = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!valid.ok()) return Fallback(key, valid);
    if (const Cached* hit = cache_.Get(key)) {
      ++stats_.local_hits;
      PlanChoice choice;
      choice.actions = hit->actions;
      choice.copies_out_landed = hit->copies_out_landed;
      choice.predicted_peak_bytes = hit->predicted_peak_bytes;
      choice.solver = hit->solver;
      choice.source = PlanSource::kLocalCache;
      choice.bucket = key.first;
      return choice;
    }
    registered = registered_;
    ++stats_.planner_calls;
  }
  // The planner is called without the lock: a slow answer must not hold
  // other threads' local hits. Registering twice is harmless (idempotent).
  absl::Status failed;
  absl::StatusOr<PlanResult> result;
  if (!registered) failed = planner_->RegisterModel(model_);
  if (failed.ok()) result = planner_->GetPlan(Request(features, budget_bytes));

  std::lock_guard<std::mutex> lock(mu_);
  if (!failed.ok()) return Fallback(key, failed);
  registered_ = true;
  if (!result.ok()) return Fallback(key, result.status());
  PlanChoice choice;
  choice.bucket = key.first;
  if (result->collect) {
    ++stats_.collects;
    // The planner's safe plan (it may send checkpoints to host), if it is
    // one and this runtime can run it.
    const std::vector<Action> safe = SafeActions(model_);
    bool planned = result->plan != nullptr &&
                   CheckActions(model_, result->plan->actions, options_.offload,
                                options_.offload_checkpoints)
                       .ok();
    for (size_t i = 0; planned && i < safe.size(); ++i) {
      const Action a = result->plan->actions[i];
      planned = safe[i] == Action::kKeep ? a == Action::kKeep : Recomputes(a);
    }
    choice.actions = planned ? result->plan->actions : safe;
    if (planned) choice.copies_out_landed = result->plan->copies_out_landed;
    choice.source = PlanSource::kCollect;
    return choice;
  }
  if (result->plan == nullptr) {
    return Fallback(key, absl::InternalError(
                             "planner returned neither a plan nor COLLECT"));
  }
  absl::Status usable =
      CheckActions(model_, result->plan->actions, options_.offload,
                   options_.offload_checkpoints);
  if (!usable.ok()) return Fallback(key, usable);
  choice.actions = result->plan->actions;
  choice.copies_out_landed = result->plan->copies_out_landed;
  choice.source = PlanSource::kPlanner;
  choice.predicted_peak_bytes = result->plan->predicted_peak_bytes;
  choice.solver = result->plan->solver;
  if (result->bucket == key.first) {
    const Cached plan{choice.actions, choice.copies_out_landed,
                      choice.predicted_peak_bytes, choice.solver};
    cache_.Put(key, plan);
    last_good_.Put(key, plan);
  }
  return choice;
}

}  // namespace remat
