// The planner as a trainer sees it: one interface with an in-process
// implementation (LocalPlanner, below) and a gRPC one (RemotePlanner, in
// remote_planner.h). No LibTorch here: the runtime includes it.
//
// Thread safety: implementations are thread-safe.
#ifndef REMAT_CLIENT_PLANNER_H_
#define REMAT_CLIENT_PLANNER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "planner/core.h"

namespace remat {

class Planner {
 public:
  virtual ~Planner() = default;
  // Same contracts as the PlannerCore methods of the same names.
  virtual absl::Status RegisterModel(const ModelSpec& spec) = 0;
  virtual absl::StatusOr<PlanResult> GetPlan(const PlanRequest& request) = 0;
  virtual absl::Status ReportSamples(const std::string& model,
                                     const std::vector<Sample>& samples) = 0;
  virtual absl::Status ReportOutcome(const Outcome& outcome) = 0;
};

// The embedded default: a PlannerCore in this process; no daemon needed.
class LocalPlanner final : public Planner {
 public:
  explicit LocalPlanner(CoreOptions options = {});
  absl::Status RegisterModel(const ModelSpec& spec) override;
  absl::StatusOr<PlanResult> GetPlan(const PlanRequest& request) override;
  absl::Status ReportSamples(const std::string& model,
                             const std::vector<Sample>& samples) override;
  absl::Status ReportOutcome(const Outcome& outcome) override;
  PlannerCore& core() { return core_; }

 private:
  PlannerCore core_;
};

}  // namespace remat

#endif  // REMAT_CLIENT_PLANNER_H_
