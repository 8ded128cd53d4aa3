// What blocks pass to each other, and how checkpoint and offload call a
// block: shared by client/checkpoint.h, client/offload.h and the runtime.
#ifndef REMAT_CLIENT_BLOCK_FUNCTION_H_
#define REMAT_CLIENT_BLOCK_FUNCTION_H_

#include <functional>
#include <vector>

#include <ATen/Tensor.h>

namespace remat {

// A block's inputs (the previous block's outputs), its side inputs (what
// every block of a step reads, e.g. an attention mask), or its outputs.
using Tensors = std::vector<at::Tensor>;

// A block as Checkpoint and Offloader::Run call it: all its inputs in one
// list (the runtime puts the side inputs last), returning its outputs.
using BlockFunction = std::function<Tensors(const Tensors&)>;

// Bytes of the storages of `tensors`, each once; with `needing_grad`, of
// those that require grad alone (what the gradients of a block's inputs
// take: the memory model's x_i).
int64_t StorageBytes(const Tensors& tensors, bool needing_grad = false);

}  // namespace remat

#endif  // REMAT_CLIENT_BLOCK_FUNCTION_H_
