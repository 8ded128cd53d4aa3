#include "planner/core.h"

#include <algorithm>
#include <atomic>
#include <future>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>


namespace remat {
namespace {

ModelSpec Spec(int blocks = 4) {
  ModelSpec spec{"enc", {"batch", "seq"}, {}};
  for (int i = 0; i < blocks; ++i) {
    spec.blocks.push_back({"layer" + std::to_string(i), i != 0});
  }
  return spec;
}

// A law the estimator can recover exactly: attention-like b*s^2 plus
// MLP-like b*s terms.
Sample Law(const ModelSpec& spec, double b, double s) {
  Sample sample;
  sample.features = {b, s};
  for (size_t i = 0; i < spec.blocks.size(); ++i) {
    const double bs = b * s;
    sample.blocks.push_back({static_cast<int64_t>(4000 * bs + 4 * bs * s),
                             static_cast<int64_t>(512 * bs),
                             static_cast<int64_t>(1000 * bs)});
  }
  sample.base_bytes = 1 << 20;
  return sample;
}

std::vector<Sample> Grid(const ModelSpec& spec) {
  std::vector<Sample> samples;
  for (double b : {1, 2, 4, 8}) {
    for (double s : {64, 128, 256, 512}) samples.push_back(Law(spec, b, s));
  }
  return samples;
}

int64_t KeepAllPeak(const ModelSpec& spec, double b, double s) {
  const Sample sample = Law(spec, b, s);
  int64_t peak = *sample.base_bytes;
  for (const auto& m : sample.blocks) peak += m.act_bytes;
  return peak;
}

// Sequence lengths in buckets of 8 tokens (rematd --granularity seq=8):
// for the tests of what a bucket shares.
CoreOptions SeqBuckets8() {
  CoreOptions options;
  options.granularity = {{"seq", 8}};
  return options;
}

TEST_CASE("a request that fails on its last element changes nothing") {
  PlannerCore core;
  REQUIRE(core.RegisterModel(Spec()).ok());
  REQUIRE(core.AddSamples("enc", Grid(Spec())).ok());
  REQUIRE(core.GetPlan({"enc", {4, 200}, int64_t{8} << 30, ""}).ok());
  const PlanCacheStats cache = core.cache_stats();
  int commits = 0;
  AddSamplesOptions counting;
  counting.commit = [&](const SampleVerdict&) {
    ++commits;
    return absl::OkStatus();
  };
  std::vector<Sample> batch = {Law(Spec(), 3, 100), Law(Spec(), 3, 120)};
  batch[1].peak_bytes = int64_t{1} << 62;
  const absl::Status s = core.AddSamples("enc", batch, counting);
  CHECK(absl::IsInvalidArgument(s));
  CHECK(s.message().find("samples[1].peak_bytes") != std::string::npos);
  CHECK(commits == 0);
  // A commit that fails (the log is full) changes nothing either.
  AddSamplesOptions failing;
  failing.commit = [](const SampleVerdict&) {
    return absl::UnavailableError("disk full");
  };
  batch[1].peak_bytes.reset();
  CHECK(absl::IsUnavailable(core.AddSamples("enc", batch, failing)));
  Outcome outcome{"enc", {4, 200}, std::vector<Action>(4, Action::kKeep),
                  1 << 30, 1000, false};
  CHECK(absl::IsUnavailable(core.ReportOutcome(
      outcome, [] { return absl::UnavailableError("disk full"); })));
  outcome.actions.back() = static_cast<Action>(9);
  CHECK(core.ReportOutcome(outcome).message().find("actions[3]") !=
        std::string::npos);
  // Same name, other shape: ALREADY_EXISTS before any commit.
  CHECK(absl::IsAlreadyExists(core.RegisterModel(
      Spec(2), [] { return absl::UnavailableError("disk full"); })));
  ModelSpec fresh = Spec();
  fresh.name = "fresh";
  CHECK(absl::IsUnavailable(core.RegisterModel(
      fresh, [] { return absl::UnavailableError("disk full"); })));
  auto state = core.GetModelState("enc");
  REQUIRE(state.ok());
  CHECK(state->num_samples == Grid(Spec()).size());
  CHECK(state->outcomes == 0);
  CHECK(core.ListModels() == std::vector<std::string>{"enc"});
  CHECK(core.cache_stats().invalidations == cache.invalidations);
  CHECK(core.cache_stats().size == cache.size);
}

TEST_CASE("a recorded verdict rebuilds the same model however batched") {
  // Live: batch by batch, one of them absurd (quarantined).
  PlannerCore live;
  REQUIRE(live.RegisterModel(Spec()).ok());
  std::vector<std::vector<Sample>> batches;
  for (const Sample& s : Grid(Spec())) batches.push_back({s});
  Sample absurd = Law(Spec(), 8, 64);
  absurd.features[1] = 4000;
  batches.push_back({absurd, Law(Spec(), 2, 300)});
  std::vector<SampleVerdict> verdicts;
  for (const auto& batch : batches) {
    AddSamplesOptions options;
    options.commit = [&](const SampleVerdict& v) {
      verdicts.push_back(v);
      return absl::OkStatus();
    };
    REQUIRE(live.AddSamples("enc", batch, options).ok());
  }
  REQUIRE(verdicts.back().quarantined == std::vector<bool>{true, false});
  // Replayed: the same batches with their recorded verdicts.
  PlannerCore replayed;
  REQUIRE(replayed.RegisterModel(Spec()).ok());
  for (size_t i = 0; i < batches.size(); ++i) {
    AddSamplesOptions options;
    options.verdict = &verdicts[i];
    REQUIRE(replayed.AddSamples("enc", batches[i], options).ok());
  }
  auto a = live.GetModelState("enc");
  auto b = replayed.GetModelState("enc");
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  CHECK(a->num_samples == b->num_samples);
  CHECK(a->num_quarantined == 1);
  CHECK(b->num_quarantined == 1);
  auto pa = live.GetPlan({"enc", {8, 500}, int64_t{1} << 30, ""});
  auto pb = replayed.GetPlan({"enc", {8, 500}, int64_t{1} << 30, ""});
  REQUIRE(pa.ok());
  REQUIRE(pb.ok());
  CHECK(pa->plan->predicted_peak_bytes == pb->plan->predicted_peak_bytes);
}

TEST_CASE("outcome tallies cannot hold more OOMs than outcomes") {
  // Found by fuzzing the log replay: such a tally was taken, then dropped
  // by compaction, so a restart changed the counts.
  PlannerCore core;
  REQUIRE(core.RegisterModel(Spec()).ok());
  CHECK(absl::IsInvalidArgument(core.AddOutcomeCounts("enc", 0, 2)));
  CHECK(absl::IsInvalidArgument(core.AddOutcomeCounts("enc", 1, 3)));
  REQUIRE(core.AddOutcomeCounts("enc", 5, 2).ok());
  CHECK(absl::IsInvalidArgument(
      core.AddOutcomeCounts("enc", ~uint64_t{0}, 0)));
  auto state = core.GetModelState("enc");
  REQUIRE(state.ok());
  CHECK(state->outcomes == 5);
  CHECK(state->out_of_memory == 2);
}

TEST_CASE("registration is idempotent for the same shape only") {
  PlannerCore core;
  REQUIRE(core.RegisterModel(Spec()).ok());
  REQUIRE(core.RegisterModel(Spec()).ok());
  CHECK(absl::IsAlreadyExists(core.RegisterModel(Spec(5))));
  CHECK(absl::IsInvalidArgument(core.RegisterModel(ModelSpec{})));
  CHECK(core.ListModels() == std::vector<std::string>{"enc"});
}

TEST_CASE("unknown models and bad requests are rejected by field") {
  PlannerCore core;
  REQUIRE(core.RegisterModel(Spec()).ok());
  CHECK(absl::IsNotFound(core.GetPlan({"nope", {1, 64}, 1 << 30}).status()));
  CHECK(absl::IsNotFound(core.AddSamples("nope", {})));
  auto bad = core.GetPlan({"enc", {1}, 1 << 30});
  CHECK(absl::IsInvalidArgument(bad.status()));
  bad = core.GetPlan({"enc", {1, 64}, 0});
  CHECK(bad.status().message().find("budget_bytes") != std::string::npos);
  bad = core.GetPlan({"enc", {1, 64}, 1 << 30, "magic"});
  CHECK(bad.status().message().find("solver") != std::string::npos);
  CHECK(absl::IsFailedPrecondition(
      core.Explain({"enc", {1, 64}, 1 << 30}).status()));
}

TEST_CASE("a model without samples collects with the safe plan") {
  PlannerCore core;
  REQUIRE(core.RegisterModel(Spec()).ok());
  auto result = core.GetPlan({"enc", {2, 100}, int64_t{1} << 40});
  REQUIRE(result.ok());
  CHECK(result->collect);
  REQUIRE(result->plan != nullptr);
  CHECK(result->plan->actions[0] == Action::kKeep);  // not checkpointable
  CHECK(result->plan->actions[1] == Action::kRecompute);
  // By default every feature is its own bucket; configured, seq rounds up.
  CHECK(result->bucket == std::vector<int64_t>{2, 100});
  PlannerCore eights(SeqBuckets8());
  REQUIRE(eights.RegisterModel(Spec()).ok());
  auto rounded = eights.GetPlan({"enc", {2, 100}, int64_t{1} << 40});
  REQUIRE(rounded.ok());
  CHECK(rounded->bucket == std::vector<int64_t>{2, 104});
}

TEST_CASE("with samples it plans within budget and caches the bucket") {
  PlannerCore core(SeqBuckets8());
  const ModelSpec spec = Spec();
  REQUIRE(core.RegisterModel(spec).ok());
  REQUIRE(core.AddSamples("enc", Grid(spec)).ok());

  // Loose budget: nothing needs recomputing.
  auto loose = core.GetPlan({"enc", {4, 300}, KeepAllPeak(spec, 8, 512) * 2});
  REQUIRE(loose.ok());
  CHECK_FALSE(loose->collect);
  CHECK(loose->plan->recompute_ns == 0);

  // Tight budget: some blocks recompute, the peak fits.
  const int64_t budget = KeepAllPeak(spec, 4, 304) * 7 / 10;
  auto tight = core.GetPlan({"enc", {4, 300}, budget});
  REQUIRE(tight.ok());
  CHECK_FALSE(tight->from_cache);
  CHECK(tight->plan->feasible);
  CHECK(tight->plan->predicted_peak_bytes <= budget);
  CHECK(tight->plan->recompute_ns > 0);
  CHECK(tight->plan->solver == "exact");

  // Same bucket: a cache hit with the same plan.
  auto again = core.GetPlan({"enc", {4, 297}, budget});
  REQUIRE(again.ok());
  CHECK(again->from_cache);
  CHECK(again->plan == tight->plan);

  // New samples refit and invalidate.
  REQUIRE(core.AddSamples("enc", {Law(spec, 3, 200)}).ok());
  auto refit = core.GetPlan({"enc", {4, 297}, budget});
  REQUIRE(refit.ok());
  CHECK_FALSE(refit->from_cache);
}

TEST_CASE("with a host link, a solver that can swap offloads") {
  const ModelSpec spec = Spec();
  const int64_t budget = KeepAllPeak(spec, 4, 304) * 9 / 10;
  auto offloaded = [&](double link_bytes_per_s) {
    CoreOptions options;
    options.host_link_bytes_per_s = link_bytes_per_s;
    PlannerCore core(options);
    REQUIRE(core.RegisterModel(spec).ok());
    REQUIRE(core.AddSamples("enc", Grid(spec)).ok());
    auto r = core.GetPlan({"enc", {4, 300}, budget, "delta"});
    INFO("link " << link_bytes_per_s);
    REQUIRE(r.ok());
    REQUIRE_FALSE(r->collect);
    CHECK(r->plan->feasible);
    return std::count(r->plan->actions.begin(), r->plan->actions.end(),
                      Action::kOffload);
  };
  CHECK(offloaded(0) == 0);     // no link: nothing can leave the device
  CHECK(offloaded(1e15) > 0);   // a link that hides every copy: swap
}

TEST_CASE("a caller that sends checkpoints to host fits below recompute-all") {
  const ModelSpec spec = Spec(8);
  CoreOptions options;
  options.host_link_bytes_per_s = 1e15;
  PlannerCore core(options);
  REQUIRE(core.RegisterModel(spec).ok());
  REQUIRE(core.AddSamples("enc", Grid(spec)).ok());
  // The smallest peak without sending checkpoints (recompute-all's).
  auto tiny = core.GetPlan({"enc", {4, 300}, 1 << 20});
  REQUIRE(absl::IsResourceExhausted(tiny.status()));
  const std::optional<int64_t> recompute_all = SmallestPeakBytes(tiny.status());
  REQUIRE(recompute_all.has_value());
  PlanRequest request{"enc", {4, 300}, *recompute_all - 1};
  CHECK(absl::IsResourceExhausted(core.GetPlan(request).status()));
  request.offload_checkpoints = true;
  auto r = core.GetPlan(request);
  REQUIRE(r.ok());
  REQUIRE_FALSE(r->collect);
  CHECK(r->plan->feasible);
  CHECK(std::count(r->plan->actions.begin(), r->plan->actions.end(),
                   Action::kRecomputeOffload) > 0);
  // Without a copy engine the flag means nothing.
  request.offload = false;
  CHECK(absl::IsResourceExhausted(core.GetPlan(request).status()));
}

TEST_CASE("a caller that sends checkpoints collects so when it may not fit") {
  const ModelSpec spec = Spec(8);
  PlannerCore core;
  REQUIRE(core.RegisterModel(spec).ok());
  auto collect_actions = [&](double seq, int64_t budget, bool sends) {
    PlanRequest request{"enc", {4, seq}, budget};
    request.offload_checkpoints = sends;
    auto r = core.GetPlan(request);
    REQUIRE(r.ok());
    REQUIRE(r->collect);
    return r->plan->actions;
  };
  const std::vector<Action> safe = SafeActions(spec);
  std::vector<Action> sending = safe;
  for (Action& a : sending) {
    if (a == Action::kRecompute) a = Action::kRecomputeOffload;
  }
  // Nothing known yet: the least memory this caller can run.
  CHECK(collect_actions(300, int64_t{1} << 40, true) == sending);
  CHECK(collect_actions(300, int64_t{1} << 40, false) == safe);
  REQUIRE(core.AddSamples("enc", Grid(spec)).ok());
  // Far outside the samples (untrusted, so collect): recompute-all's
  // estimate decides.
  CHECK(collect_actions(4096, int64_t{1} << 50, true) == safe);
  CHECK(collect_actions(4096, 1 << 20, true) == sending);
  CHECK(collect_actions(4096, 1 << 20, false) == safe);
}

TEST_CASE("the link a model's samples measured is what its plans weigh") {
  const ModelSpec spec = Spec();
  const int64_t budget = KeepAllPeak(spec, 4, 304) * 9 / 10;
  PlannerCore core;
  REQUIRE(core.RegisterModel(spec).ok());
  std::vector<Sample> samples = Grid(spec);
  REQUIRE(core.AddSamples("enc", samples).ok());
  auto count_offloads = [&](bool offload) {
    PlanRequest request{"enc", {4, 300}, budget, "delta"};
    request.offload = offload;
    auto r = core.GetPlan(request);
    REQUIRE(r.ok());
    REQUIRE_FALSE(r->collect);
    CHECK(r->plan->feasible);
    return std::count(r->plan->actions.begin(), r->plan->actions.end(),
                      Action::kOffload);
  };
  CHECK(count_offloads(true) == 0);  // nothing measured a link yet
  // Samples that measured a fast link (one slow outlier among them).
  for (size_t i = 0; i < samples.size(); ++i) {
    samples[i].d2h_bytes_per_s = i == 0 ? 1e3 : 1e15;
    samples[i].h2d_bytes_per_s = 1e15;
  }
  REQUIRE(core.AddSamples("enc", samples).ok());
  CHECK(count_offloads(true) > 0);
  // A caller without a copy engine, same bucket: its own plan, not the
  // cached one that offloads.
  CHECK(count_offloads(false) == 0);
  CHECK(count_offloads(true) > 0);
}

TEST_CASE("GetPlanIfCached answers hits and bad requests, nothing else") {
  PlannerCore core(SeqBuckets8());
  const ModelSpec spec = Spec();
  REQUIRE(core.RegisterModel(spec).ok());
  REQUIRE(core.AddSamples("enc", Grid(spec)).ok());
  const PlanRequest request{"enc", {4, 300}, KeepAllPeak(spec, 4, 304) * 7 / 10};
  // A miss: nothing to answer without a solve, and nothing solved.
  CHECK_FALSE(core.GetPlanIfCached(request).has_value());
  CHECK_FALSE(core.GetPlanIfCached(request).has_value());
  const PlanCacheStats before = core.cache_stats();
  auto solved = core.GetPlanUncached(request);
  REQUIRE(solved.ok());
  CHECK_FALSE(solved->from_cache);
  // Past the cache: no second lookup counted.
  CHECK(core.cache_stats().misses == before.misses);
  auto hit = core.GetPlanIfCached({"enc", {4, 297}, request.budget_bytes});
  REQUIRE(hit.has_value());
  REQUIRE(hit->ok());
  CHECK((*hit)->from_cache);
  CHECK((*hit)->plan == solved->plan);
  CHECK((*hit)->bucket == std::vector<int64_t>{4, 304});
  auto bad = core.GetPlanIfCached({"nope", {4, 300}, 1 << 30});
  REQUIRE(bad.has_value());
  CHECK(absl::IsNotFound(bad->status()));
}

TEST_CASE("far outside the observed range it collects") {
  PlannerCore core;
  const ModelSpec spec = Spec();
  REQUIRE(core.RegisterModel(spec).ok());
  REQUIRE(core.AddSamples("enc", Grid(spec)).ok());
  auto result = core.GetPlan({"enc", {4, 4096}, int64_t{1} << 40});
  REQUIRE(result.ok());
  CHECK(result->collect);
  CHECK_FALSE(result->collect_reason.empty());
}

TEST_CASE("no plan fits: RESOURCE_EXHAUSTED names the smallest peak") {
  PlannerCore core;
  const ModelSpec spec = Spec();
  REQUIRE(core.RegisterModel(spec).ok());
  REQUIRE(core.AddSamples("enc", Grid(spec)).ok());
  auto result = core.GetPlan({"enc", {8, 512}, 1 << 20});
  CHECK(absl::IsResourceExhausted(result.status()));
  CHECK(result.status().message().find("smallest reachable peak") !=
        std::string::npos);
  // A baseline's plan comes back as it is, marked as not fitting.
  auto baseline = core.GetPlan({"enc", {8, 512}, 1 << 20, "mimose_greedy"});
  REQUIRE(baseline.ok());
  CHECK_FALSE(baseline->plan->feasible);
  CHECK(baseline->plan->solver == "mimose_greedy");
  auto explained = core.Explain({"enc", {8, 512}, 1 << 20});
  REQUIRE(explained.ok());
  CHECK_FALSE(explained->plan->feasible);
  // The status carries that peak as a number: Explain's, with no re-solve.
  CHECK(SmallestPeakBytes(result.status()) ==
        explained->plan->predicted_peak_bytes);
  CHECK(SmallestPeakBytes(absl::ResourceExhaustedError("other")) ==
        std::nullopt);
  CHECK(SmallestPeakBytes(absl::OkStatus()) == std::nullopt);
}

TEST_CASE("a measured peak above the prediction makes later plans safer") {
  PlannerCore core;
  const ModelSpec spec = Spec();
  REQUIRE(core.RegisterModel(spec).ok());
  REQUIRE(core.AddSamples("enc", Grid(spec)).ok());
  // Needs two of the three checkpointable blocks recomputed; 4 MiB more
  // measured than predicted needs the third.
  const int64_t budget = KeepAllPeak(spec, 4, 304) * 85 / 100;
  auto first = core.GetPlan({"enc", {4, 300}, budget});
  REQUIRE(first.ok());
  REQUIRE(first->plan->feasible);

  const std::vector<Action> keep_all(spec.blocks.size(), Action::kKeep);
  Outcome outcome{"enc", {4, 304}, keep_all,
                  KeepAllPeak(spec, 4, 304) + (4 << 20), 1000, false};
  REQUIRE(core.ReportOutcome(outcome).ok());
  auto second = core.GetPlan({"enc", {4, 300}, budget});
  REQUIRE(second.ok());
  CHECK_FALSE(second->from_cache);
  CHECK(second->plan->feasible);
  CHECK(second->plan->recompute_ns > first->plan->recompute_ns);

  auto state = core.GetModelState("enc");
  REQUIRE(state.ok());
  CHECK(state->outcomes == 1);
  CHECK(state->num_samples == 16);

  outcome.actions.pop_back();
  CHECK(absl::IsInvalidArgument(core.ReportOutcome(outcome)));
}

TEST_CASE("an out-of-memory step makes the next plan for its bucket safer") {
  PlannerCore core;
  const ModelSpec spec = Spec();
  REQUIRE(core.RegisterModel(spec).ok());
  REQUIRE(core.AddSamples("enc", Grid(spec)).ok());
  const int64_t budget = KeepAllPeak(spec, 4, 304) * 85 / 100;
  auto first = core.GetPlan({"enc", {4, 300}, budget});
  REQUIRE(first.ok());
  // The plan ran out of memory: what the runtime reports then is a lower
  // bound, the budget plus a little (the allocation that failed).
  Outcome oom{"enc", {4, 300}, first->plan->actions, budget + (1 << 20),
              1000, true};
  REQUIRE(core.ReportOutcome(oom).ok());
  auto second = core.GetPlan({"enc", {4, 300}, budget});
  REQUIRE(second.ok());
  CHECK_FALSE(second->from_cache);
  CHECK(second->plan->recompute_ns > first->plan->recompute_ns);
  auto state = core.GetModelState("enc");
  REQUIRE(state.ok());
  CHECK(state->out_of_memory == 1);
}

TEST_CASE("plans keep free what the allocator reserves beyond allocated") {
  PlannerCore core;
  const ModelSpec spec = Spec();
  REQUIRE(core.RegisterModel(spec).ok());
  REQUIRE(core.AddSamples("enc", Grid(spec)).ok());
  const int64_t budget = KeepAllPeak(spec, 4, 304) * 11 / 10;
  auto first = core.GetPlan({"enc", {4, 300}, budget});
  REQUIRE(first.ok());
  REQUIRE(first->plan->recompute_ns == 0);  // keeps everything
  REQUIRE(first->plan->predicted_peak_bytes > budget * 4 / 5);
  // Two batches whose allocator held 25% more than was allocated at the
  // peak: plans now fit 80% of the budget.
  const std::vector<Action> keep_all(spec.blocks.size(), Action::kKeep);
  for (double seq : {200.0, 250.0}) {
    Outcome o{"enc", {4, seq}, keep_all, KeepAllPeak(spec, 4, seq), 1000};
    o.reserved_peak_bytes = o.measured_peak_bytes * 5 / 4;
    REQUIRE(core.ReportOutcome(o).ok());
  }
  auto state = core.GetModelState("enc");
  REQUIRE(state.ok());
  CHECK(state->reserved_ratio == Approx(1.25).epsilon(1e-6));
  CHECK(state->reserved_outcomes == 2);
  auto second = core.GetPlan({"enc", {4, 300}, budget});
  REQUIRE(second.ok());
  CHECK_FALSE(second->from_cache);
  CHECK(second->plan->feasible);
  CHECK(second->plan->recompute_ns > 0);
  CHECK(second->plan->predicted_peak_bytes <= budget * 4 / 5);
  // A budget no plan fits says what was kept free of it.
  auto none = core.GetPlan({"enc", {4, 300}, budget / 4});
  REQUIRE(absl::IsResourceExhausted(none.status()));
  CHECK(std::string(none.status().message()).find("kept free") !=
        std::string::npos);

  // Reserved below allocated is refused, naming the field.
  Outcome bad{"enc", {4, 300}, keep_all, 1000, 1000};
  bad.reserved_peak_bytes = 999;
  auto refused = core.ReportOutcome(bad);
  CHECK(absl::IsInvalidArgument(refused));
  CHECK(std::string(refused.message()).find("reserved_peak_bytes") == 0);
}

std::vector<Sample> OnDevice(std::vector<Sample> samples,
                             const std::string& device) {
  for (Sample& s : samples) s.device = device;
  return samples;
}

TEST_CASE("profiles are per device type: a plan comes from its own samples") {
  PlannerCore core;
  const ModelSpec spec = Spec();
  REQUIRE(core.RegisterModel(spec).ok());
  REQUIRE(core.AddSamples("enc", OnDevice(Grid(spec), "gpu-a")).ok());
  const int64_t budget = KeepAllPeak(spec, 4, 304) * 11 / 10;
  PlanRequest on_a{"enc", {4, 300}, budget};
  on_a.device = "gpu-a";
  auto a = core.GetPlan(on_a);
  REQUIRE(a.ok());
  CHECK_FALSE(a->collect);
  // Another device, and requests that name none, have no samples yet.
  PlanRequest on_b = on_a;
  on_b.device = "gpu-b";
  auto b = core.GetPlan(on_b);
  REQUIRE(b.ok());
  CHECK(b->collect);
  CHECK(b->collect_reason == "no samples yet for device \"gpu-b\"");
  auto unsaid = core.GetPlan({"enc", {4, 300}, budget});
  REQUIRE(unsaid.ok());
  CHECK(unsaid->collect);
  // Reading a device never measured keeps no profile for it.
  auto devices = core.ListDevices("enc");
  REQUIRE(devices.ok());
  CHECK(*devices == std::vector<std::string>{"", "gpu-a"});
  auto state_a = core.GetModelState("enc", "gpu-a");
  REQUIRE(state_a.ok());
  CHECK(state_a->num_samples == Grid(spec).size());
  CHECK(state_a->device == "gpu-a");
  CHECK(core.GetModelState("enc")->num_samples == 0);
  CHECK(core.ListModels() == std::vector<std::string>{"enc"});

  // One device's outcomes calibrate its own plans only.
  const std::vector<Action> keep_all(spec.blocks.size(), Action::kKeep);
  Outcome o{"enc", {4, 300}, keep_all, budget * 2, 1000};
  o.device = "gpu-a";
  REQUIRE(core.ReportOutcome(o).ok());
  CHECK(core.GetModelState("enc", "gpu-a")->outcomes == 1);
  CHECK(core.GetModelState("enc")->outcomes == 0);
  // And so does what its allocator reserves beyond allocated bytes.
  for (double seq : {200.0, 250.0}) {
    Outcome r{"enc", {4, seq}, keep_all, KeepAllPeak(spec, 4, seq), 1000};
    r.reserved_peak_bytes = r.measured_peak_bytes * 5 / 4;
    r.device = "gpu-a";
    REQUIRE(core.ReportOutcome(r).ok());
  }
  CHECK(core.GetModelState("enc", "gpu-a")->reserved_ratio ==
        Approx(1.25).epsilon(1e-6));
  CHECK(core.GetModelState("enc", "gpu-b")->reserved_ratio == 1.0);

  // A batch names one device.
  std::vector<Sample> mixed = OnDevice(Grid(spec), "gpu-a");
  mixed[3].device = "gpu-b";
  const absl::Status s = core.AddSamples("enc", mixed);
  CHECK(absl::IsInvalidArgument(s));
  CHECK(std::string(s.message()).find("samples[3].device") == 0);
  CHECK(core.ListDevices("enc")->size() == 2);
}

TEST_CASE("a model holds at most max_devices_per_model profiles") {
  CoreOptions options;
  options.max_devices_per_model = 2;  // "" and one more
  PlannerCore core(options);
  const ModelSpec spec = Spec();
  REQUIRE(core.RegisterModel(spec).ok());
  REQUIRE(core.AddSamples("enc", OnDevice({Law(spec, 1, 64)}, "a")).ok());
  const absl::Status s =
      core.AddSamples("enc", OnDevice({Law(spec, 1, 64)}, "b"));
  CHECK(absl::IsResourceExhausted(s));
  CHECK(std::string(s.message()).find("device: ") == 0);
  CHECK(core.ListDevices("enc")->size() == 2);
}

TEST_CASE("a profile's samples come back with its quarantine, held on import") {
  PlannerCore core;
  const ModelSpec spec = Spec();
  REQUIRE(core.RegisterModel(spec).ok());
  std::vector<Sample> batch = OnDevice(Grid(spec), "gpu-a");
  std::vector<bool> hold(batch.size(), false);
  hold[5] = true;
  size_t quarantined = 0;
  AddSamplesOptions options;
  options.hold = &hold;
  options.quarantined = &quarantined;
  REQUIRE(core.AddSamples("enc", batch, options).ok());
  CHECK(quarantined == 1);
  auto held = core.GetProfileSamples("enc", "gpu-a");
  REQUIRE(held.ok());
  CHECK(held->fitted.size() == batch.size() - 1);
  REQUIRE(held->quarantined.size() == 1);
  CHECK(held->quarantined[0] == batch[5]);
  CHECK(held->fitted[5] == batch[6]);
  // A hold list of the wrong length is refused whole.
  std::vector<bool> short_hold(2, false);
  options.hold = &short_hold;
  CHECK(absl::IsInvalidArgument(core.AddSamples("enc", batch, options)));
  CHECK(core.GetModelState("enc", "gpu-a")->num_samples == batch.size() - 1);
}

TEST_CASE("static_max plans for the largest input seen") {
  PlannerCore core;
  const ModelSpec spec = Spec();
  REQUIRE(core.RegisterModel(spec).ok());
  REQUIRE(core.AddSamples("enc", Grid(spec)).ok());
  const int64_t budget = KeepAllPeak(spec, 8, 512) * 6 / 10;
  auto small_static = core.GetPlan({"enc", {1, 64}, budget, "static_max"});
  auto small_exact = core.GetPlan({"enc", {1, 64}, budget, "exact"});
  REQUIRE(small_static.ok());
  REQUIRE(small_exact.ok());
  CHECK(small_exact->plan->recompute_ns == 0);
  CHECK(small_static->plan->recompute_ns > 0);
}

TEST_CASE("concurrent planning and sampling stay consistent") {
  PlannerCore core;
  const ModelSpec spec = Spec();
  REQUIRE(core.RegisterModel(spec).ok());
  REQUIRE(core.AddSamples("enc", Grid(spec)).ok());
  std::atomic<int> errors{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) {
        const double seq = 64 + (i * 37 + t * 11) % 448;
        auto r = core.GetPlan({"enc", {4, seq}, int64_t{1} << 40});
        if (!r.ok() || r->plan == nullptr) ++errors;
        if (t == 0 && i % 50 == 0 &&
            !core.AddSamples("enc", {Law(spec, 2, seq)}).ok()) {
          ++errors;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  CHECK(errors == 0);
  CHECK(core.cache_stats().hits > 0);
}

TEST_CASE("reports sent at once are all fitted, as one batch would be") {
  const ModelSpec spec = Spec();
  PlannerCore together(SeqBuckets8()), one_batch(SeqBuckets8());
  for (PlannerCore* core : {&together, &one_batch}) {
    REQUIRE(core->RegisterModel(spec).ok());
    REQUIRE(core->AddSamples("enc", Grid(spec)).ok());
  }
  std::vector<Sample> all;
  std::vector<std::thread> threads;
  std::atomic<int> errors{0};
  for (int t = 0; t < 8; ++t) {
    const std::vector<Sample> batch = {Law(spec, 3, 100 + 40 * t),
                                       Law(spec, 6, 90 + 40 * t)};
    all.insert(all.end(), batch.begin(), batch.end());
    threads.emplace_back([&, batch] {
      if (!together.AddSamples("enc", batch).ok()) ++errors;
    });
  }
  for (auto& th : threads) th.join();
  CHECK(errors == 0);
  REQUIRE(one_batch.AddSamples("enc", all).ok());
  CHECK(together.GetModelState("enc")->num_samples == 16 + all.size());
  for (double seq : {250.0, 333.0, 500.0}) {
    const int64_t budget = KeepAllPeak(spec, 4, seq) * 8 / 10;
    auto a = together.GetPlan({"enc", {4, seq}, budget});
    auto b = one_batch.GetPlan({"enc", {4, seq}, budget});
    INFO(a.status().ToString());
    REQUIRE(a.ok());
    REQUIRE(b.ok());
    CHECK(a->plan->recompute_ns > 0);
    CHECK(a->plan->actions == b->plan->actions);
    CHECK(a->plan->predicted_peak_bytes == b->plan->predicted_peak_bytes);
  }
}

TEST_CASE("a model plans from its last fit while a refit runs") {
  // Refitting 200 blocks takes about a second, predicting for them a
  // millisecond.
  const ModelSpec spec = Spec(200);
  PlannerCore core;
  REQUIRE(core.RegisterModel(spec).ok());
  std::vector<Sample> grid;
  for (double b : {1, 2, 3, 4, 6, 8}) {
    for (double s : {64, 96, 128, 192, 256, 384, 512}) {
      grid.push_back(Law(spec, b, s));
    }
  }
  REQUIRE(core.AddSamples("enc", grid).ok());
  std::promise<void> logged;
  AddSamplesOptions options;
  options.commit = [&](const SampleVerdict&) {
    logged.set_value();
    return absl::OkStatus();
  };
  std::thread report([&] {
    CHECK(core.AddSamples("enc", {Law(spec, 5, 300)}, options).ok());
  });
  logged.get_future().wait();
  // A miss, predicted and solved, then the state: both from the last fit,
  // while the refit runs (a lock held through the refit makes them wait
  // for it, and the state would count the new sample).
  auto plan = core.GetPlan({"enc", {4, 300}, int64_t{1} << 40});
  auto state = core.GetModelState("enc");
  report.join();
  REQUIRE(plan.ok());
  REQUIRE(state.ok());
  CHECK(state->num_samples == grid.size());
  CHECK(core.GetModelState("enc")->num_samples == grid.size() + 1);
}

}  // namespace
}  // namespace remat

namespace remat {
namespace {

TEST_CASE("a collected sample's measured peak calibrates the first plan") {
  const ModelSpec spec = Spec();
  const int64_t budget = KeepAllPeak(spec, 4, 304) * 85 / 100;
  PlannerCore plain, calibrated;
  for (PlannerCore* core : {&plain, &calibrated}) {
    REQUIRE(core->RegisterModel(spec).ok());
    REQUIRE(core->AddSamples("enc", Grid(spec)).ok());
  }
  // Measured 4 MiB above what the memory model says for the safe plan.
  Sample sample = Law(spec, 4, 304);
  int64_t safe_peak = *sample.base_bytes + sample.blocks[0].act_bytes +
                      2 * sample.blocks[1].input_bytes +
                      sample.blocks[1].act_bytes;
  sample.peak_bytes = safe_peak + (4 << 20);
  REQUIRE(calibrated.AddSamples("enc", {sample}).ok());
  sample.peak_bytes.reset();
  REQUIRE(plain.AddSamples("enc", {sample}).ok());

  auto a = plain.GetPlan({"enc", {4, 300}, budget});
  auto b = calibrated.GetPlan({"enc", {4, 300}, budget});
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  CHECK(b->plan->recompute_ns > a->plan->recompute_ns);
}

}  // namespace
}  // namespace remat
