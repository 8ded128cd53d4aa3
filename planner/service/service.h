// The remat.v1.Planner service's handlers (the daemon serves them through
// the async API, async_server.h): translates each RPC into PlannerCore calls
// (planner/service/convert.h), makes accepted writes durable in the
// write-ahead log before acknowledging them, enforces the daemon's limits,
// and records metrics and one log line per plan decision. No planning logic
// lives here.
//
// Write ordering: RegisterModel holds a mutex across "log, then register"
// so a registration always precedes its model's samples in the log.
// ReportSamples and ReportOutcome apply to the core first (which validates,
// all or nothing), then log; OK is returned only after the log is synced.
// If logging fails the call returns UNAVAILABLE and the data may be in
// memory without being durable: the client must retry (duplicates are
// possible, losses are not).
//
// Thread safety: every RPC may run concurrently.
#ifndef REMAT_PLANNER_SERVICE_SERVICE_H_
#define REMAT_PLANNER_SERVICE_SERVICE_H_

#include <grpcpp/server_context.h>
#include <grpcpp/support/status.h>

#include <atomic>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "planner/core.h"
#include "planner/service/metrics.h"
#include "planner/service/status_convert.h"
#include "planner/service/wal.h"
#include "proto/remat.pb.h"
#include "proto/wal.pb.h"

namespace remat {

struct ServiceLimits {
  int max_models = 256;
  int max_blocks_per_model = kMaxBlocks;
  int max_samples_per_request = 10000;
  // Compact the log past this size (and twice its last compacted size);
  // 0: never.
  int64_t wal_compact_bytes = int64_t{64} << 20;
};

class PlannerService final {
 public:
  // `core` and `metrics` must outlive the service; `wal` may be null (no
  // state dir: nothing is durable) and, when set, must outlive it too.
  PlannerService(PlannerCore* core, Wal* wal, Metrics* metrics,
                 ServiceLimits limits);

  // Until ready, every RPC answers UNAVAILABLE ("loading state").
  void SetReady(bool ready) { ready_ = ready; }

  // Rewrites the log with CompactWalRecords (wal_compaction.h) when it is
  // past the threshold; logs what it did. Writes wait meanwhile. Called
  // after every logged write, and by the daemon after replay.
  void MaybeCompactLog();

  grpc::Status RegisterModel(grpc::ServerContext* context,
                             const v1::RegisterModelRequest* request,
                             v1::RegisterModelResponse* response);
  grpc::Status ReportSamples(grpc::ServerContext* context,
                             const v1::ReportSamplesRequest* request,
                             v1::ReportSamplesResponse* response);
  // GetPlan in two steps, so that a server can answer plan-cache hits
  // without waiting behind solves: GetPlanIfCached answers hits (and bad
  // requests) at once and returns nullopt on a miss; then GetPlanUncached
  // estimates and solves.
  std::optional<grpc::Status> GetPlanIfCached(
      grpc::ServerContext* context, const v1::GetPlanRequest* request,
      v1::GetPlanResponse* response);
  grpc::Status GetPlanUncached(grpc::ServerContext* context,
                               const v1::GetPlanRequest* request,
                               v1::GetPlanResponse* response);
  grpc::Status ReportOutcome(grpc::ServerContext* context,
                             const v1::ReportOutcomeRequest* request,
                             v1::ReportOutcomeResponse* response);
  grpc::Status ExplainPlan(grpc::ServerContext* context,
                           const v1::ExplainPlanRequest* request,
                           v1::ExplainPlanResponse* response);
  grpc::Status ListModels(grpc::ServerContext* context,
                          const v1::ListModelsRequest* request,
                          v1::ListModelsResponse* response);
  grpc::Status GetModelState(grpc::ServerContext* context,
                             const v1::GetModelStateRequest* request,
                             v1::GetModelStateResponse* response);
  grpc::Status ExportProfile(grpc::ServerContext* context,
                             const v1::ExportProfileRequest* request,
                             v1::ExportProfileResponse* response);
  grpc::Status ImportProfile(grpc::ServerContext* context,
                             const v1::ImportProfileRequest* request,
                             v1::ImportProfileResponse* response);

  // ImportProfile without a call: what `rematd --import` runs before the
  // daemon is ready.
  absl::Status Import(const v1::ImportProfileRequest& request,
                      v1::ImportProfileResponse* response);

 private:
  absl::Status DoRegisterModel(const v1::RegisterModelRequest& request,
                               v1::RegisterModelResponse* response);
  absl::Status DoReportSamples(const v1::ReportSamplesRequest& request,
                               v1::ReportSamplesResponse* response);
  // cache_only: answer only from the cache; a miss sets *answered false.
  absl::Status DoGetPlan(grpc::ServerContext* context,
                         const v1::GetPlanRequest& request,
                         v1::GetPlanResponse* response, bool cache_only,
                         bool* answered);
  absl::Status DoReportOutcome(const v1::ReportOutcomeRequest& request);
  absl::Status DoExplainPlan(const v1::ExplainPlanRequest& request,
                             v1::ExplainPlanResponse* response);
  absl::Status DoGetModelState(const v1::GetModelStateRequest& request,
                               v1::GetModelStateResponse* response);
  absl::Status DoExportProfile(const v1::ExportProfileRequest& request,
                               v1::ExportProfileResponse* response);

  // Appends to the WAL when there is one; UNAVAILABLE when it fails.
  absl::Status Log(const v1::WalRecord& record);
  // Counts the call and converts the status.
  grpc::Status Finish(const char* method, const absl::Status& status);

  PlannerCore* const core_;
  Wal* const wal_;
  Metrics* const metrics_;
  const ServiceLimits limits_;
  std::atomic<bool> ready_{false};
  absl::Mutex register_mu_;  // orders registrations in the log
  // One import at a time: what a profile holds is read, then added to.
  absl::Mutex import_mu_;
  absl::Mutex compact_mu_;   // one compaction at a time
  // The log size that triggers the next compaction.
  std::atomic<int64_t> next_compaction_bytes_;
};

// The Profile.format_version this daemon writes and the newest it reads.
inline constexpr uint32_t kProfileFormatVersion = 1;

// Applies one replayed log record to `core` (no logging). Errors are what
// the core said; replay logs them and moves on.
absl::Status ApplyWalRecord(PlannerCore* core, const v1::WalRecord& record);

}  // namespace remat

#endif  // REMAT_PLANNER_SERVICE_SERVICE_H_
