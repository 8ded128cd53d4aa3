#include "examples/workload.h"

#include <algorithm>
#include <cmath>

namespace remat {

Workload::Workload(const WorkloadOptions& options)
    : options_(options),
      rng_(options.seed),
      size_rng_(options.seed + 1),
      seq_(std::log(options.median_seq), options.sigma),
      size_((options.min_size + 15) / 16,
            std::max((options.min_size + 15) / 16, options.max_size / 16)) {}

BatchShape Workload::Next() {
  const double seq = std::round(seq_(rng_));
  const int64_t height = 16 * size_(size_rng_);
  const int64_t width = 16 * size_(size_rng_);
  return {options_.batch,
          std::clamp(static_cast<int64_t>(seq), options_.min_seq,
                     options_.max_seq),
          height, width};
}

BatchShape Workload::Largest(const WorkloadOptions& options) {
  const int64_t size =
      16 * std::max((options.min_size + 15) / 16, options.max_size / 16);
  return {options.batch, options.max_seq, size, size};
}

std::vector<BatchShape> Workload::Draw(const WorkloadOptions& options,
                                       int steps) {
  Workload w(options);
  std::vector<BatchShape> shapes;
  for (int i = 0; i < steps; ++i) shapes.push_back(w.Next());
  return shapes;
}

}  // namespace remat
