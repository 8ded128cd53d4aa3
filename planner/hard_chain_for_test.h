// Test support: a model whose plans are hard to solve exactly, for tests of
// the solve limits (planner:core_test, tests:rematd_hard_request_test).
// 400 blocks (200 under ASan or TSan, where fitting is slow) whose sizes and
// times all differ a little (1% noise on each, alternating attention-like and
// MLP-like blocks), with samples on a grid that the estimator fits exactly:
// an unlimited exact solve of the hard request takes about two seconds in an
// optimised build on a 2-core machine, far beyond the solve deadlines the
// tests set (at most 100 ms).
#ifndef REMAT_PLANNER_HARD_CHAIN_FOR_TEST_H_
#define REMAT_PLANNER_HARD_CHAIN_FOR_TEST_H_

#include <cstdint>
#include <string>
#include <vector>

#include "planner/model.h"

namespace remat {
namespace testing {

// Features {batch, seq}; every block but the first checkpointable.
ModelSpec HardChainModel(const std::string& name);
// batch in {1, 2, 4, 8} x seq in {64, 128, 256, 512}.
std::vector<Sample> HardChainSamples(const ModelSpec& spec);
// Features of the hard request and its budget (70% of the keep-all peak).
inline constexpr double kHardBatch = 8;
inline constexpr double kHardSeq = 384;
int64_t HardChainBudgetBytes(const ModelSpec& spec);

}  // namespace testing
}  // namespace remat

#endif  // REMAT_PLANNER_HARD_CHAIN_FOR_TEST_H_
