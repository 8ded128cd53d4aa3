#include "planner/reserved_margin.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <vector>

#include "planner/estimator.h"

namespace remat {

void ReservedMargin::Report(const Features& features,
                            int64_t allocated_peak_bytes,
                            std::optional<int64_t> reserved_peak_bytes) {
  std::optional<double> ratio;
  if (reserved_peak_bytes && allocated_peak_bytes > 0) {
    ratio = static_cast<double>(*reserved_peak_bytes) /
            static_cast<double>(allocated_peak_bytes);
  }
  window_.push_back({features, ratio});
  while (window_.size() > kCalibrationWindow) window_.pop_front();
}

double ReservedMargin::ratio() const {
  std::map<Features, double> largest;
  for (const Entry& e : window_) {
    if (!e.ratio) continue;
    double& r = largest[e.features];
    r = std::max(r, *e.ratio);
  }
  if (largest.size() < 2) return 1.0;
  std::vector<double> ratios;
  for (const auto& [features, r] : largest) ratios.push_back(r);
  std::nth_element(ratios.begin(), ratios.begin() + 1, ratios.end(),
                   std::greater<>());
  return std::clamp(ratios[1], 1.0, kMaxReservedRatio);
}

size_t ReservedMargin::reserved_outcomes() const {
  return std::count_if(window_.begin(), window_.end(),
                       [](const Entry& e) { return e.ratio.has_value(); });
}

int64_t ReservedMargin::MarginBytes(int64_t budget_bytes) const {
  const double r = ratio();
  if (r <= 1.0) return 0;
  return budget_bytes -
         static_cast<int64_t>(std::floor(static_cast<double>(budget_bytes) / r));
}

}  // namespace remat
