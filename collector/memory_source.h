// Where the collector reads memory from: one small interface with a CPU
// tracker (cpu_memory_tracker.h), the CUDA caching allocator's statistics
// (cuda_memory_source.h, CUDA builds only) and a scripted fake for tests.
//
// No LibTorch here, so torch-free code (the BlockSampler) and its tests
// build fast.
#ifndef REMAT_COLLECTOR_MEMORY_SOURCE_H_
#define REMAT_COLLECTOR_MEMORY_SOURCE_H_

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

namespace remat {

class MemorySource {
 public:
  // Held for the duration of a step on the thread that runs it (see
  // Attach). Destroying it detaches.
  class Attachment {
   public:
    virtual ~Attachment() = default;
  };

  virtual ~MemorySource() = default;

  // Bytes currently allocated, as this source sees them.
  virtual int64_t current_bytes() const = 0;
  // The largest current_bytes() since the last reset_peak() (or since the
  // source was created).
  virtual int64_t peak_bytes() const = 0;
  // Sets the peak to the current value (reserved_peak_bytes' too).
  virtual void reset_peak() = 0;

  // The most the device's allocator held since the last reset_peak():
  // allocated bytes plus its cache's free blocks (CUDA: the caching
  // allocator's reserved bytes), counted as current_bytes() is; nullopt
  // when the source has no such figure (host memory).
  virtual std::optional<int64_t> reserved_peak_bytes() const {
    return std::nullopt;
  }

  // True when current_bytes() counts everything alive on the device (the
  // CUDA allocator); false when it counts only what was allocated while the
  // source was attached (the CPU tracker), so a caller must add what was
  // alive before (parameters, the batch) itself.
  virtual bool absolute() const { return true; }

  // Waits until the device has finished the work queued so far, so that a
  // host clock read after it measures device time (the sampler's
  // forward_ns). A no-op for host memory.
  virtual void Synchronize() {}

  // Allocations that failed for want of memory so far (CUDA: the caching
  // allocator's num_ooms); 0 when the source cannot tell (the CPU
  // tracker). The runtime compares it across a step to report an
  // out-of-memory step as such.
  virtual int64_t out_of_memory_count() const { return 0; }

  // Whatever the source needs installed on the calling thread while a step
  // runs; nullptr when it needs nothing. The caller keeps the returned
  // object alive for the step and destroys it on the same thread.
  virtual std::unique_ptr<Attachment> Attach() { return nullptr; }

  // The device type measured here, whose profile the planner keeps its
  // samples and plans in (proto/remat.proto, "Device types"): "cpu", or a
  // CUDA device's name and total memory ("NVIDIA H100 80GB HBM3, 81559
  // MiB"); empty when the source cannot tell (scripted sources).
  virtual std::string device_type() const { return ""; }
};

// A scripted source for tests: the test moves current_bytes by hand.
// Thread safety: none; single-threaded tests only.
class FakeMemorySource final : public MemorySource {
 public:
  explicit FakeMemorySource(int64_t initial_bytes = 0, bool absolute = true)
      : current_(initial_bytes), peak_(initial_bytes), absolute_(absolute) {}

  // Moves the current value by `delta_bytes` (negative frees).
  void Allocate(int64_t delta_bytes) {
    current_ += delta_bytes;
    if (current_ > peak_) peak_ = current_;
  }
  void Free(int64_t bytes) { Allocate(-bytes); }

  // Sets what the allocator holds (allocated plus cache); from then on
  // the source reports a reserved peak.
  void Reserve(int64_t reserved_bytes) {
    reserved_ = reserved_bytes;
    reserved_peak_ = std::max(reserved_peak_.value_or(0), reserved_bytes);
  }

  int64_t current_bytes() const override { return current_; }
  int64_t peak_bytes() const override { return peak_; }
  void reset_peak() override {
    peak_ = current_;
    reserved_peak_ = reserved_;
  }
  std::optional<int64_t> reserved_peak_bytes() const override {
    return reserved_peak_;
  }
  bool absolute() const override { return absolute_; }
  void Synchronize() override { ++synchronize_calls_; }
  int synchronize_calls() const { return synchronize_calls_; }
  // An allocation failed for want of memory.
  void FailAllocation() { ++ooms_; }
  int64_t out_of_memory_count() const override { return ooms_; }

 private:
  int64_t current_;
  int64_t peak_;
  bool absolute_;
  std::optional<int64_t> reserved_;
  std::optional<int64_t> reserved_peak_;
  int64_t ooms_ = 0;
  int synchronize_calls_ = 0;
};

}  // namespace remat

#endif  // REMAT_COLLECTOR_MEMORY_SOURCE_H_
