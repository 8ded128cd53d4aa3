#include "client/planner.h"

#include <utility>

namespace remat {

LocalPlanner::LocalPlanner(CoreOptions options) : core_(std::move(options)) {}

absl::Status LocalPlanner::RegisterModel(const ModelSpec& spec) {
  return core_.RegisterModel(spec);
}

absl::StatusOr<PlanResult> LocalPlanner::GetPlan(const PlanRequest& request) {
  return core_.GetPlan(request);
}

absl::Status LocalPlanner::ReportSamples(const std::string& model,
                                         const std::vector<Sample>& samples) {
  return core_.AddSamples(model, samples);
}

absl::Status LocalPlanner::ReportOutcome(const Outcome& outcome) {
  return core_.ReportOutcome(outcome);
}

}  // namespace remat
