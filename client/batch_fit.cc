#include "client/batch_fit.h"

#include <cmath>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace remat {

FitProbe FitsOf(bool collect, const Plan& plan) {
  const bool unknown = collect && plan.predicted_peak_bytes == 0;
  return FitProbe{unknown || plan.feasible, plan.predicted_peak_bytes,
                  !collect};
}

absl::StatusOr<BatchFit> FitBatch(const Features& features,
                                  size_t batch_feature,
                                  const FitProbeFn& probe) {
  if (batch_feature >= features.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "batch_feature: ", batch_feature, " is not an index of the ",
        features.size(), " features"));
  }
  const double batch = features[batch_feature];
  if (!(batch >= 1) || batch > 1e15 || batch != std::floor(batch)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "features[", batch_feature, "]: ", batch,
        " is not a batch size; give a whole number of rows >= 1"));
  }
  Features at = features;
  auto ask = [&](int64_t rows) {
    at[batch_feature] = static_cast<double>(rows);
    return probe(at);
  };
  BatchFit fit;
  const int64_t rows = static_cast<int64_t>(batch);
  absl::StatusOr<FitProbe> whole = ask(rows);
  if (!whole.ok()) return whole.status();
  // A batch of one that the planner cannot vouch for runs: it collects
  // under the least-memory plan, and nothing smaller could run instead.
  if (whole->fits || (rows == 1 && !whole->vouched)) {
    fit.max_batch = rows;
    fit.micro_batches = 1;
    return fit;
  }
  // fits(low) or low == 0; !fits(high).
  int64_t low = 0, high = rows;
  int64_t smallest_peak_bytes = whole->smallest_peak_bytes;
  while (high - low > 1) {
    const int64_t mid = low + (high - low) / 2;
    absl::StatusOr<FitProbe> p = ask(mid);
    if (!p.ok()) return p.status();
    if (p->fits || !p->vouched) {
      low = mid;
    } else {
      high = mid;
      smallest_peak_bytes = p->smallest_peak_bytes;
    }
  }
  fit.max_batch = low;
  if (low == 0) {
    fit.smallest_peak_bytes = smallest_peak_bytes;  // of a batch of one
  } else {
    fit.micro_batches = (rows + low - 1) / low;
  }
  return fit;
}

}  // namespace remat
