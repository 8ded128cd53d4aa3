#include "collector/block_sampler.h"

#include <algorithm>
#include <string>
#include <utility>

#include "absl/status/status.h"

namespace remat {

BlockSampler::BlockSampler(MemorySource* source, int num_blocks)
    : source_(source),
      blocks_(num_blocks < 0 ? 0 : num_blocks),
      measured_(blocks_.size(), false) {}

void BlockSampler::BeginStep(int64_t resident_bytes) {
  in_step_ = true;
  open_block_ = -1;
  std::fill(blocks_.begin(), blocks_.end(), BlockMeasurement{});
  std::fill(measured_.begin(), measured_.end(), false);
  source_->reset_peak();
  begin_bytes_ = source_->current_bytes();
  step_peak_ = begin_bytes_;
  window_block_ = -1;
  tail_start_bytes_ = -1;
  tail_bytes_.reset();
  // A relative source's count is only meaningful as a difference: what it
  // reads at the start may carry bytes of earlier steps whose frees it did
  // not see (freed after its attachment ended), so the base is what the
  // caller says is resident, never the count itself.
  base_bytes_ = source_->absolute() ? begin_bytes_ : resident_bytes;
}

void BlockSampler::BeforeBlock(int index, int64_t input_bytes) {
  if (!in_step_ || index < 0 || index >= static_cast<int>(blocks_.size())) {
    return;
  }
  CloseTail();
  open_block_ = index;
  blocks_[index].input_bytes = input_bytes;
  open_bytes_ = source_->current_bytes();
  // Device work queued before the block must not be timed as the block's.
  source_->Synchronize();
  open_time_ = Clock::now();
}

void BlockSampler::AfterBlock(int index) {
  if (!in_step_ || index != open_block_) return;
  source_->Synchronize();
  const Clock::time_point end = Clock::now();
  const int64_t after = source_->current_bytes();
  BlockMeasurement& m = blocks_[index];
  // A block that frees more than it allocates (e.g. an in-place op on a
  // tensor it owns) retains nothing.
  m.act_bytes = after > open_bytes_ ? after - open_bytes_ : 0;
  m.forward_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(end - open_time_)
          .count();
  measured_[index] = true;
  open_block_ = -1;
  // Its backward may follow (a recompute): watch the peak from here.
  step_peak_ = std::max(step_peak_, source_->peak_bytes());
  source_->reset_peak();
  window_block_ = index;
  window_bytes_ = after;
}

void BlockSampler::AfterBackward(int index) {
  if (!in_step_) return;
  CloseTail();
  if (index != window_block_) return;
  const int64_t peak = source_->peak_bytes();
  step_peak_ = std::max(step_peak_, peak);
  BlockMeasurement& m = blocks_[index];
  m.workspace_bytes =
      std::max<int64_t>(peak - window_bytes_ - m.input_bytes, 0);
  window_block_ = -1;
}

void BlockSampler::TransferBytes(int index, int64_t bytes) {
  if (!in_step_ || index < 0 || index >= static_cast<int>(blocks_.size())) {
    return;
  }
  blocks_[index].transfer_bytes = bytes;
}

void BlockSampler::EndForward() {
  if (!in_step_) return;
  step_peak_ = std::max(step_peak_, source_->peak_bytes());
  source_->reset_peak();
  tail_start_bytes_ = source_->current_bytes();
  window_block_ = -1;  // a kept last block's backward is the tail's
}

void BlockSampler::CloseTail() {
  if (tail_start_bytes_ < 0) return;
  const int64_t peak = source_->peak_bytes();
  tail_bytes_ = std::max<int64_t>(peak - tail_start_bytes_, 0);
  tail_start_bytes_ = -1;
}

absl::StatusOr<Sample> BlockSampler::EndStep(const Features& features) {
  if (!in_step_) {
    return absl::FailedPreconditionError(
        "BlockSampler::EndStep without BeginStep: call BeginStep before "
        "the step's forward");
  }
  CloseTail();
  in_step_ = false;
  for (size_t i = 0; i < measured_.size(); ++i) {
    if (!measured_[i]) {
      return absl::FailedPreconditionError(
          "block " + std::to_string(i) +
          " was not measured in this step: run backward before EndStep, "
          "and run the step with the safe plan (every checkpointable block "
          "recomputed)");
    }
  }
  Sample sample;
  sample.features = features;
  sample.blocks = blocks_;
  sample.base_bytes = base_bytes_;
  sample.tail_bytes = tail_bytes_;
  const int64_t peak = std::max(step_peak_, source_->peak_bytes());
  sample.peak_bytes = base_bytes_ + (peak - begin_bytes_);
  return sample;
}

}  // namespace remat
