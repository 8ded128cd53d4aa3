// TraceRecorder: appends collected samples to the estimator's trace CSV, so
// a run's measurements can be replayed offline (fitting, benchmarks).
//
// Columns, in this order: feature.<name> per feature, then per block
// act_bytes.<block>, input_bytes.<block>, forward_ns.<block>, then
// base_bytes and peak_bytes (empty when the sample has none).
//
// The recorder writes through TraceSink, a one-method interface, so the
// planner's own trace writer can stand behind it; CsvFileTraceSink is the
// plain file implementation.
//
// Thread safety: TraceRecorder is thread-safe (one mutex around appends).
#ifndef REMAT_COLLECTOR_TRACE_RECORDER_H_
#define REMAT_COLLECTOR_TRACE_RECORDER_H_

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "planner/model.h"

namespace remat {

// Where CSV rows go. The header is written once, before the first row.
class TraceSink {
 public:
  virtual ~TraceSink() = default;
  // Called once per recorder, with the column names.
  virtual absl::Status WriteHeader(const std::vector<std::string>& columns) = 0;
  virtual absl::Status WriteRow(const std::vector<std::string>& cells) = 0;
};

// Appends to a CSV file. If the file already has a header it must equal the
// recorder's columns (FAILED_PRECONDITION otherwise: use a new file).
class CsvFileTraceSink final : public TraceSink {
 public:
  explicit CsvFileTraceSink(std::string path) : path_(std::move(path)) {}
  absl::Status WriteHeader(const std::vector<std::string>& columns) override;
  absl::Status WriteRow(const std::vector<std::string>& cells) override;

 private:
  std::string path_;
};

// The trace columns for `model`.
std::vector<std::string> TraceColumns(const ModelSpec& model);

class TraceRecorder {
 public:
  // `sink` must not be null.
  TraceRecorder(ModelSpec model, std::unique_ptr<TraceSink> sink);

  // Validates the sample against the model (INVALID_ARGUMENT naming the
  // field) and appends one row; the header goes first on the first call.
  absl::Status Record(const Sample& sample);

 private:
  std::mutex mu_;
  ModelSpec model_;
  std::unique_ptr<TraceSink> sink_;
  bool header_written_ = false;
};

}  // namespace remat

#endif  // REMAT_COLLECTOR_TRACE_RECORDER_H_
