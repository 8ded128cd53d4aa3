// A fixed set of threads running posted tasks in order of arrival.
//
// Thread safety: Post may be called from any thread, also from a task.
#ifndef REMAT_PLANNER_SERVICE_WORKER_POOL_H_
#define REMAT_PLANNER_SERVICE_WORKER_POOL_H_

#include <deque>
#include <functional>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"

namespace remat {

class WorkerPool {
 public:
  explicit WorkerPool(int threads);  // threads >= 1
  // Runs every task already posted, then joins the threads.
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  void Post(std::function<void()> task);
  // Blocks until no task is queued or running. Tasks posted meanwhile (by
  // other threads or by tasks) are waited for too; the pool keeps running.
  void Drain();

 private:
  void Run();

  absl::Mutex mu_;
  std::deque<std::function<void()>> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  int running_ ABSL_GUARDED_BY(mu_) = 0;  // tasks taken, not yet done
  std::vector<std::thread> threads_;
};

}  // namespace remat

#endif  // REMAT_PLANNER_SERVICE_WORKER_POOL_H_
