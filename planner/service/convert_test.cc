#include "planner/service/convert.h"

#include <catch2/catch.hpp>

namespace remat {
namespace {

ModelSpec Spec() {
  ModelSpec s;
  s.name = "bert";
  s.feature_names = {"batch", "seq"};
  s.blocks = {{"embed", false}, {"layer0", true}, {"layer1", true}};
  return s;
}

bool Contains(const absl::Status& s, const std::string& text) {
  return std::string(s.message()).find(text) != std::string::npos;
}

TEST_CASE("model specs survive the round trip") {
  v1::ModelSpec proto;
  ModelSpecToProto(Spec(), &proto);
  REQUIRE(proto.blocks(0).checkpointable() == false);
  const ModelSpec back = ModelSpecFromProto(proto);
  REQUIRE(back.name == "bert");
  REQUIRE(back.feature_names == Spec().feature_names);
  REQUIRE(back.blocks.size() == 3);
  REQUIRE(back.blocks[1].name == "layer0");
  REQUIRE(back.blocks[1].checkpointable);
  REQUIRE_FALSE(back.blocks[0].checkpointable);
}

TEST_CASE("features are ordered by the spec and checked by name") {
  FeatureMap map;
  map["seq"] = 384;
  map["batch"] = 12;
  auto f = FeaturesFromMap(Spec(), map, "features");
  REQUIRE(f.ok());
  REQUIRE(*f == Features{12, 384});

  FeatureMap missing;
  missing["seq"] = 384;
  auto m = FeaturesFromMap(Spec(), missing, "features");
  REQUIRE(absl::IsInvalidArgument(m.status()));
  REQUIRE(Contains(m.status(), "features: missing feature \"batch\""));

  FeatureMap extra = map;
  extra["width"] = 3;
  auto e = FeaturesFromMap(Spec(), extra, "samples[2].features");
  REQUIRE(absl::IsInvalidArgument(e.status()));
  REQUIRE(Contains(e.status(), "samples[2].features[\"width\"]"));

  FeatureMap back;
  FeaturesToMap(Spec(), *f, &back);
  REQUIRE(back.size() == 2);
  REQUIRE(back.at("batch") == 12);
  REQUIRE(back.at("seq") == 384);
}

TEST_CASE("samples survive the round trip, optional fields included") {
  Sample s;
  s.features = {4, 128};
  s.blocks = {{100, 10, 1000}, {200, 20, 2000}, {300, 30, 3000}};
  s.blocks[1].workspace_bytes = 77;
  s.blocks[0].transfer_bytes = 88;
  s.peak_bytes = 12345;
  s.tail_bytes = 678;
  v1::Sample proto;
  SampleToProto(Spec(), s, &proto);
  REQUIRE_FALSE(proto.has_base_bytes());
  auto back = SampleFromProto(Spec(), proto, "samples[0]");
  REQUIRE(back.ok());
  REQUIRE(back->features == s.features);
  REQUIRE(back->blocks.size() == 3);
  REQUIRE(back->blocks[2].act_bytes == 300);
  REQUIRE(back->blocks[2].input_bytes == 30);
  REQUIRE(back->blocks[2].forward_ns == 3000);
  REQUIRE(back->blocks[1].workspace_bytes == 77);
  REQUIRE_FALSE(back->blocks[2].workspace_bytes.has_value());  // unset
  REQUIRE_FALSE(proto.blocks(2).has_workspace_bytes());
  REQUIRE(back->blocks[0].transfer_bytes == 88);
  REQUIRE_FALSE(back->blocks[1].transfer_bytes.has_value());
  REQUIRE_FALSE(proto.blocks(1).has_transfer_bytes());
  REQUIRE_FALSE(back->base_bytes.has_value());
  REQUIRE(back->peak_bytes == 12345);
  REQUIRE(back->tail_bytes == 678);
  REQUIRE_FALSE(back->d2h_bytes_per_s.has_value());
  REQUIRE_FALSE(proto.has_h2d_bytes_per_s());

  s.d2h_bytes_per_s = 5.5e10;
  s.h2d_bytes_per_s = 4.25e10;
  SampleToProto(Spec(), s, &proto);
  back = SampleFromProto(Spec(), proto, "samples[0]");
  REQUIRE(back.ok());
  REQUIRE(back->d2h_bytes_per_s == 5.5e10);
  REQUIRE(back->h2d_bytes_per_s == 4.25e10);
}

TEST_CASE("actions: unspecified and unknown numbers are rejected") {
  REQUIRE(*ActionFromProto(v1::KEEP, "a") == Action::kKeep);
  REQUIRE(*ActionFromProto(v1::RECOMPUTE, "a") == Action::kRecompute);
  REQUIRE(*ActionFromProto(v1::OFFLOAD, "a") == Action::kOffload);
  REQUIRE(*ActionFromProto(v1::RECOMPUTE_OFFLOAD, "a") ==
          Action::kRecomputeOffload);
  auto bad = ActionFromProto(v1::ACTION_UNSPECIFIED, "actions[3]");
  REQUIRE(absl::IsInvalidArgument(bad.status()));
  REQUIRE(Contains(bad.status(), "actions[3]"));
  REQUIRE_FALSE(ActionFromProto(77, "a").ok());
  for (Action a : {Action::kKeep, Action::kRecompute, Action::kOffload,
                   Action::kRecomputeOffload}) {
    REQUIRE(*ActionFromProto(ActionToProto(a), "a") == a);
  }
}

TEST_CASE("plan results survive the round trip; COLLECT has no plan") {
  auto plan = std::make_shared<Plan>();
  plan->actions = {Action::kKeep, Action::kRecompute, Action::kKeep};
  plan->reasons = {"not checkpointable", "largest a-x", "fits"};
  plan->feasible = true;
  plan->predicted_peak_bytes = 1 << 30;
  plan->recompute_ns = 5000;
  plan->solver = "exact";
  plan->exposed_transfer_ns = 77;
  plan->optimality_gap_ns = 0;
  PlanResult r;
  r.plan = plan;
  r.from_cache = true;
  r.bucket = {12, 384};
  v1::GetPlanResponse proto;
  PlanResultToProto(Spec(), r, &proto);
  REQUIRE(proto.decision() == v1::PLAN);
  REQUIRE(proto.plan().blocks(1).block() == "layer0");
  REQUIRE(proto.bucket_features(1) == "seq");
  auto back = PlanResultFromProto(proto);
  REQUIRE(back.ok());
  REQUIRE_FALSE(back->collect);
  REQUIRE(back->plan->actions == plan->actions);
  REQUIRE(back->plan->reasons == plan->reasons);
  REQUIRE(back->plan->predicted_peak_bytes == 1 << 30);
  REQUIRE(back->plan->recompute_ns == 5000);
  REQUIRE(back->plan->solver == "exact");
  REQUIRE(back->plan->feasible);
  REQUIRE(back->plan->exposed_transfer_ns == 77);
  REQUIRE(back->plan->optimality_gap_ns == 0);
  REQUIRE(back->from_cache);
  REQUIRE(back->bucket == r.bucket);
  // A heuristic's plan proves nothing: no gap on the wire, none back.
  plan->optimality_gap_ns.reset();
  PlanResultToProto(Spec(), r, &proto);
  REQUIRE_FALSE(proto.plan().has_optimality_gap_ns());
  REQUIRE_FALSE(PlanResultFromProto(proto)->plan->optimality_gap_ns);

  PlanResult c;
  c.collect = true;
  c.collect_reason = "3 distinct samples, 6 needed";
  PlanResultToProto(Spec(), c, &proto);
  REQUIRE(proto.decision() == v1::COLLECT);
  REQUIRE_FALSE(proto.has_plan());
  back = PlanResultFromProto(proto);
  REQUIRE(back->collect);
  REQUIRE(back->plan == nullptr);
  REQUIRE(back->collect_reason == c.collect_reason);

  // COLLECT with the plan to run (what the core returns).
  c.plan = plan;
  PlanResultToProto(Spec(), c, &proto);
  REQUIRE(proto.decision() == v1::COLLECT);
  REQUIRE(proto.plan().blocks_size() == 3);
  back = PlanResultFromProto(proto);
  REQUIRE(back->collect);
  REQUIRE(back->plan->actions == plan->actions);

  proto.set_decision(v1::DECISION_UNSPECIFIED);
  REQUIRE_FALSE(PlanResultFromProto(proto).ok());
}

TEST_CASE("a plan's copy waits survive the round trip and are checked") {
  auto plan = std::make_shared<Plan>();
  plan->actions = {Action::kKeep, Action::kOffload, Action::kKeep};
  plan->copies_out_landed = {0, 0, 2};
  PlanResult r;
  r.plan = plan;
  v1::GetPlanResponse proto;
  PlanResultToProto(Spec(), r, &proto);
  REQUIRE(proto.plan().blocks(2).copies_out_landed() == 2);
  auto back = PlanResultFromProto(proto);
  REQUIRE(back.ok());
  CHECK(back->plan->copies_out_landed == plan->copies_out_landed);
  // A plan without them (an older daemon's) waits nowhere.
  plan->copies_out_landed.clear();
  PlanResultToProto(Spec(), r, &proto);
  CHECK(PlanResultFromProto(proto)->plan->copies_out_landed ==
        std::vector<int32_t>{0, 0, 0});
  // Past the block's own index, or below the block below's: rejected,
  // naming the field.
  for (const std::vector<int32_t>& bad :
       {std::vector<int32_t>{0, 2, 2}, std::vector<int32_t>{0, 1, 0},
        std::vector<int32_t>{-1, 0, 0}}) {
    plan->copies_out_landed = bad;
    PlanResultToProto(Spec(), r, &proto);
    const auto rejected = PlanResultFromProto(proto);
    REQUIRE_FALSE(rejected.ok());
    CHECK(Contains(rejected.status(), "copies_out_landed"));
  }
}

TEST_CASE("explain answers carry budget and headroom") {
  auto plan = std::make_shared<Plan>();
  plan->actions = {Action::kKeep, Action::kKeep, Action::kKeep};
  plan->predicted_peak_bytes = 1500;
  PlanResult r;
  r.plan = plan;
  v1::ExplainPlanResponse proto;
  ExplainResultToProto(Spec(), r, 1000, &proto);
  REQUIRE(proto.budget_bytes() == 1000);
  REQUIRE(proto.headroom_bytes() == -500);
  REQUIRE(proto.plan().blocks_size() == 3);
}

TEST_CASE("outcomes need one action per block") {
  Outcome o;
  o.model = "bert";
  o.features = {2, 64};
  o.actions = {Action::kKeep, Action::kRecompute, Action::kKeep};
  o.measured_peak_bytes = 999;
  o.step_ns = 1234;
  o.out_of_memory = true;
  v1::ReportOutcomeRequest proto;
  OutcomeToProto(Spec(), o, &proto);
  auto back = OutcomeFromProto(Spec(), proto);
  REQUIRE(back.ok());
  REQUIRE(back->actions == o.actions);
  REQUIRE(back->features == o.features);
  REQUIRE(back->measured_peak_bytes == 999);
  REQUIRE(back->step_ns == 1234);
  REQUIRE(back->out_of_memory);
  REQUIRE_FALSE(back->plan_source.has_value());  // not said: unknown

  for (PlanSource source : kAllPlanSources) {
    o.plan_source = source;
    OutcomeToProto(Spec(), o, &proto);
    auto round = OutcomeFromProto(Spec(), proto);
    REQUIRE(round.ok());
    REQUIRE(round->plan_source == source);
  }
  proto.set_plan_source(static_cast<v1::PlanSource>(77));
  auto unknown = OutcomeFromProto(Spec(), proto);
  REQUIRE(absl::IsInvalidArgument(unknown.status()));
  REQUIRE(Contains(unknown.status(), "plan_source"));
  proto.set_plan_source(v1::PLAN_SOURCE_UNSPECIFIED);

  proto.add_actions(v1::KEEP);
  auto bad = OutcomeFromProto(Spec(), proto);
  REQUIRE(absl::IsInvalidArgument(bad.status()));
  REQUIRE(Contains(bad.status(), "actions: has 4 entries"));
}

TEST_CASE("model state carries fit quality, ranges and cache stats") {
  ModelState s;
  s.spec = Spec();
  s.num_samples = 42;
  s.fit_quality = {{"layer0", 0.01}};
  s.observed_range = {{"seq", 16, 512}};
  s.outcomes = 3;
  s.out_of_memory = 1;
  PlanCacheStats c;
  c.hits = 10;
  c.misses = 2;
  c.size = 2;
  v1::GetModelStateResponse proto;
  ModelStateToProto(s, c, &proto);
  REQUIRE(proto.model().name() == "bert");
  REQUIRE(proto.num_samples() == 42);
  REQUIRE(proto.fit_quality(0).act_rel_rmse() == Approx(0.01));
  REQUIRE(proto.observed_range(0).max() == 512);
  REQUIRE(proto.out_of_memory() == 1);
  REQUIRE(proto.cache().hits() == 10);
  REQUIRE(proto.cache().size() == 2);
}

}  // namespace
}  // namespace remat
