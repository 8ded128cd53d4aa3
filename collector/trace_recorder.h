// TraceRecorder: writes collected samples to the estimator's trace CSV
// (planner/trace.h), so a run's measurements can be replayed offline
// (fitting, benchmarks) and read back with ReadTraceCsv.
//
// The file is created (or truncated) on the first Record, and every row is
// flushed as it is recorded, so a crash loses at most the step in flight and
// the file can be read while training goes on.
//
// Thread safety: TraceRecorder is thread-safe (one mutex around appends).
#ifndef REMAT_COLLECTOR_TRACE_RECORDER_H_
#define REMAT_COLLECTOR_TRACE_RECORDER_H_

#include <memory>
#include <mutex>
#include <string>

#include "absl/status/status.h"
#include "planner/model.h"
#include "planner/trace.h"

namespace remat {

class TraceRecorder {
 public:
  // Records samples of `model` to the trace CSV at `path`. Nothing is
  // opened until the first Record.
  TraceRecorder(std::string path, ModelSpec model);

  // Validates the sample against the model (INVALID_ARGUMENT naming the
  // field) and appends one row, flushed. The first call creates the file and
  // writes the header; if that fails, this and every later call return the
  // error (e.g. UNAVAILABLE naming the path).
  absl::Status Record(const Sample& sample);

 private:
  std::mutex mu_;
  const std::string path_;
  const ModelSpec model_;
  std::unique_ptr<TraceWriter> writer_;  // null until opened
  absl::Status open_status_;             // the first open's error, if any
};

}  // namespace remat

#endif  // REMAT_COLLECTOR_TRACE_RECORDER_H_
