#include "collector/trace_recorder.h"

#include <fstream>
#include <sstream>
#include <utility>

namespace remat {
namespace {

std::string JoinCsv(const std::vector<std::string>& cells) {
  std::string line;
  for (size_t i = 0; i < cells.size(); ++i) {
    if (i > 0) line += ',';
    line += cells[i];
  }
  return line;
}

std::string FormatNumber(double v) {
  std::ostringstream out;
  out.precision(17);
  out << v;
  return out.str();
}

}  // namespace

absl::Status CsvFileTraceSink::WriteHeader(
    const std::vector<std::string>& columns) {
  const std::string header = JoinCsv(columns);
  std::ifstream in(path_);
  std::string existing;
  if (in && std::getline(in, existing)) {
    if (existing != header) {
      return absl::FailedPreconditionError(
          "trace file " + path_ +
          " has a different header (another model or feature set): write "
          "this model's samples to a new file");
    }
    return absl::OkStatus();
  }
  std::ofstream out(path_, std::ios::app);
  out << header << '\n';
  if (!out) {
    return absl::UnavailableError("cannot write trace file " + path_);
  }
  return absl::OkStatus();
}

absl::Status CsvFileTraceSink::WriteRow(const std::vector<std::string>& cells) {
  std::ofstream out(path_, std::ios::app);
  out << JoinCsv(cells) << '\n';
  if (!out) {
    return absl::UnavailableError("cannot append to trace file " + path_);
  }
  return absl::OkStatus();
}

std::vector<std::string> TraceColumns(const ModelSpec& model) {
  std::vector<std::string> columns;
  for (const std::string& f : model.feature_names) {
    columns.push_back("feature." + f);
  }
  for (const BlockSpec& b : model.blocks) {
    columns.push_back("act_bytes." + b.name);
    columns.push_back("input_bytes." + b.name);
    columns.push_back("forward_ns." + b.name);
  }
  columns.push_back("base_bytes");
  columns.push_back("peak_bytes");
  return columns;
}

TraceRecorder::TraceRecorder(ModelSpec model, std::unique_ptr<TraceSink> sink)
    : model_(std::move(model)), sink_(std::move(sink)) {}

absl::Status TraceRecorder::Record(const Sample& sample) {
  absl::Status valid = ValidateSample(model_, sample);
  if (!valid.ok()) return valid;
  std::lock_guard<std::mutex> lock(mu_);
  if (!header_written_) {
    absl::Status s = sink_->WriteHeader(TraceColumns(model_));
    if (!s.ok()) return s;
    header_written_ = true;
  }
  std::vector<std::string> cells;
  for (double f : sample.features) cells.push_back(FormatNumber(f));
  for (const BlockMeasurement& m : sample.blocks) {
    cells.push_back(std::to_string(m.act_bytes));
    cells.push_back(std::to_string(m.input_bytes));
    cells.push_back(std::to_string(m.forward_ns));
  }
  cells.push_back(sample.base_bytes ? std::to_string(*sample.base_bytes) : "");
  cells.push_back(sample.peak_bytes ? std::to_string(*sample.peak_bytes) : "");
  return sink_->WriteRow(cells);
}

}  // namespace remat
