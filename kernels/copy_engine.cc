#include "kernels/copy_engine.h"

#include <utility>

namespace remat::kernels {

CopyEvent::CopyEvent(const CopyEvent& other) : state_(other.state_) {
  if (state_ != nullptr) state_->refs.fetch_add(1, std::memory_order_relaxed);
}

CopyEvent& CopyEvent::operator=(const CopyEvent& other) {
  CopyEvent copy(other);
  std::swap(state_, copy.state_);
  return *this;
}

CopyEvent::CopyEvent(CopyEvent&& other) noexcept
    : state_(std::exchange(other.state_, nullptr)) {}

CopyEvent& CopyEvent::operator=(CopyEvent&& other) noexcept {
  CopyEvent moved(std::move(other));
  std::swap(state_, moved.state_);
  return *this;
}

CopyEvent::~CopyEvent() {
  if (state_ != nullptr &&
      state_->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    delete state_;
  }
}

CopyEvent CopyEvent::Pending() {
  CopyEvent event;
  event.state_ = new State();
  return event;
}

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

void CopyEvent::Complete(absl::Status status) const {
  {
    std::lock_guard lock(state_->mu);
    state_->done = true;
    state_->status = std::move(status);
  }
  state_->cv.notify_all();
}

}  // namespace remat::kernels
