// The trace CSV format: samples recorded while training, one row per step,
// readable by people, spreadsheets and the estimator benchmark.
//
// The first line is a header naming the columns; every other non-empty line
// is one sample. Columns, in any order:
//
//   feature.<name>       an input feature of the batch (a number >= 0);
//                        at least one. Feature order = column order.
//   act_bytes.<block>    a_i of the block (an integer >= 0); at least one.
//                        Block order = the order of these columns.
//   input_bytes.<block>  x_i of the block (optional; 0 when absent)
//   forward_ns.<block>   c_i of the block (optional; 0 when absent)
//   workspace_bytes.<block>  w_i of the block (optional)
//   transfer_bytes.<block>   t_i of the block (optional)
//   base_bytes           bytes alive before forward (optional)
//   peak_bytes           measured peak of the step (optional)
//   tail_bytes           the step's tail: head and loss (optional)
//
// Only workspace_bytes, transfer_bytes, base_bytes, peak_bytes and
// tail_bytes cells may be empty (not measured in that step). Names cannot contain ',', '"' or line breaks: there is no quoting.
// The model's name is the file's stem ("runs/bert.csv" -> "bert"); every
// block is checkpointable. Writers write every column.
//
// Thread safety: the functions are thread-compatible; a TraceWriter is not
// thread-safe.
#ifndef REMAT_PLANNER_TRACE_H_
#define REMAT_PLANNER_TRACE_H_

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "planner/model.h"

namespace remat {

struct Trace {
  ModelSpec model;
  std::vector<Sample> samples;
};

// Reads a trace. NOT_FOUND when the file cannot be opened; INVALID_ARGUMENT
// naming the line and column (e.g. "bert.csv:7: column 3 (act_bytes.l0):
// ...") for anything malformed. Every sample satisfies ValidateSample.
absl::StatusOr<Trace> ReadTraceCsv(const std::string& path);

// Writes a whole trace (replacing the file). INVALID_ARGUMENT when the model
// or a sample is invalid or a name cannot be written; else the I/O error.
absl::Status WriteTraceCsv(const std::string& path, const Trace& trace);

// Appends samples to a trace file as they are measured, so a crash loses at
// most what was not flushed yet. The header is written once, by Open.
class TraceWriter {
 public:
  // Creates (or truncates) `path` and writes the header for `model`.
  static absl::StatusOr<std::unique_ptr<TraceWriter>> Open(
      const std::string& path, const ModelSpec& model);

  TraceWriter(const TraceWriter&) = delete;
  TraceWriter& operator=(const TraceWriter&) = delete;
  ~TraceWriter();  // flushes and closes; errors are lost (call Close)

  // Validates the sample against the model and writes one row (buffered).
  absl::Status Append(const Sample& sample);
  // Pushes buffered rows to the operating system.
  absl::Status Flush();
  // Flushes and closes; later calls fail with FAILED_PRECONDITION.
  absl::Status Close();

  size_t rows_written() const { return rows_; }
  const std::string& path() const { return path_; }

 private:
  TraceWriter(std::string path, ModelSpec model, std::FILE* file);

  const std::string path_;
  const ModelSpec model_;
  std::FILE* file_;
  size_t rows_ = 0;
};

}  // namespace remat

#endif  // REMAT_PLANNER_TRACE_H_
