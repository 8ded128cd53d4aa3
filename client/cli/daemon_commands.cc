#include "client/cli/daemon_commands.h"

#include <grpcpp/client_context.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/batch_fit.h"
#include "client/cli/exit_codes.h"
#include "client/remote_planner.h"
#include "google/protobuf/util/json_util.h"
#include "planner/service/convert.h"
#include "planner/service/service.h"
#include "planner/units.h"
#include "proto/health.grpc.pb.h"
#include "proto/remat.grpc.pb.h"

namespace remat {

namespace {

using cli::kExitInfeasible;
using cli::kExitNotServing;
using cli::kExitOk;
using cli::kExitRejected;
using cli::kExitUnreachable;
using cli::kExitUsage;

struct CommonArgs {
  std::string address = kDefaultDaemonAddress;
  DaemonTlsOptions tls;
  std::string output = "table";
  int timeout_ms = 3000;
};

struct PlanArgs {
  std::string model;
  std::vector<std::string> features;  // name=value
  std::string budget;
  std::string solver;
  bool no_offload = false;
  bool offload_checkpoints = false;
  std::string device;
  // `plan --max-batch FEATURE`: the largest batch instead of the plan.
  std::string max_batch;
};

// `output_format`: the command prints a table or JSON (-o). `remat export`
// writes a file instead, and its -o names it.
void AddCommon(CLI::App* sub, CommonArgs* args, bool output_format = true) {
  sub->add_option("--address", args->address,
                  "rematd address: host:port or unix:/path")
      ->capture_default_str();
  sub->add_option("--tls-ca", args->tls.ca_file,
                  "PEM CAs of a TLS rematd (--tls-cert): connect over TLS");
  sub->add_option("--tls-cert", args->tls.cert_file,
                  "PEM client certificate, for a rematd with --tls-client-ca");
  sub->add_option("--tls-key", args->tls.key_file,
                  "PEM private key of --tls-cert");
  if (output_format) {
    sub->add_option("-o,--output", args->output, "table or json")
        ->check(CLI::IsMember({"table", "json"}))
        ->capture_default_str();
  }
  sub->add_option("--timeout-ms", args->timeout_ms, "Deadline of the call")
      ->check(CLI::Range(1, 600000))
      ->capture_default_str();
  sub->footer(cli::kExitCodesHelp);
}

void SetDeadline(grpc::ClientContext* context, const CommonArgs& args) {
  context->set_deadline(std::chrono::system_clock::now() +
                        std::chrono::milliseconds(args.timeout_ms));
  context->set_wait_for_ready(false);
}

int ExitCodeFor(const grpc::Status& s) {
  switch (s.error_code()) {
    case grpc::StatusCode::OK:
      return kExitOk;
    case grpc::StatusCode::UNAVAILABLE:
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return kExitUnreachable;
    default:
      return kExitRejected;
  }
}

const char* CodeName(grpc::StatusCode code) {
  static const char* kNames[] = {"OK",
                                 "CANCELLED",
                                 "UNKNOWN",
                                 "INVALID_ARGUMENT",
                                 "DEADLINE_EXCEEDED",
                                 "NOT_FOUND",
                                 "ALREADY_EXISTS",
                                 "PERMISSION_DENIED",
                                 "RESOURCE_EXHAUSTED",
                                 "FAILED_PRECONDITION",
                                 "ABORTED",
                                 "OUT_OF_RANGE",
                                 "UNIMPLEMENTED",
                                 "INTERNAL",
                                 "UNAVAILABLE",
                                 "DATA_LOSS",
                                 "UNAUTHENTICATED"};
  const int i = static_cast<int>(code);
  return i >= 0 && i < 17 ? kNames[i] : "UNKNOWN";
}

int ReportError(const grpc::Status& s, const CommonArgs& args) {
  const int code = ExitCodeFor(s);
  std::cerr << "remat: " << CodeName(s.error_code()) << ": "
            << s.error_message();
  if (code == kExitUnreachable) {
    std::cerr << " (is rematd running at " << args.address << "?)";
  }
  std::cerr << "\n";
  return code;
}

std::string ToJson(const google::protobuf::Message& message) {
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = true;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = true;
  std::string out;
  (void)google::protobuf::util::MessageToJsonString(message, &out, options);
  return out;
}

// Prints rows as left-aligned columns separated by two spaces.
void PrintTable(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> widths;
  for (const auto& row : rows) {
    if (widths.size() < row.size()) widths.resize(row.size(), 0);
    for (size_t i = 0; i < row.size(); ++i) {
      widths[i] = std::max(widths[i], row[i].size());
    }
  }
  for (const auto& row : rows) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) {
      line += row[i];
      if (i + 1 < row.size())
        line += std::string(widths[i] - row[i].size() + 2, ' ');
    }
    std::cout << line << "\n";
  }
}

// --feature name=value, repeated -> map. Throws CLI::ValidationError.
google::protobuf::Map<std::string, double> ParseFeatures(
    const std::vector<std::string>& features) {
  google::protobuf::Map<std::string, double> map;
  for (const std::string& f : features) {
    const size_t eq = f.find('=');
    double value = 0;
    if (eq == std::string::npos || eq == 0 ||
        !absl::SimpleAtod(f.substr(eq + 1), &value)) {
      throw CLI::ValidationError(
          "--feature",
          absl::StrCat("\"", f, "\" is not name=value, e.g. seq=384"));
    }
    map[f.substr(0, eq)] = value;
  }
  return map;
}

int64_t ParseBudget(const std::string& budget) {
  absl::StatusOr<int64_t> bytes = ParseBytes(budget);
  if (!bytes.ok()) {
    throw CLI::ValidationError("--budget",
                               std::string(bytes.status().message()));
  }
  if (*bytes <= 0) {
    throw CLI::ValidationError("--budget", "must be positive, e.g. 6GiB");
  }
  return *bytes;
}

// A GetPlan or ExplainPlan request (they carry the same fields) from the
// command line. Throws CLI::ValidationError.
template <typename ProtoRequest>
ProtoRequest MakePlanRequest(const PlanArgs& p) {
  ProtoRequest request;
  request.set_model(p.model);
  *request.mutable_features() = ParseFeatures(p.features);
  request.set_budget_bytes(ParseBudget(p.budget));
  request.set_solver(p.solver);
  request.set_no_offload(p.no_offload);
  request.set_offload_checkpoints(p.offload_checkpoints);
  request.set_device(p.device);
  return request;
}

// A device type for people: the empty one is the profile of requests that
// name none.
std::string DeviceName(const std::string& device) {
  return device.empty() ? "(unspecified)" : device;
}

// The channel to rematd, over TLS when a --tls-* option is given. Throws
// CLI::ValidationError for a TLS file that cannot be used.
std::shared_ptr<grpc::Channel> Channel(const CommonArgs& args) {
  auto channel = MakeDaemonChannel(args.address, args.tls);
  if (!channel.ok()) {
    throw CLI::ValidationError("--tls-*",
                               std::string(channel.status().message()));
  }
  return *std::move(channel);
}

std::unique_ptr<v1::Planner::Stub> Stub(const CommonArgs& args) {
  return v1::Planner::NewStub(Channel(args));
}

std::string Bucket(
    const google::protobuf::RepeatedField<int64_t>& bucket,
    const google::protobuf::RepeatedPtrField<std::string>& names) {
  std::string out;
  for (int i = 0; i < bucket.size(); ++i) {
    if (!out.empty()) out += " ";
    out += absl::StrCat(i < names.size() ? names[i] : "?", "=", bucket[i]);
  }
  return out;
}

void PrintPlanTable(const v1::Plan& plan) {
  std::vector<std::vector<std::string>> rows = {{"BLOCK", "ACTION", "REASON"}};
  for (const v1::BlockPlan& b : plan.blocks()) {
    rows.push_back({b.block(), v1::Action_Name(b.action()), b.reason()});
  }
  PrintTable(rows);
}

int RunHealth(const CommonArgs& args, const std::string& service, bool wait) {
  auto stub = grpc::health::v1::Health::NewStub(Channel(args));
  const auto deadline = std::chrono::system_clock::now() +
                        std::chrono::milliseconds(args.timeout_ms);
  grpc::health::v1::HealthCheckRequest request;
  request.set_service(service);
  grpc::health::v1::HealthCheckResponse response;
  while (true) {
    grpc::ClientContext context;
    context.set_deadline(deadline);
    // --wait: a daemon not up yet is waited for, within the deadline.
    context.set_wait_for_ready(wait);
    const grpc::Status s = stub->Check(&context, request, &response);
    if (!s.ok()) return ReportError(s, args);
    const bool serving = response.status() ==
                         grpc::health::v1::HealthCheckResponse::SERVING;
    if (serving || !wait ||
        std::chrono::system_clock::now() + std::chrono::milliseconds(100) >=
            deadline) {
      break;
    }
    // Up but not serving yet (replaying its log): ask again shortly.
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  const std::string status =
      grpc::health::v1::HealthCheckResponse::ServingStatus_Name(
          response.status());
  if (args.output == "json") {
    std::cout << ToJson(response);
  } else {
    std::cout << status << "\n";
  }
  return response.status() == grpc::health::v1::HealthCheckResponse::SERVING
             ? kExitOk
             : kExitNotServing;
}

int RunModels(const CommonArgs& args) {
  grpc::ClientContext context;
  SetDeadline(&context, args);
  v1::ListModelsResponse response;
  const grpc::Status s =
      Stub(args)->ListModels(&context, v1::ListModelsRequest(), &response);
  if (!s.ok()) return ReportError(s, args);
  if (args.output == "json") {
    std::cout << ToJson(response);
    return kExitOk;
  }
  std::vector<std::vector<std::string>> rows = {
      {"MODEL", "BLOCKS", "SAMPLES", "DEVICES"}};
  for (const v1::ModelSummary& m : response.models()) {
    std::vector<std::string> devices;
    for (const std::string& d : m.devices()) devices.push_back(DeviceName(d));
    rows.push_back({m.name(), absl::StrCat(m.num_blocks()),
                    absl::StrCat(m.num_samples()),
                    absl::StrJoin(devices, "; ")});
  }
  PrintTable(rows);
  return kExitOk;
}

int RunModel(const CommonArgs& args, const std::string& name,
             const std::string& device) {
  grpc::ClientContext context;
  SetDeadline(&context, args);
  v1::GetModelStateRequest request;
  request.set_model(name);
  request.set_device(device);
  v1::GetModelStateResponse r;
  const grpc::Status s = Stub(args)->GetModelState(&context, request, &r);
  if (!s.ok()) return ReportError(s, args);
  if (args.output == "json") {
    std::cout << ToJson(r);
    return kExitOk;
  }
  std::string features;
  for (const std::string& f : r.model().feature_names()) {
    features += (features.empty() ? "" : ", ") + f;
  }
  PrintTable({{"model", r.model().name()},
              {"device", DeviceName(r.device())},
              {"features", features},
              {"blocks", absl::StrCat(r.model().blocks_size())},
              {"samples", absl::StrCat(r.num_samples(), " fitted, ",
                                       r.num_quarantined(),
                                       " quarantined (outliers)")},
              {"outcomes", absl::StrCat(r.outcomes(), " (", r.out_of_memory(),
                                        " out of memory, ",
                                        r.outcomes_quarantined(),
                                        " quarantined)")},
              {"reserved margin",
               r.reserved_outcomes() == 0
                   ? std::string("none (no outcome reported reserved bytes)")
                   : absl::StrFormat("x%.3f of allocated (%d outcomes "
                                     "reported reserved bytes)",
                                     r.reserved_ratio(),
                                     r.reserved_outcomes())},
              {"plan cache",
               absl::StrCat(r.cache().hits(), " hits, ", r.cache().misses(),
                            " misses, ", r.cache().size(), " plans")}});
  if (r.observed_range_size() > 0) {
    std::cout << "\n";
    std::vector<std::vector<std::string>> rows = {{"FEATURE", "MIN", "MAX"}};
    for (const v1::FeatureRange& f : r.observed_range()) {
      rows.push_back(
          {f.feature(), absl::StrCat(f.min()), absl::StrCat(f.max())});
    }
    PrintTable(rows);
  }
  std::cout << "\n";
  std::map<std::string, double> fit;
  for (const v1::BlockFitQuality& q : r.fit_quality()) {
    fit[q.block()] = q.act_rel_rmse();
  }
  std::vector<std::vector<std::string>> rows = {
      {"BLOCK", "CHECKPOINTABLE", "ACT_REL_RMSE"}};
  for (const v1::Block& b : r.model().blocks()) {
    auto it = fit.find(b.name());
    rows.push_back(
        {b.name(), b.checkpointable() ? "yes" : "no",
         it == fit.end() ? "-" : absl::StrFormat("%.4f", it->second)});
  }
  PrintTable(rows);
  return kExitOk;
}

// `remat plan --max-batch FEATURE`: FitBatch over GetPlan calls.
int RunMaxBatch(const CommonArgs& args, const PlanArgs& p) {
  auto request = MakePlanRequest<v1::GetPlanRequest>(p);
  const auto& given = request.features();
  if (!given.contains(p.max_batch)) {
    throw CLI::ValidationError(
        "--max-batch", absl::StrCat("\"", p.max_batch,
                                    "\" is not one of the --feature names"));
  }
  Features features;
  std::vector<std::string> names;
  size_t batch_feature = 0;
  for (const auto& [name, value] : given) {
    if (name == p.max_batch) batch_feature = names.size();
    names.push_back(name);
    features.push_back(value);
  }
  const auto stub = Stub(args);
  grpc::Status failed;
  const absl::StatusOr<BatchFit> fit = FitBatch(
      features, batch_feature,
      [&](const Features& at) -> absl::StatusOr<FitProbe> {
        for (size_t i = 0; i < names.size(); ++i) {
          (*request.mutable_features())[names[i]] = at[i];
        }
        grpc::ClientContext context;
        SetDeadline(&context, args);
        v1::GetPlanResponse r;
        const grpc::Status s = stub->GetPlan(&context, request, &r);
        if (s.ok()) {
          absl::StatusOr<PlanResult> result = PlanResultFromProto(r);
          if (!result.ok()) return result.status();
          return FitsOf(result->collect, *result->plan);
        }
        const auto& trailers = context.GetServerTrailingMetadata();
        auto it = trailers.find(kSmallestPeakMetadataKey);
        int64_t peak = 0;
        if (s.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED &&
            it != trailers.end() &&
            absl::SimpleAtoi(
                absl::string_view(it->second.data(), it->second.size()),
                &peak)) {
          return FitProbe{false, peak};
        }
        failed = s;
        return absl::UnknownError("the call failed");
      });
  if (!failed.ok()) return ReportError(failed, args);
  if (!fit.ok()) {
    throw CLI::ValidationError("--feature", std::string(fit.status().message()));
  }
  const int64_t budget = request.budget_bytes();
  if (args.output == "json") {
    std::cout << absl::StrCat(
        "{\"feature\":\"", p.max_batch, "\",\"batch\":",
        static_cast<int64_t>(features[batch_feature]),
        ",\"max_batch\":", fit->max_batch,
        ",\"micro_batches\":", fit->micro_batches,
        ",\"budget_bytes\":", budget,
        fit->smallest_peak_bytes
            ? absl::StrCat(",\"smallest_peak_bytes\":", *fit->smallest_peak_bytes)
            : "",
        "}\n");
  } else {
    std::vector<std::vector<std::string>> rows = {
        {"feature", p.max_batch},
        {"batch", absl::StrCat(features[batch_feature])},
        {"max_batch", absl::StrCat(fit->max_batch)},
        {"micro_batches", absl::StrCat(fit->micro_batches)},
        {"budget", FormatBytes(budget)}};
    if (fit->smallest_peak_bytes) {
      rows.push_back({"smallest_peak (one row)",
                      FormatBytes(*fit->smallest_peak_bytes)});
    }
    PrintTable(rows);
  }
  return fit->max_batch > 0 ? kExitOk : kExitInfeasible;
}

int RunPlan(const CommonArgs& args, const PlanArgs& p) {
  if (!p.max_batch.empty()) return RunMaxBatch(args, p);
  auto request = MakePlanRequest<v1::GetPlanRequest>(p);
  request.set_include_reasons(true);  // the table shows them
  grpc::ClientContext context;
  SetDeadline(&context, args);
  v1::GetPlanResponse r;
  const grpc::Status s = Stub(args)->GetPlan(&context, request, &r);
  if (!s.ok()) {
    const auto& trailers = context.GetServerTrailingMetadata();
    auto it = trailers.find(kSmallestPeakMetadataKey);
    if (s.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED &&
        it != trailers.end()) {
      std::cerr << "remat: no plan fits: " << s.error_message() << "\n";
      return kExitInfeasible;
    }
    return ReportError(s, args);
  }
  if (args.output == "json") {
    std::cout << ToJson(r);
    return kExitOk;
  }
  const std::string bucket = Bucket(r.bucket(), r.bucket_features());
  if (r.decision() == v1::COLLECT) {
    PrintTable({{"decision", "COLLECT"},
                {"reason", r.collect_reason()},
                {"bucket", bucket}});
    if (r.plan().blocks_size() > 0) {
      std::cout << "\n";
      PrintPlanTable(r.plan());
    }
    return kExitOk;
  }
  const v1::Plan& plan = r.plan();
  PrintTable({{"decision", "PLAN"},
              {"bucket", bucket},
              {"from_cache", r.from_cache() ? "yes" : "no"},
              {"solver", plan.solver()},
              {"predicted_peak", FormatBytes(plan.predicted_peak_bytes())},
              {"budget", FormatBytes(request.budget_bytes())},
              {"recompute", FormatNs(plan.recompute_ns())}});
  std::cout << "\n";
  PrintPlanTable(plan);
  return kExitOk;
}

int RunExplain(const CommonArgs& args, const PlanArgs& p) {
  const auto request = MakePlanRequest<v1::ExplainPlanRequest>(p);
  grpc::ClientContext context;
  SetDeadline(&context, args);
  v1::ExplainPlanResponse r;
  const grpc::Status s = Stub(args)->ExplainPlan(&context, request, &r);
  if (!s.ok()) return ReportError(s, args);
  const bool fits = r.decision() == v1::COLLECT || r.plan().feasible();
  if (args.output == "json") {
    std::cout << ToJson(r);
  } else if (r.decision() == v1::COLLECT) {
    PrintTable(
        {{"decision", "COLLECT"},
         {"reason", r.collect_reason()},
         {"bucket", Bucket(r.bucket(), r.bucket_features())},
         {"untrusted_peak", FormatBytes(r.plan().predicted_peak_bytes())},
         {"budget", FormatBytes(r.budget_bytes())}});
    if (r.plan().blocks_size() > 0) {
      std::cout << "\n";
      PrintPlanTable(r.plan());
    }
  } else {
    PrintTable(
        {{"decision", "PLAN"},
         {"bucket", Bucket(r.bucket(), r.bucket_features())},
         {"solver", r.plan().solver()},
         {"fits", fits ? "yes" : "NO"},
         {"predicted_peak", FormatBytes(r.plan().predicted_peak_bytes())},
         {"budget", FormatBytes(r.budget_bytes())},
         {"headroom", r.headroom_bytes() < 0
                          ? "-" + FormatBytes(-r.headroom_bytes())
                          : FormatBytes(r.headroom_bytes())},
         {"recompute", FormatNs(r.plan().recompute_ns())}});
    std::cout << "\n";
    PrintPlanTable(r.plan());
  }
  return fits ? kExitOk : kExitInfeasible;
}

void AddPlanArgs(CLI::App* sub, PlanArgs* p) {
  sub->add_option("--model", p->model, "Registered model name")->required();
  sub->add_option("--feature", p->features,
                  "Input feature name=value (repeat per feature)")
      ->required();
  sub->add_option("--budget", p->budget,
                  "Memory budget: bytes, or with a unit (6GiB, 512MiB, 8GB)")
      ->required();
  sub->add_option("--solver", p->solver, "Solver (default: the daemon's)");
  sub->add_flag("--no-offload", p->no_offload,
                "No block OFFLOAD (a trainer without a copy engine)");
  sub->add_flag("--offload-checkpoints", p->offload_checkpoints,
                "Plans may send checkpoints to host (RECOMPUTE_OFFLOAD), as "
                "a trainer whose runtime can does");
  sub->add_option("--device", p->device,
                  "Device type whose profile plans (\"cpu\", or as "
                  "`remat models` lists them; default: unspecified)");
}

int RunExport(const CommonArgs& args, const std::string& model,
              const std::string& device, const std::string& file) {
  grpc::ClientContext context;
  SetDeadline(&context, args);
  v1::ExportProfileRequest request;
  request.set_model(model);
  request.set_device(device);
  v1::ExportProfileResponse response;
  const grpc::Status s = Stub(args)->ExportProfile(&context, request, &response);
  if (!s.ok()) return ReportError(s, args);
  if (auto w = WriteProfileFile(file, response.profile()); !w.ok()) {
    std::cerr << "remat: " << w.message() << "\n";
    return kExitUsage;
  }
  std::cout << "exported " << model << " on " << DeviceName(device) << ": "
            << response.profile().samples_size() << " samples ("
            << response.profile().quarantined_size()
            << " quarantined) to " << file << "\n";
  return kExitOk;
}

int RunImport(const CommonArgs& args, const std::string& file,
              const std::string& device, bool force_device) {
  auto profile = ReadProfileFile(file);
  if (!profile.ok()) {
    std::cerr << "remat: " << profile.status().message() << "\n";
    return kExitUsage;
  }
  grpc::ClientContext context;
  SetDeadline(&context, args);
  v1::ImportProfileRequest request;
  *request.mutable_profile() = *std::move(profile);
  request.set_device(device);
  request.set_force_device(force_device);
  v1::ImportProfileResponse r;
  const grpc::Status s = Stub(args)->ImportProfile(&context, request, &r);
  if (!s.ok()) return ReportError(s, args);
  if (args.output == "json") {
    std::cout << ToJson(r);
    return kExitOk;
  }
  std::cout << "imported " << request.profile().model().name() << " on "
            << DeviceName(r.device()) << ": " << r.added()
            << " samples added (" << r.quarantined() << " quarantined), "
            << r.already_held() << " held already"
            << (r.registered() ? "; model registered" : "") << "\n";
  return kExitOk;
}

}  // namespace

void AddDaemonCommands(CLI::App& app, int* exit_code) {
  // Owned by the callbacks; they live as long as `app`.
  auto health_args = std::make_shared<CommonArgs>();
  auto health_service = std::make_shared<std::string>();
  auto health_wait = std::make_shared<bool>(false);
  CLI::App* health =
      app.add_subcommand("health",
                         "Ask rematd's health service (exit 0 when "
                         "SERVING, 6 when not)");
  AddCommon(health, health_args.get());
  health->add_option("--service", *health_service,
                     "Service to check (default: the whole daemon)");
  health->add_flag("--wait", *health_wait,
                   "Wait for rematd to come up and serve, within "
                   "--timeout-ms, instead of answering at once (for scripts "
                   "that start it)");
  health->callback(
      [=] {
        *exit_code = RunHealth(*health_args, *health_service, *health_wait);
      });

  auto models_args = std::make_shared<CommonArgs>();
  CLI::App* models = app.add_subcommand("models", "List registered models");
  AddCommon(models, models_args.get());
  models->callback([=] { *exit_code = RunModels(*models_args); });

  auto model_args = std::make_shared<CommonArgs>();
  auto model_name = std::make_shared<std::string>();
  auto model_device = std::make_shared<std::string>();
  CLI::App* model = app.add_subcommand(
      "model",
      "One model's profile on one device type: features, samples, fit "
      "quality, cache");
  AddCommon(model, model_args.get());
  model->add_option("name", *model_name, "Model name")->required();
  model->add_option("--device", *model_device,
                    "Device type (default: unspecified)");
  model->callback([=] {
    *exit_code = RunModel(*model_args, *model_name, *model_device);
  });

  auto export_args = std::make_shared<CommonArgs>();
  auto export_model = std::make_shared<std::string>();
  auto export_device = std::make_shared<std::string>();
  auto export_file = std::make_shared<std::string>();
  CLI::App* export_cmd = app.add_subcommand(
      "export",
      "Write a model's profile on one device type (spec, samples, "
      "quarantine) to a file, for `remat import` or `rematd --import` on "
      "another node");
  AddCommon(export_cmd, export_args.get(), /*output_format=*/false);
  export_cmd->add_option("model", *export_model, "Model name")->required();
  export_cmd->add_option("--device", *export_device,
                         "Device type (default: unspecified)");
  export_cmd->add_option("-o,--output", *export_file, "File to write")
      ->required();
  export_cmd->callback([=] {
    *exit_code =
        RunExport(*export_args, *export_model, *export_device, *export_file);
  });

  auto import_args = std::make_shared<CommonArgs>();
  auto import_file = std::make_shared<std::string>();
  auto import_device = std::make_shared<std::string>();
  auto import_force = std::make_shared<bool>(false);
  CLI::App* import_cmd = app.add_subcommand(
      "import",
      "Add a profile `remat export` wrote to rematd (registers the model; "
      "samples held already are not added again)");
  AddCommon(import_cmd, import_args.get());
  import_cmd->add_option("file", *import_file, "Profile file")
      ->required()
      ->check(CLI::ExistingFile);
  import_cmd->add_option("--device", *import_device,
                         "Import into this device type's profile (default: "
                         "the file's); another than the file's is refused "
                         "without --force-device");
  import_cmd->add_flag("--force-device", *import_force,
                       "Import a profile measured on another device type "
                       "as --device's");
  import_cmd->callback([=] {
    *exit_code = RunImport(*import_args, *import_file, *import_device,
                           *import_force);
  });

  auto plan_args = std::make_shared<CommonArgs>();
  auto plan_params = std::make_shared<PlanArgs>();
  CLI::App* plan = app.add_subcommand(
      "plan", "Ask rematd for a plan (exit 3 when none fits the budget)");
  AddCommon(plan, plan_args.get());
  AddPlanArgs(plan, plan_params.get());
  plan->add_option(
      "--max-batch", plan_params->max_batch,
      "Instead of the plan: the largest value of this feature (a batch "
      "size, up to the given one) that fits the budget, and how many "
      "micro-batches the batch splits into (exit 3 when not even 1 fits)");
  plan->callback([=] { *exit_code = RunPlan(*plan_args, *plan_params); });

  auto explain_args = std::make_shared<CommonArgs>();
  auto explain_params = std::make_shared<PlanArgs>();
  CLI::App* explain = app.add_subcommand(
      "explain",
      "Explain a plan per block, even when it does not fit (then exit 3)");
  AddCommon(explain, explain_args.get());
  AddPlanArgs(explain, explain_params.get());
  explain->callback(
      [=] { *exit_code = RunExplain(*explain_args, *explain_params); });
}

}  // namespace remat
