#include "planner/service/convert.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace remat {
ModelSpec ModelSpecFromProto(const v1::ModelSpec& proto) {
  ModelSpec spec;
  spec.name = proto.name();
  spec.feature_names.assign(proto.feature_names().begin(),
                            proto.feature_names().end());
  spec.blocks.reserve(proto.blocks_size());
  for (const v1::Block& b : proto.blocks()) {
    spec.blocks.push_back(BlockSpec{b.name(), b.checkpointable()});
  }
  return spec;
}

void ModelSpecToProto(const ModelSpec& spec, v1::ModelSpec* proto) {
  proto->Clear();
  proto->set_name(spec.name);
  for (const std::string& f : spec.feature_names) proto->add_feature_names(f);
  for (const BlockSpec& b : spec.blocks) {
    v1::Block* block = proto->add_blocks();
    block->set_name(b.name);
    block->set_checkpointable(b.checkpointable);
  }
}

absl::StatusOr<Features> FeaturesFromMap(const ModelSpec& spec,
                                         const FeatureMap& map,
                                         const std::string& field) {
  Features features(spec.feature_names.size());
  for (size_t i = 0; i < spec.feature_names.size(); ++i) {
    auto it = map.find(spec.feature_names[i]);
    if (it == map.end()) {
      return InvalidField(field,
                     absl::StrCat("missing feature \"", spec.feature_names[i],
                                  "\"; model \"", spec.name, "\" needs ",
                                  absl::StrJoin(spec.feature_names, ", ")));
    }
    features[i] = it->second;
  }
  if (map.size() != spec.feature_names.size()) {
    const std::set<std::string> known(spec.feature_names.begin(),
                                      spec.feature_names.end());
    for (const auto& kv : map) {
      if (known.count(kv.first) == 0) {
        return InvalidField(
            absl::StrCat(field, "[\"", kv.first, "\"]"),
            absl::StrCat("not a feature of model \"", spec.name, "\" (it has ",
                         absl::StrJoin(spec.feature_names, ", "), ")"));
      }
    }
  }
  return features;
}

void FeaturesToMap(const ModelSpec& spec, const Features& features,
                   FeatureMap* map) {
  map->clear();
  for (size_t i = 0; i < spec.feature_names.size() && i < features.size();
       ++i) {
    (*map)[spec.feature_names[i]] = features[i];
  }
}

absl::StatusOr<Sample> SampleFromProto(const ModelSpec& spec,
                                       const v1::Sample& proto,
                                       const std::string& field) {
  Sample sample;
  auto features =
      FeaturesFromMap(spec, proto.features(), absl::StrCat(field, ".features"));
  if (!features.ok()) return features.status();
  sample.features = *std::move(features);
  sample.blocks.reserve(proto.blocks_size());
  for (const v1::BlockMeasurement& b : proto.blocks()) {
    sample.blocks.push_back(
        BlockMeasurement{b.act_bytes(), b.input_bytes(), b.forward_ns()});
    if (b.has_workspace_bytes()) {
      sample.blocks.back().workspace_bytes = b.workspace_bytes();
    }
    if (b.has_transfer_bytes()) {
      sample.blocks.back().transfer_bytes = b.transfer_bytes();
    }
  }
  if (proto.has_base_bytes()) sample.base_bytes = proto.base_bytes();
  if (proto.has_peak_bytes()) sample.peak_bytes = proto.peak_bytes();
  if (proto.has_tail_bytes()) sample.tail_bytes = proto.tail_bytes();
  if (proto.has_d2h_bytes_per_s()) {
    sample.d2h_bytes_per_s = proto.d2h_bytes_per_s();
  }
  if (proto.has_h2d_bytes_per_s()) {
    sample.h2d_bytes_per_s = proto.h2d_bytes_per_s();
  }
  sample.device = proto.device();
  return sample;
}

void SampleToProto(const ModelSpec& spec, const Sample& sample,
                   v1::Sample* proto) {
  proto->Clear();
  FeaturesToMap(spec, sample.features, proto->mutable_features());
  for (const BlockMeasurement& b : sample.blocks) {
    v1::BlockMeasurement* m = proto->add_blocks();
    m->set_act_bytes(b.act_bytes);
    m->set_input_bytes(b.input_bytes);
    m->set_forward_ns(b.forward_ns);
    if (b.workspace_bytes) m->set_workspace_bytes(*b.workspace_bytes);
    if (b.transfer_bytes) m->set_transfer_bytes(*b.transfer_bytes);
  }
  if (sample.base_bytes) proto->set_base_bytes(*sample.base_bytes);
  if (sample.peak_bytes) proto->set_peak_bytes(*sample.peak_bytes);
  if (sample.tail_bytes) proto->set_tail_bytes(*sample.tail_bytes);
  if (sample.d2h_bytes_per_s) {
    proto->set_d2h_bytes_per_s(*sample.d2h_bytes_per_s);
  }
  if (sample.h2d_bytes_per_s) {
    proto->set_h2d_bytes_per_s(*sample.h2d_bytes_per_s);
  }
  proto->set_device(sample.device);
}

// The wire enum's values carry the names of plan.h's actions (kActions):
// the two are matched by name.
absl::StatusOr<Action> ActionFromProto(int action, const std::string& field) {
  Action ours;
  if (action != v1::ACTION_UNSPECIFIED && v1::Action_IsValid(action) &&
      ParseAction(v1::Action_Name(static_cast<v1::Action>(action)), &ours)) {
    return ours;
  }
  std::vector<std::string> names;
  for (const ActionInfo& info : kActions) names.push_back(info.name);
  return InvalidField(field, absl::StrCat("unknown action ", action, "; use ",
                                          absl::StrJoin(names, ", ")));
}

v1::Action ActionToProto(Action action) {
  v1::Action wire = v1::ACTION_UNSPECIFIED;
  v1::Action_Parse(ActionName(action), &wire);
  return wire;
}

namespace {

// PlanSource and its wire enum, in one table.
constexpr std::pair<PlanSource, v1::PlanSource> kPlanSources[] = {
    {PlanSource::kPlanner, v1::PLAN_SOURCE_PLANNER},
    {PlanSource::kLocalCache, v1::PLAN_SOURCE_LOCAL_CACHE},
    {PlanSource::kCollect, v1::PLAN_SOURCE_COLLECT},
    {PlanSource::kLastGood, v1::PLAN_SOURCE_LAST_GOOD},
    {PlanSource::kSafe, v1::PLAN_SOURCE_SAFE},
};

}  // namespace

absl::StatusOr<std::optional<PlanSource>> PlanSourceFromProto(
    int source, const std::string& field) {
  if (source == v1::PLAN_SOURCE_UNSPECIFIED) return std::nullopt;
  for (const auto& [ours, wire] : kPlanSources) {
    if (wire == source) return ours;
  }
  return InvalidField(field, absl::StrCat("unknown plan source ", source,
                                          "; leave it unset when unknown"));
}

v1::PlanSource PlanSourceToProto(std::optional<PlanSource> source) {
  for (const auto& [ours, wire] : kPlanSources) {
    if (source == ours) return wire;
  }
  return v1::PLAN_SOURCE_UNSPECIFIED;
}

void PlanToProto(const ModelSpec& spec, const Plan& plan, v1::Plan* proto,
                 bool with_reasons) {
  proto->Clear();
  for (size_t i = 0; i < plan.actions.size(); ++i) {
    v1::BlockPlan* b = proto->add_blocks();
    if (i < spec.blocks.size()) b->set_block(spec.blocks[i].name);
    b->set_action(ActionToProto(plan.actions[i]));
    if (with_reasons && i < plan.reasons.size()) {
      b->set_reason(plan.reasons[i]);
    }
    if (i < plan.copies_out_landed.size()) {
      b->set_copies_out_landed(plan.copies_out_landed[i]);
    }
  }
  proto->set_predicted_peak_bytes(plan.predicted_peak_bytes);
  proto->set_recompute_ns(plan.recompute_ns);
  proto->set_solver(plan.solver);
  proto->set_feasible(plan.feasible);
  proto->set_exposed_transfer_ns(plan.exposed_transfer_ns);
  if (plan.optimality_gap_ns) {
    proto->set_optimality_gap_ns(*plan.optimality_gap_ns);
  }
}

absl::StatusOr<Plan> PlanFromProto(const v1::Plan& proto) {
  Plan plan;
  plan.actions.reserve(proto.blocks_size());
  plan.reasons.reserve(proto.blocks_size());
  for (int i = 0; i < proto.blocks_size(); ++i) {
    auto action = ActionFromProto(proto.blocks(i).action(),
                                  absl::StrCat("plan.blocks[", i, "].action"));
    if (!action.ok()) return action.status();
    plan.actions.push_back(*action);
    plan.reasons.push_back(proto.blocks(i).reason());
    const int32_t landed = proto.blocks(i).copies_out_landed();
    const int32_t below =
        plan.copies_out_landed.empty() ? 0 : plan.copies_out_landed.back();
    if (landed < below || landed > i) {
      return absl::InvalidArgumentError(absl::StrCat(
          "plan.blocks[", i, "].copies_out_landed: ", landed,
          " must be in [", below,
          ", ", i, "] (at least the block below's, at most the block's index)"));
    }
    plan.copies_out_landed.push_back(landed);
  }
  plan.predicted_peak_bytes = proto.predicted_peak_bytes();
  plan.recompute_ns = proto.recompute_ns();
  plan.solver = proto.solver();
  plan.feasible = proto.feasible();
  plan.exposed_transfer_ns = proto.exposed_transfer_ns();
  if (proto.has_optimality_gap_ns()) {
    plan.optimality_gap_ns = proto.optimality_gap_ns();
  }
  return plan;
}

void PlanResultToProto(const ModelSpec& spec, const PlanResult& result,
                       v1::GetPlanResponse* proto, bool with_reasons) {
  proto->Clear();
  if (result.collect || result.plan == nullptr) {
    proto->set_decision(v1::COLLECT);
    proto->set_collect_reason(result.collect_reason);
  } else {
    proto->set_decision(v1::PLAN);
  }
  // COLLECT carries the plan to run too (every checkpointable block
  // recomputed; from Explain, the plan the estimator would make).
  if (result.plan != nullptr) {
    PlanToProto(spec, *result.plan, proto->mutable_plan(), with_reasons);
  }
  proto->set_from_cache(result.from_cache);
  for (int64_t b : result.bucket) proto->add_bucket(b);
  for (const std::string& f : spec.feature_names) {
    proto->add_bucket_features(f);
  }
}

absl::StatusOr<PlanResult> PlanResultFromProto(
    const v1::GetPlanResponse& proto) {
  PlanResult result;
  switch (proto.decision()) {
    case v1::COLLECT:
      result.collect = true;
      result.collect_reason = proto.collect_reason();
      if (proto.has_plan()) {
        auto plan = PlanFromProto(proto.plan());
        if (!plan.ok()) return plan.status();
        result.plan = std::make_shared<const Plan>(*std::move(plan));
      }
      break;
    case v1::PLAN: {
      auto plan = PlanFromProto(proto.plan());
      if (!plan.ok()) return plan.status();
      result.plan = std::make_shared<const Plan>(*std::move(plan));
      break;
    }
    default:
      return InvalidField("decision",
                     absl::StrCat("unknown decision ", proto.decision()));
  }
  result.from_cache = proto.from_cache();
  result.bucket.assign(proto.bucket().begin(), proto.bucket().end());
  return result;
}

void ExplainResultToProto(const ModelSpec& spec, const PlanResult& result,
                          int64_t budget_bytes,
                          v1::ExplainPlanResponse* proto) {
  v1::GetPlanResponse plan;
  PlanResultToProto(spec, result, &plan);
  proto->Clear();
  proto->set_decision(plan.decision());
  *proto->mutable_plan() = plan.plan();
  proto->set_collect_reason(plan.collect_reason());
  proto->set_from_cache(plan.from_cache());
  *proto->mutable_bucket() = plan.bucket();
  *proto->mutable_bucket_features() = plan.bucket_features();
  proto->set_budget_bytes(budget_bytes);
  if (result.plan != nullptr) {
    proto->set_headroom_bytes(budget_bytes - result.plan->predicted_peak_bytes);
  }
}

absl::StatusOr<Outcome> OutcomeFromProto(
    const ModelSpec& spec, const v1::ReportOutcomeRequest& proto) {
  Outcome outcome;
  outcome.model = proto.model();
  auto features = FeaturesFromMap(spec, proto.features(), "features");
  if (!features.ok()) return features.status();
  outcome.features = *std::move(features);
  if (proto.actions_size() != static_cast<int>(spec.blocks.size())) {
    return InvalidField(
        "actions",
        absl::StrCat("has ", proto.actions_size(), " entries; model \"",
                     spec.name, "\" has ", spec.blocks.size(), " blocks"));
  }
  for (int i = 0; i < proto.actions_size(); ++i) {
    auto action =
        ActionFromProto(proto.actions(i), absl::StrCat("actions[", i, "]"));
    if (!action.ok()) return action.status();
    outcome.actions.push_back(*action);
  }
  outcome.measured_peak_bytes = proto.measured_peak_bytes();
  outcome.step_ns = proto.step_ns();
  outcome.out_of_memory = proto.out_of_memory();
  auto source = PlanSourceFromProto(proto.plan_source(), "plan_source");
  if (!source.ok()) return source.status();
  outcome.plan_source = *source;
  if (proto.has_copy_wait_ns()) outcome.copy_wait_ns = proto.copy_wait_ns();
  if (proto.has_reserved_peak_bytes()) {
    outcome.reserved_peak_bytes = proto.reserved_peak_bytes();
  }
  outcome.device = proto.device();
  return outcome;
}

void OutcomeToProto(const ModelSpec& spec, const Outcome& outcome,
                    v1::ReportOutcomeRequest* proto) {
  proto->Clear();
  proto->set_model(outcome.model);
  FeaturesToMap(spec, outcome.features, proto->mutable_features());
  for (Action a : outcome.actions) proto->add_actions(ActionToProto(a));
  proto->set_measured_peak_bytes(outcome.measured_peak_bytes);
  proto->set_step_ns(outcome.step_ns);
  proto->set_out_of_memory(outcome.out_of_memory);
  proto->set_plan_source(PlanSourceToProto(outcome.plan_source));
  if (outcome.copy_wait_ns) proto->set_copy_wait_ns(*outcome.copy_wait_ns);
  if (outcome.reserved_peak_bytes) {
    proto->set_reserved_peak_bytes(*outcome.reserved_peak_bytes);
  }
  proto->set_device(outcome.device);
}

void VerdictToProto(const SampleVerdict& verdict, v1::SampleVerdict* proto) {
  proto->Clear();
  for (size_t i = 0; i < verdict.quarantined.size(); ++i) {
    if (verdict.quarantined[i]) proto->add_quarantined(static_cast<uint32_t>(i));
  }
  proto->set_release_quarantine(verdict.release_quarantine);
}

absl::StatusOr<SampleVerdict> VerdictFromProto(const v1::SampleVerdict& proto,
                                               size_t num_samples) {
  SampleVerdict verdict;
  verdict.release_quarantine = proto.release_quarantine();
  if (proto.quarantined_size() == 0) return verdict;
  verdict.quarantined.assign(num_samples, false);
  for (int i = 0; i < proto.quarantined_size(); ++i) {
    const uint32_t index = proto.quarantined(i);
    if (index >= num_samples) {
      return InvalidField(absl::StrCat("verdict.quarantined[", i, "]"),
                     absl::StrCat(index, " is not a sample index (the record "
                                         "has ", num_samples, " samples)"));
    }
    verdict.quarantined[index] = true;
  }
  return verdict;
}

void ModelStateToProto(const ModelState& state, const PlanCacheStats& cache,
                       v1::GetModelStateResponse* proto) {
  proto->Clear();
  ModelSpecToProto(state.spec, proto->mutable_model());
  proto->set_num_samples(state.num_samples);
  proto->set_num_quarantined(state.num_quarantined);
  for (const BlockFitQuality& q : state.fit_quality) {
    v1::BlockFitQuality* p = proto->add_fit_quality();
    p->set_block(q.block);
    p->set_act_rel_rmse(q.act_rel_rmse);
  }
  for (const FeatureRange& r : state.observed_range) {
    v1::FeatureRange* p = proto->add_observed_range();
    p->set_feature(r.feature);
    p->set_min(r.min);
    p->set_max(r.max);
  }
  proto->set_outcomes(state.outcomes);
  proto->set_out_of_memory(state.out_of_memory);
  proto->set_outcomes_quarantined(state.outcomes_quarantined);
  proto->set_reserved_ratio(state.reserved_ratio);
  proto->set_reserved_outcomes(state.reserved_outcomes);
  proto->set_device(state.device);
  v1::CacheStats* c = proto->mutable_cache();
  c->set_hits(cache.hits);
  c->set_misses(cache.misses);
  c->set_evictions(cache.evictions);
  c->set_invalidations(cache.invalidations);
  c->set_size(cache.size);
}

absl::StatusOr<v1::Profile> ReadProfileFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::NotFoundError(
        absl::StrCat(path, ": cannot open: ", std::strerror(errno)));
  }
  v1::Profile profile;
  if (!profile.ParseFromIstream(&in) || profile.format_version() == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": not a profile (the files `remat export` writes)"));
  }
  return profile;
}

absl::Status WriteProfileFile(const std::string& path,
                              const v1::Profile& profile) {
  const std::string temporary = path + ".tmp";
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    if (!out || !profile.SerializeToOstream(&out) || !out.flush()) {
      std::remove(temporary.c_str());
      return absl::UnavailableError(
          absl::StrCat(path, ": cannot write: ", std::strerror(errno)));
    }
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    std::remove(temporary.c_str());
    return absl::UnavailableError(
        absl::StrCat(path, ": cannot write: ", why));
  }
  return absl::OkStatus();
}

}  // namespace remat
