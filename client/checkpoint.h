// Activation checkpointing for one block: keep only the block's inputs in
// forward, recompute the block in backward.
//
// Checkpoint(block, inputs, params) runs `block` under NoGradGuard, so none
// of its intermediate tensors are kept; it saves only the inputs, the RNG
// state (when preserve_rng is on) and the autocast state. In backward it
// restores that RNG state (forking: the caller's RNG stream is left as it
// was), re-runs the block with grad enabled under the saved autocast state,
// and backpropagates the incoming gradients of its outputs to the inputs
// and to `params`. Inputs and outputs may be several tensors; those that
// need no gradient (integer ids, a mask) pass through untouched.
// The result is bit-for-bit what running the block normally gives,
// dropout included.
//
// The parameters are inputs of the autograd node, so their gradients flow
// through the graph like any other: loss.backward() accumulates them into
// .grad, and torch::autograd::grad(loss, params) returns them, whether or
// not the input requires grad.
//
// Limits: no double backward (create_graph) through a checkpointed block;
// a second backward through the same graph fails like autograd's own
// ("Trying to backward through the graph a second time") unless the first
// used retain_graph. The block must be a pure function of its input,
// parameters and RNG (no in-place updates of outside state in forward).
#ifndef REMAT_CLIENT_CHECKPOINT_H_
#define REMAT_CLIENT_CHECKPOINT_H_

#include <optional>
#include <vector>

#include <ATen/Tensor.h>
#include <ATen/core/Generator.h>
#include <c10/core/Device.h>

#include "client/block_function.h"
#include "collector/block_observer.h"

namespace remat {

// RNG states of the generators a block (or a step) may draw from: the
// CPU's, and that of the first defined tensor's device when it is an
// accelerator.
struct RngState {
  at::Tensor cpu;
  std::optional<c10::Device> device;
  at::Tensor device_state;

  static RngState Capture(at::TensorList tensors);
  void Restore() const;

 private:
  static at::Tensor Get(at::Generator gen);
  static void Set(at::Generator gen, const at::Tensor& state);
};

struct CheckpointOptions {
  // Save the RNG state of the CPU generator (and of the input's device
  // generator, for accelerator inputs) in forward and restore it for the
  // recompute. Needed for dropout; off saves one state copy per block.
  bool preserve_rng = true;
  // Called around the recompute in backward (not in forward), with
  // `block_index`; may be null. Must outlive the backward pass.
  BlockObserver* observer = nullptr;
  int block_index = -1;
};

// Returns block(inputs), with the block's activations freed until
// backward. `params` are the tensors the block reads besides its inputs
// (its parameters) that may need gradients. With grad mode off, or when
// neither an input nor a parameter requires grad, this is just
// block(inputs). The RNG state saved is the CPU generator's and that of
// the first input's device when it is an accelerator.
Tensors Checkpoint(BlockFunction block, const Tensors& inputs,
                   const std::vector<at::Tensor>& params,
                   const CheckpointOptions& options = {});

// One tensor in, one out.
at::Tensor Checkpoint(std::function<at::Tensor(const at::Tensor&)> block,
                      const at::Tensor& input,
                      const std::vector<at::Tensor>& params,
                      const CheckpointOptions& options = {});

}  // namespace remat

#endif  // REMAT_CLIENT_CHECKPOINT_H_
