#include "examples/workload.h"

#include <algorithm>
#include <cmath>

namespace remat {

Workload::Workload(const WorkloadOptions& options)
    : options_(options),
      rng_(options.seed),
      seq_(std::log(options.median_seq), options.sigma) {}

BatchShape Workload::Next() {
  const double seq = std::round(seq_(rng_));
  return {options_.batch,
          std::clamp(static_cast<int64_t>(seq), options_.min_seq,
                     options_.max_seq)};
}

std::vector<BatchShape> Workload::Draw(const WorkloadOptions& options,
                                       int steps) {
  Workload w(options);
  std::vector<BatchShape> shapes;
  for (int i = 0; i < steps; ++i) shapes.push_back(w.Next());
  return shapes;
}

}  // namespace remat
