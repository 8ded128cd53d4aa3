// Conversions between the remat.v1 messages and the planning core's types.
// The daemon's service and the remote client both use them, so the two
// sides of the wire cannot drift apart.
//
// Features travel as maps keyed by feature name; converting them needs the
// model's spec, which gives the order. Errors are INVALID_ARGUMENT naming
// the field (with the prefix the caller passes, e.g. "samples[3]").
//
// Thread safety: pure functions.
#ifndef REMAT_PLANNER_SERVICE_CONVERT_H_
#define REMAT_PLANNER_SERVICE_CONVERT_H_

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "google/protobuf/map.h"
#include "planner/core.h"
#include "planner/model.h"
#include "planner/plan.h"
#include "proto/remat.pb.h"
#include "proto/wal.pb.h"

namespace remat {

using FeatureMap = google::protobuf::Map<std::string, double>;

// Structural only; ValidateModelSpec (or PlannerCore) checks the contents.
ModelSpec ModelSpecFromProto(const v1::ModelSpec& proto);
void ModelSpecToProto(const ModelSpec& spec, v1::ModelSpec* proto);

// Orders `map` by spec.feature_names. INVALID_ARGUMENT for a missing or
// unknown feature ("<field>: missing feature \"seq\" ...").
absl::StatusOr<Features> FeaturesFromMap(const ModelSpec& spec,
                                         const FeatureMap& map,
                                         const std::string& field);
// Precondition: features.size() == spec.feature_names.size().
void FeaturesToMap(const ModelSpec& spec, const Features& features,
                   FeatureMap* map);

absl::StatusOr<Sample> SampleFromProto(const ModelSpec& spec,
                                       const v1::Sample& proto,
                                       const std::string& field);
void SampleToProto(const ModelSpec& spec, const Sample& sample,
                   v1::Sample* proto);

// INVALID_ARGUMENT for ACTION_UNSPECIFIED or an unknown number.
absl::StatusOr<Action> ActionFromProto(int action, const std::string& field);
v1::Action ActionToProto(Action action);
// UNSPECIFIED is nullopt; an unknown value is INVALID_ARGUMENT naming field.
absl::StatusOr<std::optional<PlanSource>> PlanSourceFromProto(
    int source, const std::string& field);
v1::PlanSource PlanSourceToProto(std::optional<PlanSource> source);

// Block names come from `spec`; plan.actions.size() must match its blocks
// (reasons may be shorter).
// `with_reasons`: fill BlockPlan.reason.
void PlanToProto(const ModelSpec& spec, const Plan& plan, v1::Plan* proto,
                 bool with_reasons = true);
absl::StatusOr<Plan> PlanFromProto(const v1::Plan& proto);

// GetPlan and ExplainPlan answers.
void PlanResultToProto(const ModelSpec& spec, const PlanResult& result,
                       v1::GetPlanResponse* proto, bool with_reasons = true);
absl::StatusOr<PlanResult> PlanResultFromProto(
    const v1::GetPlanResponse& proto);
void ExplainResultToProto(const ModelSpec& spec, const PlanResult& result,
                          int64_t budget_bytes, v1::ExplainPlanResponse* proto);

absl::StatusOr<Outcome> OutcomeFromProto(const ModelSpec& spec,
                                         const v1::ReportOutcomeRequest& proto);
void OutcomeToProto(const ModelSpec& spec, const Outcome& outcome,
                    v1::ReportOutcomeRequest* proto);

// The estimator's verdict on a batch of samples, as the log records it.
void VerdictToProto(const SampleVerdict& verdict, v1::SampleVerdict* proto);
// INVALID_ARGUMENT when an index is not below `num_samples`.
absl::StatusOr<SampleVerdict> VerdictFromProto(const v1::SampleVerdict& proto,
                                               size_t num_samples);

void ModelStateToProto(const ModelState& state, const PlanCacheStats& cache,
                       v1::GetModelStateResponse* proto);

// A profile file (`remat export` writes one, `remat import` and
// `rematd --import` read it): the serialised v1::Profile. Read errors name
// the path and what is wrong; a write lands whole or not at all (a
// temporary file renamed over the path).
absl::StatusOr<v1::Profile> ReadProfileFile(const std::string& path);
absl::Status WriteProfileFile(const std::string& path,
                              const v1::Profile& profile);

}  // namespace remat

#endif  // REMAT_PLANNER_SERVICE_CONVERT_H_
