// One direction of a copy engine (CPU and CUDA): a first-in-first-out
// queue of copies run by a worker thread of its own. Each copy waits for
// the copy it depends on, runs (the engine's copy function), calls its
// "landed" callback, then completes its event (CopyEngine's contract).
//
// Thread safety: every method may be called from any thread.
#ifndef REMAT_KERNELS_COPY_QUEUE_H_
#define REMAT_KERNELS_COPY_QUEUE_H_

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

#include "absl/status/status.h"
#include "kernels/copy_engine.h"

namespace remat::kernels {

struct CopyQueueStats {
  int64_t copied_bytes = 0;  // by copies that succeeded
  int64_t failed = 0;
  int64_t pending = 0;  // queued or running
};

class CopyQueue {
 public:
  // `thread_init` (may be null) runs first on the worker thread (CUDA:
  // selects the device).
  explicit CopyQueue(std::function<void()> thread_init = nullptr);
  // Finishes every queued copy, then stops.
  ~CopyQueue();

  // Queues `copy`, which moves `bytes` from `src` to `dst` and returns how
  // that went, to run once `after` is done and the copies before it are.
  // A null `src` or `dst`, or bytes < 0, fails at once without running it.
  CopyEvent Push(const void* src, const void* dst, int64_t bytes,
                 std::function<absl::Status()> copy,
                 std::function<void()> landed, CopyEvent after);

  CopyQueueStats stats() const;

 private:
  struct Task {
    int64_t bytes = 0;
    std::function<absl::Status()> copy;
    std::function<void()> landed;
    CopyEvent after;
    CopyEvent done;  // completed when the copy is over
  };

  void Run(const std::function<void()>& thread_init);
  void Finish(Task* task, absl::Status status);

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Task> tasks_;
  CopyQueueStats stats_;
  bool stop_ = false;
  std::thread worker_;  // last: starts once the rest is built
};

// An engine's statistics from its pool's and its two queues'.
CopyEngineStats EngineStats(const HostPoolStats& pool,
                            const CopyQueueStats& to_host,
                            const CopyQueueStats& to_device);

}  // namespace remat::kernels

#endif  // REMAT_KERNELS_COPY_QUEUE_H_
