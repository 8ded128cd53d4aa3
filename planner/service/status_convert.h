// The one place that converts between absl::Status (the planning core, the
// client's API) and grpc::Status (the wire). Both use the canonical codes,
// so the mapping is the identity on codes and messages.
//
// Thread safety: pure functions.
#ifndef REMAT_PLANNER_SERVICE_STATUS_CONVERT_H_
#define REMAT_PLANNER_SERVICE_STATUS_CONVERT_H_

#include <grpcpp/support/status.h>

#include "absl/status/status.h"

namespace remat {

grpc::Status ToGrpcStatus(const absl::Status& status);
absl::Status FromGrpcStatus(const grpc::Status& status);

// Trailing metadata key on a GetPlan RESOURCE_EXHAUSTED that means "no plan
// fits": the smallest reachable predicted peak, in bytes (decimal).
inline constexpr char kSmallestPeakMetadataKey[] = "remat-smallest-peak-bytes";

}  // namespace remat

#endif  // REMAT_PLANNER_SERVICE_STATUS_CONVERT_H_
