// CpuMemoryTracker: exact CPU allocation accounting from LibTorch's own
// allocator, without LibTorch in this header.
//
// LibTorch's CPU allocator reports every allocation and free (with its exact
// size) to the c10::MemoryReportingInfoBase installed in the calling
// thread's debug info under DebugInfoKind::PROFILER_STATE. Attach() installs
// one. The debug info is thread-local, and autograd carries it into its
// engine threads (ThreadLocalState), so backward is counted too.
//
// Limits: only allocations made while attached are seen (the source is not
// absolute(): current_bytes() starts at 0 and a free of memory allocated
// before attaching is invisible). Attaching occupies the PROFILER_STATE
// slot, so do not run LibTorch's profiler inside an attached region.
//
// Thread safety: counters are atomic; any thread may read them while
// another allocates.
#ifndef REMAT_COLLECTOR_CPU_MEMORY_TRACKER_H_
#define REMAT_COLLECTOR_CPU_MEMORY_TRACKER_H_

#include <cstdint>
#include <memory>

#include "collector/memory_source.h"

namespace remat {

class CpuMemoryTracker final : public MemorySource {
 public:
  CpuMemoryTracker();
  ~CpuMemoryTracker() override;

  int64_t current_bytes() const override;
  int64_t peak_bytes() const override;
  void reset_peak() override;
  bool absolute() const override { return false; }
  std::string device_type() const override { return "cpu"; }

  // Installs the tracker on the calling thread until the returned object is
  // destroyed (on the same thread). Nested attachments are fine.
  std::unique_ptr<Attachment> Attach() override;

  // Allocation and free events seen so far (for tests and overhead checks).
  int64_t events() const;

  struct Counters;  // shared with the installed reporter

 private:
  std::shared_ptr<Counters> counters_;
};

}  // namespace remat

#endif  // REMAT_COLLECTOR_CPU_MEMORY_TRACKER_H_
