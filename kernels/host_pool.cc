#include "kernels/host_pool.h"

#include <algorithm>
#include <cstdlib>

#include "absl/strings/str_cat.h"

namespace remat::kernels {
namespace {

constexpr int64_t kAlignment = 256;

int64_t RoundUp(int64_t bytes) {
  return (bytes + kAlignment - 1) / kAlignment * kAlignment;
}

}  // namespace

ChunkSource HeapChunks() {
  return {[](int64_t bytes) -> void* {
            return std::aligned_alloc(kAlignment,
                                      static_cast<size_t>(RoundUp(bytes)));
          },
          [](void* data) { std::free(data); }};
}

HostBuffer::HostBuffer(HostBuffer&& other) noexcept { *this = std::move(other); }

HostBuffer& HostBuffer::operator=(HostBuffer&& other) noexcept {
  if (this != &other) {
    Reset();
    pool_ = std::move(other.pool_);
    data_ = other.data_;
    bytes_ = other.bytes_;
    rounded_ = other.rounded_;
    other.pool_ = nullptr;
    other.data_ = nullptr;
    other.bytes_ = other.rounded_ = 0;
  }
  return *this;
}

HostBuffer::~HostBuffer() { Reset(); }

void HostBuffer::Reset() {
  if (pool_ != nullptr) pool_->Free(data_, rounded_);
  pool_ = nullptr;
  data_ = nullptr;
  bytes_ = rounded_ = 0;
}

std::shared_ptr<HostPool> HostPool::Create(ChunkSource source,
                                           const HostPoolOptions& options) {
  return std::shared_ptr<HostPool>(new HostPool(std::move(source), options));
}

HostPool::~HostPool() {
  for (const auto& [data, bytes] : chunks_) source_.release(data);
}

absl::StatusOr<HostBuffer> HostPool::Allocate(int64_t bytes) {
  if (bytes <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("host buffer of ", bytes, " bytes: must be > 0"));
  }
  const int64_t rounded = RoundUp(bytes);
  std::lock_guard lock(mu_);
  auto fit = free_by_size_.lower_bound(rounded);
  if (fit == free_by_size_.end()) {
    const int64_t chunk = RoundUp(std::max(options_.chunk_bytes, rounded));
    if (stats_.reserved_bytes + chunk > options_.limit_bytes) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "host pool: ", rounded, " more bytes would need a chunk of ", chunk,
          " past the host-memory limit of ", options_.limit_bytes, " (",
          stats_.in_use_bytes, " in use); raise the limit or offload less"));
    }
    void* data = source_.allocate(chunk);
    if (data == nullptr) {
      return absl::ResourceExhaustedError(
          absl::StrCat("host pool: allocating a chunk of ", chunk,
                       " bytes failed"));
    }
    chunks_.push_back({static_cast<char*>(data), chunk});
    stats_.reserved_bytes += chunk;
    ++stats_.chunk_allocations;
    AddFree(static_cast<char*>(data), chunk);
    fit = free_by_size_.lower_bound(rounded);
  }
  char* begin = fit->second;
  const int64_t size = fit->first;
  EraseFree(free_by_address_.find(begin));
  if (size > rounded) AddFree(begin + rounded, size - rounded);
  stats_.in_use_bytes += rounded;
  stats_.peak_in_use_bytes =
      std::max(stats_.peak_in_use_bytes, stats_.in_use_bytes);
  return HostBuffer(shared_from_this(), begin, bytes, rounded);
}

void HostPool::Free(void* data, int64_t rounded) {
  std::lock_guard lock(mu_);
  stats_.in_use_bytes -= rounded;
  AddFree(static_cast<char*>(data), rounded);
}

HostPoolStats HostPool::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

void HostPool::EraseFree(std::map<char*, int64_t>::iterator it) {
  auto [lo, hi] = free_by_size_.equal_range(it->second);
  for (auto s = lo; s != hi; ++s) {
    if (s->second == it->first) {
      free_by_size_.erase(s);
      break;
    }
  }
  free_by_address_.erase(it);
}

void HostPool::AddFree(char* begin, int64_t bytes) {
  // Never merged across chunks: each goes back to its source whole.
  auto chunk_of = [&](const char* p) {
    for (size_t c = 0; c < chunks_.size(); ++c) {
      if (p >= chunks_[c].first && p < chunks_[c].first + chunks_[c].second) {
        return c;
      }
    }
    return chunks_.size();
  };
  const size_t chunk = chunk_of(begin);
  auto next = free_by_address_.lower_bound(begin);
  if (next != free_by_address_.end() && next->first == begin + bytes &&
      chunk_of(next->first) == chunk) {
    bytes += next->second;
    EraseFree(next);
  }
  auto after = free_by_address_.lower_bound(begin);
  if (after != free_by_address_.begin()) {
    auto prev = std::prev(after);
    if (prev->first + prev->second == begin && chunk_of(prev->first) == chunk) {
      begin = prev->first;
      bytes += prev->second;
      EraseFree(prev);
    }
  }
  free_by_address_.emplace(begin, bytes);
  free_by_size_.emplace(bytes, begin);
}

}  // namespace remat::kernels
