// The planning core's solve limits on a model whose exact plans are hard
// (planner/hard_chain_for_test.h): shared solves, caller deadlines, the
// solve time limit. Apart from core_test because fitting the hard chain is
// slow, the more so under the sanitizers.
#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "planner/core.h"
#include "planner/hard_chain_for_test.h"

namespace remat {
namespace {

ModelSpec HardSpec() { return testing::HardChainModel("enc"); }

std::vector<Sample> HardGrid(const ModelSpec& spec) {
  return testing::HardChainSamples(spec);
}

PlanRequest HardRequest() {
  return {"enc",
          {testing::kHardBatch, testing::kHardSeq},
          testing::HardChainBudgetBytes(HardSpec()),
          ""};
}

bool StoppedEarly(const Plan& plan) {
  for (const std::string& r : plan.reasons) {
    if (r.find("not proven optimal") != std::string::npos) return true;
  }
  return false;
}

TEST_CASE("identical concurrent misses share one solve") {
  PlannerCore core;
  REQUIRE(core.RegisterModel(HardSpec()).ok());
  REQUIRE(core.AddSamples("enc", HardGrid(HardSpec())).ok());
  constexpr int kCallers = 8;
  std::vector<absl::StatusOr<PlanResult>> results(kCallers);
  std::atomic<int> ready{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kCallers; ++i) {
    threads.emplace_back([&, i] {
      ready.fetch_add(1);
      while (ready.load() < kCallers) std::this_thread::yield();
      results[i] = core.GetPlanUncached(HardRequest());
    });
  }
  for (std::thread& t : threads) t.join();
  int shared = 0;
  for (const auto& r : results) {
    REQUIRE(r.ok());
    REQUIRE(r->plan != nullptr);
    shared += r->plan == results[0]->plan;  // the same Plan object
  }
  // All but a caller that came after the first solve had landed share it
  // (one solve takes far longer than starting eight threads).
  CHECK(shared >= kCallers - 1);
}

TEST_CASE("a miss whose caller's deadline has passed is not solved") {
  PlannerCore core;
  REQUIRE(core.RegisterModel(HardSpec()).ok());
  REQUIRE(core.AddSamples("enc", HardGrid(HardSpec())).ok());
  PlanRequest late = HardRequest();
  late.deadline = std::chrono::steady_clock::now() - std::chrono::milliseconds(1);
  auto result = core.GetPlanUncached(late);
  CHECK(absl::IsDeadlineExceeded(result.status()));
  CHECK(core.cache_stats().size == 0);
  // Through GetPlan too, and a request with time left is answered.
  CHECK(absl::IsDeadlineExceeded(core.GetPlan(late).status()));
  PlanRequest timely = HardRequest();
  timely.deadline = std::chrono::steady_clock::now() + std::chrono::minutes(1);
  CHECK(core.GetPlan(timely).ok());
}

TEST_CASE("the solve time limit answers with the best plan found, flagged") {
  CoreOptions unlimited;
  PlannerCore reference(unlimited);
  CoreOptions limited;
  limited.solve_time_limit_ms = 1e-6;  // past by the search's first check
  PlannerCore core(limited);
  for (PlannerCore* c : {&reference, &core}) {
    REQUIRE(c->RegisterModel(HardSpec()).ok());
    REQUIRE(c->AddSamples("enc", HardGrid(HardSpec())).ok());
  }
  const auto start = std::chrono::steady_clock::now();
  auto best = reference.GetPlan(HardRequest());
  const double unlimited_ms = std::chrono::duration<double, std::milli>(
                                  std::chrono::steady_clock::now() - start)
                                  .count();
  auto quick = core.GetPlan(HardRequest());
  REQUIRE(best.ok());
  REQUIRE(quick.ok());
  INFO("unlimited solve: " << unlimited_ms << " ms");
  CHECK_FALSE(StoppedEarly(*best->plan));
  CHECK(StoppedEarly(*quick->plan));
  // Stopping never costs feasibility.
  CHECK(quick->plan->feasible);
  CHECK(quick->plan->predicted_peak_bytes <= HardRequest().budget_bytes);
  CHECK(quick->plan->recompute_ns >= best->plan->recompute_ns);
}

}  // namespace
}  // namespace remat
