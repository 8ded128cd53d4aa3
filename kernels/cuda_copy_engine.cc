#include "kernels/cuda_copy_engine.h"

#include <cuda_runtime_api.h>

#include <mutex>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/copy_queue.h"

namespace remat::kernels {
namespace {

absl::Status CudaStatus(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return absl::OkStatus();
  return absl::InternalError(absl::StrCat("CUDA ", what, ": ",
                                          cudaGetErrorName(e), ": ",
                                          cudaGetErrorString(e)));
}

// Makes `device` current on this thread for the scope.
class DeviceScope {
 public:
  explicit DeviceScope(int device) {
    if (cudaGetDevice(&previous_) != cudaSuccess || previous_ == device) {
      previous_ = -1;
      return;
    }
    cudaSetDevice(device);
  }
  ~DeviceScope() {
    if (previous_ >= 0) cudaSetDevice(previous_);
  }

 private:
  int previous_ = -1;
};

// CUDA events of one kind on one device, reused: a step creates none once
// warm.
class EventPool {
 public:
  EventPool(int device, unsigned flags) : device_(device), flags_(flags) {}
  ~EventPool() {
    for (cudaEvent_t e : free_) cudaEventDestroy(e);
  }

  absl::StatusOr<cudaEvent_t> Take() {
    {
      std::lock_guard lock(mu_);
      if (!free_.empty()) {
        cudaEvent_t e = free_.back();
        free_.pop_back();
        return e;
      }
    }
    DeviceScope scope(device_);
    cudaEvent_t e = nullptr;
    if (absl::Status s = CudaStatus(cudaEventCreateWithFlags(&e, flags_),
                                    "cudaEventCreateWithFlags");
        !s.ok()) {
      return s;
    }
    return e;
  }

  void Give(cudaEvent_t e) {
    std::lock_guard lock(mu_);
    free_.push_back(e);
  }

 private:
  const int device_;
  const unsigned flags_;
  std::mutex mu_;
  std::vector<cudaEvent_t> free_;
};

// An event taken from a pool, given back when the last copy of it goes
// (also when the copy that held it never ran).
using PooledEvent = std::shared_ptr<CUevent_st>;

absl::StatusOr<PooledEvent> TakeEvent(EventPool* pool) {
  absl::StatusOr<cudaEvent_t> e = pool->Take();
  if (!e.ok()) return e.status();
  return PooledEvent(*e, [pool](cudaEvent_t ev) { pool->Give(ev); });
}

class CudaCopyEngine final : public CopyEngine {
 public:
  CudaCopyEngine(const CudaCopyEngineOptions& options, cudaStream_t to_host,
                 cudaStream_t to_device)
      : device_(options.device_index),
        compute_stream_(options.compute_stream),
        pool_(HostPool::Create(PinnedChunks(), options.engine.pool)),
        streams_{to_host, to_device},
        ready_events_(device_, cudaEventDisableTiming),
        // The engine's threads sleep while a copy runs rather than spin.
        done_events_(device_, cudaEventDisableTiming | cudaEventBlockingSync),
        to_host_([d = device_] { cudaSetDevice(d); }),
        to_device_([d = device_] { cudaSetDevice(d); }) {}

  ~CudaCopyEngine() override {
    // The queues finish their copies first (declared last), then:
    for (cudaStream_t s : streams_) cudaStreamDestroy(s);
  }

  const char* name() const override { return "cuda"; }

  absl::StatusOr<HostBuffer> AllocateHost(int64_t bytes) override {
    return pool_->Allocate(bytes);
  }

  CopyEvent CopyToHost(const void* src, HostBuffer* dst,
                       std::function<void()> landed) override {
    void* to = dst != nullptr ? dst->data() : nullptr;
    const int64_t bytes = dst != nullptr ? dst->bytes() : 0;
    return to_host_.Push(src, to, bytes, Copy(src, to, bytes, streams_[0]),
                         std::move(landed), CopyEvent());
  }

  CopyEvent CopyToDevice(const HostBuffer& src, void* dst,
                         const CopyEvent& after,
                         std::function<void()> landed) override {
    return to_device_.Push(src.data(), dst, src.bytes(),
                           Copy(src.data(), dst, src.bytes(), streams_[1]),
                           std::move(landed), after);
  }

  CopyEngineStats stats() const override {
    return EngineStats(pool_->stats(), to_host_.stats(), to_device_.stats());
  }

 private:
  static ChunkSource PinnedChunks() {
    ChunkSource source;
    // Portable: usable as pinned memory from every device's context.
    source.allocate = [](int64_t bytes) -> void* {
      void* p = nullptr;
      if (cudaHostAlloc(&p, static_cast<size_t>(bytes),
                        cudaHostAllocPortable) != cudaSuccess) {
        return nullptr;
      }
      return p;
    };
    source.release = [](void* p) { cudaFreeHost(p); };
    return source;
  }

  // On the caller's thread: an event after the compute stream's queued
  // work, and the copy that waits for it on `stream` (run on the engine's
  // thread, returning once the bytes have landed).
  std::function<absl::Status()> Copy(const void* src, void* dst,
                                     int64_t bytes, cudaStream_t stream) {
    absl::StatusOr<PooledEvent> ready = TakeEvent(&ready_events_);
    if (ready.ok()) {
      DeviceScope scope(device_);
      cudaStream_t compute = compute_stream_
                                 ? static_cast<cudaStream_t>(compute_stream_())
                                 : nullptr;
      if (absl::Status s = CudaStatus(cudaEventRecord(ready->get(), compute),
                                      "cudaEventRecord on the compute stream");
          !s.ok()) {
        ready = s;
      }
    }
    if (!ready.ok()) {
      return [s = ready.status()] { return s; };
    }
    return [this, src, dst, bytes, stream, ready = *std::move(ready)] {
      absl::StatusOr<PooledEvent> done = TakeEvent(&done_events_);
      if (!done.ok()) return done.status();
      absl::Status s = CudaStatus(cudaStreamWaitEvent(stream, ready.get(), 0),
                                  "cudaStreamWaitEvent");
      if (s.ok() && bytes > 0) {
        s = CudaStatus(cudaMemcpyAsync(dst, src, static_cast<size_t>(bytes),
                                       cudaMemcpyDefault, stream),
                       "cudaMemcpyAsync");
      }
      if (s.ok()) {
        s = CudaStatus(cudaEventRecord(done->get(), stream), "cudaEventRecord");
      }
      if (s.ok()) {
        s = CudaStatus(cudaEventSynchronize(done->get()),
                       "the copy (cudaEventSynchronize)");
      }
      return s;
    };
  }

  const int device_;
  const std::function<void*()> compute_stream_;
  std::shared_ptr<HostPool> pool_;
  cudaStream_t streams_[2];  // to host, to device
  EventPool ready_events_;
  EventPool done_events_;
  // Declared last: destroyed first, finishing their copies while the
  // streams, events and pool are still there.
  CopyQueue to_host_;
  CopyQueue to_device_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<CopyEngine>> NewCudaCopyEngine(
    const CudaCopyEngineOptions& options) {
  if (options.engine.link_bytes_per_s != 0) {
    return absl::InvalidArgumentError(
        "CUDA copy engine: link_bytes_per_s emulates a link on the CPU; "
        "on a GPU the link is real: leave it 0");
  }
  int count = 0;
  if (absl::Status s = CudaStatus(cudaGetDeviceCount(&count),
                                  "cudaGetDeviceCount");
      !s.ok()) {
    return s;
  }
  if (options.device_index < 0 || options.device_index >= count) {
    return absl::InvalidArgumentError(
        absl::StrCat("CUDA copy engine: device_index ", options.device_index,
                     " is not one of this machine's ", count, " GPUs"));
  }
  DeviceScope scope(options.device_index);
  cudaStream_t streams[2] = {nullptr, nullptr};
  for (cudaStream_t& s : streams) {
    if (absl::Status st = CudaStatus(
            cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking),
            "cudaStreamCreateWithFlags");
        !st.ok()) {
      for (cudaStream_t made : streams) {
        if (made != nullptr) cudaStreamDestroy(made);
      }
      return st;
    }
  }
  return std::unique_ptr<CopyEngine>(
      new CudaCopyEngine(options, streams[0], streams[1]));
}

}  // namespace remat::kernels
