// A pool of host memory for offloaded activations: grown in large chunks up
// to a limit, reused across steps, so a step never allocates host memory on
// its path once the pool is warm (allocating pinned memory synchronises the
// device, which is what kills copy/compute overlap in other offloading
// tools). Chunks come from a ChunkSource: plain memory outside LibTorch's
// allocator for the CPU engine, pinned memory (cudaHostAlloc) for CUDA.
//
// Thread safety: every method may be called from any thread.
#ifndef REMAT_KERNELS_HOST_POOL_H_
#define REMAT_KERNELS_HOST_POOL_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "absl/status/statusor.h"

namespace remat::kernels {

// Allocates and frees whole chunks. allocate returns nullptr on failure.
struct ChunkSource {
  std::function<void*(int64_t bytes)> allocate;
  std::function<void(void* data)> release;
};

// Memory from the C heap: not seen by LibTorch's CPU allocator, so the CPU
// memory tracker (the CPU's "device" memory) does not count it.
ChunkSource HeapChunks();

struct HostPoolOptions {
  int64_t limit_bytes = int64_t{8} << 30;  // chunks never sum past this
  int64_t chunk_bytes = int64_t{64} << 20;  // the smallest chunk
};

struct HostPoolStats {
  int64_t reserved_bytes = 0;  // in chunks
  int64_t in_use_bytes = 0;    // in live buffers (rounded up)
  int64_t peak_in_use_bytes = 0;
  int64_t chunk_allocations = 0;  // a warm pool stops adding to this
};

class HostPool;

// Host memory from a pool, returned to it when destroyed. Move-only.
class HostBuffer {
 public:
  HostBuffer() = default;
  HostBuffer(HostBuffer&& other) noexcept;
  HostBuffer& operator=(HostBuffer&& other) noexcept;
  HostBuffer(const HostBuffer&) = delete;
  HostBuffer& operator=(const HostBuffer&) = delete;
  ~HostBuffer();

  void* data() const { return data_; }
  int64_t bytes() const { return bytes_; }

 private:
  friend class HostPool;
  HostBuffer(std::shared_ptr<HostPool> pool, void* data, int64_t bytes,
             int64_t rounded)
      : pool_(std::move(pool)), data_(data), bytes_(bytes), rounded_(rounded) {}
  void Reset();

  std::shared_ptr<HostPool> pool_;  // keeps the pool alive while in use
  void* data_ = nullptr;
  int64_t bytes_ = 0;
  int64_t rounded_ = 0;
};

class HostPool : public std::enable_shared_from_this<HostPool> {
 public:
  static std::shared_ptr<HostPool> Create(ChunkSource source,
                                          const HostPoolOptions& options);
  ~HostPool();

  // A buffer of at least `bytes` (> 0), 256-byte aligned: from free space
  // (best fit) or, when none fits, a new chunk of max(chunk_bytes, bytes).
  // RESOURCE_EXHAUSTED when that chunk would take the pool past its limit
  // (or the chunk source fails); INVALID_ARGUMENT for bytes <= 0.
  absl::StatusOr<HostBuffer> Allocate(int64_t bytes);

  HostPoolStats stats() const;

 private:
  friend class HostBuffer;
  HostPool(ChunkSource source, const HostPoolOptions& options)
      : source_(std::move(source)), options_(options) {}
  void Free(void* data, int64_t rounded);
  // Adds a free range, merging it with free neighbours in the same chunk.
  void AddFree(char* begin, int64_t bytes);
  void EraseFree(std::map<char*, int64_t>::iterator it);

  const ChunkSource source_;
  const HostPoolOptions options_;
  mutable std::mutex mu_;
  std::vector<std::pair<char*, int64_t>> chunks_;
  std::map<char*, int64_t> free_by_address_;      // begin -> bytes
  std::multimap<int64_t, char*> free_by_size_;    // bytes -> begin
  HostPoolStats stats_;
};

}  // namespace remat::kernels

#endif  // REMAT_KERNELS_HOST_POOL_H_
