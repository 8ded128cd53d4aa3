// Drives every remat.v1 RPC of a real rematd process through the real
// RemotePlanner (and, for requests the client would refuse to send, through
// the raw stub), including a table of bad requests and many concurrent
// clients.
#include <grpcpp/client_context.h>
#include <signal.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <cmath>
#include <functional>
#include <limits>
#include <thread>

#include "client/remote_planner.h"
#include "planner/service/service.h"
#include "proto/health.grpc.pb.h"
#include "proto/remat.grpc.pb.h"
#include "tests/daemon_harness.h"

namespace remat {
namespace {

using testing::DaemonProcess;

constexpr int64_t kMiB = 1 << 20;

bool Contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

RemotePlannerOptions Options(const std::string& address) {
  RemotePlannerOptions o;
  o.address = address;
  // Generous: these tests check answers, not the fallback (see
  // remote_planner_test).
  // Under ThreadSanitizer every refit is an order of magnitude slower, and
  // concurrent refits of one model queue on its lock.
#if defined(__SANITIZE_THREAD__)
  o.get_plan_deadline = std::chrono::milliseconds(60000);
  o.call_deadline = std::chrono::milliseconds(60000);
#else
  o.get_plan_deadline = std::chrono::milliseconds(10000);
  o.call_deadline = std::chrono::milliseconds(10000);
#endif
  return o;
}

std::string Health(const std::string& address) {
  auto stub = grpc::health::v1::Health::NewStub(MakeDaemonChannel(address));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::seconds(5));
  grpc::health::v1::HealthCheckRequest request;
  grpc::health::v1::HealthCheckResponse response;
  grpc::Status s = stub->Check(&context, request, &response);
  if (!s.ok()) return "ERROR " + s.error_message();
  return grpc::health::v1::HealthCheckResponse::ServingStatus_Name(
      response.status());
}

TEST_CASE("every RPC through RemotePlanner against a real rematd") {
  DaemonProcess daemon;
  REQUIRE(daemon.Start({}).ok());
  REQUIRE(Health(daemon.address()) == "SERVING");
  RemotePlanner planner(Options(daemon.address()));
  const ModelSpec spec = testing::TestModel("bert");

  // RegisterModel: created, then idempotent, then a conflicting shape.
  REQUIRE(planner.RegisterModel(spec).ok());
  REQUIRE(planner.RegisterModel(spec).ok());
  ModelSpec other = spec;
  other.blocks.pop_back();
  const absl::Status conflict = planner.RegisterModel(other);
  REQUIRE(absl::IsAlreadyExists(conflict));

  // No samples yet: COLLECT, with the safe plan to run.
  PlanRequest request{"bert", {8, 500}, 1024 * kMiB, ""};
  auto collect = planner.GetPlan(request);
  REQUIRE(collect.ok());
  REQUIRE(collect->collect);
  REQUIRE_FALSE(collect->collect_reason.empty());
  REQUIRE(collect->plan != nullptr);
  REQUIRE(collect->plan->actions[0] == Action::kKeep);  // embed
  REQUIRE(collect->plan->actions[1] == Action::kRecompute);

  // ReportSamples, then a real plan.
  REQUIRE(planner.ReportSamples("bert", testing::TestSampleGrid(spec)).ok());
  auto plan = planner.GetPlan(request);
  REQUIRE(plan.ok());
  INFO(plan->collect_reason);
  REQUIRE_FALSE(plan->collect);
  REQUIRE(plan->plan->feasible);
  REQUIRE(plan->plan->actions.size() == spec.blocks.size());
  REQUIRE(plan->plan->predicted_peak_bytes <= request.budget_bytes);
  REQUIRE_FALSE(plan->from_cache);
  REQUIRE(plan->bucket == std::vector<int64_t>{8, 500});  // a plan per value

  auto again = planner.GetPlan(request);
  REQUIRE(again.ok());
  REQUIRE(again->from_cache);
  REQUIRE(again->plan->actions == plan->plan->actions);

  // Reasons only when asked for; block names always.
  {
    auto stub = v1::Planner::NewStub(MakeDaemonChannel(daemon.address()));
    v1::GetPlanRequest raw;
    raw.set_model("bert");
    (*raw.mutable_features())["batch"] = 8;
    (*raw.mutable_features())["seq"] = 500;
    raw.set_budget_bytes(request.budget_bytes);
    for (const bool include : {false, true}) {
      raw.set_include_reasons(include);
      grpc::ClientContext context;
      v1::GetPlanResponse response;
      REQUIRE(stub->GetPlan(&context, raw, &response).ok());
      REQUIRE(response.plan().blocks_size() ==
              static_cast<int>(spec.blocks.size()));
      for (int i = 0; i < response.plan().blocks_size(); ++i) {
        const v1::BlockPlan& b = response.plan().blocks(i);
        CHECK(b.block() == spec.blocks[i].name);
        CHECK(b.reason().empty() == !include);
      }
    }
  }

  // A tighter budget recomputes more.
  PlanRequest tight = request;
  tight.budget_bytes = 300 * kMiB;
  auto tighter = planner.GetPlan(tight);
  REQUIRE(tighter.ok());
  REQUIRE(tighter->plan->feasible);
  REQUIRE(tighter->plan->recompute_ns >= plan->plan->recompute_ns);

  // No plan fits: RESOURCE_EXHAUSTED naming the smallest reachable peak.
  PlanRequest impossible = request;
  impossible.budget_bytes = 10 * kMiB;
  auto none = planner.GetPlan(impossible);
  REQUIRE(absl::IsResourceExhausted(none.status()));
  REQUIRE(Contains(std::string(none.status().message()), "smallest reachable"));

  // ExplainPlan: the infeasible plan, with reasons and negative headroom.
  auto explained = planner.ExplainPlan(impossible);
  REQUIRE(explained.ok());
  REQUIRE(explained->decision() == v1::PLAN);
  REQUIRE_FALSE(explained->plan().feasible());
  REQUIRE(explained->budget_bytes() == impossible.budget_bytes);
  REQUIRE(explained->headroom_bytes() < 0);
  REQUIRE(explained->plan().blocks_size() ==
          static_cast<int>(spec.blocks.size()));
  REQUIRE(explained->plan().blocks(1).block() == "layer0");
  for (const auto& b : explained->plan().blocks()) {
    REQUIRE_FALSE(b.reason().empty());
  }

  // ReportOutcome (with the predicted peak the client remembered).
  Outcome outcome;
  outcome.model = "bert";
  outcome.features = request.features;
  outcome.actions = plan->plan->actions;
  outcome.measured_peak_bytes = plan->plan->predicted_peak_bytes * 9 / 10;
  outcome.step_ns = 120000000;
  outcome.copy_wait_ns = 6000000;  // its forward waited 6 ms for copies out
  REQUIRE(planner.ReportOutcome(outcome).ok());
  outcome.copy_wait_ns.reset();
  outcome.out_of_memory = true;
  outcome.plan_source = PlanSource::kLastGood;  // a step on a fallback plan
  REQUIRE(planner.ReportOutcome(outcome).ok());

  // GetModelState and ListModels.
  auto state = planner.GetModelState("bert");
  REQUIRE(state.ok());
  REQUIRE(state->num_samples() == testing::TestSampleGrid(spec).size());
  REQUIRE(state->outcomes() == 2);
  REQUIRE(state->out_of_memory() == 1);
  REQUIRE(state->model().blocks_size() == static_cast<int>(spec.blocks.size()));
  REQUIRE(state->observed_range_size() == 2);
  REQUIRE(state->cache().hits() >= 1);
  REQUIRE(state->fit_quality_size() > 0);
  auto models = planner.ListModels();
  REQUIRE(models.ok());
  REQUIRE(models->models_size() == 1);
  REQUIRE(models->models(0).name() == "bert");
  REQUIRE(models->models(0).num_blocks() == spec.blocks.size());

  // Metrics and health over HTTP.
  const std::string metrics =
      testing::HttpGet(daemon.metrics_port(), "/metrics");
  REQUIRE(Contains(metrics, "HTTP/1.0 200"));
  REQUIRE(Contains(metrics,
                   "rematd_requests_total{method=\"GetPlan\",code=\"OK\"}"));
  REQUIRE(Contains(metrics,
                   "rematd_requests_total{method=\"RegisterModel\",code="
                   "\"ALREADY_EXISTS\"} 1"));
  REQUIRE(Contains(metrics, "rematd_oom_reports_total 1"));
  REQUIRE(Contains(metrics,
                   "rematd_outcomes_by_source_total{source=\"last_good\"} 1"));
  REQUIRE(Contains(metrics, "rematd_copy_wait_reports_total 1\n"));
  REQUIRE(Contains(metrics, "rematd_copy_waited_steps_total 1\n"));
  REQUIRE(Contains(metrics, "rematd_copy_wait_seconds_total 0.006\n"));
  REQUIRE(Contains(metrics, "rematd_copy_wait_step_seconds_total 0.12\n"));
  REQUIRE(Contains(metrics, "rematd_peak_ratio_count 2"));
  REQUIRE(Contains(metrics, "rematd_plan_cache_hits_total"));
  REQUIRE(
      Contains(metrics, "rematd_plan_latency_seconds_count{result=\"hit\"}"));
  REQUIRE(
      Contains(testing::HttpGet(daemon.metrics_port(), "/healthz"), "200 OK"));
  REQUIRE(Contains(testing::HttpGet(daemon.metrics_port(), "/nothing"), "404"));

  // One log line per plan decision.
  const std::string log = daemon.log();
  REQUIRE(Contains(log, "plan model=\"bert\""));
  REQUIRE(Contains(log, "from_cache=true"));
  REQUIRE(Contains(log, "blocks_recomputed="));

  // SIGTERM: a clean exit.
  REQUIRE(daemon.Signal(SIGTERM) == 0);
  REQUIRE(Contains(daemon.log(), "shutting_down"));
}

struct BadRequest {
  std::string name;
  std::function<grpc::Status(v1::Planner::Stub*, grpc::ClientContext*)> call;
  grpc::StatusCode code;
  std::string message_part;
};

v1::ModelSpec ProtoModel(const std::string& name, int blocks) {
  v1::ModelSpec m;
  m.set_name(name);
  m.add_feature_names("batch");
  m.add_feature_names("seq");
  for (int i = 0; i < blocks; ++i) {
    v1::Block* b = m.add_blocks();
    b->set_name("b" + std::to_string(i));
    b->set_checkpointable(true);
  }
  return m;
}

v1::Sample ProtoSample(int blocks, double batch, double seq) {
  v1::Sample s;
  (*s.mutable_features())["batch"] = batch;
  (*s.mutable_features())["seq"] = seq;
  for (int i = 0; i < blocks; ++i) {
    v1::BlockMeasurement* m = s.add_blocks();
    m->set_act_bytes(static_cast<int64_t>(1000 * batch * seq));
    m->set_input_bytes(static_cast<int64_t>(100 * batch * seq));
    m->set_forward_ns(static_cast<int64_t>(10 * batch * seq));
  }
  return s;
}

TEST_CASE("bad requests get their code and the daemon keeps serving") {
  DaemonProcess daemon;
  REQUIRE(
      daemon
          .Start({"",
                  "",
                  {"--max-blocks-per-model", "8", "--max-samples-per-request",
                   "50", "--max-message-bytes", "65536", "--max-models", "3"}})
          .ok());
  auto stub = v1::Planner::NewStub(MakeDaemonChannel(daemon.address()));
  {
    // A model with samples, and one without.
    grpc::ClientContext c1, c2, c3;
    v1::RegisterModelRequest r;
    v1::RegisterModelResponse resp;
    *r.mutable_model() = ProtoModel("m", 3);
    REQUIRE(stub->RegisterModel(&c1, r, &resp).ok());
    REQUIRE(resp.created());
    *r.mutable_model() = ProtoModel("empty", 3);
    REQUIRE(stub->RegisterModel(&c2, r, &resp).ok());
    v1::ReportSamplesRequest s;
    s.set_model("m");
    for (double b : {1, 2, 4})
      for (double q : {8, 16, 32}) *s.add_samples() = ProtoSample(3, b, q);
    v1::ReportSamplesResponse sresp;
    REQUIRE(stub->ReportSamples(&c3, s, &sresp).ok());
    REQUIRE(sresp.accepted() == 9);
  }

  auto reg = [](v1::ModelSpec m) {
    return [m](v1::Planner::Stub* s, grpc::ClientContext* c) {
      v1::RegisterModelRequest r;
      *r.mutable_model() = m;
      v1::RegisterModelResponse resp;
      return s->RegisterModel(c, r, &resp);
    };
  };
  auto samples = [](const std::string& model, std::vector<v1::Sample> list) {
    return [model, list](v1::Planner::Stub* s, grpc::ClientContext* c) {
      v1::ReportSamplesRequest r;
      r.set_model(model);
      for (const auto& x : list) *r.add_samples() = x;
      v1::ReportSamplesResponse resp;
      return s->ReportSamples(c, r, &resp);
    };
  };
  auto plan = [](const std::string& model, double batch, double seq,
                 int64_t budget, const std::string& solver) {
    return [=](v1::Planner::Stub* s, grpc::ClientContext* c) {
      v1::GetPlanRequest r;
      r.set_model(model);
      (*r.mutable_features())["batch"] = batch;
      (*r.mutable_features())["seq"] = seq;
      r.set_budget_bytes(budget);
      r.set_solver(solver);
      v1::GetPlanResponse resp;
      return s->GetPlan(c, r, &resp);
    };
  };
  auto outcome = [](std::vector<v1::Action> actions, int64_t peak) {
    return [=](v1::Planner::Stub* s, grpc::ClientContext* c) {
      v1::ReportOutcomeRequest r;
      r.set_model("m");
      (*r.mutable_features())["batch"] = 2;
      (*r.mutable_features())["seq"] = 16;
      for (auto a : actions) r.add_actions(a);
      r.set_measured_peak_bytes(peak);
      v1::ReportOutcomeResponse resp;
      return s->ReportOutcome(c, r, &resp);
    };
  };

  // A profile as `remat export` writes it, spoilt one field at a time; none
  // may register a model or store a sample.
  auto import = [](std::function<void(v1::ImportProfileRequest*)> spoil) {
    return [spoil](v1::Planner::Stub* s, grpc::ClientContext* c) {
      v1::ImportProfileRequest r;
      v1::Profile* p = r.mutable_profile();
      p->set_format_version(1);
      *p->mutable_model() = ProtoModel("imported", 3);
      p->set_device("gpu");
      for (double q : {8, 16, 32}) {
        v1::Sample* sample = p->add_samples();
        *sample = ProtoSample(3, 1, q);
        sample->set_device("gpu");
      }
      spoil(&r);
      v1::ImportProfileResponse resp;
      return s->ImportProfile(c, r, &resp);
    };
  };
  v1::ModelSpec dup = ProtoModel("dup", 2);
  dup.mutable_blocks(1)->set_name("b0");
  v1::ModelSpec nofeat = ProtoModel("nofeat", 2);
  nofeat.clear_feature_names();
  v1::Sample missing = ProtoSample(3, 1, 8);
  missing.mutable_features()->erase("seq");
  v1::Sample unknown = ProtoSample(3, 1, 8);
  (*unknown.mutable_features())["width"] = 3;
  v1::Sample negative = ProtoSample(3, 1, 8);
  negative.mutable_blocks(1)->set_act_bytes(-5);
  v1::Sample nan = ProtoSample(3, 1, 8);
  (*nan.mutable_features())["seq"] = std::nan("");
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<v1::Sample> too_many(51, ProtoSample(3, 1, 8));
  std::vector<v1::Sample> huge(1, ProtoSample(3, 1, 8));
  for (int i = 0; i < 20000; ++i) {  // ~160 KB, over the 64 KiB limit
    huge[0].add_blocks()->set_act_bytes(1000000 + i);
  }

  using C = grpc::StatusCode;
  const std::vector<BadRequest> table = {
      {"register without a model", reg(v1::ModelSpec()), C::INVALID_ARGUMENT,
       "model.name"},
      {"register with duplicate blocks", reg(dup), C::INVALID_ARGUMENT,
       "model.blocks[1].name"},
      {"register without features", reg(nofeat), C::INVALID_ARGUMENT,
       "model.feature_names"},
      {"register beyond max blocks", reg(ProtoModel("big", 9)),
       C::RESOURCE_EXHAUSTED, "max_blocks_per_model"},
      {"register a new shape", reg(ProtoModel("m", 4)), C::ALREADY_EXISTS,
       "\"m\""},
      {"samples for an unknown model", samples("nope", {ProtoSample(3, 1, 8)}),
       C::NOT_FOUND, "nope"},
      {"no samples", samples("m", {}), C::INVALID_ARGUMENT, "samples"},
      {"sample missing a feature", samples("m", {missing}), C::INVALID_ARGUMENT,
       "samples[0].features: missing feature \"seq\""},
      {"sample with an unknown feature", samples("m", {unknown}),
       C::INVALID_ARGUMENT, "width"},
      {"sample with negative bytes", samples("m", {negative}),
       C::INVALID_ARGUMENT, "act_bytes"},
      {"sample with a NaN feature", samples("m", {nan}), C::INVALID_ARGUMENT,
       "samples[0].features[1] (seq): nan is outside [0, 2^53]"},
      {"sample with the wrong block count",
       samples("m", {ProtoSample(2, 1, 8)}), C::INVALID_ARGUMENT, "blocks"},
      {"too many samples", samples("m", too_many), C::RESOURCE_EXHAUSTED,
       "raise --max-samples-per-request"},
      {"message over the size limit", samples("m", huge), C::RESOURCE_EXHAUSTED,
       ""},
      {"plan for an unknown model", plan("nope", 1, 8, 1 << 30, ""),
       C::NOT_FOUND, "nope"},
      {"plan with a zero budget", plan("m", 1, 8, 0, ""), C::INVALID_ARGUMENT,
       "budget_bytes"},
      {"plan with a negative feature", plan("m", -1, 8, 1 << 30, ""),
       C::INVALID_ARGUMENT, "batch"},
      {"plan with an infinite feature", plan("m", 1, inf, 1 << 30, ""),
       C::INVALID_ARGUMENT, "seq"},
      {"plan with an unknown solver", plan("m", 1, 8, 1 << 30, "quantum"),
       C::INVALID_ARGUMENT, "solver"},
      {"plan that cannot fit", plan("m", 2, 16, 10, ""), C::RESOURCE_EXHAUSTED,
       "smallest reachable"},
      {"outcome with too few actions", outcome({v1::KEEP}, 100),
       C::INVALID_ARGUMENT, "actions"},
      {"outcome with an unspecified action",
       outcome({v1::KEEP, v1::ACTION_UNSPECIFIED, v1::KEEP}, 100),
       C::INVALID_ARGUMENT, "actions[1]"},
      {"outcome with a negative peak",
       outcome({v1::KEEP, v1::KEEP, v1::KEEP}, -1), C::INVALID_ARGUMENT,
       "measured_peak_bytes"},
      {"explain a model without samples",
       [](v1::Planner::Stub* s, grpc::ClientContext* c) {
         v1::ExplainPlanRequest r;
         r.set_model("empty");
         (*r.mutable_features())["batch"] = 1;
         (*r.mutable_features())["seq"] = 8;
         r.set_budget_bytes(1 << 30);
         v1::ExplainPlanResponse resp;
         return s->ExplainPlan(c, r, &resp);
       },
       C::FAILED_PRECONDITION, "no samples"},
      {"model state without a name",
       [](v1::Planner::Stub* s, grpc::ClientContext* c) {
         v1::GetModelStateResponse resp;
         return s->GetModelState(c, v1::GetModelStateRequest(), &resp);
       },
       C::INVALID_ARGUMENT, "model"},
      {"import of a newer format", import([](v1::ImportProfileRequest* r) {
         r->mutable_profile()->set_format_version(2);
       }),
       C::FAILED_PRECONDITION, "profile.format_version: 2 is newer"},
      {"import into another device type", import([](v1::ImportProfileRequest* r) {
         r->set_device("cpu");
       }),
       C::FAILED_PRECONDITION, "device: the profile was measured on \"gpu\""},
      {"import with a sample of another device",
       import([](v1::ImportProfileRequest* r) {
         r->mutable_profile()->mutable_samples(2)->set_device("cpu");
       }),
       C::INVALID_ARGUMENT, "profile.samples[2].device"},
      {"import with a bad sample", import([](v1::ImportProfileRequest* r) {
         r->mutable_profile()->mutable_samples(1)->set_peak_bytes(-1);
       }),
       C::INVALID_ARGUMENT, "profile.samples[1].peak_bytes"},
      {"import with a quarantine index past the samples",
       import([](v1::ImportProfileRequest* r) {
         r->mutable_profile()->add_quarantined(3);
       }),
       C::INVALID_ARGUMENT, "profile.quarantined[0]"},
      {"import of another shape under a registered name",
       import([](v1::ImportProfileRequest* r) {
         *r->mutable_profile()->mutable_model() = ProtoModel("m", 2);
         for (auto& s : *r->mutable_profile()->mutable_samples()) {
           s.mutable_blocks()->RemoveLast();
         }
       }),
       C::ALREADY_EXISTS, "profile.model"},
      {"model state of an unknown model",
       [](v1::Planner::Stub* s, grpc::ClientContext* c) {
         v1::GetModelStateRequest r;
         r.set_model("nope");
         v1::GetModelStateResponse resp;
         return s->GetModelState(c, r, &resp);
       },
       C::NOT_FOUND, "nope"},
  };
  for (const BadRequest& bad : table) {
    INFO(bad.name);
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::seconds(10));
    const grpc::Status s = bad.call(stub.get(), &context);
    INFO(s.error_message());
    REQUIRE(s.error_code() == bad.code);
    REQUIRE(Contains(s.error_message(), bad.message_part));
    if (bad.name == "plan that cannot fit") {
      const auto& trailers = context.GetServerTrailingMetadata();
      REQUIRE(trailers.count(kSmallestPeakMetadataKey) == 1);
      // The peak the message names, as a number.
      const std::string peak(trailers.find(kSmallestPeakMetadataKey)->second.data(),
                             trailers.find(kSmallestPeakMetadataKey)->second.size());
      REQUIRE(Contains(s.error_message(), "(" + peak + " bytes)"));
    }
    REQUIRE(Health(daemon.address()) == "SERVING");
  }

  // No bad import registered its model.
  {
    grpc::ClientContext c;
    v1::GetModelStateRequest r;
    r.set_model("imported");
    v1::GetModelStateResponse resp;
    REQUIRE(stub->GetModelState(&c, r, &resp).error_code() == C::NOT_FOUND);
  }
  // The model limit: two registered, one more fits, the next does not.
  {
    grpc::ClientContext c;
    REQUIRE(reg(ProtoModel("third", 2))(stub.get(), &c).ok());
    grpc::ClientContext c2;
    const grpc::Status s = reg(ProtoModel("fourth", 2))(stub.get(), &c2);
    REQUIRE(s.error_code() == C::RESOURCE_EXHAUSTED);
    REQUIRE(Contains(s.error_message(), "max_models"));
  }
  // Nothing above changed the good model or stopped the daemon.
  grpc::ClientContext c;
  REQUIRE(plan("m", 2, 16, 1 << 30, "")(stub.get(), &c).ok());
  RemotePlanner planner(Options(daemon.address()));
  auto state = planner.GetModelState("m");
  REQUIRE(state.ok());
  REQUIRE(state->num_samples() == 9);
  REQUIRE(daemon.Signal(SIGTERM) == 0);
}

TEST_CASE("many concurrent clients") {
  DaemonProcess daemon;
  REQUIRE(daemon.Start({}).ok());
  const ModelSpec spec = testing::TestModel("shared", 4);
  {
    RemotePlanner setup(Options(daemon.address()));
    REQUIRE(setup.RegisterModel(spec).ok());
    REQUIRE(setup.ReportSamples("shared", testing::TestSampleGrid(spec)).ok());
  }
  constexpr int kThreads = 16;
  constexpr int kIterations = 40;
  std::atomic<int> errors{0}, plans{0}, samples_sent{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      RemotePlanner planner(Options(daemon.address()));
      if (!planner.RegisterModel(spec).ok()) ++errors;  // idempotent
      for (int i = 0; i < kIterations; ++i) {
        const double batch = 1 + (t + i) % 8;
        const double seq = 64 + 8 * ((t * 7 + i) % 56);
        auto r = planner.GetPlan({"shared", {batch, seq}, 2048 * kMiB, ""});
        if (!r.ok() || r->plan == nullptr) {
          ++errors;
        } else {
          ++plans;
        }
        if (i % 10 == t % 10) {
          if (planner
                  .ReportSamples("shared",
                                 {testing::TestSample(spec, batch, seq)})
                  .ok()) {
            ++samples_sent;
          } else {
            ++errors;
          }
        }
        if (i % 13 == 0 && r.ok()) {
          Outcome o{"shared",
                    {batch, seq},
                    r->plan->actions,
                    r->plan->predicted_peak_bytes,
                    1000,
                    false};
          if (!planner.ReportOutcome(o).ok()) ++errors;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  REQUIRE(errors == 0);
  REQUIRE(plans == kThreads * kIterations);
  RemotePlanner check(Options(daemon.address()));
  auto state = check.GetModelState("shared");
  REQUIRE(state.ok());
  REQUIRE(state->num_samples() ==
          testing::TestSampleGrid(spec).size() + samples_sent.load());
  REQUIRE(Health(daemon.address()) == "SERVING");
  REQUIRE(daemon.Signal(SIGTERM) == 0);
}

}  // namespace
}  // namespace remat
