// Fuzzes rematd's config file parser (ParseConfigFile, planner/service/
// config.h): the input is the file. A config that parses is merged over the
// defaults like ResolveDaemonConfig does, validated, and when valid mapped
// onto the core's options and its addresses split; protobuf's JSON of a
// parsed config parses back to the same message. A valid config must give a
// core that plans: one small model, a few samples, a plan per block.
#include <unistd.h>

#include <cstdint>
#include <string>
#include <vector>

#include "google/protobuf/util/field_comparator.h"
#include "google/protobuf/util/json_util.h"
#include "google/protobuf/util/message_differencer.h"
#include "planner/core.h"
#include "planner/service/config.h"
#include "planner/solver.h"
#include "third_party/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = remat::fuzz::TempDir::Path() + "/rematd.json";
  remat::fuzz::WriteFileOrDie(path, data, size);
  auto parsed = remat::ParseConfigFile(path);
  ::unlink(path.c_str());
  if (!parsed.ok()) {
    REMAT_FUZZ_CHECK(parsed.status().code() ==
                     absl::StatusCode::kInvalidArgument);
    return 0;
  }

  std::string json;
  REMAT_FUZZ_CHECK(
      google::protobuf::util::MessageToJsonString(*parsed, &json).ok());
  remat::v1::DaemonConfig again;
  REMAT_FUZZ_CHECK(
      google::protobuf::util::JsonStringToMessage(json, &again).ok());
  // Equal as values: -0e308 parses to -0.0, which proto3's JSON prints as
  // the default it equals, so the bytes may differ there; NaN equals NaN.
  google::protobuf::util::DefaultFieldComparator comparator;
  comparator.set_treat_nan_as_equal(true);
  google::protobuf::util::MessageDifferencer differencer;
  differencer.set_field_comparator(&comparator);
  differencer.set_message_field_comparison(
      google::protobuf::util::MessageDifferencer::EQUIVALENT);
  REMAT_FUZZ_CHECK(differencer.Compare(again, *parsed));

  remat::v1::DaemonConfig config = remat::DefaultDaemonConfig();
  if (parsed->has_core() && parsed->core().granularity_size() > 0) {
    config.mutable_core()->clear_granularity();
  }
  config.MergeFrom(*parsed);
  const absl::Status valid =
      remat::ValidateDaemonConfig(config, remat::SolverNames());
  if (!valid.ok()) {
    REMAT_FUZZ_CHECK(valid.code() == absl::StatusCode::kInvalidArgument);
    return 0;
  }
  const remat::CoreOptions options = remat::ToCoreOptions(config);
  REMAT_FUZZ_CHECK(!options.default_solver.empty());
  REMAT_FUZZ_CHECK(options.max_models >= 1);
  if (!config.listen().empty()) {
    std::string host;
    int port = 0;
    if (remat::SplitHostPort(config.listen(), &host, &port).ok()) {
      remat::IsLoopbackHost(host);
    }
  }
  remat::UnixSocketTarget(config.unix_socket());

  remat::PlannerCore core(options);
  remat::ModelSpec spec;
  spec.name = "m";
  spec.feature_names = {"seq"};
  spec.blocks = {{"a", true}, {"b", false}, {"c", true}};
  REMAT_FUZZ_CHECK(core.RegisterModel(spec).ok());
  std::vector<remat::Sample> samples;
  for (int i = 1; i <= 8; ++i) {
    remat::Sample s;
    s.features = {32.0 * i};
    for (int b = 0; b < 3; ++b) {
      s.blocks.push_back({int64_t{1000} * i * (b + 1), 100 * i, 1000});
    }
    s.base_bytes = 5000;
    samples.push_back(s);
  }
  // The samples-per-model limit may refuse them; planning must still work.
  (void)core.AddSamples("m", samples);
  for (double seq : {16.0, 100.0, 256.0, 4096.0}) {
    remat::PlanRequest request;
    request.model = "m";
    request.features = {seq};
    request.budget_bytes = int64_t{1} << 30;
    auto result = core.GetPlan(request);
    if (!result.ok()) continue;
    REMAT_FUZZ_CHECK(result->plan != nullptr);
    REMAT_FUZZ_CHECK(result->plan->actions.size() == spec.blocks.size());
    REMAT_FUZZ_CHECK(result->plan->actions[1] == remat::Action::kKeep);
  }
  return 0;
}
