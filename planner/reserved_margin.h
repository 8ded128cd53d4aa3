// What the GPU's caching allocator holds beyond what is allocated, learned
// from outcomes, as a margin plans keep free below the budget.
//
// The memory model predicts allocated bytes. On a GPU a step fails when
// the allocator cannot reserve more from the device, and what it has
// reserved is allocated bytes plus its cache's free blocks (fragmentation).
// A plan within budget by allocated bytes can still run out by reserved
// ones; so plans fit budget / ratio, where ratio is reserved over
// allocated at the step's peak, as recent outcomes measured it.
#ifndef REMAT_PLANNER_RESERVED_MARGIN_H_
#define REMAT_PLANNER_RESERVED_MARGIN_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>

#include "planner/model.h"

namespace remat {

// The most a ratio counts for: plans never give up more than half the
// budget to fragmentation, whatever a client reports.
inline constexpr double kMaxReservedRatio = 2.0;

// Not thread-safe: the planner holds its model's lock.
class ReservedMargin {
 public:
  // One outcome that calibrates (a measured peak, not held as an outlier):
  // its allocated peak and, when the client measured it, its reserved
  // peak (>= allocated). Only the last kCalibrationWindow outcomes count,
  // the same ones rematd's log keeps through compaction; an outcome
  // without a reserved figure still takes its place in that window.
  void Report(const Features& features, int64_t allocated_peak_bytes,
              std::optional<int64_t> reserved_peak_bytes);

  // Reserved over allocated that plans allow for, >= 1: the largest ratio
  // that two batches of different features corroborate (the second
  // largest of each feature vector's largest), so that one batch, or one
  // client's absurd report, does not shrink every plan. At most
  // kMaxReservedRatio; 1 with fewer than two such batches.
  double ratio() const;
  // Outcomes in the window that carried a reserved figure.
  size_t reserved_outcomes() const;

  // The bytes to keep free below `budget_bytes` for ratio():
  // budget - floor(budget / ratio).
  int64_t MarginBytes(int64_t budget_bytes) const;

 private:
  struct Entry {
    Features features;
    std::optional<double> ratio;
  };
  std::deque<Entry> window_;
};

}  // namespace remat

#endif  // REMAT_PLANNER_RESERVED_MARGIN_H_
