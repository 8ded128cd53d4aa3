// RemotePlanner: the Planner interface over gRPC to rematd.
//
// It never lets the planner stall or crash training:
// * every call has a deadline (GetPlan: 50 ms by default);
// * idempotent calls (RegisterModel, GetPlan, GetModelState, ListModels)
//   are retried with exponential backoff on UNAVAILABLE, within their
//   deadline; ReportSamples and ReportOutcome are not retried (a retried
//   batch would be counted twice);
// * calls fail fast while the daemon is down (wait_for_ready is false) and
//   the channel reconnects by itself when it is back;
// * when GetPlan gets no answer (DEADLINE_EXCEEDED, UNAVAILABLE) it returns
//   that error: the fallback (the last good plan for a covering bucket,
//   else the safe plan) is PlanChooser's, the one layer in front of every
//   planner, which reports it as a fallback with the reason;
// * GetPlan answers NOT_FOUND after a daemon lost its state: the client
//   registers the model again (it has the spec: RegisterModel records it
//   even while the daemon is unreachable, or the daemon's GetModelState
//   provides it) and asks once more.
//
// ReportSamples returns the daemon's error (UNAVAILABLE, DEADLINE_EXCEEDED,
// ...) unchanged and keeps nothing: an OK means the samples are durable in
// the daemon; on an error the caller (the runtime) must buffer and retry,
// or drop them knowingly.
//
// Thread safety: every method may be called concurrently.
#ifndef REMAT_CLIENT_REMOTE_PLANNER_H_
#define REMAT_CLIENT_REMOTE_PLANNER_H_

#include <grpcpp/channel.h>
#include <grpcpp/support/channel_arguments.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "client/planner.h"
#include "proto/remat.grpc.pb.h"

namespace remat {

// rematd's default endpoint.
inline constexpr char kDefaultDaemonAddress[] = "127.0.0.1:7421";

// TLS to a daemon that serves it (rematd --tls-cert). All empty: plaintext
// (a unix socket, or loopback TCP without TLS).
struct DaemonTlsOptions {
  // PEM CAs that signed the daemon's certificate. Empty with cert_file set:
  // gRPC's default roots.
  std::string ca_file;
  // PEM client certificate chain and its key, for a daemon that asks for
  // client certificates (rematd --tls-client-ca). Both or neither.
  std::string cert_file;
  std::string key_file;

  bool enabled() const {
    return !ca_file.empty() || !cert_file.empty() || !key_file.empty();
  }
};

struct RemotePlannerOptions {
  // "host:port" or "unix:/path/to/socket".
  std::string address = kDefaultDaemonAddress;
  // TLS over TCP; off by default. A file that cannot be read makes every
  // call fail with FAILED_PRECONDITION naming it.
  DaemonTlsOptions tls;
  // Deadline of one GetPlan, retries included.
  std::chrono::milliseconds get_plan_deadline{50};
  // Deadline of every other call, retries included.
  std::chrono::milliseconds call_deadline{2000};
  // Attempts of an idempotent call on UNAVAILABLE (>= 1).
  int max_attempts = 3;
  // First retry delay; doubles per retry.
  std::chrono::milliseconds initial_backoff{2};
  // At most one warning per interval (the rest are counted).
  std::chrono::milliseconds warning_interval{10000};
};

// The arguments of a channel to rematd: fast reconnects (100 ms first
// backoff, 1 s max) and a 64 MiB receive limit.
grpc::ChannelArguments DaemonChannelArguments();
// A plaintext channel to rematd with DaemonChannelArguments, for
// RemotePlanner and the CLI.
std::shared_ptr<grpc::Channel> MakeDaemonChannel(const std::string& address);
// The same over TLS when `tls.enabled()`. FAILED_PRECONDITION naming a file
// that cannot be read, or a cert_file without key_file (or the reverse).
absl::StatusOr<std::shared_ptr<grpc::Channel>> MakeDaemonChannel(
    const std::string& address, const DaemonTlsOptions& tls);

class RemotePlanner final : public Planner {
 public:
  explicit RemotePlanner(RemotePlannerOptions options = {});

  absl::Status RegisterModel(const ModelSpec& spec) override;
  absl::StatusOr<PlanResult> GetPlan(const PlanRequest& request) override;
  absl::Status ReportSamples(const std::string& model,
                             const std::vector<Sample>& samples) override;
  absl::Status ReportOutcome(const Outcome& outcome) override;

  // Not part of Planner: for tools and tests.
  absl::StatusOr<v1::GetModelStateResponse> GetModelState(
      const std::string& model, const std::string& device = "");
  absl::StatusOr<v1::ListModelsResponse> ListModels();
  absl::StatusOr<v1::ExplainPlanResponse> ExplainPlan(
      const PlanRequest& request);

  struct Stats {
    uint64_t plans_from_daemon = 0;
    uint64_t reregistrations = 0;
  };
  Stats stats() const;

 private:
  // The spec recorded by RegisterModel or fetched from the daemon.
  absl::StatusOr<ModelSpec> Spec(const std::string& model);
  absl::StatusOr<PlanResult> CallGetPlan(const ModelSpec& spec,
                                         const PlanRequest& request);
  void Remember(const PlanRequest& request, const PlanResult& result);
  void Warn(const std::string& message);

  const RemotePlannerOptions options_;
  // Not OK when the TLS options could not be used; every call returns it.
  grpc::Status channel_error_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Planner::Stub> stub_;

  mutable absl::Mutex mu_;
  std::map<std::string, ModelSpec> specs_ ABSL_GUARDED_BY(mu_);
  // Predicted peak of the latest plan per (model, features), so outcomes
  // can carry it (bounded; cleared when full).
  std::map<std::pair<std::string, Features>, int64_t> predicted_
      ABSL_GUARDED_BY(mu_);
  Stats stats_ ABSL_GUARDED_BY(mu_);
  std::chrono::steady_clock::time_point last_warning_ ABSL_GUARDED_BY(mu_);
  uint64_t suppressed_warnings_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace remat

#endif  // REMAT_CLIENT_REMOTE_PLANNER_H_
