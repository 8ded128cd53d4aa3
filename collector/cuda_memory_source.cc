#include "collector/cuda_memory_source.h"

#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <cuda_runtime_api.h>

#include <string>

namespace remat {
namespace {

namespace alloc = c10::cuda::CUDACachingAllocator;

// Index of the aggregate (all pools) statistic in DeviceStats' arrays:
// StatType::AGGREGATE is 0 in every version. The index is spelled as a
// number because the Stat and StatType types moved between namespaces in
// LibTorch 2.x (c10::CachingAllocator, c10::CachingDeviceAllocator), while
// getDeviceStats and the field names stayed.
constexpr size_t kAggregate = 0;

}  // namespace

CudaMemorySource::CudaMemorySource(int device_index) : device_(device_index) {}

int64_t CudaMemorySource::current_bytes() const {
  const auto stats = alloc::getDeviceStats(device_);
  return stats.allocated_bytes[kAggregate].current;
}

int64_t CudaMemorySource::peak_bytes() const {
  const auto stats = alloc::getDeviceStats(device_);
  return stats.allocated_bytes[kAggregate].peak;
}

std::optional<int64_t> CudaMemorySource::reserved_peak_bytes() const {
  return alloc::getDeviceStats(device_).reserved_bytes[kAggregate].peak;
}

int64_t CudaMemorySource::out_of_memory_count() const {
  return alloc::getDeviceStats(device_).num_ooms;
}

void CudaMemorySource::reset_peak() { alloc::resetPeakStats(device_); }

void CudaMemorySource::Synchronize() { c10::cuda::device_synchronize(); }

std::string CudaMemorySource::device_type() const {
  cudaDeviceProp properties{};
  if (cudaGetDeviceProperties(&properties, device_) != cudaSuccess) {
    return "";
  }
  return std::string(properties.name) + ", " +
         std::to_string(properties.totalGlobalMem >> 20) + " MiB";
}

}  // namespace remat
