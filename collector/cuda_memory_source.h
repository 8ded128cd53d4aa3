// CudaMemorySource: the CUDA caching allocator's statistics for one device
// (allocated bytes, aggregate over pools). Built only with --config=cuda
// against a CUDA-enabled LibTorch; Debian's LibTorch cannot compile it.
//
// absolute(): it sees everything the caching allocator hands out on the
// device, including what was allocated before the step.
// Thread safety: the allocator's statistics are thread-safe; reset_peak
// affects every user of the device's peak statistic.
#ifndef REMAT_COLLECTOR_CUDA_MEMORY_SOURCE_H_
#define REMAT_COLLECTOR_CUDA_MEMORY_SOURCE_H_

#include <cstdint>

#include "collector/memory_source.h"

namespace remat {

class CudaMemorySource final : public MemorySource {
 public:
  explicit CudaMemorySource(int device_index = 0);

  int64_t current_bytes() const override;
  int64_t peak_bytes() const override;
  void reset_peak() override;
  // The caching allocator's peak reserved bytes (segments it holds from
  // the device, allocated or cached).
  std::optional<int64_t> reserved_peak_bytes() const override;
  // Waits for the device (c10::cuda::device_synchronize).
  void Synchronize() override;
  int64_t out_of_memory_count() const override;
  // The device's name and total memory in MiB (cudaGetDeviceProperties),
  // as torch.cuda.get_device_name and get_device_properties give them.
  std::string device_type() const override;

  int device_index() const { return device_; }

 private:
  int device_;
};

}  // namespace remat

#endif  // REMAT_COLLECTOR_CUDA_MEMORY_SOURCE_H_
