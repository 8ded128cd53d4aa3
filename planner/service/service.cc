#include "planner/service/service.h"

#include <algorithm>
#include <chrono>
#include <exception>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "planner/service/convert.h"
#include "planner/service/logging.h"
#include "planner/service/status_convert.h"
#include "planner/service/wal_compaction.h"

namespace remat {
namespace {

absl::Status Required(const std::string& field) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": required"));
}

nlohmann::json FeaturesJson(const FeatureMap& map) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& kv : map) j[kv.first] = kv.second;
  return j;
}

// Checks a GetPlan or ExplainPlan request (they carry the same fields) and
// converts it for the core. Fills `spec` with the model's spec.
template <typename ProtoRequest>
absl::Status ToPlanRequest(const PlannerCore& core, const ProtoRequest& request,
                           std::shared_ptr<const ModelSpec>* spec,
                           PlanRequest* out) {
  if (request.model().empty()) return Required("model");
  if (auto s = ValidateBudget(request.budget_bytes()); !s.ok()) return s;
  auto found = core.GetModelSpec(request.model());
  if (!found.ok()) return found.status();
  *spec = *std::move(found);
  auto features = FeaturesFromMap(**spec, request.features(), "features");
  if (!features.ok()) return features.status();
  out->model = request.model();
  out->features = *std::move(features);
  out->budget_bytes = request.budget_bytes();
  out->solver = request.solver();
  out->offload = !request.no_offload();
  out->offload_checkpoints = request.offload_checkpoints();
  out->device = request.device();
  return absl::OkStatus();
}

// Runs `fn`, turning any exception into INTERNAL: no request may take the
// daemon down.
template <typename Fn>
absl::Status Guarded(Fn&& fn) {
  try {
    return fn();
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("internal error: ", e.what()));
  } catch (...) {
    return absl::InternalError("internal error");
  }
}

}  // namespace

PlannerService::PlannerService(PlannerCore* core, Wal* wal, Metrics* metrics,
                               ServiceLimits limits)
    : core_(core),
      wal_(wal),
      metrics_(metrics),
      limits_(limits),
      next_compaction_bytes_(limits.wal_compact_bytes) {}

void PlannerService::MaybeCompactLog() {
  if (wal_ == nullptr || limits_.wal_compact_bytes <= 0) return;
  if (static_cast<int64_t>(wal_->size_bytes()) < next_compaction_bytes_) {
    return;
  }
  if (!compact_mu_.TryLock()) return;  // another thread is at it
  const auto start = std::chrono::steady_clock::now();
  const uint64_t bytes_before = wal_->size_bytes();
  size_t records_before = 0;
  size_t records_after = 0;
  // Records are parsed straight from the log and written straight to the
  // new one: the parsed records are the only copy of the log in memory.
  const absl::Status s = wal_->CompactStreaming(
      [&](const Wal::ForEachRecord& for_each,
          const Wal::EmitRecord& emit) -> absl::Status {
        std::vector<v1::WalRecord> records;
        if (auto r = for_each([&](absl::string_view p) {
              ++records_before;
              // An unparsable record is rejected at every replay: nothing
              // to keep.
              if (!records.emplace_back().ParseFromArray(
                      p.data(), static_cast<int>(p.size()))) {
                records.pop_back();
              }
            });
            !r.ok()) {
          return r;
        }
        std::vector<v1::WalRecord> kept = CompactWalRecords(records);
        std::vector<v1::WalRecord>().swap(records);
        std::string payload;
        for (const v1::WalRecord& r : kept) {
          payload.clear();
          if (!r.SerializeToString(&payload)) {
            return absl::InternalError("cannot serialise a log record");
          }
          if (auto e = emit(payload); !e.ok()) return e;
          ++records_after;
        }
        return absl::OkStatus();
      });
  const int64_t bytes_after = static_cast<int64_t>(wal_->size_bytes());
  // A log that is mostly samples stays big: wait for it to double.
  next_compaction_bytes_ = std::max(limits_.wal_compact_bytes, 2 * bytes_after);
  compact_mu_.Unlock();
  if (!s.ok()) {
    LogEvent(spdlog::level::err, "wal_compaction_failed",
             {{"error", std::string(s.message())}});
    return;
  }
  LogEvent(spdlog::level::info, "wal_compacted",
           {{"bytes_before", bytes_before},
            {"bytes_after", bytes_after},
            {"records_before", records_before},
            {"records_after", records_after},
            {"seconds", std::chrono::duration<double>(
                            std::chrono::steady_clock::now() - start)
                            .count()}});
}

absl::Status PlannerService::Log(const v1::WalRecord& record) {
  if (wal_ == nullptr) return absl::OkStatus();
  std::string payload;
  if (!record.SerializeToString(&payload)) {
    return absl::InternalError("cannot serialise the log record");
  }
  absl::Status s = wal_->Append(payload);
  if (!s.ok()) {
    LogEvent(spdlog::level::err, "wal_append_failed",
             {{"error", std::string(s.message())}});
    return absl::UnavailableError(
        absl::StrCat("not durable, retry: ", s.message()));
  }
  MaybeCompactLog();
  return s;
}

grpc::Status PlannerService::Finish(const char* method,
                                    const absl::Status& status) {
  metrics_->CountRequest(method, absl::StatusCodeToString(status.code()));
  return ToGrpcStatus(status);
}

#define REMAT_CHECK_READY(method)                                          \
  if (!ready_) {                                                           \
    return Finish(method, absl::UnavailableError(                          \
                              "rematd is loading its state; retry soon")); \
  }

grpc::Status PlannerService::RegisterModel(
    grpc::ServerContext*, const v1::RegisterModelRequest* request,
    v1::RegisterModelResponse* response) {
  REMAT_CHECK_READY("RegisterModel");
  return Finish("RegisterModel",
                Guarded([&] { return DoRegisterModel(*request, response); }));
}

grpc::Status PlannerService::ReportSamples(
    grpc::ServerContext*, const v1::ReportSamplesRequest* request,
    v1::ReportSamplesResponse* response) {
  REMAT_CHECK_READY("ReportSamples");
  return Finish("ReportSamples",
                Guarded([&] { return DoReportSamples(*request, response); }));
}

std::optional<grpc::Status> PlannerService::GetPlanIfCached(
    grpc::ServerContext* context, const v1::GetPlanRequest* request,
    v1::GetPlanResponse* response) {
  REMAT_CHECK_READY("GetPlan");
  bool answered = true;
  const absl::Status status = Guarded([&] {
    return DoGetPlan(context, *request, response, /*cache_only=*/true,
                     &answered);
  });
  if (!answered) return std::nullopt;
  return Finish("GetPlan", status);
}

grpc::Status PlannerService::GetPlanUncached(grpc::ServerContext* context,
                                             const v1::GetPlanRequest* request,
                                             v1::GetPlanResponse* response) {
  REMAT_CHECK_READY("GetPlan");
  return Finish("GetPlan", Guarded([&] {
                  return DoGetPlan(context, *request, response,
                                   /*cache_only=*/false, nullptr);
                }));
}

grpc::Status PlannerService::ReportOutcome(
    grpc::ServerContext*, const v1::ReportOutcomeRequest* request,
    v1::ReportOutcomeResponse*) {
  REMAT_CHECK_READY("ReportOutcome");
  return Finish("ReportOutcome",
                Guarded([&] { return DoReportOutcome(*request); }));
}

grpc::Status PlannerService::ExplainPlan(grpc::ServerContext*,
                                         const v1::ExplainPlanRequest* request,
                                         v1::ExplainPlanResponse* response) {
  REMAT_CHECK_READY("ExplainPlan");
  return Finish("ExplainPlan",
                Guarded([&] { return DoExplainPlan(*request, response); }));
}

grpc::Status PlannerService::ListModels(grpc::ServerContext*,
                                        const v1::ListModelsRequest*,
                                        v1::ListModelsResponse* response) {
  REMAT_CHECK_READY("ListModels");
  return Finish(
      "ListModels", Guarded([&] {
        std::vector<std::string> names = core_->ListModels();
        std::sort(names.begin(), names.end());
        for (const std::string& name : names) {
          // Models and profiles are never removed: these cannot fail.
          auto spec = core_->GetModelSpec(name);
          auto devices = core_->ListDevices(name);
          if (!spec.ok() || !devices.ok()) continue;
          v1::ModelSummary* m = response->add_models();
          m->set_name(name);
          m->set_num_blocks(static_cast<uint32_t>((*spec)->blocks.size()));
          uint64_t samples = 0;
          for (const std::string& device : *devices) {
            m->add_devices(device);
            auto state = core_->GetModelState(name, device);
            if (state.ok()) samples += state->num_samples;
          }
          m->set_num_samples(samples);
        }
        return absl::OkStatus();
      }));
}

grpc::Status PlannerService::GetModelState(
    grpc::ServerContext*, const v1::GetModelStateRequest* request,
    v1::GetModelStateResponse* response) {
  REMAT_CHECK_READY("GetModelState");
  return Finish("GetModelState",
                Guarded([&] { return DoGetModelState(*request, response); }));
}

grpc::Status PlannerService::ExportProfile(
    grpc::ServerContext*, const v1::ExportProfileRequest* request,
    v1::ExportProfileResponse* response) {
  REMAT_CHECK_READY("ExportProfile");
  return Finish("ExportProfile",
                Guarded([&] { return DoExportProfile(*request, response); }));
}

grpc::Status PlannerService::ImportProfile(
    grpc::ServerContext*, const v1::ImportProfileRequest* request,
    v1::ImportProfileResponse* response) {
  REMAT_CHECK_READY("ImportProfile");
  return Finish("ImportProfile",
                Guarded([&] { return Import(*request, response); }));
}

#undef REMAT_CHECK_READY

absl::Status PlannerService::DoRegisterModel(
    const v1::RegisterModelRequest& request,
    v1::RegisterModelResponse* response) {
  if (!request.has_model()) return Required("model");
  const ModelSpec spec = ModelSpecFromProto(request.model());
  if (spec.blocks.size() > static_cast<size_t>(limits_.max_blocks_per_model)) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "model.blocks: ", spec.blocks.size(),
        " blocks exceed limits.max_blocks_per_model (",
        limits_.max_blocks_per_model, "); raise --max-blocks-per-model"));
  }
  if (auto s = ValidateModelSpec(spec); !s.ok()) return Prefixed("model.", s);

  absl::MutexLock lock(&register_mu_);
  if (core_->GetModelSpec(spec.name).ok()) {
    // Same shape: OK (idempotent, nothing to log); else ALREADY_EXISTS.
    response->set_created(false);
    return core_->RegisterModel(spec);
  }
  if (core_->ListModels().size() >= static_cast<size_t>(limits_.max_models)) {
    return absl::ResourceExhaustedError(
        absl::StrCat("limits.max_models: the daemon already holds ",
                     limits_.max_models, " models; raise --max-models"));
  }
  if (auto s = core_->RegisterModel(spec,
                                    [&] {
                                      v1::WalRecord record;
                                      *record.mutable_register_model() =
                                          request.model();
                                      return Log(record);
                                    });
      !s.ok()) {
    return s;
  }
  response->set_created(true);
  LogEvent(spdlog::level::info, "model_registered",
           {{"model", spec.name},
            {"blocks", spec.blocks.size()},
            {"features", spec.feature_names}});
  return absl::OkStatus();
}

absl::Status PlannerService::DoReportSamples(
    const v1::ReportSamplesRequest& request,
    v1::ReportSamplesResponse* response) {
  if (request.model().empty()) return Required("model");
  if (request.samples_size() == 0) {
    return absl::InvalidArgumentError(
        "samples: empty; send at least one sample");
  }
  if (request.samples_size() > limits_.max_samples_per_request) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "samples: ", request.samples_size(),
        " samples exceed limits.max_samples_per_request (",
        limits_.max_samples_per_request,
        "); split the batch or raise --max-samples-per-request"));
  }
  auto spec = core_->GetModelSpec(request.model());
  if (!spec.ok()) return spec.status();
  std::vector<Sample> samples;
  samples.reserve(request.samples_size());
  for (int i = 0; i < request.samples_size(); ++i) {
    auto sample = SampleFromProto(**spec, request.samples(i),
                                  absl::StrCat("samples[", i, "]"));
    if (!sample.ok()) return sample.status();
    samples.push_back(*std::move(sample));
  }
  // Validated whole by the core, logged, then applied: a rejected request
  // changes nothing, and memory never holds what the log lacks.
  size_t quarantined = 0;
  AddSamplesOptions options;
  options.quarantined = &quarantined;
  options.commit = [&](const SampleVerdict& verdict) {
    v1::WalRecord record;
    *record.mutable_samples() = request;
    VerdictToProto(verdict, record.mutable_verdict());
    return Log(record);
  };
  if (auto s = core_->AddSamples(request.model(), samples, options); !s.ok()) {
    return s;
  }
  metrics_->CountSamples(samples.size(), quarantined);
  response->set_accepted(static_cast<uint32_t>(samples.size()));
  response->set_quarantined(static_cast<uint32_t>(quarantined));
  if (quarantined > 0) {
    LogEvent(spdlog::level::warn, "samples_quarantined",
             {{"model", request.model()},
              {"samples", samples.size()},
              {"quarantined", quarantined}});
  }
  return absl::OkStatus();
}

namespace {

// When the caller stops waiting, on the steady clock the core uses; none
// when it set no deadline.
std::optional<std::chrono::steady_clock::time_point> CallerDeadline(
    const grpc::ServerContext* context) {
  const auto deadline = context->deadline();
  if (deadline == std::chrono::system_clock::time_point::max()) {
    return std::nullopt;
  }
  const auto left = deadline - std::chrono::system_clock::now();
  return std::chrono::steady_clock::now() +
         std::chrono::duration_cast<std::chrono::steady_clock::duration>(left);
}

}  // namespace

absl::Status PlannerService::DoGetPlan(grpc::ServerContext* context,
                                       const v1::GetPlanRequest& request,
                                       v1::GetPlanResponse* response,
                                       bool cache_only, bool* answered) {
  const auto start = std::chrono::steady_clock::now();
  std::shared_ptr<const ModelSpec> spec;
  PlanRequest plan_request;
  if (auto s = ToPlanRequest(*core_, request, &spec, &plan_request); !s.ok()) {
    return s;
  }
  absl::StatusOr<PlanResult> result;
  if (cache_only) {
    auto cached = core_->GetPlanIfCached(plan_request);
    if (!cached) {
      *answered = false;
      return absl::OkStatus();
    }
    result = *std::move(cached);
  } else {
    // A caller that has stopped waiting gets no solve; a solve stops by
    // the caller's deadline.
    plan_request.deadline = CallerDeadline(context);
    result = core_->GetPlanUncached(plan_request);
  }
  if (!result.ok()) {
    if (absl::IsResourceExhausted(result.status())) {
      // No plan fits: tell the caller the smallest reachable peak (the
      // solve found it; no second solve).
      if (auto smallest = SmallestPeakBytes(result.status())) {
        context->AddTrailingMetadata(kSmallestPeakMetadataKey,
                                     absl::StrCat(*smallest));
      }
      LogEvent(spdlog::level::info, "plan",
               {{"model", request.model()},
                {"features", FeaturesJson(request.features())},
                {"budget_bytes", request.budget_bytes()},
                {"decision", "NO_FIT"},
                {"error", std::string(result.status().message())}});
    }
    return result.status();
  }
  PlanResultToProto(*spec, *result, response, request.include_reasons());
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  metrics_->ObservePlanLatency(seconds, result->from_cache);
  if (!LogEnabled(spdlog::level::info)) return absl::OkStatus();
  int recomputed = 0;
  int64_t predicted = 0;
  if (result->plan != nullptr) {
    predicted = result->plan->predicted_peak_bytes;
    recomputed = static_cast<int>(std::count(result->plan->actions.begin(),
                                             result->plan->actions.end(),
                                             Action::kRecompute));
  }
  LogEvent(spdlog::level::info, "plan",
           {{"model", request.model()},
            {"features", FeaturesJson(request.features())},
            {"budget_bytes", request.budget_bytes()},
            {"decision", result->collect ? "COLLECT" : "PLAN"},
            {"predicted_peak_bytes", predicted},
            {"blocks_recomputed", recomputed},
            {"from_cache", result->from_cache},
            {"latency_us", static_cast<int64_t>(seconds * 1e6)}});
  return absl::OkStatus();
}

absl::Status PlannerService::DoReportOutcome(
    const v1::ReportOutcomeRequest& request) {
  if (request.model().empty()) return Required("model");
  auto spec = core_->GetModelSpec(request.model());
  if (!spec.ok()) return spec.status();
  auto outcome = OutcomeFromProto(**spec, request);
  if (!outcome.ok()) return outcome.status();
  ReportOutcomeOptions options;
  options.commit = [&](bool outlier) {
    v1::WalRecord record;
    *record.mutable_outcome() = request;
    record.set_outcome_outlier(outlier);
    return Log(record);
  };
  bool held = false;
  options.held = &held;
  if (auto s = core_->ReportOutcome(*outcome, options); !s.ok()) return s;
  if (held) {
    metrics_->CountOutcomeQuarantined();
    LogEvent(spdlog::level::warn, "outcome_quarantined",
             {{"model", request.model()},
              {"features", FeaturesJson(request.features())},
              {"measured_peak_bytes", request.measured_peak_bytes()}});
  }
  metrics_->CountOutcome(
      request.out_of_memory(),
      outcome->plan_source ? PlanSourceName(*outcome->plan_source) : "");
  if (outcome->copy_wait_ns) {
    metrics_->CountCopyWait(*outcome->copy_wait_ns, outcome->step_ns);
  }
  if (request.has_predicted_peak_bytes() &&
      request.predicted_peak_bytes() > 0 && request.measured_peak_bytes() > 0) {
    metrics_->ObservePeakRatio(
        static_cast<double>(request.measured_peak_bytes()) /
        static_cast<double>(request.predicted_peak_bytes()));
  }
  if (request.out_of_memory()) {
    LogEvent(spdlog::level::warn, "out_of_memory_reported",
             {{"model", request.model()},
              {"features", FeaturesJson(request.features())},
              {"measured_peak_bytes", request.measured_peak_bytes()}});
  }
  return absl::OkStatus();
}

absl::Status PlannerService::DoExplainPlan(
    const v1::ExplainPlanRequest& request, v1::ExplainPlanResponse* response) {
  std::shared_ptr<const ModelSpec> spec;
  PlanRequest plan_request;
  if (auto s = ToPlanRequest(*core_, request, &spec, &plan_request); !s.ok()) {
    return s;
  }
  auto result = core_->Explain(plan_request);
  if (!result.ok()) return result.status();
  ExplainResultToProto(*spec, *result, request.budget_bytes(), response);
  return absl::OkStatus();
}

absl::Status PlannerService::DoGetModelState(
    const v1::GetModelStateRequest& request,
    v1::GetModelStateResponse* response) {
  if (request.model().empty()) return Required("model");
  auto state = core_->GetModelState(request.model(), request.device());
  if (!state.ok()) return state.status();
  ModelStateToProto(*state, core_->cache_stats(), response);
  return absl::OkStatus();
}

absl::Status PlannerService::DoExportProfile(
    const v1::ExportProfileRequest& request,
    v1::ExportProfileResponse* response) {
  if (request.model().empty()) return Required("model");
  auto held = core_->GetProfileSamples(request.model(), request.device());
  if (!held.ok()) return held.status();
  v1::Profile* profile = response->mutable_profile();
  profile->set_format_version(kProfileFormatVersion);
  ModelSpecToProto(*held->spec, profile->mutable_model());
  profile->set_device(request.device());
  for (const Sample& s : held->fitted) {
    SampleToProto(*held->spec, s, profile->add_samples());
  }
  for (const Sample& s : held->quarantined) {
    profile->add_quarantined(static_cast<uint32_t>(profile->samples_size()));
    SampleToProto(*held->spec, s, profile->add_samples());
  }
  return absl::OkStatus();
}

namespace {

// A sample as one string, equal for equal samples: what a profile holds
// already is not imported again.
std::string SampleKey(const ModelSpec& spec, const Sample& sample) {
  v1::Sample proto;
  SampleToProto(spec, sample, &proto);
  std::string key;
  google::protobuf::io::StringOutputStream out(&key);
  google::protobuf::io::CodedOutputStream coded(&out);
  coded.SetSerializationDeterministic(true);
  proto.SerializeToCodedStream(&coded);
  return key;
}

}  // namespace

absl::Status PlannerService::Import(const v1::ImportProfileRequest& request,
                                    v1::ImportProfileResponse* response) {
  // Validate the whole profile first: nothing is stored for a bad one.
  const v1::Profile& profile = request.profile();
  if (profile.format_version() == 0) {
    return absl::InvalidArgumentError(
        "profile.format_version: missing; this is not a profile that "
        "`remat export` wrote");
  }
  if (profile.format_version() > kProfileFormatVersion) {
    return absl::FailedPreconditionError(absl::StrCat(
        "profile.format_version: ", profile.format_version(),
        " is newer than this rematd reads (", kProfileFormatVersion,
        "); import it with a newer rematd"));
  }
  if (!profile.has_model()) return Required("profile.model");
  const ModelSpec spec = ModelSpecFromProto(profile.model());
  if (auto s = ValidateModelSpec(spec); !s.ok()) {
    return Prefixed("profile.model.", s);
  }
  if (auto s = ValidateDevice(profile.device(), "profile.device"); !s.ok()) {
    return s;
  }
  if (auto s = ValidateDevice(request.device()); !s.ok()) return s;
  const std::string device =
      request.device().empty() ? profile.device() : request.device();
  if (device != profile.device() && !request.force_device()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "device: the profile was measured on \"", profile.device(),
        "\", not \"", device, "\"; plans for \"", device,
        "\" would come from another device's samples. Import it as it is "
        "(no device), or force it (force_device, remat import "
        "--force-device)"));
  }
  std::vector<Sample> samples;
  samples.reserve(profile.samples_size());
  for (int i = 0; i < profile.samples_size(); ++i) {
    const std::string field = absl::StrCat("profile.samples[", i, "]");
    auto sample = SampleFromProto(spec, profile.samples(i), field);
    if (!sample.ok()) return sample.status();
    if (sample->device != profile.device()) {
      return InvalidField(
          field + ".device",
          absl::StrCat("\"", sample->device, "\" differs from profile.device \"",
                       profile.device(), "\""));
    }
    if (auto s = ValidateSample(spec, *sample); !s.ok()) {
      return Prefixed(field + ".", s);
    }
    sample->device = device;
    samples.push_back(*std::move(sample));
  }
  std::vector<bool> hold(samples.size(), false);
  for (int k = 0; k < profile.quarantined_size(); ++k) {
    const uint32_t i = profile.quarantined(k);
    if (i >= samples.size()) {
      return InvalidField(absl::StrCat("profile.quarantined[", k, "]"),
                          absl::StrCat(i, " is past the profile's ",
                                       samples.size(), " samples"));
    }
    hold[i] = true;
  }
  if (auto registered = core_->GetModelSpec(spec.name); registered.ok()) {
    if (auto s = core_->RegisterModel(spec); !s.ok()) {
      return Prefixed("profile.", s);  // ALREADY_EXISTS: another shape
    }
  } else {
    v1::RegisterModelRequest registration;
    *registration.mutable_model() = profile.model();
    v1::RegisterModelResponse registered_now;
    if (auto s = DoRegisterModel(registration, &registered_now); !s.ok()) {
      return s;
    }
    response->set_registered(registered_now.created());
  }
  response->set_device(device);

  // Leave out what the profile holds already.
  absl::MutexLock lock(&import_mu_);
  auto held = core_->GetProfileSamples(spec.name, device);
  if (!held.ok()) return held.status();
  absl::flat_hash_set<std::string> known;
  for (const auto* list : {&held->fitted, &held->quarantined}) {
    for (const Sample& s : *list) known.insert(SampleKey(spec, s));
  }
  std::vector<Sample> fresh;
  std::vector<bool> fresh_hold;
  for (size_t i = 0; i < samples.size(); ++i) {
    if (!known.insert(SampleKey(spec, samples[i])).second) continue;
    fresh.push_back(std::move(samples[i]));
    fresh_hold.push_back(hold[i]);
  }
  response->set_already_held(static_cast<uint32_t>(samples.size() - fresh.size()));
  if (fresh.empty()) return absl::OkStatus();
  size_t quarantined = 0;
  AddSamplesOptions options;
  options.hold = &fresh_hold;
  options.quarantined = &quarantined;
  options.commit = [&](const SampleVerdict& verdict) {
    v1::WalRecord record;
    v1::ReportSamplesRequest* logged = record.mutable_samples();
    logged->set_model(spec.name);
    for (const Sample& s : fresh) SampleToProto(spec, s, logged->add_samples());
    VerdictToProto(verdict, record.mutable_verdict());
    return Log(record);
  };
  if (auto s = core_->AddSamples(spec.name, fresh, options); !s.ok()) return s;
  metrics_->CountSamples(fresh.size(), quarantined);
  response->set_added(static_cast<uint32_t>(fresh.size()));
  response->set_quarantined(static_cast<uint32_t>(quarantined));
  LogEvent(spdlog::level::info, "profile_imported",
           {{"model", spec.name},
            {"device", device},
            {"added", fresh.size()},
            {"quarantined", quarantined},
            {"already_held", samples.size() - fresh.size()}});
  return absl::OkStatus();
}

absl::Status ApplyWalRecord(PlannerCore* core, const v1::WalRecord& record) {
  switch (record.record_case()) {
    case v1::WalRecord::kRegisterModel:
      return core->RegisterModel(ModelSpecFromProto(record.register_model()));
    case v1::WalRecord::kSamples: {
      const v1::ReportSamplesRequest& r = record.samples();
      auto spec = core->GetModelSpec(r.model());
      if (!spec.ok()) return spec.status();
      std::vector<Sample> samples;
      for (int i = 0; i < r.samples_size(); ++i) {
        auto sample = SampleFromProto(**spec, r.samples(i),
                                      absl::StrCat("samples[", i, "]"));
        if (!sample.ok()) return sample.status();
        samples.push_back(*std::move(sample));
      }
      auto verdict = VerdictFromProto(record.verdict(), samples.size());
      if (!verdict.ok()) return verdict.status();
      AddSamplesOptions options;
      options.verdict = &*verdict;
      return core->AddSamples(r.model(), samples, options);
    }
    case v1::WalRecord::kOutcome: {
      auto spec = core->GetModelSpec(record.outcome().model());
      if (!spec.ok()) return spec.status();
      auto outcome = OutcomeFromProto(**spec, record.outcome());
      if (!outcome.ok()) return outcome.status();
      const bool outlier = record.outcome_outlier();
      ReportOutcomeOptions options;
      options.outlier = &outlier;
      return core->ReportOutcome(*outcome, options);
    }
    case v1::WalRecord::kOutcomeTally: {
      const v1::OutcomeTally& t = record.outcome_tally();
      return core->AddOutcomeCounts(t.model(), t.outcomes(), t.out_of_memory(),
                                    t.quarantined(), t.device());
    }
    case v1::WalRecord::RECORD_NOT_SET:
      break;
  }
  return absl::InvalidArgumentError("empty log record");
}

}  // namespace remat
