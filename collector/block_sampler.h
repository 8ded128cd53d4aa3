// BlockSampler: turns one measured step into a planner Sample.
//
// Usage, for a step that runs every checkpointable block recomputed (the
// safe plan):
//   BlockSampler sampler(&source, num_blocks);
//   sampler.BeginStep(resident_bytes);   // before forward
//   ... forward and backward, the runtime calling the BlockObserver hooks ...
//   absl::StatusOr<Sample> s = sampler.EndStep(features);
//
// Per block it records
//   act_bytes   = current_bytes after the block's forward-with-grad minus
//                 before it: what the block saved for backward plus its
//                 output (temporaries are freed by then);
//   input_bytes = the size of the block's input tensor;
//   forward_ns  = steady-clock time of that forward, the device
//                 synchronised on both ends (MemorySource::Synchronize);
//   workspace_bytes (recomputed blocks) = the source's peak during the
//                 block's backward, above what was allocated when its
//                 recompute returned, less the gradient of its input;
//   transfer_bytes = what the runtime reports (BlockObserver::
//                 TransferBytes), when it has a copy engine;
// and for the step base_bytes (alive at BeginStep), peak_bytes (the
// source's peak from BeginStep to EndStep) and tail_bytes (the source's
// peak from EndForward until the next block event, above what was
// allocated at EndForward: the head and loss, when the last block is
// recomputed, as the safe plan does; a last block kept adds its backward).
//
// Thread safety: BeginStep/EndStep on the step's thread; the observer hooks
// may run on autograd's thread, but never concurrently with each other or
// with BeginStep/EndStep (backward finishes before EndStep).
#ifndef REMAT_COLLECTOR_BLOCK_SAMPLER_H_
#define REMAT_COLLECTOR_BLOCK_SAMPLER_H_

#include <chrono>
#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "collector/block_observer.h"
#include "collector/memory_source.h"
#include "planner/model.h"

namespace remat {

class BlockSampler final : public BlockObserver {
 public:
  // `source` must outlive the sampler. num_blocks >= 0.
  BlockSampler(MemorySource* source, int num_blocks);

  // Starts a step. `resident_bytes` is what was alive before the step that
  // the source cannot see: ignored for an absolute source; for a relative
  // one (the CPU tracker) it becomes the base, and the step's peak is
  // reported on top of it.
  void BeginStep(int64_t resident_bytes = 0);

  void BeforeBlock(int index, int64_t input_bytes) override;
  void AfterBlock(int index) override;
  void AfterBackward(int index) override;
  void TransferBytes(int index, int64_t bytes) override;
  void EndForward() override;

  // Ends the step. FAILED_PRECONDITION when no step was begun or a block
  // was never measured (e.g. the step did not run backward), naming the
  // block. The sampler is ready for the next BeginStep either way.
  absl::StatusOr<Sample> EndStep(const Features& features);

  // What was measured so far in this step (for diagnostics and benches).
  const std::vector<BlockMeasurement>& measurements() const { return blocks_; }

 private:
  using Clock = std::chrono::steady_clock;

  MemorySource* source_;
  bool in_step_ = false;
  int64_t base_bytes_ = 0;   // reported base
  int64_t begin_bytes_ = 0;  // source's current_bytes at BeginStep
  std::vector<BlockMeasurement> blocks_;
  std::vector<bool> measured_;
  int open_block_ = -1;
  int64_t open_bytes_ = 0;
  // The backward window after a recompute (AfterBlock to AfterBackward).
  int window_block_ = -1;
  int64_t window_bytes_ = 0;
  // The tail's window (EndForward to the next block event); -1: closed.
  int64_t tail_start_bytes_ = -1;
  std::optional<int64_t> tail_bytes_;
  // The step's peak over the windows so far (each window resets the
  // source's peak).
  int64_t step_peak_ = 0;
  Clock::time_point open_time_;

  // Closes the tail's window if it is open.
  void CloseTail();
};

}  // namespace remat

#endif  // REMAT_COLLECTOR_BLOCK_SAMPLER_H_
