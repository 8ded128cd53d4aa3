// The CUDA copy engine. Cases tagged [cuda] need a GPU and say they skipped
// without one (tests/gpu_check.sh runs them on a GPU machine and fails if
// they skip); LibTorch provides the device memory, the compute kernels and
// the compute stream (its current stream), as in the runtime.
#include "kernels/cuda_copy_engine.h"

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "collector/cuda_skip.h"

#ifdef REMAT_WITH_CUDA
#include <c10/cuda/CUDAStream.h>
#endif

namespace remat::kernels {
namespace {

#define SKIP_WITHOUT_GPU()                                   \
  if (const std::string why = CudaSkipReason(); !why.empty()) { \
    WARN("SKIPPED: " << why);                                \
    return;                                                  \
  }

#ifdef REMAT_WITH_CUDA
using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

CudaCopyEngineOptions TorchStreamOptions() {
  CudaCopyEngineOptions options;
  options.compute_stream = [] {
    return static_cast<void*>(c10::cuda::getCurrentCUDAStream().stream());
  };
  return options;
}

std::unique_ptr<CopyEngine> Engine() {
  auto engine = NewCudaCopyEngine(TorchStreamOptions());
  REQUIRE(engine.ok());
  return *std::move(engine);
}

torch::TensorOptions CudaBytes() {
  return torch::dtype(torch::kUInt8).device(torch::kCUDA);
}

TEST_CASE("CUDA engine options are checked", "[cuda_build]") {
  CudaCopyEngineOptions capped = TorchStreamOptions();
  capped.engine.link_bytes_per_s = 1e9;
  CHECK(NewCudaCopyEngine(capped).status().code() ==
        absl::StatusCode::kInvalidArgument);
  CudaCopyEngineOptions far = TorchStreamOptions();
  far.device_index = 1000;
  CHECK_FALSE(NewCudaCopyEngine(far).ok());  // no such GPU, or none at all
}
#endif

TEST_CASE("CUDA engine: a round trip is bit-exact, ordered after compute",
          "[cuda]") {
  SKIP_WITHOUT_GPU();
#ifdef REMAT_WITH_CUDA
  auto engine = Engine();
  int64_t moved = 0;
  for (int64_t bytes : {int64_t{1}, int64_t{4097}, int64_t{24} << 20}) {
    INFO(bytes << " bytes");
    // Queued on the compute stream and not waited for: the copy out must
    // still read the finished values.
    torch::Tensor src =
        torch::randint(0, 128, {bytes}, CudaBytes()).mul_(2).add_(1);
    auto host = engine->AllocateHost(bytes);
    REQUIRE(host.ok());
    CopyEvent out = engine->CopyToHost(src.data_ptr(), &*host);
    torch::Tensor back = torch::zeros({bytes}, CudaBytes());
    CopyEvent in = engine->CopyToDevice(*host, back.data_ptr(), out);
    REQUIRE(out.Wait().ok());
    const torch::Tensor expect = src.cpu();
    CHECK(std::memcmp(host->data(), expect.data_ptr(),
                      static_cast<size_t>(bytes)) == 0);
    REQUIRE(in.Wait().ok());
    CHECK(torch::equal(back, src));
    moved += bytes;
  }
  const CopyEngineStats s = engine->stats();
  CHECK(s.bytes_to_host == moved);
  CHECK(s.bytes_to_device == moved);
  CHECK(s.failed_copies == 0);
  CHECK(s.pending_copies == 0);
#endif
}

TEST_CASE("CUDA engine: a copy out overlaps a compute kernel", "[cuda]") {
  SKIP_WITHOUT_GPU();
#ifdef REMAT_WITH_CUDA
  auto engine = Engine();
  const int64_t bytes = int64_t{256} << 20;
  torch::Tensor src = torch::ones({bytes}, CudaBytes());
  auto host = engine->AllocateHost(bytes);
  REQUIRE(host.ok());
  torch::Tensor a = torch::randn({4096, 4096}, torch::kCUDA);
  auto compute = [&](int n) {
    for (int i = 0; i < n; ++i) a = torch::mm(a, a).div_(4096);
  };
  // Each figure is the best of three, after a warm-up.
  auto best = [](const std::function<double()>& run) {
    run();
    double s = 1e9;
    for (int i = 0; i < 3; ++i) s = std::min(s, run());
    return s;
  };
  const double copy_s = best([&] {
    torch::cuda::synchronize();
    const Clock::time_point t0 = Clock::now();
    REQUIRE(engine->CopyToHost(src.data_ptr(), &*host).Wait().ok());
    return SecondsSince(t0);
  });
  const double mm_s = best([&] {
    torch::cuda::synchronize();
    const Clock::time_point t0 = Clock::now();
    compute(1);
    torch::cuda::synchronize();
    return SecondsSince(t0);
  });
  // A compute load at least as long as the copy.
  const int n = std::max(1, static_cast<int>(std::ceil(copy_s / mm_s)));
  const double kernel_s = best([&] {
    torch::cuda::synchronize();
    const Clock::time_point t0 = Clock::now();
    compute(n);
    torch::cuda::synchronize();
    return SecondsSince(t0);
  });
  const double both_s = best([&] {
    torch::cuda::synchronize();
    const Clock::time_point t0 = Clock::now();
    CopyEvent out = engine->CopyToHost(src.data_ptr(), &*host);
    compute(n);
    torch::cuda::synchronize();
    REQUIRE(out.Wait().ok());
    return SecondsSince(t0);
  });
  INFO("copy of 256 MiB " << copy_s * 1e3 << " ms ("
                          << bytes / copy_s / 1e9 << " GB/s), " << n
                          << " matmuls " << kernel_s * 1e3
                          << " ms, both at once " << both_s * 1e3 << " ms");
  CHECK(both_s <= 1.3 * kernel_s);
  WARN("overlap: copy " << copy_s * 1e3 << " ms, compute " << kernel_s * 1e3
                        << " ms, both " << both_s * 1e3 << " ms");
#endif
}

TEST_CASE("CUDA engine: a warm pool allocates no pinned memory", "[cuda]") {
  SKIP_WITHOUT_GPU();
#ifdef REMAT_WITH_CUDA
  auto engine = Engine();
  torch::Tensor device = torch::randint(0, 255, {int64_t{48} << 20}, CudaBytes());
  torch::Tensor back = torch::empty_like(device);
  int64_t warm_chunks = -1;
  for (int step = 0; step < 60; ++step) {
    if (step == 5) warm_chunks = engine->stats().pool.chunk_allocations;
    // Six tensors per step, of sizes that vary from step to step.
    std::vector<HostBuffer> buffers;
    buffers.reserve(6);
    std::vector<CopyEvent> ins;
    int64_t offset = 0;
    for (int i = 0; i < 6; ++i) {
      const int64_t bytes = (int64_t{1} << 20) * (1 + (step * 7 + i * 3) % 8);
      auto host = engine->AllocateHost(bytes);
      REQUIRE(host.ok());
      buffers.push_back(*std::move(host));
      CopyEvent out = engine->CopyToHost(
          static_cast<char*>(device.data_ptr()) + offset, &buffers.back());
      ins.push_back(engine->CopyToDevice(
          buffers.back(), static_cast<char*>(back.data_ptr()) + offset, out));
      offset += bytes;
    }
    for (const CopyEvent& e : ins) REQUIRE(e.Wait().ok());
    CHECK(torch::equal(back.narrow(0, 0, offset), device.narrow(0, 0, offset)));
  }
  CHECK(engine->stats().pool.chunk_allocations == warm_chunks);
  CHECK(engine->stats().pool.in_use_bytes == 0);
#endif
}

}  // namespace
}  // namespace remat::kernels
