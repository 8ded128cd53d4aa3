#include "planner/service/async_server.h"

namespace remat {

void RunCompletionQueue(grpc::ServerCompletionQueue* cq) {
  void* tag = nullptr;
  bool ok = false;
  while (cq->Next(&tag, &ok)) static_cast<CompletionTag*>(tag)->Complete(ok);
}

void BlockingTag::Complete(bool ok) {
  absl::MutexLock lock(&mu_);
  ok_ = ok;
  done_ = true;
}

bool BlockingTag::Wait() {
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(&done_));
  done_ = false;
  return ok_;
}

}  // namespace remat
