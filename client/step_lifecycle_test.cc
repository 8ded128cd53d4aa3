#include "client/step_lifecycle.h"

#include <memory>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "client/plan_chooser.h"
#include "client/planner.h"
#include "collector/memory_source.h"

namespace remat {
namespace {

const Action K = Action::kKeep;
const Action O = Action::kOffload;

// Answers COLLECT until `plan` is set, then that plan; records what it is
// told.
class RecordingPlanner final : public Planner {
 public:
  absl::Status RegisterModel(const ModelSpec&) override {
    return absl::OkStatus();
  }
  absl::StatusOr<PlanResult> GetPlan(const PlanRequest& request) override {
    budgets.push_back(request.budget_bytes);
    if (smallest_peak_bytes > 0) {
      return WithSmallestPeakBytes(
          absl::ResourceExhaustedError("budget_bytes: no plan fits"),
          smallest_peak_bytes);
    }
    PlanResult result;
    result.collect = plan.empty();
    for (double f : request.features) {
      result.bucket.push_back(static_cast<int64_t>(f));
    }
    if (!result.collect) {
      auto p = std::make_shared<Plan>();
      p->actions = plan;
      p->feasible = true;
      p->predicted_peak_bytes = predicted_peak_bytes;
      p->solver = "exact";
      result.plan = p;
    }
    return result;
  }
  absl::Status ReportSamples(const std::string& model,
                             const std::vector<Sample>& s) override {
    CHECK(model == "m");
    samples.insert(samples.end(), s.begin(), s.end());
    return report_status;
  }
  absl::Status ReportOutcome(const Outcome& outcome) override {
    outcomes.push_back(outcome);
    return report_status;
  }

  std::vector<Action> plan;
  int64_t predicted_peak_bytes = 0;
  int64_t smallest_peak_bytes = 0;  // > 0: no plan fits, this is the least
  std::vector<int64_t> budgets;  // asked for
  std::vector<Sample> samples;
  std::vector<Outcome> outcomes;
  absl::Status report_status;
};

struct Fixture {
  explicit Fixture(StepLifecycleOptions options = {}, bool offload = false)
      : chooser(&planner, ModelSpec{"m", {"batch"}, {{"b0", true},
                                                     {"b1", true}}},
                ChooserOptions(offload)),
        lifecycle(&planner, &chooser, WithMemory(options)) {}

  static PlanChooserOptions ChooserOptions(bool offload) {
    PlanChooserOptions o;
    o.offload = offload;
    return o;
  }
  StepLifecycleOptions WithMemory(StepLifecycleOptions o) {
    if (o.memory == nullptr) o.memory = &memory;
    return o;
  }

  // A COLLECT step whose two blocks each keep `act` bytes when
  // recomputed.
  absl::Status Collect(double batch, int64_t act, const LinkProbe& probe) {
    auto step = *lifecycle.Begin({batch}, 1 << 20);
    REQUIRE(step->choice().collect());
    BlockSampler* sampler = step->Start(0);
    REQUIRE(sampler != nullptr);
    for (int b = 1; b >= 0; --b) {
      sampler->BeforeBlock(b, 8);
      memory.Allocate(act);
      sampler->AfterBlock(b);
      memory.Free(act);
    }
    return step->Finish(0, probe);
  }

  RecordingPlanner planner;
  FakeMemorySource memory{1000};
  PlanChooser chooser;
  StepLifecycle lifecycle;
};

TEST_CASE("COLLECT steps report their samples, after the warm-up step") {
  Fixture f;
  int probes = 0;
  LinkProbe probe = [&](int64_t bytes) {
    ++probes;
    CHECK(bytes == int64_t{16} << 20);
    return kernels::LinkBandwidth{2e15, 5e9};
  };
  REQUIRE(f.Collect(4, 100, probe).ok());
  // The first step runs before the optimizer's state exists: its sample
  // is not the training's, and it times no link.
  CHECK(f.planner.samples.empty());
  CHECK(probes == 0);
  REQUIRE(f.Collect(8, 200, probe).ok());
  REQUIRE(f.planner.samples.size() == 1);
  const Sample& s = f.planner.samples[0];
  CHECK(s.features == Features{8});
  CHECK(s.blocks[0].act_bytes == 200);
  CHECK(*s.base_bytes == 1000);
  CHECK(s.d2h_bytes_per_s == kMaxLinkBytesPerS);  // clamped
  CHECK(s.h2d_bytes_per_s == 5e9);
  CHECK(probes == 1);
  CHECK(f.planner.outcomes.empty());  // collect steps report no outcome
}

TEST_CASE("link probes stop after link_probe_steps; warm-up 0 reports all") {
  StepLifecycleOptions options;
  options.warmup_steps = 0;
  options.link_probe_steps = 2;
  Fixture f(options);
  int probes = 0;
  LinkProbe probe = [&](int64_t) {
    ++probes;
    return absl::StatusOr<kernels::LinkBandwidth>(
        absl::ResourceExhaustedError("pool full"));
  };
  for (int i = 0; i < 4; ++i) REQUIRE(f.Collect(4 + i, 100, probe).ok());
  CHECK(f.planner.samples.size() == 4);
  CHECK(probes == 2);
  // A failed probe leaves the sample without a link.
  CHECK_FALSE(f.planner.samples[0].d2h_bytes_per_s.has_value());
}

TEST_CASE("a planned step reports its outcome; an OOM one what it measured "
          "until the failure") {
  Fixture f({}, /*offload=*/true);
  f.planner.plan = {K, O};
  f.planner.predicted_peak_bytes = 1500;
  auto step = *f.lifecycle.Begin({4}, 4000);
  REQUIRE_FALSE(step->choice().collect());
  CHECK(step->Start(0) == nullptr);
  f.memory.Allocate(700);
  f.memory.Free(700);
  REQUIRE(step->Finish(/*copy_wait_ns=*/12).ok());
  REQUIRE(f.planner.outcomes.size() == 1);
  Outcome o = f.planner.outcomes[0];
  CHECK(o.measured_peak_bytes == 1700);
  CHECK_FALSE(o.out_of_memory);
  CHECK(o.copy_wait_ns == 12);  // the plan sends copies
  CHECK(o.plan_source == PlanSource::kPlanner);
  CHECK(*step->measured_peak_bytes() == 1700);
  CHECK_FALSE(o.reserved_peak_bytes.has_value());  // the source cannot tell

  // A source that sees the allocator's reserved bytes: the outcome carries
  // their peak, less what the step held from before (as the peak).
  f.memory.Reserve(1000);
  step = *f.lifecycle.Begin({4}, 4000, /*held_bytes=*/100);
  step->Start(0);
  f.memory.Allocate(700);
  f.memory.Reserve(2100);
  f.memory.Free(700);
  f.memory.Reserve(1000);
  REQUIRE(step->Finish(0).ok());
  o = f.planner.outcomes.back();
  CHECK(o.measured_peak_bytes == 1600);
  CHECK(o.reserved_peak_bytes == 2000);
  // A step the allocator's cache served (it reserved no more) says nothing
  // of fragmentation: no reserved figure.
  f.memory.Reserve(2100);
  step = *f.lifecycle.Begin({4}, 4000);
  step->Start(0);
  f.memory.Allocate(700);
  f.memory.Free(700);
  REQUIRE(step->Finish(0).ok());
  CHECK(f.planner.outcomes.back().measured_peak_bytes == 1700);
  CHECK_FALSE(f.planner.outcomes.back().reserved_peak_bytes.has_value());

  step = *f.lifecycle.Begin({4}, 4000);
  step->Start(0);
  f.memory.Allocate(900);
  f.memory.FailAllocation();
  f.memory.Free(900);
  REQUIRE(step->Finish(0).ok());
  o = f.planner.outcomes.back();
  CHECK(o.out_of_memory);
  // A lower bound of the step's peak, not the budget: an error the plan did
  // not cause must not raise calibration for every later batch.
  CHECK(o.measured_peak_bytes == 1900);
}

TEST_CASE("an unwound step's outcome waits for the next Begin; a "
          "discarded step reports nothing") {
  Fixture f;
  f.planner.plan = {K, K};
  auto step = *f.lifecycle.Begin({4}, 4000);
  step->Start(0);
  step->Unwind(0);
  CHECK(f.planner.outcomes.empty());
  CHECK(step->Finish(0).ok());  // already finished: nothing more
  CHECK(f.planner.outcomes.empty());
  step = *f.lifecycle.Begin({4}, 4000);
  CHECK(f.planner.outcomes.size() == 1);
  step->Start(0);
  step->Discard();
  CHECK(step->Finish(0).ok());
  REQUIRE(f.lifecycle.Begin({4}, 4000).ok());
  CHECK(f.planner.outcomes.size() == 1);
  // A step never started measures and reports nothing.
  CHECK((*f.lifecycle.Begin({4}, 4000))->Finish(0).ok());
  CHECK(f.planner.outcomes.size() == 1);
}

TEST_CASE("no plan fits: refused before it runs, or run over budget") {
  Fixture raise;
  raise.planner.smallest_peak_bytes = 5000;
  absl::StatusOr<std::unique_ptr<StepSession>> refused =
      raise.lifecycle.Begin({4}, 4000);
  REQUIRE(refused.status().code() == absl::StatusCode::kResourceExhausted);
  CHECK(SmallestPeakBytes(refused.status()) == 5000);
  CHECK(std::string(refused.status().message()).find("over_budget") !=
        std::string::npos);
  // Once the planner finds a plan, steps run again.
  raise.planner.smallest_peak_bytes = 0;
  raise.planner.plan = {K, K};
  CHECK(raise.lifecycle.Begin({4}, 4000).ok());

  StepLifecycleOptions options;
  options.over_budget = StepLifecycleOptions::OverBudget::kRun;
  Fixture run(options);
  run.planner.smallest_peak_bytes = 5000;
  auto step = *run.lifecycle.Begin({4}, 4000);
  CHECK(step->choice().source == PlanSource::kSafe);
  CHECK(step->choice().smallest_peak_bytes == 5000);
  step->Start(0);
  run.memory.Allocate(3500);
  run.memory.Free(3500);
  REQUIRE(step->Finish(0).ok());
  REQUIRE(run.planner.outcomes.size() == 1);  // it ran; its outcome counts
  CHECK(run.planner.outcomes[0].plan_source == PlanSource::kSafe);
}

TEST_CASE("held bytes (accumulated gradients) are planned and reported "
          "outside the plan") {
  StepLifecycleOptions options;
  options.warmup_steps = 0;
  Fixture f(options);
  // A COLLECT step holding gradients from before: measured, not reported.
  auto step = *f.lifecycle.Begin({4}, 4000, /*held_bytes=*/600);
  CHECK(f.planner.budgets.back() == 3400);
  REQUIRE(step->choice().collect());
  BlockSampler* sampler = step->Start(0);
  REQUIRE(sampler != nullptr);
  for (int b = 1; b >= 0; --b) {
    sampler->BeforeBlock(b, 8);
    sampler->AfterBlock(b);
  }
  REQUIRE(step->Finish(0).ok());
  CHECK(f.planner.samples.empty());

  f.planner.plan = {K, K};
  step = *f.lifecycle.Begin({4}, 4000, 600);
  step->Start(0);
  f.memory.Allocate(2000);
  f.memory.Free(2000);
  REQUIRE(step->Finish(0).ok());
  CHECK(*step->measured_peak_bytes() == 3000);  // what the device held
  REQUIRE(f.planner.outcomes.size() == 1);
  CHECK(f.planner.outcomes[0].measured_peak_bytes == 2400);  // as planned

  f.planner.smallest_peak_bytes = 3500;
  auto refused = f.lifecycle.Begin({5}, 4000, 600);  // not cached
  CHECK(SmallestPeakBytes(refused.status()) == 4100);  // with what it held
  for (int64_t bad : {-1, 4000}) {
    CHECK(f.lifecycle.Begin({4}, 4000, bad).status().code() ==
          absl::StatusCode::kInvalidArgument);
  }
}

TEST_CASE("a step out of memory reports at once; the retry is safer") {
  Fixture f;
  f.planner.plan = {K, K};
  auto step = *f.lifecycle.Begin({4}, 4000);
  step->Start(0);
  f.memory.Allocate(900);
  REQUIRE(step->FailOutOfMemory(0).ok());
  f.memory.Free(900);
  REQUIRE(f.planner.outcomes.size() == 1);  // now, not at the next Begin
  CHECK(f.planner.outcomes[0].out_of_memory);
  CHECK(f.planner.outcomes[0].measured_peak_bytes == 1900);
  CHECK(f.planner.outcomes[0].actions == std::vector<Action>{K, K});

  // The planner answers the same plan: the safe plan.
  auto retry = f.lifecycle.Retry(*step);
  REQUIRE(retry.ok());
  CHECK((*retry)->choice().source == PlanSource::kSafe);
  CHECK((*retry)->choice().actions ==
        std::vector<Action>{Action::kRecompute, Action::kRecompute});
  CHECK((*retry)->features() == Features{4});
  CHECK((*retry)->budget_bytes() == 4000);
  (*retry)->Start(0);
  REQUIRE((*retry)->FailOutOfMemory(0).ok());
  // Even that ran out (an error that may not recur): the safe plan again;
  // the runtime bounds the retries.
  auto safe = f.lifecycle.Retry(**retry);
  REQUIRE(safe.ok());
  CHECK((*safe)->choice().actions == (*retry)->choice().actions);

  // A planner that answers a new plan after the outcome: that plan.
  f.planner.plan = {Action::kRecompute, K};
  auto again = f.lifecycle.Retry(*step);
  REQUIRE(again.ok());
  CHECK((*again)->choice().source == PlanSource::kPlanner);
  CHECK((*again)->choice().actions == f.planner.plan);
}

TEST_CASE("report failures are returned; training goes on") {
  StepLifecycleOptions options;
  options.warmup_steps = 0;
  Fixture f(options);
  f.planner.report_status = absl::UnavailableError("rematd is down");
  CHECK(f.Collect(4, 100, nullptr).code() == absl::StatusCode::kUnavailable);
  CHECK(f.Collect(5, 100, nullptr).code() == absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace remat
