#include "planner/model.h"

#include <cmath>
#include <set>

#include "absl/strings/str_cat.h"

namespace remat {
namespace {

// The number of code points of valid UTF-8 text, or nullopt when `text` is
// not valid UTF-8 (overlong forms, surrogates and values past U+10FFFF
// included).
std::optional<size_t> Utf8Length(const std::string& text) {
  size_t count = 0;
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  const unsigned char* end = p + text.size();
  while (p < end) {
    const unsigned char c = *p;
    int extra = 0;
    uint32_t cp = 0;
    if (c < 0x80) {
      cp = c;
    } else if ((c & 0xE0) == 0xC0) {
      extra = 1, cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      extra = 2, cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      extra = 3, cp = c & 0x07;
    } else {
      return std::nullopt;
    }
    if (end - p <= extra) return std::nullopt;
    for (int i = 1; i <= extra; ++i) {
      if ((p[i] & 0xC0) != 0x80) return std::nullopt;
      cp = (cp << 6) | (p[i] & 0x3F);
    }
    static constexpr uint32_t kMinForLength[] = {0, 0x80, 0x800, 0x10000};
    if (cp < kMinForLength[extra] || cp > 0x10FFFF ||
        (cp >= 0xD800 && cp <= 0xDFFF)) {
      return std::nullopt;
    }
    p += extra + 1;
    ++count;
  }
  return count;
}

absl::Status ValidateName(const std::string& field, const std::string& name) {
  if (name.empty()) return InvalidField(field, "must not be empty");
  const std::optional<size_t> length = Utf8Length(name);
  if (!length) return InvalidField(field, "must be valid UTF-8");
  if (*length > kMaxNameLength) {
    return InvalidField(field, absl::StrCat(*length, " characters; at most ",
                                       kMaxNameLength, " are allowed"));
  }
  return absl::OkStatus();
}

absl::Status ValidateRange(const std::string& field, int64_t v, int64_t max,
                           const char* max_text) {
  if (v < 0 || v > max) {
    return InvalidField(field, absl::StrCat(v, " is outside [0, ", max_text, "]"));
  }
  return absl::OkStatus();
}

absl::Status ValidateQuantity(const std::string& field,
                              const std::optional<int64_t>& v) {
  if (!v) return absl::OkStatus();
  return ValidateRange(field, *v, kMaxQuantity, "2^48");
}

}  // namespace

absl::Status ValidateModelSpec(const ModelSpec& model) {
  if (auto s = ValidateName("name", model.name); !s.ok()) return s;
  if (model.feature_names.empty()) {
    return InvalidField("feature_names", "at least one input feature is needed");
  }
  if (model.feature_names.size() > static_cast<size_t>(kMaxFeatures)) {
    return InvalidField("feature_names",
                   absl::StrCat("at most ", kMaxFeatures, " features"));
  }
  std::set<std::string> seen;
  for (size_t i = 0; i < model.feature_names.size(); ++i) {
    const std::string field = absl::StrCat("feature_names[", i, "]");
    if (auto s = ValidateName(field, model.feature_names[i]); !s.ok()) return s;
    if (!seen.insert(model.feature_names[i]).second) {
      return InvalidField(field, absl::StrCat("duplicate feature \"",
                                         model.feature_names[i], "\""));
    }
  }
  if (model.blocks.empty()) return InvalidField("blocks", "the model has no blocks");
  if (model.blocks.size() > static_cast<size_t>(kMaxBlocks)) {
    return InvalidField("blocks", absl::StrCat("at most ", kMaxBlocks, " blocks"));
  }
  seen.clear();
  for (size_t i = 0; i < model.blocks.size(); ++i) {
    const std::string field = absl::StrCat("blocks[", i, "].name");
    if (auto s = ValidateName(field, model.blocks[i].name); !s.ok()) return s;
    if (!seen.insert(model.blocks[i].name).second) {
      return InvalidField(field, absl::StrCat("duplicate block \"",
                                         model.blocks[i].name, "\""));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateFeatures(const ModelSpec& model, const Features& features,
                              const std::string& field) {
  if (features.size() != model.feature_names.size()) {
    return InvalidField(field, absl::StrCat("has ", features.size(),
                                       " values; model \"", model.name,
                                       "\" has ", model.feature_names.size(),
                                       " features"));
  }
  for (size_t i = 0; i < features.size(); ++i) {
    const std::string f =
        absl::StrCat(field, "[", i, "] (", model.feature_names[i], ")");
    // NaN fails both comparisons: it is out of range too.
    if (!(features[i] >= 0 && features[i] <= kMaxFeatureValue)) {
      return InvalidField(f, absl::StrCat(features[i],
                                     " is outside [0, 2^53]; features are "
                                     "sizes (tokens, images, pixels)"));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateSample(const ModelSpec& model, const Sample& sample) {
  if (auto s = ValidateFeatures(model, sample.features); !s.ok()) return s;
  if (sample.blocks.size() != model.blocks.size()) {
    return InvalidField("blocks", absl::StrCat("has ", sample.blocks.size(),
                                          " entries; model \"", model.name,
                                          "\" has ", model.blocks.size(),
                                          " blocks"));
  }
  for (size_t i = 0; i < sample.blocks.size(); ++i) {
    const BlockMeasurement& b = sample.blocks[i];
    const std::string p = absl::StrCat("blocks[", i, "].");
    if (auto s = ValidateQuantity(p + "act_bytes", b.act_bytes); !s.ok()) {
      return s;
    }
    if (auto s = ValidateQuantity(p + "input_bytes", b.input_bytes); !s.ok()) {
      return s;
    }
    if (auto s = ValidateQuantity(p + "forward_ns", b.forward_ns); !s.ok()) {
      return s;
    }
    if (auto s = ValidateQuantity(p + "workspace_bytes", b.workspace_bytes);
        !s.ok()) {
      return s;
    }
    if (auto s = ValidateQuantity(p + "transfer_bytes", b.transfer_bytes);
        !s.ok()) {
      return s;
    }
  }
  if (auto s = ValidateQuantity("base_bytes", sample.base_bytes); !s.ok()) {
    return s;
  }
  if (auto s = ValidateQuantity("tail_bytes", sample.tail_bytes); !s.ok()) {
    return s;
  }
  if (sample.peak_bytes) {
    if (auto s = ValidateRange("peak_bytes", *sample.peak_bytes, kMaxPeakBytes,
                               "2^60");
        !s.ok()) {
      return s;
    }
  }
  for (auto [field, v] : {std::pair{"d2h_bytes_per_s", &sample.d2h_bytes_per_s},
                          std::pair{"h2d_bytes_per_s", &sample.h2d_bytes_per_s}}) {
    // NaN fails both comparisons: it is out of range too.
    if (*v && !(**v > 0 && **v <= kMaxLinkBytesPerS)) {
      return InvalidField(field, absl::StrCat(**v,
                                              " is outside (0, 1e15]; the "
                                              "host link's measured bandwidth"));
    }
  }
  return ValidateDevice(sample.device);
}

absl::Status ValidateDevice(const std::string& device,
                            const std::string& field) {
  if (device.empty()) return absl::OkStatus();
  return ValidateName(field, device);
}

bool operator==(const BlockMeasurement& a, const BlockMeasurement& b) {
  return a.act_bytes == b.act_bytes && a.input_bytes == b.input_bytes &&
         a.forward_ns == b.forward_ns &&
         a.workspace_bytes == b.workspace_bytes &&
         a.transfer_bytes == b.transfer_bytes;
}

bool operator==(const Sample& a, const Sample& b) {
  return a.features == b.features && a.blocks == b.blocks &&
         a.base_bytes == b.base_bytes && a.peak_bytes == b.peak_bytes &&
         a.tail_bytes == b.tail_bytes &&
         a.d2h_bytes_per_s == b.d2h_bytes_per_s &&
         a.h2d_bytes_per_s == b.h2d_bytes_per_s && a.device == b.device;
}

absl::Status ValidateBudget(int64_t bytes, const std::string& field) {
  if (bytes <= 0 || bytes > kMaxPeakBytes) {
    return InvalidField(field, absl::StrCat(bytes,
                                       " is outside (0, 2^60]; the device "
                                       "memory the step may use"));
  }
  return absl::OkStatus();
}

std::optional<int> FeatureIndex(const ModelSpec& model,
                                const std::string& feature) {
  for (size_t i = 0; i < model.feature_names.size(); ++i) {
    if (model.feature_names[i] == feature) return static_cast<int>(i);
  }
  return std::nullopt;
}

absl::Status InvalidField(const std::string& field, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", what));
}

absl::Status Prefixed(const std::string& prefix, const absl::Status& s) {
  if (s.ok()) return s;
  return absl::Status(s.code(), absl::StrCat(prefix, s.message()));
}

}  // namespace remat
