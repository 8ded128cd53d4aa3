#include "kernels/copy_engine.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"

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
  if (state_->status.ok()) return absl::OkStatus();
  // A copy of its own, not one sharing the stored status's reference-counted
  // text: that count lives in Debian's uninstrumented libabsl_status, so
  // ThreadSanitizer would see the copy thread free text this thread read,
  // without the atomic decrement that orders the two.
  return absl::Status(state_->status.code(), state_->status.message());
}

void CopyEvent::Complete(absl::Status status) const {
  {
    std::lock_guard lock(state_->mu);
    state_->done = true;
    state_->status = std::move(status);
  }
  state_->cv.notify_all();
}

absl::StatusOr<LinkBandwidth> MeasureLink(CopyEngine* engine, void* device,
                                          int64_t bytes) {
  if (bytes <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("MeasureLink: bytes is ", bytes, "; it must be > 0"));
  }
  absl::StatusOr<HostBuffer> host = engine->AllocateHost(bytes);
  if (!host.ok()) return host.status();
  using Clock = std::chrono::steady_clock;
  auto rate = [bytes](Clock::duration d) {
    const double s = std::max(std::chrono::duration<double>(d).count(), 1e-9);
    return static_cast<double>(bytes) / s;
  };
  LinkBandwidth link;
  const Clock::time_point t0 = Clock::now();
  if (auto s = engine->CopyToHost(device, &*host).Wait(); !s.ok()) return s;
  const Clock::time_point t1 = Clock::now();
  if (auto s = engine->CopyToDevice(*host, device).Wait(); !s.ok()) return s;
  link.d2h_bytes_per_s = rate(t1 - t0);
  link.h2d_bytes_per_s = rate(Clock::now() - t1);
  return link;
}

}  // namespace remat::kernels
