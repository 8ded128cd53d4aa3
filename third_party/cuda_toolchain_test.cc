// The CUDA build itself: a kernel compiled by cuda_library's nvcc (the
// release of torch.version.cuda) links into a C++ test and computes the
// right numbers on the GPU. Skips, saying why, without --config=cuda or
// without a GPU.
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "third_party/cuda_toolchain_test_kernel.h"

TEST_CASE("an nvcc-compiled kernel runs on the GPU", "[cuda]") {
#ifndef REMAT_WITH_CUDA
  WARN("SKIPPED: built without --config=cuda");
#else
  std::string why;
  if (remat::CudaDeviceCount(&why) == 0) {
    WARN("SKIPPED: no GPU (" << why << ")");
    return;
  }
  std::vector<float> x(1000), y(1000);
  for (int i = 0; i < 1000; ++i) {
    x[i] = static_cast<float>(i);
    y[i] = 1.0f;
  }
  REQUIRE(remat::Saxpy(2.0f, x, &y) == "");
  for (int i = 0; i < 1000; ++i) REQUIRE(y[i] == 2.0f * i + 1.0f);
#endif
}
