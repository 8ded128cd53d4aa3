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
#include <chrono>
#include <cstring>
#include <deque>
#include <thread>

#include "absl/strings/str_cat.h"
#include "kernels/copy_engine.h"

namespace remat::kernels {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int64_t kPieceBytes = int64_t{1} << 20;

class CopyQueue {
 public:
  CopyQueue(double bytes_per_s, int64_t* copied_bytes, int64_t* failed,
            std::mutex* stats_mu)
      : bytes_per_s_(bytes_per_s),
        copied_bytes_(copied_bytes),
        failed_(failed),
        stats_mu_(stats_mu),
        worker_([this] { Run(); }) {}

  // Finishes every queued copy, then stops.
  ~CopyQueue() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    worker_.join();
  }

  // Copies queued or running.
  int64_t pending() const {
    std::lock_guard lock(mu_);
    return pending_;
  }

  CopyEvent Push(const void* src, void* dst, int64_t bytes,
                 std::function<void()> landed, CopyEvent after) {
    CopyEvent event = CopyEvent::Pending();
    if (src == nullptr || dst == nullptr || bytes < 0) {
      {
        std::lock_guard lock(*stats_mu_);
        ++*failed_;
      }
      event.Complete(
          absl::InvalidArgumentError(absl::StrCat(
              "copy of ", bytes, " bytes", src == nullptr ? " (no source)" : "",
              dst == nullptr ? " (no destination)" : "",
              ": needs a source, a destination and bytes >= 0")));
      return event;
    }
    {
      std::lock_guard lock(mu_);
      tasks_.push_back({static_cast<const char*>(src), static_cast<char*>(dst),
                        bytes, std::move(landed), std::move(after), event});
      ++pending_;
    }
    cv_.notify_one();
    return event;
  }

 private:
  struct Task {
    const char* src;
    char* dst;
    int64_t bytes;
    std::function<void()> landed;
    CopyEvent after;
    CopyEvent done;  // completed when the copy is over
  };

  void Run() {
    for (;;) {
      Task task;
      {
        std::unique_lock lock(mu_);
        cv_.wait(lock, [&] { return stop_ || !tasks_.empty(); });
        if (tasks_.empty()) return;  // stopping, nothing left
        task = std::move(tasks_.front());
        tasks_.pop_front();
      }
      if (absl::Status s = task.after.Wait(); !s.ok()) {
        Fail(&task, absl::Status(s.code(),
                                 absl::StrCat("the copy this one waited for "
                                              "failed: ", s.message())));
        continue;
      }
      const Clock::time_point start = Clock::now();
      for (int64_t done = 0; done < task.bytes;) {
        const int64_t piece = std::min(kPieceBytes, task.bytes - done);
        std::memcpy(task.dst + done, task.src + done,
                    static_cast<size_t>(piece));
        done += piece;
        if (bytes_per_s_ > 0) {
          std::this_thread::sleep_until(
              start + std::chrono::duration_cast<Clock::duration>(
                          std::chrono::duration<double>(
                              static_cast<double>(done) / bytes_per_s_)));
        }
      }
      {
        std::lock_guard lock(*stats_mu_);
        *copied_bytes_ += task.bytes;
      }
      if (task.landed) task.landed();
      task.landed = nullptr;  // what it held goes here, not later
      Done();
      task.done.Complete(absl::OkStatus());
    }
  }

  void Done() {
    std::lock_guard lock(mu_);
    --pending_;
  }

  void Fail(Task* task, absl::Status status) {
    {
      std::lock_guard lock(*stats_mu_);
      ++*failed_;
    }
    task->landed = nullptr;
    Done();
    task->done.Complete(std::move(status));
  }

  const double bytes_per_s_;
  int64_t* const copied_bytes_;
  int64_t* const failed_;
  std::mutex* const stats_mu_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Task> tasks_;
  int64_t pending_ = 0;  // queued or running
  bool stop_ = false;
  std::thread worker_;  // last: starts once the rest is built
};

class CpuCopyEngine final : public CopyEngine {
 public:
  explicit CpuCopyEngine(const CopyEngineOptions& options)
      : pool_(HostPool::Create(HeapChunks(), options.pool)),
        to_host_(options.link_bytes_per_s, &stats_.bytes_to_host,
                 &stats_.failed_copies, &stats_mu_),
        to_device_(options.link_bytes_per_s, &stats_.bytes_to_device,
                   &stats_.failed_copies, &stats_mu_) {}

  const char* name() const override { return "cpu"; }

  absl::StatusOr<HostBuffer> AllocateHost(int64_t bytes) override {
    return pool_->Allocate(bytes);
  }

  CopyEvent CopyToHost(const void* src, HostBuffer* dst,
                       std::function<void()> landed) override {
    return to_host_.Push(src, dst != nullptr ? dst->data() : nullptr,
                         dst != nullptr ? dst->bytes() : 0, std::move(landed),
                         CopyEvent());
  }

  CopyEvent CopyToDevice(const HostBuffer& src, void* dst,
                         const CopyEvent& after,
                         std::function<void()> landed) override {
    return to_device_.Push(src.data(), dst, src.bytes(), std::move(landed),
                           after);
  }

  CopyEngineStats stats() const override {
    CopyEngineStats s;
    {
      std::lock_guard lock(stats_mu_);
      s = stats_;
    }
    s.pool = pool_->stats();
    s.pending_copies = to_host_.pending() + to_device_.pending();
    return s;
  }

 private:
  std::shared_ptr<HostPool> pool_;
  mutable std::mutex stats_mu_;
  CopyEngineStats stats_;  // byte and failure counts, under stats_mu_
  // Declared last: destroyed first, finishing their copies while the pool
  // and the counters are still there.
  CopyQueue to_host_;
  CopyQueue to_device_;
};

}  // namespace

std::unique_ptr<CopyEngine> NewCpuCopyEngine(const CopyEngineOptions& options) {
  return std::make_unique<CpuCopyEngine>(options);
}

}  // namespace remat::kernels
