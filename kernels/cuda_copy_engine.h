// The CUDA copy engine: the host pool in pinned memory (cudaHostAlloc
// chunks, allocated as the pool grows and never on a warm step's path), a
// copy stream per direction (non-blocking, so neither waits for the legacy
// default stream), and CUDA events.
//
// Ordering, which is what makes an offload safe under a caching allocator:
//   * A copy to host starts after everything the compute stream had queued
//     when CopyToHost was called (an event recorded there; the copy stream
//     waits on it), so it reads the finished activation. Its event, and its
//     "landed" callback, come only once the copy has completed on the
//     device (the engine's thread synchronises on the copy's CUDA event):
//     a caller that holds the source tensor until then (client/offload.cc
//     does, in the callback) lets the caching allocator reuse the memory
//     only after the copy stream is done reading it.
//   * A copy to device starts after its `after` event and after everything
//     the compute stream had queued when CopyToDevice was called (so memory
//     the allocator just handed out for it is no longer in use there); its
//     event completes once the bytes are on the device, so compute that
//     waits for the event never reads a buffer still in flight.
//
// Built only with --config=cuda (REMAT_WITH_CUDA); no LibTorch: the caller
// says which stream is its compute stream.
#ifndef REMAT_KERNELS_CUDA_COPY_ENGINE_H_
#define REMAT_KERNELS_CUDA_COPY_ENGINE_H_

#include <functional>
#include <memory>

#include "absl/status/statusor.h"
#include "kernels/copy_engine.h"

namespace remat::kernels {

struct CudaCopyEngineOptions {
  // The pool's sizes. link_bytes_per_s must be 0: the link is real.
  CopyEngineOptions engine;
  int device_index = 0;
  // The calling thread's compute stream (a cudaStream_t), which writes what
  // CopyToHost reads and reads what CopyToDevice writes: LibTorch's current
  // stream (client/copy_engines.h). Null, or returning null: the legacy
  // default stream.
  std::function<void*()> compute_stream;
};

// INVALID_ARGUMENT for a link cap or a device that is not there; INTERNAL
// (with CUDA's message) when the streams cannot be made.
absl::StatusOr<std::unique_ptr<CopyEngine>> NewCudaCopyEngine(
    const CudaCopyEngineOptions& options);

}  // namespace remat::kernels

#endif  // REMAT_KERNELS_CUDA_COPY_ENGINE_H_
