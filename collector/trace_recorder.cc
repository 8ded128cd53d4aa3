#include "collector/trace_recorder.h"

#include <utility>

namespace remat {

TraceRecorder::TraceRecorder(std::string path, ModelSpec model)
    : path_(std::move(path)), model_(std::move(model)) {}

absl::Status TraceRecorder::Record(const Sample& sample) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!open_status_.ok()) return open_status_;
  if (writer_ == nullptr) {
    auto writer = TraceWriter::Open(path_, model_);
    if (!writer.ok()) {
      open_status_ = writer.status();
      return open_status_;
    }
    writer_ = *std::move(writer);
  }
  if (absl::Status s = writer_->Append(sample); !s.ok()) return s;
  return writer_->Flush();
}

}  // namespace remat
