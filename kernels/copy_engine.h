// The copy engine: moves activations between device memory and a host pool
// on queues of its own, so that copies overlap with compute (DELTA's
// swapping). One queue per direction, first in first out; every copy has
// an event the runtime waits on before it touches the copy's destination
// (or frees its source).
//
// Two implementations: the CPU reference (NewCpuCopyEngine, here: the
// "device" is ordinary memory, copies run on a worker thread per
// direction, optionally capped at an emulated link bandwidth) and CUDA
// (kernels/cuda_copy_engine.h: pinned pool, copy streams, CUDA events).
//
// Thread safety: every method may be called from any thread.
#ifndef REMAT_KERNELS_COPY_ENGINE_H_
#define REMAT_KERNELS_COPY_ENGINE_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/host_pool.h"

namespace remat::kernels {

// The completion of one queued copy. Copyable; an empty event is complete.
class CopyEvent {
 public:
  CopyEvent() = default;
  CopyEvent(const CopyEvent& other);
  CopyEvent& operator=(const CopyEvent& other);
  CopyEvent(CopyEvent&& other) noexcept;
  CopyEvent& operator=(CopyEvent&& other) noexcept;
  ~CopyEvent();

  // Whether the copy has finished (successfully or not).
  bool done() const;
  // Blocks until the copy has finished; its status.
  absl::Status Wait() const;

  // For implementations: a pending event, and completing it (once).
  static CopyEvent Pending();
  void Complete(absl::Status status) const;

 private:
  // Shared by the copies of an event. Counted by hand with acquire/release
  // atomics rather than by std::shared_ptr, whose last release on another
  // thread ThreadSanitizer cannot follow in this libstdc++.
  struct State {
    std::atomic<int> refs{1};
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    absl::Status status;
  };
  State* state_ = nullptr;
};

struct CopyEngineOptions {
  HostPoolOptions pool;
  // CPU engine only: the bandwidth each direction is held to, emulating a
  // host link (PCIe) on a machine that has none; 0 copies at memory speed.
  double link_bytes_per_s = 0;
};

struct CopyEngineStats {
  HostPoolStats pool;
  int64_t bytes_to_host = 0;    // completed copies, per direction
  int64_t bytes_to_device = 0;
  int64_t failed_copies = 0;
  int64_t pending_copies = 0;  // queued or running, both directions
};

class CopyEngine {
 public:
  virtual ~CopyEngine() = default;

  // "cpu" or "cuda".
  virtual const char* name() const = 0;

  // Host memory from the engine's pool (HostPool::Allocate).
  virtual absl::StatusOr<HostBuffer> AllocateHost(int64_t bytes) = 0;

  // Queues a copy of dst->bytes() bytes from device memory `src` into
  // `dst`. `src` must stay allocated and unchanged, and `dst` alive, until
  // the copy is over. `landed` (may be null) is called once the copy has
  // landed, before the event completes, on the engine's thread, and
  // destroyed then (also when the copy failed): what it holds lives as
  // long as the copy, which is how a caller keeps both ends alive and lets
  // go of the device memory in time. It must not block.
  virtual CopyEvent CopyToHost(const void* src, HostBuffer* dst,
                               std::function<void()> landed = nullptr) = 0;
  // Queues a copy of src.bytes() bytes from `src` into device memory `dst`
  // that starts once `after` is done (the copy that filled `src`) and the
  // copies queued before it are. Read `dst` only once the event is done;
  // a failed `after` fails this copy too. `landed` as for CopyToHost.
  virtual CopyEvent CopyToDevice(const HostBuffer& src, void* dst,
                                 const CopyEvent& after = CopyEvent(),
                                 std::function<void()> landed = nullptr) = 0;

  virtual CopyEngineStats stats() const = 0;
};

// The host link's bandwidth as one engine moves data, bytes per second.
struct LinkBandwidth {
  double d2h_bytes_per_s = 0;
  double h2d_bytes_per_s = 0;
};

// Times one copy of `bytes` (> 0) from device memory `device` to a host
// buffer of the engine's pool, then one back into `device` (its contents
// come back unchanged), each from its queueing to its event: what an
// offloaded tensor sees, queue latency included. Copies already queued
// count against it, so measure with the engine idle (after a step).
// Errors: the pool cannot hold `bytes`, or a copy failed. A copy shorter
// than the clock resolves counts as one nanosecond.
absl::StatusOr<LinkBandwidth> MeasureLink(CopyEngine* engine, void* device,
                                          int64_t bytes);

// The CPU reference engine.
std::unique_ptr<CopyEngine> NewCpuCopyEngine(
    const CopyEngineOptions& options = {});

}  // namespace remat::kernels

#endif  // REMAT_KERNELS_COPY_ENGINE_H_
