// Solver benchmark: latency, plan quality and plan-cache hits, every
// baseline measured in the same run. One JSON line per result:
//
//   {"bench":"solver_latency","solver":S,"blocks":N,"p50_us":..,"p99_us":..}
//     Solve() wall time (reasons included) on transformer-like chains of N
//     blocks, budgets drawn between the smallest reachable peak and the
//     keep-everything peak; "family" says which chains (TransformerChain)
//     and "solves" how many samples the percentiles come from. cpu_p50_us
//     and cpu_p99_us are the same solves in thread CPU time, which leaves
//     out time lost to other processes on a shared machine.
//
//   {"bench":"solver_quality","solver":S,"instances":..,"mean_cost_ratio":..,
//    "max_cost_ratio":..,"over_budget":..,"missed_feasible":..,
//    "zero_cost_instances":..,"zero_cost_extra":..}
//     Random transformer-like instances (both families, see
//     TransformerChain; jittered chains up to 48 blocks, the others up to
//     200) whose budgets run from tight (the
//     smallest reachable peak, computed here independently
//     of the solvers) to loose (everything kept), so a fitting plan always
//     exists.
//     static_max plans for the largest shape of the same chain (batch 32,
//     seq 512, same budget) and that one plan is scored on the instance.
//     * over_budget: plans whose peak, recomputed here with the shared
//       PredictedPeakBytes, exceeds the limit.
//     * missed_feasible: plans the solver itself marks infeasible although
//       a fitting plan exists. (Equal to over_budget when the solver's
//       feasible flag is honest; both are printed so a dishonest flag
//       shows.)
//     * cost ratio = solver recompute_ns / exact recompute_ns, over the
//       instances where the solver's plan fits and exact's cost is > 0
//       (ratio_instances of them; null when there are none).
//       Instances where exact's cost is 0 (everything fits) have no ratio:
//       they are counted in zero_cost_instances, and zero_cost_extra counts
//       those where the solver recomputed anything anyway.
//
//   {"bench":"plan_cache","p50_ns":..,"p99_ns":..}
//     PlanCache::Lookup hits on a warm cache of 4096 plans, one thread.
//
// Flags: --quick runs fewer repetitions (for smoke tests); --stats prints
// the exact search's work per instance instead; --max-blocks N leaves out
// the chains longer than N.
#include "planner/solver.h"

#include <time.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "bench/chains.h"
#include "planner/exact_solver.h"
#include "planner/plan.h"
#include "planner/plan_cache.h"

namespace remat {
namespace {

using Clock = std::chrono::steady_clock;

// CPU time of this thread: unlike wall time, it does not count the time the
// scheduler gives to other processes on a shared machine.
double ThreadCpuUs() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e6 +
         static_cast<double>(ts.tv_nsec) / 1e3;
}

double Percentile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  const size_t i = static_cast<size_t>(q * static_cast<double>(v.size() - 1));
  return v[i];
}

// Chains longer than this are left out (--max-blocks).
int g_max_blocks = 1000;

void Latency(bool quick, Family family, bool offload) {
  for (const LatencyChains& chains : MakeLatencyChains(family, offload, quick)) {
    const int n = chains.blocks;
    if (n > g_max_blocks) break;
    const bool slow = offload && n >= 96;
    const int reps = quick || slow ? 1 : (n >= 1000 ? 3 : 5);
    const std::vector<PlanProblem>& problems = chains.problems;
    for (const std::string& name : SolverNames()) {
      auto solver = std::move(NewSolver(name).value());
      std::vector<double> us, cpu_us;
      for (int r = 0; r < reps; ++r) {
        for (const PlanProblem& p : problems) {
          const double c0 = ThreadCpuUs();
          const auto t0 = Clock::now();
          Plan plan = solver->Solve(p);
          const auto t1 = Clock::now();
          cpu_us.push_back(ThreadCpuUs() - c0);
          us.push_back(
              std::chrono::duration<double, std::micro>(t1 - t0).count());
          if (plan.actions.size() != p.blocks.size()) std::abort();
        }
      }
      std::printf(
          "{\"bench\":\"solver_latency\",\"solver\":\"%s\",\"blocks\":%d,"
          "\"p50_us\":%.1f,\"p99_us\":%.1f,\"cpu_p50_us\":%.1f,"
          "\"cpu_p99_us\":%.1f,\"family\":\"%s\",\"link_gb_per_s\":%g,"
          "\"solves\":%zu}\n",
          name.c_str(), n, Percentile(us, 0.5), Percentile(us, 0.99),
          Percentile(cpu_us, 0.5), Percentile(cpu_us, 0.99), FamilyName(family),
          offload ? kLinkBytesPerS / 1e9 : 0.0, us.size());
      std::fflush(stdout);
    }
  }
}

// --stats: how hard the exact search works, per chain length.
void SearchStats(Family family, bool offload) {
  for (const LatencyChains& chains : MakeStatsChains(family, offload)) {
    const int n = chains.blocks;
    if (n > g_max_blocks) break;
    for (size_t i = 0; i < chains.problems.size(); ++i) {
      const PlanProblem& p = chains.problems[i];
      const double u = chains.budget_u[i];
      internal::ExactStats st;
      const auto t0 = Clock::now();
      internal::SolveExact(p, &st);
      const double us =
          std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
      std::printf(
          "{\"bench\":\"exact_stats\",\"family\":\"%s\",\"offload\":%s,"
          "\"blocks\":%d,\"u\":%.2f,"
          "\"us\":%.0f,\"steps\":%d,\"states\":%lld,\"nodes\":%lld,"
          "\"max_front\":%lld,\"tail\":%d,\"candidates\":%d,\"gap_over_block\":%.4f,"
          "\"stopped\":%s,\"lower_bound_gap_over_block\":%.4f,"
          "\"heuristic_gap_over_block\":%.4f,\"cost_ns\":%lld,"
          "\"heuristic_nodes\":%lld,\"whole_pruned\":%lld,\"count_pruned\":%lld}\n",
          FamilyName(family), offload ? "true" : "false", n, u, us, st.steps,
          static_cast<long long>(st.states), static_cast<long long>(st.nodes),
          static_cast<long long>(st.max_front), st.tail, st.candidates,
          static_cast<double>(st.cost_ns - st.root_bound_ns) /
              static_cast<double>(p.blocks[1].forward_ns),
          st.stopped_at_limit ? "true" : "false",
          static_cast<double>(st.cost_ns - st.lower_bound_ns) /
              static_cast<double>(p.blocks[1].forward_ns),
          static_cast<double>(st.heuristic_cost_ns - st.cost_ns) /
              static_cast<double>(p.blocks[1].forward_ns),
          static_cast<long long>(st.cost_ns),
          static_cast<long long>(st.heuristic_nodes),
          static_cast<long long>(st.whole_pruned),
          static_cast<long long>(st.count_pruned));
    }
  }
}

void Quality(bool quick) {
  std::mt19937_64 rng(2);
  const int count = quick ? 100 : 2000;
  std::vector<PlanProblem> problems;
  // The same chain (same noise draws) at the largest shape, same budget:
  // what static_max plans for, once, as Mimose's static mode does.
  std::vector<PlanProblem> largest;
  for (int i = 0; i < count; ++i) {
    // Alternate families; jittered chains stay short (their exact search
    // is the slow one).
    const Family family = i % 2 ? Family::kJittered : Family::kTransformer;
    const int n = family == Family::kJittered
                      ? 12 + static_cast<int>(rng() % 37)    // 12..48
                      : 12 + static_cast<int>(rng() % 189);  // 12..200
    const int64_t batch = 1 + static_cast<int64_t>(rng() % 32);
    const int64_t seq = 32 + static_cast<int64_t>(rng() % 481);
    const uint64_t seed = rng();
    std::mt19937_64 noise(seed), same_noise(seed);
    PlanProblem p = TransformerChain(n, batch, seq, family, noise);
    PlanProblem big = TransformerChain(n, 32, 512, family, same_noise);
    // Tight (the smallest reachable peak) to loose; about one in eleven
    // fits without any recompute. A margin on some.
    SetBudget(&p, std::min(1.0, std::uniform_real_distribution<double>(
                                    0.0, 1.1)(rng)));
    if (i % 4 == 0) {
      p.margin_bytes = 64LL << 20;
      p.budget_bytes += p.margin_bytes;
    }
    big.budget_bytes = p.budget_bytes;
    big.margin_bytes = p.margin_bytes;
    problems.push_back(std::move(p));
    largest.push_back(std::move(big));
  }
  auto exact = std::move(NewSolver("exact").value());
  std::vector<Plan> reference;
  for (const PlanProblem& p : problems) reference.push_back(exact->Solve(p));

  for (const std::string& name : SolverNames()) {
    auto solver = std::move(NewSolver(name).value());
    int over_budget = 0, missed = 0, zero_cost = 0, zero_extra = 0;
    double sum_ratio = 0, max_ratio = 0;
    int ratios = 0;
    for (size_t i = 0; i < problems.size(); ++i) {
      const PlanProblem& p = problems[i];
      Plan plan = solver->Solve(name == "static_max" ? largest[i] : p);
      ScorePlan(p, &plan);  // the static plan runs on this batch
      const bool fits = PredictedPeakBytes(p, plan.actions) <= p.limit_bytes();
      if (!fits) ++over_budget;
      if (!plan.feasible) ++missed;
      const Plan& ref = reference[i];
      if (ref.recompute_ns == 0) {
        ++zero_cost;
        if (RecomputeNs(p, plan.actions) > 0) ++zero_extra;
        continue;
      }
      if (!fits) continue;
      const double ratio = static_cast<double>(RecomputeNs(p, plan.actions)) /
                           static_cast<double>(ref.recompute_ns);
      sum_ratio += ratio;
      max_ratio = std::max(max_ratio, ratio);
      ++ratios;
    }
    // No fitting plan with a ratio: the ratios are null, not 0.
    char mean[32] = "null", max[32] = "null";
    if (ratios > 0) {
      std::snprintf(mean, sizeof(mean), "%.4f", sum_ratio / ratios);
      std::snprintf(max, sizeof(max), "%.4f", max_ratio);
    }
    std::printf(
        "{\"bench\":\"solver_quality\",\"solver\":\"%s\",\"instances\":%zu,"
        "\"mean_cost_ratio\":%s,\"max_cost_ratio\":%s,"
        "\"over_budget\":%d,\"missed_feasible\":%d,"
        "\"zero_cost_instances\":%d,\"zero_cost_extra\":%d,"
        "\"ratio_instances\":%d}\n",
        name.c_str(), problems.size(), mean, max, over_budget, missed,
        zero_cost, zero_extra, ratios);
    std::fflush(stdout);
  }
}

void CacheHits(bool quick) {
  constexpr int kPlans = 4096;
  PlanCache cache(kPlans);
  std::vector<PlanKey> keys;
  for (int i = 0; i < kPlans; ++i) {
    PlanKey k;
    k.model = "bert-large-" + std::to_string(i % 8);
    k.bucket = {1 + i % 32, 8 * (i / 32)};
    k.budget_bytes = 40LL << 30;
    k.solver = "exact";
    auto plan = std::make_shared<Plan>();
    plan->actions.assign(48, Action::kKeep);
    cache.Insert(k, plan);
    keys.push_back(std::move(k));
  }
  std::mt19937_64 rng(3);
  const int lookups = quick ? 20000 : 200000;
  std::vector<double> ns;
  ns.reserve(lookups);
  size_t found = 0;
  for (int i = 0; i < lookups; ++i) {
    const PlanKey& k = keys[rng() % keys.size()];
    const auto t0 = Clock::now();
    auto plan = cache.Lookup(k);
    const auto t1 = Clock::now();
    found += plan != nullptr;
    ns.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count());
  }
  if (found != static_cast<size_t>(lookups)) std::abort();
  std::printf("{\"bench\":\"plan_cache\",\"p50_ns\":%.0f,\"p99_ns\":%.0f}\n",
              Percentile(ns, 0.5), Percentile(ns, 0.99));
}

}  // namespace
}  // namespace remat

int main(int argc, char** argv) {
  bool quick = false, stats = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--stats") == 0) {
      stats = true;
    } else if (std::strcmp(argv[i], "--quick") == 0) {
      quick = true;
    } else if (std::strcmp(argv[i], "--max-blocks") == 0 && i + 1 < argc) {
      char* end = nullptr;
      const long n = std::strtol(argv[++i], &end, 10);
      if (*end != '\0' || n < 1 || n > 1000) {
        std::fprintf(stderr, "--max-blocks: %s is not a number in [1, 1000]\n",
                     argv[i]);
        return 2;
      }
      remat::g_max_blocks = static_cast<int>(n);
    } else {
      std::fprintf(stderr,
                   "usage: %s [--quick | --stats] [--max-blocks N]\n",
                   argv[0]);
      return 2;
    }
  }
  if (stats) {
    for (bool offload : {false, true}) {
      remat::SearchStats(remat::Family::kTransformer, offload);
      remat::SearchStats(remat::Family::kJittered, offload);
    }
    return 0;
  }
  for (bool offload : {false, true}) {
    remat::Latency(quick, remat::Family::kTransformer, offload);
    remat::Latency(quick, remat::Family::kJittered, offload);
  }
  remat::Quality(quick);
  remat::CacheHits(quick);
  return 0;
}
