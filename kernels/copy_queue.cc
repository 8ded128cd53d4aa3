#include "kernels/copy_queue.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace remat::kernels {

CopyQueue::CopyQueue(std::function<void()> thread_init)
    : worker_([this, init = std::move(thread_init)] { Run(init); }) {}

CopyQueue::~CopyQueue() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  worker_.join();
}

CopyQueueStats CopyQueue::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

CopyEvent CopyQueue::Push(const void* src, const void* dst, int64_t bytes,
                          std::function<absl::Status()> copy,
                          std::function<void()> landed, CopyEvent after) {
  Task task{bytes, std::move(copy), std::move(landed), std::move(after),
            CopyEvent::Pending()};
  CopyEvent event = task.done;
  if (src == nullptr || dst == nullptr || bytes < 0) {
    {
      std::lock_guard lock(mu_);
      ++stats_.pending;  // Finish counts it down
    }
    Finish(&task,
           absl::InvalidArgumentError(absl::StrCat(
               "copy of ", bytes, " bytes", src == nullptr ? " (no source)" : "",
               dst == nullptr ? " (no destination)" : "",
               ": needs a source, a destination and bytes >= 0")));
    return event;
  }
  {
    std::lock_guard lock(mu_);
    tasks_.push_back(std::move(task));
    ++stats_.pending;
  }
  cv_.notify_one();
  return event;
}

void CopyQueue::Run(const std::function<void()>& thread_init) {
  if (thread_init) thread_init();
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
      Finish(&task, absl::Status(s.code(),
                                 absl::StrCat("the copy this one waited for "
                                              "failed: ", s.message())));
      continue;
    }
    absl::Status s = task.copy();
    if (s.ok() && task.landed) task.landed();
    Finish(&task, std::move(s));
  }
}

void CopyQueue::Finish(Task* task, absl::Status status) {
  // What the callbacks held goes here, before the event completes.
  task->landed = nullptr;
  task->copy = nullptr;
  {
    std::lock_guard lock(mu_);
    --stats_.pending;
    if (status.ok()) {
      stats_.copied_bytes += task->bytes;
    } else {
      ++stats_.failed;
    }
  }
  task->done.Complete(std::move(status));
}

CopyEngineStats EngineStats(const HostPoolStats& pool,
                            const CopyQueueStats& to_host,
                            const CopyQueueStats& to_device) {
  CopyEngineStats s;
  s.pool = pool;
  s.bytes_to_host = to_host.copied_bytes;
  s.bytes_to_device = to_device.copied_bytes;
  s.failed_copies = to_host.failed + to_device.failed;
  s.pending_copies = to_host.pending + to_device.pending;
  return s;
}

}  // namespace remat::kernels
