// The one place that knows where LibTorch's C++ API differs between the
// versions remat builds against: Debian's 1.13 and current 2.x.
#ifndef REMAT_COLLECTOR_TORCH_COMPAT_H_
#define REMAT_COLLECTOR_TORCH_COMPAT_H_

#include <cstddef>
#include <cstdint>

#include <ATen/autocast_mode.h>
#include <c10/core/ScalarType.h>
#include <torch/version.h>

namespace remat {
namespace torch_compat {

// c10::MemoryReportingInfoBase::reportMemoryUsage takes the allocator's
// totals as int64_t in 1.x and as size_t from 2.0 on.
#if TORCH_VERSION_MAJOR >= 2
using ReportedTotal = size_t;
#else
using ReportedTotal = int64_t;
#endif

// Autocast state of the calling thread for the CPU and CUDA device types.
// 2.4 replaced the per-device functions (is_cpu_enabled, ...) with ones
// taking a DeviceType.
#if TORCH_VERSION_MAJOR > 2 || \
    (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
inline bool AutocastCpuEnabled() {
  return at::autocast::is_autocast_enabled(at::kCPU);
}
inline void SetAutocastCpuEnabled(bool on) {
  at::autocast::set_autocast_enabled(at::kCPU, on);
}
inline c10::ScalarType AutocastCpuDtype() {
  return at::autocast::get_autocast_dtype(at::kCPU);
}
inline void SetAutocastCpuDtype(c10::ScalarType t) {
  at::autocast::set_autocast_dtype(at::kCPU, t);
}
inline bool AutocastCudaEnabled() {
  return at::autocast::is_autocast_enabled(at::kCUDA);
}
inline void SetAutocastCudaEnabled(bool on) {
  at::autocast::set_autocast_enabled(at::kCUDA, on);
}
inline c10::ScalarType AutocastCudaDtype() {
  return at::autocast::get_autocast_dtype(at::kCUDA);
}
inline void SetAutocastCudaDtype(c10::ScalarType t) {
  at::autocast::set_autocast_dtype(at::kCUDA, t);
}
#else
inline bool AutocastCpuEnabled() { return at::autocast::is_cpu_enabled(); }
inline void SetAutocastCpuEnabled(bool on) {
  at::autocast::set_cpu_enabled(on);
}
inline c10::ScalarType AutocastCpuDtype() {
  return at::autocast::get_autocast_cpu_dtype();
}
inline void SetAutocastCpuDtype(c10::ScalarType t) {
  at::autocast::set_autocast_cpu_dtype(t);
}
inline bool AutocastCudaEnabled() { return at::autocast::is_enabled(); }
inline void SetAutocastCudaEnabled(bool on) { at::autocast::set_enabled(on); }
inline c10::ScalarType AutocastCudaDtype() {
  return at::autocast::get_autocast_gpu_dtype();
}
inline void SetAutocastCudaDtype(c10::ScalarType t) {
  at::autocast::set_autocast_gpu_dtype(t);
}
#endif

}  // namespace torch_compat
}  // namespace remat

#endif  // REMAT_COLLECTOR_TORCH_COMPAT_H_
