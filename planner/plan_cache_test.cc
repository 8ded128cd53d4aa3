#include "planner/plan_cache.h"

#include <atomic>
#include <catch2/catch.hpp>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace remat {
namespace {

PlanKey Key(const std::string& model, int64_t seq, int64_t budget = 100) {
  PlanKey k;
  k.model = model;
  k.bucket = {8, seq};
  k.budget_bytes = budget;
  k.solver = "exact";
  return k;
}

std::shared_ptr<const Plan> MakePlan(int64_t peak) {
  auto plan = std::make_shared<Plan>();
  plan->predicted_peak_bytes = peak;
  return plan;
}

TEST_CASE("BucketFeatures rounds every feature up to its granularity") {
  CHECK(BucketFeatures({12, 384}, {1, 8}) == std::vector<int64_t>{12, 384});
  CHECK(BucketFeatures({12, 385}, {1, 8}) == std::vector<int64_t>{12, 392});
  CHECK(BucketFeatures({12.2, 1}, {1, 8}) == std::vector<int64_t>{13, 8});
  CHECK(BucketFeatures({0, 0}, {5, 100}) == std::vector<int64_t>{0, 0});
  CHECK(BucketFeatures({101, 599}, {5, 100}) == std::vector<int64_t>{105, 600});
  // Floating-point noise does not push an exact multiple up a bucket.
  CHECK(BucketFeatures({0.3}, {0.1}) == std::vector<int64_t>{1});
  CHECK(BucketFeatures({30}, {0.1}) == std::vector<int64_t>{30});
  // Every member of a bucket maps to the bucket's largest member.
  for (int s = 1; s <= 64; ++s) {
    const int64_t b = BucketFeatures({double(s)}, {8})[0];
    CHECK(b >= s);
    CHECK(b - s < 8);
    CHECK(b % 8 == 0);
  }
}

TEST_CASE("lookups hit what was inserted and count misses") {
  PlanCache cache(4);
  CHECK(cache.Lookup(Key("bert", 128)) == nullptr);
  cache.Insert(Key("bert", 128), MakePlan(7));
  auto hit = cache.Lookup(Key("bert", 128));
  REQUIRE(hit != nullptr);
  CHECK(hit->predicted_peak_bytes == 7);
  // Every key field matters.
  CHECK(cache.Lookup(Key("bert", 136)) == nullptr);
  CHECK(cache.Lookup(Key("bert", 128, 101)) == nullptr);
  PlanKey other_solver = Key("bert", 128);
  other_solver.solver = "mimose_greedy";
  CHECK(cache.Lookup(other_solver) == nullptr);
  // Insert replaces.
  cache.Insert(Key("bert", 128), MakePlan(9));
  CHECK(cache.Lookup(Key("bert", 128))->predicted_peak_bytes == 9);
  const PlanCacheStats s = cache.stats();
  CHECK(s.hits == 2);
  CHECK(s.misses == 4);
  CHECK(s.size == 1);
  CHECK(s.evictions == 0);
}

TEST_CASE("the least recently used plan is evicted first") {
  PlanCache cache(3);
  cache.Insert(Key("m", 1), MakePlan(1));
  cache.Insert(Key("m", 2), MakePlan(2));
  cache.Insert(Key("m", 3), MakePlan(3));
  REQUIRE(cache.Lookup(Key("m", 1)) != nullptr);  // 2 is now the oldest
  cache.Insert(Key("m", 4), MakePlan(4));
  CHECK(cache.Lookup(Key("m", 2)) == nullptr);
  CHECK(cache.Lookup(Key("m", 1)) != nullptr);
  CHECK(cache.Lookup(Key("m", 3)) != nullptr);
  CHECK(cache.Lookup(Key("m", 4)) != nullptr);
  // Order now (oldest first): 1, 3, 4. Replacing 1 refreshes it.
  cache.Insert(Key("m", 1), MakePlan(10));
  cache.Insert(Key("m", 5), MakePlan(5));
  CHECK(cache.Lookup(Key("m", 3)) == nullptr);
  CHECK(cache.Lookup(Key("m", 1)) != nullptr);
  const PlanCacheStats s = cache.stats();
  CHECK(s.evictions == 2);
  CHECK(s.size == 3);
}

TEST_CASE("InvalidateModel drops only that model's plans") {
  PlanCache cache(10);
  for (int i = 0; i < 3; ++i) {
    cache.Insert(Key("bert", i), MakePlan(i));
    cache.Insert(Key("gpt", i), MakePlan(i));
  }
  cache.InvalidateModel("bert");
  for (int i = 0; i < 3; ++i) {
    CHECK(cache.Lookup(Key("bert", i)) == nullptr);
    CHECK(cache.Lookup(Key("gpt", i)) != nullptr);
  }
  cache.InvalidateModel("unknown");
  const PlanCacheStats s = cache.stats();
  CHECK(s.invalidations == 3);
  CHECK(s.size == 3);
  // A dropped model can be cached again.
  cache.Insert(Key("bert", 0), MakePlan(42));
  CHECK(cache.Lookup(Key("bert", 0))->predicted_peak_bytes == 42);
}

TEST_CASE("a plan handed out survives its eviction") {
  PlanCache cache(1);
  cache.Insert(Key("m", 1), MakePlan(1));
  auto held = cache.Lookup(Key("m", 1));
  cache.Insert(Key("m", 2), MakePlan(2));
  CHECK(cache.Lookup(Key("m", 1)) == nullptr);
  CHECK(held->predicted_peak_bytes == 1);
}

TEST_CASE("concurrent lookups, inserts and invalidations stay consistent") {
  PlanCache cache(64);
  constexpr int kThreads = 4;
  constexpr int kOps = 20000;
  std::atomic<int> wrong{0};
  std::atomic<uint64_t> lookups{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      const std::string model = t % 2 ? "a" : "b";
      for (int i = 0; i < kOps; ++i) {
        const int64_t seq = (i * 7 + t) % 100;
        if (i % 3 == 0) {
          cache.Insert(Key(model, seq), MakePlan(seq));
        } else if (i % 997 == 0) {
          cache.InvalidateModel(model);
        } else {
          ++lookups;
          auto plan = cache.Lookup(Key(model, seq));
          // A hit must be the plan stored under that key.
          if (plan != nullptr && plan->predicted_peak_bytes != seq) ++wrong;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  CHECK(wrong == 0);
  const PlanCacheStats s = cache.stats();
  CHECK(s.size <= 64);
  CHECK(s.hits + s.misses == lookups);
  CHECK(s.hits > 0);
  CHECK(s.evictions > 0);
}

TEST_CASE("granularities far from the feature's scale never overflow") {
  // Found by fuzzing the config: 100 / 1e-305 is inf.
  CHECK(BucketFeatures({100, 0.5}, {1e-305, 1e-305}) ==
        std::vector<int64_t>{100, 1});
  // A step far beyond int64: the feature itself, rounded up.
  CHECK(BucketFeatures({9007199254740992.0}, {1e300}) ==
        std::vector<int64_t>{int64_t{1} << 53});
  CHECK(BucketFeatures({3}, {1e300}) == std::vector<int64_t>{3});
}

}  // namespace
}  // namespace remat
