// The chains bench:solver times the solvers on, shared with the tests that
// hold the exact search to its work on them (tests:exact_work_test).
#ifndef REMAT_BENCH_CHAINS_H_
#define REMAT_BENCH_CHAINS_H_

#include <cstdint>
#include <random>
#include <vector>

#include "planner/plan.h"

namespace remat {

// A transformer-like chain of n blocks for a batch of `batch` sequences of
// `seq` tokens (hidden 1024, 16 heads, fp16 activations): an embedding
// block (not checkpointable), alternating attention and MLP blocks, and a
// head. Forward times carry 2% independent noise (timing noise). Sizes:
//   * kTransformer: identical within a block type, as the allocations of
//     structurally identical layers are;
//   * kJittered: 1% independent noise on every size too, as per-block
//     estimator upper bounds may have: blocks of a type are near-identical
//     but never equal, the hard case for a Pareto search.
enum class Family { kTransformer, kJittered };

const char* FamilyName(Family f);

PlanProblem TransformerChain(int n, int64_t batch, int64_t seq, Family family,
                             std::mt19937_64& rng);

int64_t KeepAllPeak(const PlanProblem& p);

// Smallest reachable peak (memory model v2, independently of the solvers):
// recompute every checkpointable block but the last whose saving is
// positive; that lowers every moment at once.
int64_t MinReachablePeak(const PlanProblem& p);

// Sets the budget at fraction u of the way from the smallest reachable peak
// to the keep-everything peak.
void SetBudget(PlanProblem* p, double u);

// The host link of the offload runs: PCIe Gen5 x16, 64 GB/s each way, as
// an H200 has.
inline constexpr double kLinkBytesPerS = 64e9;

// The latency run's chains of one length: distinct instances (shape, noise,
// budget), so that p99 covers the hard budgets too.
struct LatencyChains {
  int blocks = 0;
  std::vector<PlanProblem> problems;
  std::vector<double> budget_u;  // each problem's SetBudget u
};

// The latency run's chains of `family`, 12 to 1000 blocks, shortest first,
// all from one stream of draws: 200 chains a length (100 of 1000 blocks),
// 20 with `quick` and with a link from 96 blocks on. With `link`, budgets
// also below what recomputing alone reaches, and the host link above.
std::vector<LatencyChains> MakeLatencyChains(Family family, bool link, bool quick);

// The chains of `bench:solver --stats`: 20 each of 48, 96, 200 and 1000
// blocks, budgets as the latency run's.
std::vector<LatencyChains> MakeStatsChains(Family family, bool link);

}  // namespace remat

#endif  // REMAT_BENCH_CHAINS_H_
