#include "planner/service/wal_compaction.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "planner/core.h"
#include "planner/service/convert.h"
#include "planner/service/service.h"

namespace remat {
namespace {

ModelSpec Spec(const std::string& name) {
  ModelSpec spec{name, {"batch", "seq"}, {}};
  spec.blocks.push_back({"embed", false});
  for (int i = 0; i < 4; ++i) spec.blocks.push_back({"layer" + std::to_string(i), true});
  return spec;
}

Sample Law(const ModelSpec& spec, double b, double s) {
  Sample sample;
  sample.features = {b, s};
  for (size_t i = 0; i < spec.blocks.size(); ++i) {
    sample.blocks.push_back({static_cast<int64_t>(4096 * b * s + 64 * s * s),
                             static_cast<int64_t>(1024 * b * s),
                             static_cast<int64_t>(100 * b * s + 1000)});
  }
  sample.base_bytes = 1 << 20;
  return sample;
}

v1::WalRecord Register(const ModelSpec& spec) {
  v1::WalRecord r;
  ModelSpecToProto(spec, r.mutable_register_model());
  return r;
}

v1::WalRecord Samples(const ModelSpec& spec, double b_from, double b_to) {
  v1::WalRecord r;
  r.mutable_samples()->set_model(spec.name);
  for (double b = b_from; b <= b_to; ++b) {
    for (double s = 64; s <= 512; s += 64) {
      SampleToProto(spec, Law(spec, b, s), r.mutable_samples()->add_samples());
    }
  }
  return r;
}

v1::WalRecord OutcomeRecord(const ModelSpec& spec, int i) {
  Outcome o;
  o.model = spec.name;
  o.features = {4, 256};
  o.actions.assign(spec.blocks.size(), Action::kKeep);
  // Early outcomes fall far short of the measured peak, later ones a
  // little: only the last kCalibrationWindow may decide the calibration.
  o.measured_peak_bytes =
      i % 7 == 0 ? 0 : (int64_t{64} << 20) * (i < 100 ? 8 : 1) + i * 4096;
  o.step_ns = 1000000;
  o.out_of_memory = i % 11 == 0;
  v1::WalRecord r;
  OutcomeToProto(spec, o, r.mutable_outcome());
  return r;
}

// Replays `records` into a fresh core.
std::unique_ptr<PlannerCore> Replay(const std::vector<v1::WalRecord>& records) {
  auto core = std::make_unique<PlannerCore>();
  for (const v1::WalRecord& r : records) REQUIRE(ApplyWalRecord(core.get(), r).ok());
  return core;
}

TEST_CASE("a compacted log replays to the same planner state") {
  const ModelSpec a = Spec("a");
  const ModelSpec b = Spec("b");
  std::vector<v1::WalRecord> log = {Register(a), Samples(a, 1, 4), Register(b)};
  for (int i = 0; i < 400; ++i) {
    log.push_back(OutcomeRecord(a, i));
    if (i == 150) log.push_back(Samples(a, 5, 8));  // a refit mid-stream
    if (i % 3 == 0) log.push_back(OutcomeRecord(b, i));  // b has no samples
    if (i >= 100 && i % 3 == 1) {
      // A broken client's absurd peaks, held as outliers: 100 of them, so
      // that some fold into the tally.
      v1::WalRecord held = OutcomeRecord(a, i);
      held.mutable_outcome()->set_measured_peak_bytes(int64_t{1} << 45);
      held.set_outcome_outlier(true);
      log.push_back(held);
    }
  }
  // Compacting twice folds the first tallies into the second.
  const std::vector<v1::WalRecord> once = CompactWalRecords(log);
  const std::vector<v1::WalRecord> compacted =
      CompactWalRecords(CompactWalRecords(once));
  CHECK(compacted.size() < log.size() / 3);

  auto full = Replay(log);
  auto small = Replay(compacted);
  for (const std::string& model : {"a", "b"}) {
    auto s1 = full->GetModelState(model);
    auto s2 = small->GetModelState(model);
    REQUIRE(s1.ok());
    REQUIRE(s2.ok());
    CHECK(s1->num_samples == s2->num_samples);
    CHECK(s1->outcomes == s2->outcomes);
    CHECK(s1->out_of_memory == s2->out_of_memory);
    CHECK(s1->outcomes_quarantined == s2->outcomes_quarantined);
  }
  CHECK(full->GetModelState("a")->outcomes == 500);
  CHECK(full->GetModelState("a")->outcomes_quarantined == 100);
  CHECK(full->GetModelState("b")->outcomes == 134);
  // Same calibration: the same predicted peaks everywhere.
  for (double batch : {1, 3, 8}) {
    for (double seq : {64, 200, 512}) {
      const PlanRequest r{"a", {batch, seq}, int64_t{1} << 40, "none"};
      auto p1 = full->Explain(r);
      auto p2 = small->Explain(r);
      REQUIRE(p1.ok());
      REQUIRE(p2.ok());
      CHECK(p1->plan->predicted_peak_bytes == p2->plan->predicted_peak_bytes);
    }
  }
  // And calibration really came from the outcomes kept: without them the
  // peaks differ.
  std::vector<v1::WalRecord> no_outcomes;
  for (const v1::WalRecord& r : log) {
    if (!r.has_outcome()) no_outcomes.push_back(r);
  }
  const PlanRequest r{"a", {4, 256}, int64_t{1} << 40, "none"};
  CHECK(Replay(no_outcomes)->Explain(r)->plan->predicted_peak_bytes !=
        small->Explain(r)->plan->predicted_peak_bytes);
}

TEST_CASE("compaction keeps each device type's outcomes apart") {
  const ModelSpec a = Spec("a");
  std::vector<v1::WalRecord> log = {Register(a), Samples(a, 1, 4)};
  v1::WalRecord gpu = Samples(a, 1, 4);
  for (auto& sample : *gpu.mutable_samples()->mutable_samples()) {
    sample.set_device("gpu");
  }
  log.push_back(gpu);
  for (int i = 0; i < 300; ++i) {
    v1::WalRecord r = OutcomeRecord(a, i);
    // Two devices, each with more outcomes than calibration remembers.
    if (i % 2 == 1) r.mutable_outcome()->set_device("gpu");
    log.push_back(r);
  }
  const std::vector<v1::WalRecord> compacted = CompactWalRecords(log);
  CHECK(compacted.size() < log.size() / 2);
  auto full = Replay(log);
  auto small = Replay(compacted);
  for (const std::string device : {"", "gpu"}) {
    auto s1 = full->GetModelState("a", device);
    auto s2 = small->GetModelState("a", device);
    REQUIRE(s1.ok());
    REQUIRE(s2.ok());
    CHECK(s1->num_samples == 32);
    CHECK(s2->num_samples == 32);
    CHECK(s1->outcomes == 150);
    CHECK(s2->outcomes == 150);
    CHECK(s1->out_of_memory == s2->out_of_memory);
    PlanRequest r{"a", {4, 256}, int64_t{1} << 40, "none"};
    r.device = device;
    CHECK(full->Explain(r)->plan->predicted_peak_bytes ==
          small->Explain(r)->plan->predicted_peak_bytes);
  }
}

}  // namespace
}  // namespace remat
