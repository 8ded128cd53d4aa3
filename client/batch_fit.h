// Before a batch runs: the largest batch of its features that fits the
// budget under the planner's current profile, and the split into
// micro-batches that fits, so a data loader or trainer can accumulate
// gradients over them instead of running a step no plan fits. No LibTorch.
//
//   absl::StatusOr<BatchFit> fit = chooser.FitBatch({32, 2048}, budget, 0);
//   // fit->micro_batches steps of at most fit->max_batch rows each
//
// Thread safety: pure functions of their arguments (a probe that is
// thread-safe makes them so).
#ifndef REMAT_CLIENT_BATCH_FIT_H_
#define REMAT_CLIENT_BATCH_FIT_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>

#include "absl/status/statusor.h"
#include "planner/model.h"
#include "planner/plan.h"

namespace remat {

// What the planner says of one batch's features under the budget.
struct FitProbe {
  // A plan fits; or the planner asks to collect (it cannot vouch for these
  // features yet: the step runs the least-memory plan and measures) and
  // its untrusted estimate of that step fits, or it has none.
  bool fits = false;
  int64_t smallest_peak_bytes = 0;  // when it does not fit
  // False for a COLLECT answer: the estimate behind `fits` is untrusted.
  bool vouched = true;
};
using FitProbeFn = std::function<absl::StatusOr<FitProbe>(const Features&)>;

struct BatchFit {
  // The largest value of the batch feature, at most the batch's own, whose
  // features (the others unchanged) fit. 0: not even a batch of one.
  int64_t max_batch = 0;
  // ceil(batch / max_batch): the micro-batches, each at most max_batch
  // rows (and as even as can be), that the batch splits into; 1 when it
  // fits whole, 0 when not even a batch of one fits.
  int64_t micro_batches = 0;
  // When not even a batch of one fits: the least peak any plan reaches
  // for it.
  std::optional<int64_t> smallest_peak_bytes;
};

// What a planner's answer says of fitting: a plan that fits (a baseline
// solver's may not: exact ones refuse instead), or a COLLECT whose
// untrusted estimate fits or that has no estimate yet (PlanResult).
FitProbe FitsOf(bool collect, const Plan& plan);

// Bisection over the batch feature (features[batch_feature], an integer
// >= 1): a batch that fits is assumed to fit with fewer rows, so it asks
// `probe` about log2(batch) + 1 feature vectors. A COLLECT answer for
// fewer rows than the batch's counts as fitting whatever its estimate
// says: an estimate the planner cannot vouch for says little of how
// memory scales with rows (never, when every sample had the same batch),
// and the smaller step measures it; so does a batch of one row (nothing
// smaller could run in its place). INVALID_ARGUMENT for a bad index or
// batch value; a probe's error is returned as it is.
absl::StatusOr<BatchFit> FitBatch(const Features& features,
                                  size_t batch_feature,
                                  const FitProbeFn& probe);

}  // namespace remat

#endif  // REMAT_CLIENT_BATCH_FIT_H_
