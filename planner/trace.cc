#include "planner/trace.h"

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace remat {
namespace {

constexpr char kFeaturePrefix[] = "feature.";
constexpr char kActPrefix[] = "act_bytes.";
constexpr char kInputPrefix[] = "input_bytes.";
constexpr char kForwardPrefix[] = "forward_ns.";
constexpr char kWorkspacePrefix[] = "workspace_bytes.";
constexpr char kTransferPrefix[] = "transfer_bytes.";
constexpr char kBase[] = "base_bytes";
constexpr char kPeak[] = "peak_bytes";
constexpr char kTail[] = "tail_bytes";

bool StartsWith(const std::string& s, const char* prefix) {
  return s.compare(0, std::strlen(prefix), prefix) == 0;
}

std::string Stem(const std::string& path) {
  size_t slash = path.find_last_of('/');
  std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
  size_t dot = name.find_last_of('.');
  if (dot != std::string::npos && dot > 0) name.resize(dot);
  return name;
}

absl::Status CheckWritableName(const std::string& field,
                               const std::string& name) {
  if (name.find_first_of(",\"\r\n") != std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": \"", name,
                     "\" contains ',', '\"' or a line break, which the trace "
                     "CSV format cannot hold; rename it"));
  }
  return absl::OkStatus();
}

std::string FormatDouble(double v) {
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof(buf), v);
  return std::string(buf, r.ptr);
}

std::string Header(const ModelSpec& model) {
  std::string out;
  auto add = [&out](const std::string& column) {
    if (!out.empty()) out += ',';
    out += column;
  };
  for (const std::string& f : model.feature_names) add(kFeaturePrefix + f);
  for (const BlockSpec& b : model.blocks) add(kActPrefix + b.name);
  for (const BlockSpec& b : model.blocks) add(kInputPrefix + b.name);
  for (const BlockSpec& b : model.blocks) add(kForwardPrefix + b.name);
  for (const BlockSpec& b : model.blocks) add(kWorkspacePrefix + b.name);
  for (const BlockSpec& b : model.blocks) add(kTransferPrefix + b.name);
  add(kBase);
  add(kPeak);
  add(kTail);
  out += '\n';
  return out;
}

std::string Row(const Sample& s) {
  std::string out;
  for (size_t i = 0; i < s.features.size(); ++i) {
    if (i > 0) out += ',';
    out += FormatDouble(s.features[i]);
  }
  for (const BlockMeasurement& b : s.blocks)
    absl::StrAppend(&out, ",", b.act_bytes);
  for (const BlockMeasurement& b : s.blocks) {
    absl::StrAppend(&out, ",", b.input_bytes);
  }
  for (const BlockMeasurement& b : s.blocks) {
    absl::StrAppend(&out, ",", b.forward_ns);
  }
  for (const BlockMeasurement& b : s.blocks) {
    out += ',';
    if (b.workspace_bytes) absl::StrAppend(&out, *b.workspace_bytes);
  }
  for (const BlockMeasurement& b : s.blocks) {
    out += ',';
    if (b.transfer_bytes) absl::StrAppend(&out, *b.transfer_bytes);
  }
  out += ',';
  if (s.base_bytes) absl::StrAppend(&out, *s.base_bytes);
  out += ',';
  if (s.peak_bytes) absl::StrAppend(&out, *s.peak_bytes);
  out += ',';
  if (s.tail_bytes) absl::StrAppend(&out, *s.tail_bytes);
  out += '\n';
  return out;
}

absl::Status CheckModel(const ModelSpec& model) {
  if (absl::Status s = ValidateModelSpec(model); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat("model.", s.message()));
  }
  for (size_t i = 0; i < model.feature_names.size(); ++i) {
    if (auto s = CheckWritableName(absl::StrCat("model.feature_names[", i, "]"),
                                   model.feature_names[i]);
        !s.ok()) {
      return s;
    }
  }
  for (size_t i = 0; i < model.blocks.size(); ++i) {
    if (auto s = CheckWritableName(absl::StrCat("model.blocks[", i, "].name"),
                                   model.blocks[i].name);
        !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

absl::Status CheckSample(const ModelSpec& model, const Sample& sample,
                         size_t index) {
  absl::Status s = ValidateSample(model, sample);
  if (s.ok()) return s;
  return absl::Status(s.code(),
                      absl::StrCat("samples[", index, "].", s.message()));
}

// What one column of a trace holds.
enum class ColumnKind {
  kFeature, kAct, kInput, kForward, kWorkspace, kTransfer, kBase, kPeak,
  kTail
};

// The per-block columns other than act_bytes: the prefix `column` starts
// with and its kind, or none.
std::optional<std::pair<const char*, ColumnKind>> PerBlockColumn(
    const std::string& column) {
  for (auto [prefix, kind] : {std::pair{kInputPrefix, ColumnKind::kInput},
                              std::pair{kForwardPrefix, ColumnKind::kForward},
                              std::pair{kWorkspacePrefix, ColumnKind::kWorkspace},
                              std::pair{kTransferPrefix, ColumnKind::kTransfer}}) {
    if (StartsWith(column, prefix)) return std::pair{prefix, kind};
  }
  return std::nullopt;
}

struct Column {
  ColumnKind kind;
  int index = 0;  // feature or block index
};

bool ParseInt(const std::string& cell, int64_t* out) {
  if (cell.empty()) return false;
  const char* end = cell.data() + cell.size();
  auto r = std::from_chars(cell.data(), end, *out);
  return r.ec == std::errc() && r.ptr == end;
}

bool ParseDouble(const std::string& cell, double* out) {
  if (cell.empty()) return false;
  const char* end = cell.data() + cell.size();
  auto r = std::from_chars(cell.data(), end, *out);
  return r.ec == std::errc() && r.ptr == end;
}

}  // namespace

absl::StatusOr<Trace> ReadTraceCsv(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::NotFoundError(
        absl::StrCat(path, ": cannot open trace (", std::strerror(errno), ")"));
  }
  auto error = [&path](size_t line, const std::string& what) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ":", line, ": ", what));
  };

  Trace trace;
  trace.model.name = Stem(path);
  std::vector<Column> columns;
  std::vector<std::string> names;
  std::string line;
  size_t line_no = 0;
  bool have_header = false;
  while (std::getline(in, line)) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    std::vector<std::string> cells = absl::StrSplit(line, ',');
    if (!have_header) {
      have_header = true;
      names = cells;
      std::map<std::string, int> blocks;  // block name -> index
      std::map<std::string, size_t> seen;
      // Blocks are defined by act_bytes columns, in their order.
      for (const std::string& c : cells) {
        if (StartsWith(c, kActPrefix)) {
          const std::string block = c.substr(std::strlen(kActPrefix));
          if (blocks.count(block) == 0) {
            blocks[block] = static_cast<int>(trace.model.blocks.size());
            trace.model.blocks.push_back({block, true});
          }
        }
      }
      for (size_t i = 0; i < cells.size(); ++i) {
        const std::string& c = cells[i];
        const std::string where =
            absl::StrCat("column ", i + 1, " (", c, "): ");
        if (!seen.emplace(c, i).second) {
          return error(line_no, absl::StrCat(where, "duplicate of column ",
                                             seen[c] + 1));
        }
        Column col;
        auto block_of = [&](const char* prefix) -> int {
          auto it = blocks.find(c.substr(std::strlen(prefix)));
          return it == blocks.end() ? -1 : it->second;
        };
        if (StartsWith(c, kFeaturePrefix)) {
          col.kind = ColumnKind::kFeature;
          col.index = static_cast<int>(trace.model.feature_names.size());
          trace.model.feature_names.push_back(
              c.substr(std::strlen(kFeaturePrefix)));
        } else if (StartsWith(c, kActPrefix)) {
          col.kind = ColumnKind::kAct;
          col.index = block_of(kActPrefix);
        } else if (const auto per_block = PerBlockColumn(c)) {
          const char* prefix = per_block->first;
          col.kind = per_block->second;
          col.index = block_of(prefix);
          if (col.index < 0) {
            return error(line_no, absl::StrCat(where,
                                               "no act_bytes column for this "
                                               "block; add act_bytes.",
                                               c.substr(c.find('.') + 1)));
          }
        } else if (c == kBase) {
          col.kind = ColumnKind::kBase;
        } else if (c == kPeak) {
          col.kind = ColumnKind::kPeak;
        } else if (c == kTail) {
          col.kind = ColumnKind::kTail;
        } else {
          return error(line_no,
                       absl::StrCat(where,
                                    "unknown column; expected feature.<name>, "
                                    "act_bytes.<block>, input_bytes.<block>, "
                                    "forward_ns.<block>, "
                                    "workspace_bytes.<block>, "
                                    "transfer_bytes.<block>, base_bytes, "
                                    "peak_bytes or tail_bytes"));
        }
        columns.push_back(col);
      }
      if (absl::Status s = ValidateModelSpec(trace.model); !s.ok()) {
        return error(line_no,
                     absl::StrCat("header: ", s.message(),
                                  " (features come from feature.* "
                                  "columns, blocks from act_bytes.*)"));
      }
      continue;
    }

    if (cells.size() != columns.size()) {
      return error(line_no,
                   absl::StrCat("has ", cells.size(), " cells; the header has ",
                                columns.size(), " columns"));
    }
    Sample sample;
    sample.features.assign(trace.model.feature_names.size(), 0);
    sample.blocks.assign(trace.model.blocks.size(), BlockMeasurement());
    for (size_t i = 0; i < cells.size(); ++i) {
      const std::string& cell = cells[i];
      const Column& col = columns[i];
      auto bad = [&](const char* expected) {
        return error(line_no,
                     absl::StrCat("column ", i + 1, " (", names[i], "): \"",
                                  cell, "\" is not ", expected));
      };
      if (col.kind == ColumnKind::kFeature) {
        double v;
        if (!ParseDouble(cell, &v) || !std::isfinite(v) || v < 0) {
          return bad("a finite number >= 0");
        }
        sample.features[col.index] = v;
        continue;
      }
      if ((col.kind == ColumnKind::kBase || col.kind == ColumnKind::kPeak ||
           col.kind == ColumnKind::kTail ||
           col.kind == ColumnKind::kWorkspace ||
           col.kind == ColumnKind::kTransfer) &&
          cell.empty()) {
        continue;  // not measured in this step
      }
      int64_t v;
      if (!ParseInt(cell, &v) || v < 0) return bad("an integer >= 0");
      switch (col.kind) {
        case ColumnKind::kAct:
          sample.blocks[col.index].act_bytes = v;
          break;
        case ColumnKind::kInput:
          sample.blocks[col.index].input_bytes = v;
          break;
        case ColumnKind::kForward:
          sample.blocks[col.index].forward_ns = v;
          break;
        case ColumnKind::kWorkspace:
          sample.blocks[col.index].workspace_bytes = v;
          break;
        case ColumnKind::kTransfer:
          sample.blocks[col.index].transfer_bytes = v;
          break;
        case ColumnKind::kBase:
          sample.base_bytes = v;
          break;
        case ColumnKind::kPeak:
          sample.peak_bytes = v;
          break;
        case ColumnKind::kTail:
          sample.tail_bytes = v;
          break;
        case ColumnKind::kFeature:
          break;
      }
    }
    // The cells parsed; now the ranges every sample must keep (model.h).
    if (absl::Status s = ValidateSample(trace.model, sample); !s.ok()) {
      return error(line_no, std::string(s.message()));
    }
    trace.samples.push_back(std::move(sample));
  }
  if (in.bad()) {
    return absl::DataLossError(absl::StrCat(path, ": read failed"));
  }
  if (!have_header) {
    return error(1, "empty file; expected a header row (feature.<name>,...)");
  }
  return trace;
}

absl::Status WriteTraceCsv(const std::string& path, const Trace& trace) {
  // Everything is checked before the file is touched.
  if (absl::Status s = CheckModel(trace.model); !s.ok()) return s;
  for (size_t i = 0; i < trace.samples.size(); ++i) {
    if (auto s = CheckSample(trace.model, trace.samples[i], i); !s.ok()) {
      return s;
    }
  }
  auto writer = TraceWriter::Open(path, trace.model);
  if (!writer.ok()) return writer.status();
  for (const Sample& sample : trace.samples) {
    if (auto s = (*writer)->Append(sample); !s.ok()) return s;
  }
  return (*writer)->Close();
}

TraceWriter::TraceWriter(std::string path, ModelSpec model, std::FILE* file)
    : path_(std::move(path)), model_(std::move(model)), file_(file) {}

TraceWriter::~TraceWriter() {
  if (file_ != nullptr) std::fclose(file_);
}

absl::StatusOr<std::unique_ptr<TraceWriter>> TraceWriter::Open(
    const std::string& path, const ModelSpec& model) {
  if (absl::Status s = CheckModel(model); !s.ok()) return s;
  std::FILE* file = std::fopen(path.c_str(), "wb");
  if (file == nullptr) {
    return absl::UnavailableError(absl::StrCat(path, ": cannot create trace (",
                                               std::strerror(errno), ")"));
  }
  std::unique_ptr<TraceWriter> writer(new TraceWriter(path, model, file));
  const std::string header = Header(model);
  if (std::fwrite(header.data(), 1, header.size(), file) != header.size()) {
    return absl::DataLossError(absl::StrCat(
        path, ": writing the header failed (", std::strerror(errno), ")"));
  }
  return writer;
}

absl::Status TraceWriter::Append(const Sample& sample) {
  if (file_ == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat(path_, ": trace writer is closed"));
  }
  if (absl::Status s = ValidateSample(model_, sample); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat("sample.", s.message()));
  }
  const std::string row = Row(sample);
  if (std::fwrite(row.data(), 1, row.size(), file_) != row.size()) {
    return absl::DataLossError(absl::StrCat(path_, ": writing row ", rows_ + 1,
                                            " failed (", std::strerror(errno),
                                            ")"));
  }
  ++rows_;
  return absl::OkStatus();
}

absl::Status TraceWriter::Flush() {
  if (file_ == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat(path_, ": trace writer is closed"));
  }
  if (std::fflush(file_) != 0) {
    return absl::DataLossError(
        absl::StrCat(path_, ": flush failed (", std::strerror(errno), ")"));
  }
  return absl::OkStatus();
}

absl::Status TraceWriter::Close() {
  if (file_ == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat(path_, ": trace writer is closed"));
  }
  std::FILE* file = file_;
  file_ = nullptr;
  if (std::fclose(file) != 0) {
    return absl::DataLossError(
        absl::StrCat(path_, ": close failed (", std::strerror(errno), ")"));
  }
  return absl::OkStatus();
}

}  // namespace remat
