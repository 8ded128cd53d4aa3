#include "kernels/copy_engine.h"

namespace remat::kernels {

bool CopyEvent::done() const {
  if (state_ == nullptr) return true;
  std::lock_guard lock(state_->mu);
  return state_->done;
}

absl::Status CopyEvent::Wait() const {
  if (state_ == nullptr) return absl::OkStatus();
  std::unique_lock lock(state_->mu);
  state_->cv.wait(lock, [&] { return state_->done; });
  return state_->status;
}

void CopyEvent::Complete(State* state, absl::Status status) {
  {
    std::lock_guard lock(state->mu);
    state->done = true;
    state->status = std::move(status);
  }
  state->cv.notify_all();
}

}  // namespace remat::kernels
