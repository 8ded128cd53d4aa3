// What log compaction keeps: the records that rebuild the same planner
// state on replay, fewer of them.
//
// Kept as they are, in order: every registration and every sample batch
// (samples are bounded per model by max_samples_per_model). Outcomes only
// feed calibration through their measured peaks, and calibration only
// remembers the last kCalibrationWindow reports (estimator.h), and the
// judge of outliers the last kCalibrationWindow outliers held, so of each
// model's outcomes with a measured peak only the last kCalibrationWindow
// calibrated with and the last kCalibrationWindow held as outliers are
// kept, in place, with their verdicts; every other outcome is folded into
// one OutcomeTally
// per model (after its registration) so the model's outcome counts stay
// right. Replaying the result gives the same fits, the same calibration
// and the same counts as replaying the input.
#ifndef REMAT_PLANNER_SERVICE_WAL_COMPACTION_H_
#define REMAT_PLANNER_SERVICE_WAL_COMPACTION_H_

#include <vector>

#include "proto/wal.pb.h"

namespace remat {

std::vector<v1::WalRecord> CompactWalRecords(
    const std::vector<v1::WalRecord>& records);

}  // namespace remat

#endif  // REMAT_PLANNER_SERVICE_WAL_COMPACTION_H_
