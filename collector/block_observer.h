// The hook the checkpoint runtime calls around each block it measures. The
// runtime calls it around a KEEP block's forward and around a RECOMPUTE
// block's recompute in backward, so measuring costs no extra forward pass.
//
// No LibTorch: sizes arrive as plain byte counts.
#ifndef REMAT_COLLECTOR_BLOCK_OBSERVER_H_
#define REMAT_COLLECTOR_BLOCK_OBSERVER_H_

#include <cstdint>

namespace remat {

// Thread safety: the runtime calls an observer from the thread that runs
// the block (in backward, autograd's thread for that device); calls for one
// step never overlap, since the blocks of a chain run one after another.
class BlockObserver {
 public:
  virtual ~BlockObserver() = default;
  // Just before block `index` runs with grad enabled. `input_bytes` is the
  // size of its input tensor.
  virtual void BeforeBlock(int index, int64_t input_bytes) = 0;
  // Just after it returned; its output and whatever it saved for backward
  // are still alive, its temporaries are freed.
  virtual void AfterBlock(int index) = 0;
  // Just after a recomputed block's backward, which ran right after its
  // recompute (AfterBlock): the window that holds its backward's transient
  // memory. Not called for blocks measured in forward.
  virtual void AfterBackward(int index) {}
  // What OFFLOAD would move for block `index` (BlockMeasurement's
  // transfer_bytes), counted by a runtime with a copy engine while the
  // block ran (between BeforeBlock and AfterBlock); never called without
  // one.
  virtual void TransferBytes(int index, int64_t bytes) {}
  // Just after the chain's forward: the last block returned (with or
  // without grad) and the runtime's waits at the end of forward are done.
  // What runs from here until a block's backward begins is the step's tail
  // (the model's head and loss, and their backward).
  virtual void EndForward() {}
};

}  // namespace remat

#endif  // REMAT_COLLECTOR_BLOCK_OBSERVER_H_
