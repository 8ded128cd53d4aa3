// OFFLOAD for a block (DELTA's swapping): the tensors autograd saves while
// the block runs go to host memory through a copy engine (kernels/) once
// they are made, and come back before the block's backward needs them,
// prefetched when the backward of the block above begins (the memory
// model's one block of prefetch, plan.h).
//
// Mechanism (C++, Offloader::Run): each time autograd saves a tensor,
// LibTorch asks the autograd engine for "default saved-variable hooks"
// (SavedVariable, torch/csrc/autograd/saved_variable_hooks.h). The first
// Run installs an engine that is the base engine with that one method
// overridden (set_default_engine_stub): its hooks act only on a thread
// inside Offloader::Run and answer "none" everywhere else, so the rest of
// the process saves tensors as always. Same mechanism in LibTorch 1.13 and
// 2.x. A Python process has its own engine (PyTorch's), which must stay:
// there the block runs under torch.autograd.graph.saved_tensors_hooks
// whose hooks are SavedTensor::Pack and Unpack, between Begin and End.
//
// What moves: each storage once (views of it, and tensors other blocks of
// the same step also save, share one copy), if it has at least
// OffloadOptions::min_bytes and is neither the block's input (the previous
// block's output, which stays on the device for that block) nor one of
// its parameters or buffers. A saved
// tensor that turns out to be the block's output stays usable from the
// device (the next block holds it anyway). The values come back
// bit-for-bit, so gradients equal those of the plain block.
//
// Failures: a host pool that cannot take a tensor fails the forward; a copy
// that fails fails the backward that needed it; backward never reads a
// buffer whose copy back has not landed.
#ifndef REMAT_CLIENT_OFFLOAD_H_
#define REMAT_CLIENT_OFFLOAD_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <ATen/Tensor.h>
#include <c10/core/Device.h>

#include "absl/status/statusor.h"
#include "client/block_function.h"
#include "kernels/copy_engine.h"

namespace remat {

struct OffloadOptions {
  // Saved tensors whose storage is smaller stay on the device: moving them
  // costs more in bookkeeping than it frees.
  int64_t min_bytes = int64_t{64} << 10;
};

struct OffloadedStorage;
class Offloader;

// One tensor autograd saved while an Offloader's block ran: its storage's
// record (on its way to host and back), or the tensor itself when it stays
// on the device, and how to view the storage. What a saved-tensor hook
// holds.
class SavedTensor {
 public:
  // On the forward's thread, between Begin and End (or inside Run).
  static SavedTensor Pack(Offloader* offloader, const at::Tensor& tensor);
  // The tensor again, bit for bit, on its device; waits for its copy
  // back (prefetched by then, as a rule). Fails (c10::Error) when that
  // copy failed.
  at::Tensor Unpack() const;

 private:
  std::shared_ptr<OffloadedStorage> record_;
  at::Tensor kept_;
  at::TensorOptions options_;
  std::vector<int64_t> sizes_, strides_;
  int64_t offset_ = 0;
};

// The tensors one block offloaded. Shared by its saved tensors' hooks.
class OffloadGroup {
 public:
  // Starts copying every storage of the group back (those not already on
  // their way) and lets go of them. Returns at once.
  void Prefetch();
  // Waits until every copy to host of the group has landed (a failed copy
  // fails the backward that needs it, not this).
  void WaitCopiesOut() const;

 private:
  friend class Offloader;
  std::vector<std::shared_ptr<OffloadedStorage>> storages_;
};

// Offloads the blocks of one forward pass. Not thread-safe: one forward at
// a time; the backward may run on other threads.
class Offloader {
 public:
  // `engine` must outlive every tensor this offloader saved.
  explicit Offloader(kernels::CopyEngine* engine, OffloadOptions options = {});
  ~Offloader();

  // Runs block(inputs) with grad mode as it is, sending what autograd
  // saves to host, except the storages of the inputs and of `resident`
  // (the block's parameters and buffers: they stay on the device whatever
  // the plan). `group` receives the block's offloaded tensors (for
  // PrefetchOnBackward). With `inputs_stay` false the inputs may go too:
  // RECOMPUTE_OFFLOAD runs a checkpointed block so, its checkpoint (the
  // inputs it saves) sent to host, with the side inputs in `resident`.
  Tensors Run(const BlockFunction& block, const Tensors& inputs,
              const std::vector<at::Tensor>& resident,
              std::shared_ptr<OffloadGroup>* group, bool inputs_stay = true);

  // Run in two halves, for a runtime that installs the hooks itself
  // (Python): Begin starts a block whose `stays` (its inputs, parameters
  // and buffers) stay on the device; End ends it, given its outputs (a
  // saved output is read from the device, where the next block holds it),
  // and returns its group.
  void Begin(const std::vector<at::Tensor>& stays);
  std::shared_ptr<OffloadGroup> End(const std::vector<at::Tensor>& outputs);

  // Returns `x` (an output of the block above the offloaded one), through
  // an autograd node whose backward, which runs as the backward of that
  // block begins, prefetches `group`. With several outputs, each goes
  // through one such node: the first gradient to arrive prefetches.
  static at::Tensor PrefetchOnBackward(const at::Tensor& x,
                                       std::shared_ptr<OffloadGroup> group);

  // Waits until every copy to host of this pass has landed (and let go of
  // its device memory): the end of forward, where the memory model has
  // backward begin (plan.h). A failed copy fails the backward that needs
  // it, not this.
  void WaitCopiesOut() const;

  // Pack hook (on the forward's thread): the record of `tensor` under the
  // current Run, or null when it stays on the device.
  std::shared_ptr<OffloadedStorage> Pack(const at::Tensor& tensor);

 private:
  kernels::CopyEngine* engine_;
  OffloadOptions options_;
  // Of the block running now: its inputs' and its parameters' storages.
  std::unordered_set<const void*> stays_;
  std::shared_ptr<OffloadGroup> group_;  // of the block running now
  // Every storage offloaded in this pass, so each moves once.
  std::unordered_map<const void*, std::weak_ptr<OffloadedStorage>> moved_;
};

// Runs block(inputs) with grad mode as it is, moving nothing, and returns
// its outputs; `*transfer_bytes` receives what Offloader::Run would have
// sent to host for it: the storages autograd saved, each once, less those
// of `resident`, the inputs, the outputs and those under
// options.min_bytes. A storage that two blocks save counts for each (Run
// moves it once). For the collector: a COLLECT step measures it as it runs.
Tensors MeasureTransfer(const BlockFunction& block, const Tensors& inputs,
                        const std::vector<at::Tensor>& resident,
                        const OffloadOptions& options,
                        int64_t* transfer_bytes);

// The copy engine for tensors on `device`: the CPU reference engine on the
// CPU; on a CUDA device (in a --config=cuda build) the CUDA engine
// (kernels/cuda_copy_engine.h), ordered after LibTorch's current stream on
// the thread that offloads or prefetches. INVALID_ARGUMENT for any other
// device, for CUDA in a build without it, and for an emulated link
// (options.link_bytes_per_s) on a GPU.
absl::StatusOr<std::unique_ptr<kernels::CopyEngine>> NewCopyEngine(
    const c10::Device& device, const kernels::CopyEngineOptions& options = {});

}  // namespace remat

#endif  // REMAT_CLIENT_OFFLOAD_H_
