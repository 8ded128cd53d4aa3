// For tests: why a [cuda] case cannot run here, or empty when it can. A
// case that cannot says so in its log (`WARN("SKIPPED: " << why)`), which
// the test command lists and tests/gpu_check.sh refuses on a GPU machine.
// REMAT_WITH_CUDA comes from the including test's CUDA dependencies.
#ifndef REMAT_COLLECTOR_CUDA_SKIP_H_
#define REMAT_COLLECTOR_CUDA_SKIP_H_

#include <torch/torch.h>

#include <string>

namespace remat {

inline std::string CudaSkipReason() {
#ifndef REMAT_WITH_CUDA
  return "built without --config=cuda";
#else
  if (!torch::cuda::is_available()) {
    return "no GPU (torch::cuda::is_available() is false)";
  }
  return "";
#endif
}

}  // namespace remat

#endif  // REMAT_COLLECTOR_CUDA_SKIP_H_
