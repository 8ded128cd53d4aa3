#include "collector/cpu_memory_tracker.h"

#include <atomic>
#include <utility>

#include <c10/core/Allocator.h>
#include <c10/core/Device.h>
#include <c10/util/ThreadLocalDebugInfo.h>
#include <torch/csrc/profiler/orchestration/observer.h>

#include "collector/torch_compat.h"

namespace remat {

struct CpuMemoryTracker::Counters {
  std::atomic<int64_t> current{0};
  std::atomic<int64_t> peak{0};
  std::atomic<int64_t> events{0};

  void Add(int64_t delta) {
    const int64_t now = current.fetch_add(delta) + delta;
    int64_t seen = peak.load(std::memory_order_relaxed);
    while (now > seen && !peak.compare_exchange_weak(seen, now)) {
    }
    events.fetch_add(1, std::memory_order_relaxed);
  }
};

namespace {

// What LibTorch's allocator calls. Holds the counters by shared_ptr: the
// debug info may outlive the attachment in a thread that captured it.
// LibTorch reads whatever sits in the PROFILER_STATE slot as a profiler's
// state (a Python autograd Function asks for its config, reentrant
// checkpointing's included), so this is one, of a profiler that is off.
class Reporter final : public torch::profiler::impl::ProfilerStateBase {
 public:
  explicit Reporter(std::shared_ptr<CpuMemoryTracker::Counters> counters)
      : ProfilerStateBase(torch::profiler::impl::ProfilerConfig(
            torch::profiler::impl::ProfilerState::Disabled)),
        counters_(std::move(counters)) {}

  torch::profiler::impl::ActiveProfilerType profilerType() override {
    return torch::profiler::impl::ActiveProfilerType::NONE;
  }

  void reportMemoryUsage(void* /*ptr*/, int64_t alloc_size,
                         torch_compat::ReportedTotal /*total_allocated*/,
                         torch_compat::ReportedTotal /*total_reserved*/,
                         c10::Device device) override {
    if (device.type() != c10::DeviceType::CPU) return;
    counters_->Add(alloc_size);
  }

  bool memoryProfilingEnabled() const override { return true; }

 private:
  std::shared_ptr<CpuMemoryTracker::Counters> counters_;
};

class Installed final : public MemorySource::Attachment {
 public:
  explicit Installed(std::shared_ptr<CpuMemoryTracker::Counters> counters)
      : guard_(c10::DebugInfoKind::PROFILER_STATE,
               std::make_shared<Reporter>(std::move(counters))) {}

 private:
  c10::DebugInfoGuard guard_;
};

}  // namespace

CpuMemoryTracker::CpuMemoryTracker()
    : counters_(std::make_shared<Counters>()) {}

CpuMemoryTracker::~CpuMemoryTracker() = default;

int64_t CpuMemoryTracker::current_bytes() const {
  return counters_->current.load();
}

int64_t CpuMemoryTracker::peak_bytes() const { return counters_->peak.load(); }

void CpuMemoryTracker::reset_peak() {
  counters_->peak.store(counters_->current.load());
}

int64_t CpuMemoryTracker::events() const { return counters_->events.load(); }

std::unique_ptr<MemorySource::Attachment> CpuMemoryTracker::Attach() {
  return std::make_unique<Installed>(counters_);
}

}  // namespace remat
