// The CPU reference copy engine. The "device" is ordinary memory (what
// LibTorch's CPU allocator hands out, which the CPU memory tracker counts);
// the host pool lives outside that allocator (HeapChunks), so offloaded
// bytes leave the tracked footprint as they would leave a GPU's. One
// worker thread per direction copies first in first out while the caller
// computes.
//
// Link emulation: with link_bytes_per_s set, a copy of B bytes takes at
// least B / link_bytes_per_s (copied in 1 MiB pieces, each waiting for its
// place in that schedule), per direction, as on a full-duplex PCIe link.
// It emulates the link's speed only, not its effect on compute.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>

#include "kernels/copy_engine.h"
#include "kernels/copy_queue.h"

namespace remat::kernels {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int64_t kPieceBytes = int64_t{1} << 20;

// Copies `bytes` from `src` to `dst`, held to `bytes_per_s` when > 0.
absl::Status CappedCopy(const void* src, void* dst, int64_t bytes,
                        double bytes_per_s) {
  const Clock::time_point start = Clock::now();
  for (int64_t done = 0; done < bytes;) {
    const int64_t piece = std::min(kPieceBytes, bytes - done);
    std::memcpy(static_cast<char*>(dst) + done,
                static_cast<const char*>(src) + done,
                static_cast<size_t>(piece));
    done += piece;
    if (bytes_per_s > 0) {
      std::this_thread::sleep_until(
          start + std::chrono::duration_cast<Clock::duration>(
                      std::chrono::duration<double>(
                          static_cast<double>(done) / bytes_per_s)));
    }
  }
  return absl::OkStatus();
}

class CpuCopyEngine final : public CopyEngine {
 public:
  explicit CpuCopyEngine(const CopyEngineOptions& options)
      : bytes_per_s_(options.link_bytes_per_s),
        pool_(HostPool::Create(HeapChunks(), options.pool)) {}

  const char* name() const override { return "cpu"; }

  absl::StatusOr<HostBuffer> AllocateHost(int64_t bytes) override {
    return pool_->Allocate(bytes);
  }

  CopyEvent CopyToHost(const void* src, HostBuffer* dst,
                       std::function<void()> landed) override {
    void* to = dst != nullptr ? dst->data() : nullptr;
    const int64_t bytes = dst != nullptr ? dst->bytes() : 0;
    return to_host_.Push(src, to, bytes, Copy(src, to, bytes),
                         std::move(landed), CopyEvent());
  }

  CopyEvent CopyToDevice(const HostBuffer& src, void* dst,
                         const CopyEvent& after,
                         std::function<void()> landed) override {
    return to_device_.Push(src.data(), dst, src.bytes(),
                           Copy(src.data(), dst, src.bytes()),
                           std::move(landed), after);
  }

  CopyEngineStats stats() const override {
    return EngineStats(pool_->stats(), to_host_.stats(), to_device_.stats());
  }

 private:
  std::function<absl::Status()> Copy(const void* src, void* dst,
                                     int64_t bytes) const {
    return [src, dst, bytes, rate = bytes_per_s_] {
      return CappedCopy(src, dst, bytes, rate);
    };
  }

  const double bytes_per_s_;
  std::shared_ptr<HostPool> pool_;
  // Declared last: destroyed first, finishing their copies while the pool
  // is still there.
  CopyQueue to_host_;
  CopyQueue to_device_;
};

}  // namespace

std::unique_ptr<CopyEngine> NewCpuCopyEngine(const CopyEngineOptions& options) {
  return std::make_unique<CpuCopyEngine>(options);
}

}  // namespace remat::kernels
