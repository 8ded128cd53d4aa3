#include "planner/model.h"

#include <cmath>
#include <set>

#include "absl/strings/str_cat.h"

namespace remat {
namespace {

absl::Status Invalid(const std::string& field, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", what));
}

absl::Status ValidateName(const std::string& field, const std::string& name) {
  if (name.empty()) return Invalid(field, "must not be empty");
  if (name.size() > kMaxNameLength) {
    return Invalid(field, absl::StrCat("longer than ", kMaxNameLength,
                                       " characters"));
  }
  return absl::OkStatus();
}

absl::Status ValidateBytes(const std::string& field,
                           const std::optional<int64_t>& v) {
  if (v && *v < 0) return Invalid(field, absl::StrCat("negative (", *v, ")"));
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateModelSpec(const ModelSpec& model) {
  if (auto s = ValidateName("name", model.name); !s.ok()) return s;
  if (model.feature_names.empty()) {
    return Invalid("feature_names", "at least one input feature is needed");
  }
  if (model.feature_names.size() > static_cast<size_t>(kMaxFeatures)) {
    return Invalid("feature_names",
                   absl::StrCat("at most ", kMaxFeatures, " features"));
  }
  std::set<std::string> seen;
  for (size_t i = 0; i < model.feature_names.size(); ++i) {
    const std::string field = absl::StrCat("feature_names[", i, "]");
    if (auto s = ValidateName(field, model.feature_names[i]); !s.ok()) return s;
    if (!seen.insert(model.feature_names[i]).second) {
      return Invalid(field, absl::StrCat("duplicate feature \"",
                                         model.feature_names[i], "\""));
    }
  }
  if (model.blocks.empty()) return Invalid("blocks", "the model has no blocks");
  if (model.blocks.size() > static_cast<size_t>(kMaxBlocks)) {
    return Invalid("blocks", absl::StrCat("at most ", kMaxBlocks, " blocks"));
  }
  seen.clear();
  for (size_t i = 0; i < model.blocks.size(); ++i) {
    const std::string field = absl::StrCat("blocks[", i, "].name");
    if (auto s = ValidateName(field, model.blocks[i].name); !s.ok()) return s;
    if (!seen.insert(model.blocks[i].name).second) {
      return Invalid(field, absl::StrCat("duplicate block \"",
                                         model.blocks[i].name, "\""));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateFeatures(const ModelSpec& model, const Features& features,
                              const std::string& field) {
  if (features.size() != model.feature_names.size()) {
    return Invalid(field, absl::StrCat("has ", features.size(),
                                       " values; model \"", model.name,
                                       "\" has ", model.feature_names.size(),
                                       " features"));
  }
  for (size_t i = 0; i < features.size(); ++i) {
    const std::string f =
        absl::StrCat(field, "[", i, "] (", model.feature_names[i], ")");
    if (!std::isfinite(features[i])) return Invalid(f, "must be finite");
    if (features[i] < 0) return Invalid(f, "must not be negative");
  }
  return absl::OkStatus();
}

absl::Status ValidateSample(const ModelSpec& model, const Sample& sample) {
  if (auto s = ValidateFeatures(model, sample.features); !s.ok()) return s;
  if (sample.blocks.size() != model.blocks.size()) {
    return Invalid("blocks", absl::StrCat("has ", sample.blocks.size(),
                                          " entries; model \"", model.name,
                                          "\" has ", model.blocks.size(),
                                          " blocks"));
  }
  for (size_t i = 0; i < sample.blocks.size(); ++i) {
    const BlockMeasurement& b = sample.blocks[i];
    const std::string p = absl::StrCat("blocks[", i, "].");
    if (auto s = ValidateBytes(p + "act_bytes", b.act_bytes); !s.ok()) return s;
    if (auto s = ValidateBytes(p + "input_bytes", b.input_bytes); !s.ok()) {
      return s;
    }
    if (auto s = ValidateBytes(p + "forward_ns", b.forward_ns); !s.ok()) {
      return s;
    }
  }
  if (auto s = ValidateBytes("base_bytes", sample.base_bytes); !s.ok()) return s;
  return ValidateBytes("peak_bytes", sample.peak_bytes);
}

std::optional<int> FeatureIndex(const ModelSpec& model,
                                const std::string& feature) {
  for (size_t i = 0; i < model.feature_names.size(); ++i) {
    if (model.feature_names[i] == feature) return static_cast<int>(i);
  }
  return std::nullopt;
}

}  // namespace remat
