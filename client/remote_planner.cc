#include "client/remote_planner.h"

#include <grpcpp/client_context.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/support/channel_arguments.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "planner/plan.h"
#include "planner/service/convert.h"
#include "planner/service/status_convert.h"
#include "spdlog/spdlog.h"

namespace remat {
namespace {

using Clock = std::chrono::system_clock;

// Runs `call` with a fresh context per attempt, all attempts within
// `deadline`; retries only idempotent calls, only on UNAVAILABLE.
// A channel_error that is not OK is returned as it is, without a call.
template <typename Call>
grpc::Status Invoke(const grpc::Status& channel_error,
                    const RemotePlannerOptions& options,
                    Clock::time_point deadline, bool idempotent, Call&& call) {
  if (!channel_error.ok()) return channel_error;
  std::chrono::milliseconds backoff = options.initial_backoff;
  for (int attempt = 1;; ++attempt) {
    grpc::ClientContext context;
    context.set_deadline(deadline);
    context.set_wait_for_ready(false);  // fail fast while the daemon is down
    grpc::Status s = call(&context);
    if (s.ok() || !idempotent ||
        s.error_code() != grpc::StatusCode::UNAVAILABLE ||
        attempt >= options.max_attempts) {
      return s;
    }
    if (Clock::now() + backoff >= deadline) return s;
    std::this_thread::sleep_for(backoff);
    backoff *= 2;
  }
}

// Errors that mean "no answer from the daemon", as opposed to "the daemon
// answered no" (INTERNAL, a bug in rematd, is an answer).
bool IsUnreachable(const absl::Status& s) {
  switch (s.code()) {
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kDeadlineExceeded:
    case absl::StatusCode::kCancelled:
    case absl::StatusCode::kAborted:
    case absl::StatusCode::kUnknown:
      return true;
    default:
      return false;
  }
}

// A GetPlan or ExplainPlan request (they carry the same fields).
template <typename ProtoRequest>
ProtoRequest PlanRequestToProto(const ModelSpec& spec,
                                const PlanRequest& request) {
  ProtoRequest proto;
  proto.set_model(request.model);
  FeaturesToMap(spec, request.features, proto.mutable_features());
  proto.set_budget_bytes(request.budget_bytes);
  proto.set_solver(request.solver);
  proto.set_no_offload(!request.offload);
  proto.set_offload_checkpoints(request.offload_checkpoints);
  proto.set_device(request.device);
  return proto;
}

}  // namespace

grpc::ChannelArguments DaemonChannelArguments() {
  grpc::ChannelArguments args;
  // Reconnect quickly after a daemon restart; the defaults back off to 2 min.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  args.SetMaxReceiveMessageSize(64 << 20);
  return args;
}

std::shared_ptr<grpc::Channel> MakeDaemonChannel(const std::string& address) {
  return grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(),
                                   DaemonChannelArguments());
}

absl::StatusOr<std::shared_ptr<grpc::Channel>> MakeDaemonChannel(
    const std::string& address, const DaemonTlsOptions& tls) {
  if (!tls.enabled()) return MakeDaemonChannel(address);
  if (tls.cert_file.empty() != tls.key_file.empty()) {
    return absl::FailedPreconditionError(
        "TLS: a client certificate needs its key: give both --tls-cert and "
        "--tls-key");
  }
  auto read = [](const std::string& path, const char* flag,
                 std::string* out) -> absl::Status {
    if (path.empty()) return absl::OkStatus();
    std::ifstream in(path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    if (!in || ss.str().find("-----BEGIN ") == std::string::npos) {
      return absl::FailedPreconditionError(absl::StrCat(
          "TLS: ", flag, " \"", path, "\" cannot be read or holds no PEM"));
    }
    *out = ss.str();
    return absl::OkStatus();
  };
  grpc::SslCredentialsOptions options;
  if (auto s = read(tls.ca_file, "--tls-ca", &options.pem_root_certs);
      !s.ok()) {
    return s;
  }
  if (auto s = read(tls.cert_file, "--tls-cert", &options.pem_cert_chain);
      !s.ok()) {
    return s;
  }
  if (auto s = read(tls.key_file, "--tls-key", &options.pem_private_key);
      !s.ok()) {
    return s;
  }
  return grpc::CreateCustomChannel(address, grpc::SslCredentials(options),
                                   DaemonChannelArguments());
}

RemotePlanner::RemotePlanner(RemotePlannerOptions options)
    : options_(std::move(options)) {
  auto channel = MakeDaemonChannel(options_.address, options_.tls);
  if (channel.ok()) {
    channel_ = *std::move(channel);
  } else {
    channel_error_ = grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                                  std::string(channel.status().message()));
    channel_ = MakeDaemonChannel(options_.address);  // never used
  }
  stub_ = v1::Planner::NewStub(channel_);
}

absl::Status RemotePlanner::RegisterModel(const ModelSpec& spec) {
  // Validate here too, so the safe plan is never built from a bad spec.
  if (auto s = ValidateModelSpec(spec); !s.ok()) return s;
  v1::RegisterModelRequest request;
  ModelSpecToProto(spec, request.mutable_model());
  v1::RegisterModelResponse response;
  const grpc::Status s =
      Invoke(channel_error_, options_, Clock::now() + options_.call_deadline,
             /*idempotent=*/true, [&](grpc::ClientContext* c) {
               return stub_->RegisterModel(c, request, &response);
             });
  absl::Status status = FromGrpcStatus(s);
  // Keep the spec even when the daemon is unreachable: later calls need it
  // to build their requests once it is back.
  if (status.ok() || IsUnreachable(status)) {
    absl::MutexLock lock(&mu_);
    specs_[spec.name] = spec;
  }
  return status;
}

absl::StatusOr<ModelSpec> RemotePlanner::Spec(const std::string& model) {
  {
    absl::MutexLock lock(&mu_);
    auto it = specs_.find(model);
    if (it != specs_.end()) return it->second;
  }
  auto state = GetModelState(model);
  if (!state.ok()) {
    return absl::Status(
        state.status().code(),
        absl::StrCat("model \"", model,
                     "\": spec unknown to this client (call RegisterModel "
                     "first): ",
                     state.status().message()));
  }
  ModelSpec spec = ModelSpecFromProto(state->model());
  absl::MutexLock lock(&mu_);
  specs_[model] = spec;
  return spec;
}

absl::StatusOr<PlanResult> RemotePlanner::CallGetPlan(
    const ModelSpec& spec, const PlanRequest& request) {
  const auto proto = PlanRequestToProto<v1::GetPlanRequest>(spec, request);
  v1::GetPlanResponse response;
  std::optional<int64_t> smallest_peak_bytes;  // "no plan fits"
  const grpc::Status s = Invoke(
      channel_error_, options_, Clock::now() + options_.get_plan_deadline,
      /*idempotent=*/true, [&](grpc::ClientContext* c) {
        grpc::Status status = stub_->GetPlan(c, proto, &response);
        const auto& trailers = c->GetServerTrailingMetadata();
        auto it = trailers.find(kSmallestPeakMetadataKey);
        int64_t bytes = 0;
        if (it != trailers.end() &&
            absl::SimpleAtoi(absl::string_view(it->second.data(),
                                               it->second.size()),
                             &bytes)) {
          smallest_peak_bytes = bytes;
        }
        return status;
      });
  if (!s.ok()) {
    absl::Status status = FromGrpcStatus(s);
    if (absl::IsResourceExhausted(status) && smallest_peak_bytes) {
      return WithSmallestPeakBytes(std::move(status), *smallest_peak_bytes);
    }
    return status;
  }
  return PlanResultFromProto(response);
}

absl::StatusOr<PlanResult> RemotePlanner::GetPlan(const PlanRequest& request) {
  auto spec = Spec(request.model);
  if (!spec.ok()) return spec.status();
  if (auto s = ValidateFeatures(*spec, request.features); !s.ok()) return s;
  auto result = CallGetPlan(*spec, request);
  if (absl::IsNotFound(result.status())) {
    // The daemon lost the model (a fresh state dir): register it again.
    if (RegisterModel(*spec).ok()) {
      {
        absl::MutexLock lock(&mu_);
        ++stats_.reregistrations;
      }
      Warn(absl::StrCat("rematd did not know model \"", request.model,
                        "\"; registered it again"));
      result = CallGetPlan(*spec, request);
    }
  }
  if (result.ok()) Remember(request, *result);
  return result;
}

void RemotePlanner::Remember(const PlanRequest& request,
                             const PlanResult& result) {
  absl::MutexLock lock(&mu_);
  ++stats_.plans_from_daemon;
  if (result.collect || result.plan == nullptr) return;
  if (predicted_.size() >= 4096) predicted_.clear();
  predicted_[{request.model, request.features}] =
      result.plan->predicted_peak_bytes;
}

void RemotePlanner::Warn(const std::string& message) {
  uint64_t suppressed = 0;
  {
    absl::MutexLock lock(&mu_);
    const auto now = std::chrono::steady_clock::now();
    if (last_warning_.time_since_epoch().count() != 0 &&
        now - last_warning_ < options_.warning_interval) {
      ++suppressed_warnings_;
      return;
    }
    last_warning_ = now;
    suppressed = suppressed_warnings_;
    suppressed_warnings_ = 0;
  }
  if (suppressed > 0) {
    spdlog::warn("remat: {} ({} similar warnings suppressed)", message,
                 suppressed);
  } else {
    spdlog::warn("remat: {}", message);
  }
}

absl::Status RemotePlanner::ReportSamples(const std::string& model,
                                          const std::vector<Sample>& samples) {
  auto spec = Spec(model);
  if (!spec.ok()) return spec.status();
  v1::ReportSamplesRequest request;
  request.set_model(model);
  for (size_t i = 0; i < samples.size(); ++i) {
    if (samples[i].features.size() != spec->feature_names.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("samples[", i, "].features: has ",
                       samples[i].features.size(), " values; model \"", model,
                       "\" has ", spec->feature_names.size(), " features"));
    }
    SampleToProto(*spec, samples[i], request.add_samples());
  }
  v1::ReportSamplesResponse response;
  const grpc::Status s =
      Invoke(channel_error_, options_, Clock::now() + options_.call_deadline,
             /*idempotent=*/false, [&](grpc::ClientContext* c) {
               return stub_->ReportSamples(c, request, &response);
             });
  return FromGrpcStatus(s);
}

absl::Status RemotePlanner::ReportOutcome(const Outcome& outcome) {
  auto spec = Spec(outcome.model);
  if (!spec.ok()) return spec.status();
  if (auto s = ValidateFeatures(*spec, outcome.features); !s.ok()) return s;
  v1::ReportOutcomeRequest request;
  OutcomeToProto(*spec, outcome, &request);
  {
    absl::MutexLock lock(&mu_);
    auto it = predicted_.find({outcome.model, outcome.features});
    if (it != predicted_.end()) request.set_predicted_peak_bytes(it->second);
  }
  v1::ReportOutcomeResponse response;
  const grpc::Status s =
      Invoke(channel_error_, options_, Clock::now() + options_.call_deadline,
             /*idempotent=*/false, [&](grpc::ClientContext* c) {
               return stub_->ReportOutcome(c, request, &response);
             });
  return FromGrpcStatus(s);
}

absl::StatusOr<v1::GetModelStateResponse> RemotePlanner::GetModelState(
    const std::string& model, const std::string& device) {
  v1::GetModelStateRequest request;
  request.set_model(model);
  request.set_device(device);
  v1::GetModelStateResponse response;
  const grpc::Status s =
      Invoke(channel_error_, options_, Clock::now() + options_.call_deadline,
             /*idempotent=*/true, [&](grpc::ClientContext* c) {
               return stub_->GetModelState(c, request, &response);
             });
  if (!s.ok()) return FromGrpcStatus(s);
  return response;
}

absl::StatusOr<v1::ListModelsResponse> RemotePlanner::ListModels() {
  v1::ListModelsRequest request;
  v1::ListModelsResponse response;
  const grpc::Status s =
      Invoke(channel_error_, options_, Clock::now() + options_.call_deadline,
             /*idempotent=*/true, [&](grpc::ClientContext* c) {
               return stub_->ListModels(c, request, &response);
             });
  if (!s.ok()) return FromGrpcStatus(s);
  return response;
}

absl::StatusOr<v1::ExplainPlanResponse> RemotePlanner::ExplainPlan(
    const PlanRequest& request) {
  auto spec = Spec(request.model);
  if (!spec.ok()) return spec.status();
  if (auto s = ValidateFeatures(*spec, request.features); !s.ok()) return s;
  const auto proto = PlanRequestToProto<v1::ExplainPlanRequest>(*spec, request);
  v1::ExplainPlanResponse response;
  const grpc::Status s =
      Invoke(channel_error_, options_, Clock::now() + options_.call_deadline,
             /*idempotent=*/true, [&](grpc::ClientContext* c) {
               return stub_->ExplainPlan(c, proto, &response);
             });
  if (!s.ok()) return FromGrpcStatus(s);
  return response;
}

RemotePlanner::Stats RemotePlanner::stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

}  // namespace remat
