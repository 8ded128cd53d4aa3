// Validate, then change: requests to a real rematd that fail on their last
// element change nothing (state, plan cache, log, metrics), in memory or
// after a restart; every quantity has a range named in its error; one
// absurd sample cannot bend a model that other trainers share.
#include <grpcpp/client_context.h>
#include <signal.h>
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "client/remote_planner.h"
#include "proto/remat.grpc.pb.h"
#include "tests/daemon_harness.h"
#include "tests/raw_client.h"

namespace remat {
namespace {

using testing::DaemonProcess;
using testing::RawClient;
using testing::SamplesRequest;
using Client = RawClient;

bool Contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

off_t FileSize(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 ? st.st_size : -1;
}

// The value of an unlabelled metric in a Prometheus text page; -1 if absent.
double Metric(const std::string& page, const std::string& name) {
  std::istringstream in(page);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(name + " ", 0) == 0) return std::stod(line.substr(name.size()));
  }
  return -1;
}

// Twelve distinct samples: enough to trust a fit of the test model's laws.
std::vector<Sample> Twelve(const ModelSpec& spec) {
  std::vector<Sample> out;
  for (double batch : {2, 4, 8}) {
    for (double seq : {64, 128, 256, 512}) {
      out.push_back(testing::TestSample(spec, batch, seq));
    }
  }
  return out;
}

TEST_CASE("a request that fails on its last element changes nothing") {
  const std::string state = testing::MakeTempDir() + "/state";
  const std::string wal = state + "/wal.log";
  const ModelSpec spec = testing::TestModel("m", 4);
  DaemonProcess daemon;
  REQUIRE(daemon.Start({state}).ok());
  Client client(daemon.address());
  REQUIRE(client.Register(testing::ToProto(spec)).ok());
  REQUIRE(client.Samples(SamplesRequest(spec, Twelve(spec))).ok());
  v1::GetPlanResponse plan;
  REQUIRE(client.Plan("m", 4, 200, int64_t{8} << 30, &plan).ok());
  REQUIRE(plan.decision() == v1::PLAN);

  const v1::GetModelStateResponse before = client.State("m");
  REQUIRE(before.num_samples() == 12);
  const off_t wal_before = FileSize(wal);
  const std::string metrics_before = testing::HttpGet(daemon.metrics_port(), "/metrics");
  REQUIRE(wal_before > 0);

  auto unchanged = [&](const char* what) {
    INFO(what);
    const v1::GetModelStateResponse now = client.State("m");
    CHECK(now.num_samples() == before.num_samples());
    CHECK(now.num_quarantined() == before.num_quarantined());
    CHECK(now.outcomes() == before.outcomes());
    CHECK(now.cache().invalidations() == before.cache().invalidations());
    CHECK(now.cache().size() == before.cache().size());
    CHECK(now.observed_range(1).max() == before.observed_range(1).max());
    CHECK(FileSize(wal) == wal_before);
    const std::string metrics = testing::HttpGet(daemon.metrics_port(), "/metrics");
    for (const char* name :
         {"rematd_samples_total", "rematd_samples_quarantined_total",
          "rematd_outcomes_total", "rematd_oom_reports_total"}) {
      INFO(name);
      CHECK(Metric(metrics, name) == Metric(metrics_before, name));
    }
    CHECK(client.NumModels() == 1);
  };

  // ReportSamples: [a valid sample, a sample whose peak is 2^62].
  {
    std::vector<Sample> samples = {testing::TestSample(spec, 3, 300),
                                   testing::TestSample(spec, 3, 320)};
    samples[1].peak_bytes = int64_t{1} << 62;
    const grpc::Status s = client.Samples(SamplesRequest(spec, samples));
    REQUIRE(s.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
    CHECK(Contains(s.error_message(),
                   "samples[1].peak_bytes: 4611686018427387904 is outside "
                   "[0, 2^60]"));
    unchanged("samples");
  }
  // ReportOutcome whose last action is unknown.
  {
    v1::ReportOutcomeRequest r;
    r.set_model("m");
    (*r.mutable_features())["batch"] = 4;
    (*r.mutable_features())["seq"] = 200;
    for (size_t i = 0; i + 1 < spec.blocks.size(); ++i) r.add_actions(v1::KEEP);
    r.add_actions(static_cast<v1::Action>(7));
    r.set_measured_peak_bytes(1 << 30);
    const grpc::Status s = client.Outcome(r);
    REQUIRE(s.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
    CHECK(Contains(s.error_message(),
                   "actions[" + std::to_string(spec.blocks.size() - 1) + "]"));
    // And one whose measured peak is beyond range.
    r.set_actions(static_cast<int>(spec.blocks.size()) - 1, v1::KEEP);
    r.set_measured_peak_bytes((int64_t{1} << 60) + 1);
    const grpc::Status peak = client.Outcome(r);
    REQUIRE(peak.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
    CHECK(Contains(peak.error_message(), "measured_peak_bytes"));
    // And one that waited for its copies longer than the step took.
    r.set_measured_peak_bytes(1 << 30);
    r.set_step_ns(1000);
    r.set_copy_wait_ns(1001);
    const grpc::Status wait = client.Outcome(r);
    REQUIRE(wait.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
    CHECK(Contains(wait.error_message(),
                   "copy_wait_ns: 1001 is outside [0, step_ns = 1000]"));
    r.set_copy_wait_ns(-1);
    CHECK(client.Outcome(r).error_code() == grpc::StatusCode::INVALID_ARGUMENT);
    unchanged("outcome");
  }
  // RegisterModel whose last block repeats the first one's name.
  {
    ModelSpec bad = testing::TestModel("other", 4);
    bad.blocks.back().name = bad.blocks.front().name;
    const grpc::Status s = client.Register(testing::ToProto(bad));
    REQUIRE(s.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
    CHECK(Contains(s.error_message(),
                   "blocks[" + std::to_string(bad.blocks.size() - 1) + "]"));
    unchanged("register");
  }

  // What memory says is what the log says: the same after SIGKILL.
  REQUIRE(daemon.Signal(SIGKILL) == 128 + SIGKILL);
  DaemonProcess restarted;
  REQUIRE(restarted.Start({state}).ok());
  Client again(restarted.address());
  const v1::GetModelStateResponse after = again.State("m");
  CHECK(after.num_samples() == before.num_samples());
  CHECK(after.outcomes() == before.outcomes());
  CHECK(again.NumModels() == 1);
  v1::GetPlanResponse replanned;
  REQUIRE(again.Plan("m", 4, 200, int64_t{8} << 30, &replanned).ok());
  CHECK(replanned.plan().predicted_peak_bytes() ==
        plan.plan().predicted_peak_bytes());
  REQUIRE(restarted.Signal(SIGTERM) == 0);
}

TEST_CASE("ranges: huge features, huge blocks and names in characters") {
  DaemonProcess daemon;
  REQUIRE(daemon.Start({}).ok());
  Client client(daemon.address());
  const ModelSpec spec = testing::TestModel("m", 3);
  REQUIRE(client.Register(testing::ToProto(spec)).ok());
  REQUIRE(client.Samples(SamplesRequest(spec, Twelve(spec))).ok());

  // Finite, non-negative, but beyond 2^53: out of range, and said so.
  for (double seq : {1e19, 1e300}) {
    v1::GetPlanResponse resp;
    const grpc::Status s = client.Plan("m", 4, seq, int64_t{1} << 30, &resp);
    INFO(s.error_message());
    REQUIRE(s.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
    CHECK(Contains(s.error_message(), "features[1] (seq)"));
    CHECK(Contains(s.error_message(), "outside [0, 2^53]"));
    CHECK_FALSE(Contains(s.error_message(), "negative"));
  }
  // A sample at seq = 1e300 is refused, not fitted.
  {
    Sample absurd = testing::TestSample(spec, 4, 256);
    absurd.features[1] = 1e300;
    const grpc::Status s = client.Samples(SamplesRequest(spec, {absurd}));
    REQUIRE(s.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
    CHECK(Contains(s.error_message(), "samples[0].features[1] (seq)"));
  }
  // Blocks of 2e15 bytes cannot be represented: an error, not a cap.
  {
    Sample big = testing::TestSample(spec, 4, 256);
    big.blocks[2].act_bytes = 2000000000000000;
    const grpc::Status s = client.Samples(SamplesRequest(spec, {big}));
    REQUIRE(s.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
    CHECK(Contains(s.error_message(),
                   "samples[0].blocks[2].act_bytes: 2000000000000000 is "
                   "outside [0, 2^48]"));
  }
  // A budget beyond 2^60.
  {
    v1::GetPlanResponse resp;
    const grpc::Status s =
        client.Plan("m", 4, 256, (int64_t{1} << 60) + 1, &resp);
    REQUIRE(s.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
    CHECK(Contains(s.error_message(), "budget_bytes"));
  }
  CHECK(client.State("m").num_samples() == 12);

  // 200 'é' are 200 characters (400 bytes): allowed; 257 are not.
  std::string name;
  for (int i = 0; i < 200; ++i) name += "\xc3\xa9";
  REQUIRE(client.Register(testing::ToProto(testing::TestModel(name, 2))).ok());
  CHECK(client.State(name).model().name() == name);
  std::string too_long;
  for (int i = 0; i < 257; ++i) too_long += "\xc3\xa9";
  const grpc::Status s = client.Register(testing::ToProto(testing::TestModel(too_long, 2)));
  REQUIRE(s.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK(Contains(s.error_message(), "model.name: 257 characters; at most 256"));
  REQUIRE(daemon.Signal(SIGTERM) == 0);
}

TEST_CASE("one absurd sample is quarantined, durably, and plans keep") {
  const std::string state = testing::MakeTempDir() + "/state";
  const ModelSpec spec = testing::TestModel("shared", 4);
  DaemonProcess daemon;
  REQUIRE(daemon.Start({state}).ok());
  Client client(daemon.address());
  REQUIRE(client.Register(testing::ToProto(spec)).ok());
  REQUIRE(client.Samples(SamplesRequest(spec, Twelve(spec))).ok());
  v1::GetPlanResponse good;
  REQUIRE(client.Plan("shared", 8, 500, int64_t{64} << 30, &good).ok());
  REQUIRE(good.decision() == v1::PLAN);
  const double seq_max = client.State("shared").observed_range(1).max();

  // A broken client: seq 5000 with a step's worth of bytes per block that
  // a short batch would have.
  Sample absurd = testing::TestSample(spec, 8, 64);
  absurd.features[1] = 5000;
  v1::ReportSamplesResponse resp;
  REQUIRE(client.Samples(SamplesRequest(spec, {absurd}), &resp).ok());
  CHECK(resp.accepted() == 1);
  CHECK(resp.quarantined() == 1);
  const v1::GetModelStateResponse held = client.State("shared");
  CHECK(held.num_samples() == 12);
  CHECK(held.num_quarantined() == 1);
  CHECK(held.observed_range(1).max() == seq_max);
  CHECK(Metric(testing::HttpGet(daemon.metrics_port(), "/metrics"),
               "rematd_samples_quarantined_total") == 1);
  // The plan is the one the model's own law gives, and seq 5000 is still
  // beyond what was observed: COLLECT, not a plan sized by the outlier.
  v1::GetPlanResponse same;
  REQUIRE(client.Plan("shared", 8, 500, int64_t{64} << 30, &same).ok());
  CHECK(same.plan().predicted_peak_bytes() == good.plan().predicted_peak_bytes());
  v1::GetPlanResponse far;
  REQUIRE(client.Plan("shared", 8, 5000, int64_t{64} << 30, &far).ok());
  CHECK(far.decision() == v1::COLLECT);

  // Samples that follow the law beyond the range are not outliers.
  v1::ReportSamplesResponse legit;
  REQUIRE(client
              .Samples(SamplesRequest(spec, {testing::TestSample(spec, 8, 600),
                                             testing::TestSample(spec, 4, 640)}),
                       &legit)
              .ok());
  CHECK(legit.quarantined() == 0);

  // Durable: the same after SIGKILL and replay.
  REQUIRE(daemon.Signal(SIGKILL) == 128 + SIGKILL);
  DaemonProcess restarted;
  REQUIRE(restarted.Start({state}).ok());
  Client again(restarted.address());
  const v1::GetModelStateResponse after = again.State("shared");
  CHECK(after.num_samples() == 14);
  CHECK(after.num_quarantined() == 1);
  REQUIRE(restarted.Signal(SIGTERM) == 0);
}

TEST_CASE("one client's absurd outcomes are quarantined, durably, and "
          "everyone's plans keep") {
  const std::string state = testing::MakeTempDir() + "/state";
  const ModelSpec spec = testing::TestModel("shared", 12);
  DaemonProcess daemon;
  REQUIRE(daemon.Start({state}).ok());
  Client client(daemon.address());
  REQUIRE(client.Register(testing::ToProto(spec)).ok());
  REQUIRE(client.Samples(SamplesRequest(spec, Twelve(spec))).ok());
  const std::vector<std::pair<double, double>> probes = {
      {2, 100}, {4, 200}, {8, 300}, {8, 500}};
  const int64_t budget = int64_t{64} << 30;
  auto predicted = [&](Client& c) {
    std::vector<int64_t> peaks;
    for (auto [batch, seq] : probes) {
      v1::GetPlanResponse r;
      REQUIRE(c.Plan("shared", batch, seq, budget, &r).ok());
      REQUIRE(r.decision() == v1::PLAN);
      peaks.push_back(r.plan().predicted_peak_bytes());
    }
    return peaks;
  };
  const std::vector<int64_t> before = predicted(client);

  // A broken client reports its step at (8, 500) as 100 times the plan's
  // prediction, 64 times.
  Client broken(daemon.address());
  v1::GetPlanResponse plan;
  REQUIRE(broken.Plan("shared", 8, 500, budget, &plan).ok());
  v1::ReportOutcomeRequest absurd;
  absurd.set_model("shared");
  (*absurd.mutable_features())["batch"] = 8;
  (*absurd.mutable_features())["seq"] = 500;
  for (const v1::BlockPlan& b : plan.plan().blocks()) {
    absurd.add_actions(b.action());
  }
  absurd.set_measured_peak_bytes(100 * plan.plan().predicted_peak_bytes());
  for (int i = 0; i < 64; ++i) REQUIRE(broken.Outcome(absurd).ok());
  const v1::GetModelStateResponse held = client.State("shared");
  CHECK(held.outcomes() == 64);
  CHECK(held.outcomes_quarantined() == 64);
  CHECK(Metric(testing::HttpGet(daemon.metrics_port(), "/metrics"),
               "rematd_outcomes_quarantined_total") == 64);
  CHECK(predicted(client) == before);
  // An honest miss (10% over) still calibrates.
  v1::ReportOutcomeRequest honest = absurd;
  honest.set_measured_peak_bytes(plan.plan().predicted_peak_bytes() * 11 / 10);
  REQUIRE(client.Outcome(honest).ok());
  CHECK(client.State("shared").outcomes_quarantined() == 64);
  const std::vector<int64_t> calibrated = predicted(client);
  CHECK(calibrated != before);

  // Durable: the same after SIGKILL and replay.
  REQUIRE(daemon.Signal(SIGKILL) == 128 + SIGKILL);
  DaemonProcess restarted;
  REQUIRE(restarted.Start({state}).ok());
  Client again(restarted.address());
  const v1::GetModelStateResponse after = again.State("shared");
  CHECK(after.outcomes() == 65);
  CHECK(after.outcomes_quarantined() == 64);
  CHECK(predicted(again) == calibrated);
  REQUIRE(restarted.Signal(SIGTERM) == 0);
}

TEST_CASE("with --log-format json, libprotobuf's own lines are JSON too") {
  DaemonProcess daemon;
  REQUIRE(daemon.Start({"", "", {"--log-format", "json"}}).ok());
  Client client(daemon.address());
  // A model name that is not UTF-8: the daemon's parser refuses the
  // message and libprotobuf logs why.
  v1::ModelSpec bad = testing::ToProto(testing::TestModel("m", 2));
  bad.set_name("bad\xff\xfe");
  const grpc::Status s = client.Register(bad);
  CHECK_FALSE(s.ok());
  REQUIRE(daemon.Signal(SIGTERM) == 0);
  std::istringstream log(daemon.log());
  std::string line;
  int lines = 0;
  bool saw_protobuf = false;
  while (std::getline(log, line)) {
    if (line.empty()) continue;
    ++lines;
    INFO(line);
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    REQUIRE_FALSE(j.is_discarded());
    REQUIRE(j.is_object());
    if (j.value("msg", "") == "protobuf") saw_protobuf = true;
  }
  CHECK(lines > 2);
  CHECK(saw_protobuf);
}

}  // namespace
}  // namespace remat
