#include "planner/service/async_server.h"

namespace remat {

void ServingQueue::Run() {
  void* tag = nullptr;
  bool ok = false;
  while (cq_->Next(&tag, &ok)) static_cast<CompletionTag*>(tag)->Complete(ok);
}

}  // namespace remat
