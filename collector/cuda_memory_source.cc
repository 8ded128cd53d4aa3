#include "collector/cuda_memory_source.h"

#include <c10/cuda/CUDACachingAllocator.h>

namespace remat {
namespace {

namespace alloc = c10::cuda::CUDACachingAllocator;

const alloc::Stat& Allocated(const alloc::DeviceStats& stats) {
  return stats.allocated_bytes[static_cast<size_t>(alloc::StatType::AGGREGATE)];
}

}  // namespace

CudaMemorySource::CudaMemorySource(int device_index) : device_(device_index) {}

int64_t CudaMemorySource::current_bytes() const {
  return Allocated(alloc::getDeviceStats(device_)).current;
}

int64_t CudaMemorySource::peak_bytes() const {
  return Allocated(alloc::getDeviceStats(device_)).peak;
}

void CudaMemorySource::reset_peak() { alloc::resetPeakStats(device_); }

}  // namespace remat
