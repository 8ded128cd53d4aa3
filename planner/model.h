// The vocabulary of the planning core: a model as a chain of named blocks,
// the input features of a batch, and one measured sample.
//
// Everything here is plain data plus validation. No LibTorch, no gRPC.
// Thread safety: plain values; no shared state.
#ifndef REMAT_PLANNER_MODEL_H_
#define REMAT_PLANNER_MODEL_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace remat {

// One block of a model's chain, in forward order.
struct BlockSpec {
  std::string name;
  // False for blocks the runtime cannot recompute (e.g. one with side
  // effects); those are always KEEP.
  bool checkpointable = true;
};

// A model as the planner sees it: ordered blocks and named input features.
struct ModelSpec {
  std::string name;
  std::vector<std::string> feature_names;  // e.g. {"batch", "seq"}
  std::vector<BlockSpec> blocks;
};

// Input features of one batch, in ModelSpec::feature_names order.
using Features = std::vector<double>;

// What one block cost in one measured step.
struct BlockMeasurement {
  int64_t act_bytes = 0;    // a_i: retained for backward when the block KEEPs
  int64_t input_bytes = 0;  // x_i: its input, what a recomputed block keeps
  int64_t forward_ns = 0;   // c_i: forward time, the price of a recompute
};

// One observation: a batch's features and what each block cost.
struct Sample {
  Features features;
  std::vector<BlockMeasurement> blocks;  // one per ModelSpec block, in order
  std::optional<int64_t> base_bytes;     // alive before forward
  std::optional<int64_t> peak_bytes;     // measured peak of the whole step
};

// Limits that keep one bad request from exhausting memory.
inline constexpr int kMaxBlocks = 4096;
inline constexpr int kMaxFeatures = 16;
inline constexpr size_t kMaxNameLength = 256;

// OK, or INVALID_ARGUMENT naming the offending field (e.g. "blocks[3].name").
absl::Status ValidateModelSpec(const ModelSpec& model);

// OK when `features` has one finite, non-negative value per feature of
// `model`; else INVALID_ARGUMENT naming the field (prefix + "[i]").
absl::Status ValidateFeatures(const ModelSpec& model, const Features& features,
                              const std::string& field = "features");

// OK when the sample matches `model` (feature and block counts) and every
// value is finite and non-negative; else INVALID_ARGUMENT naming the field.
absl::Status ValidateSample(const ModelSpec& model, const Sample& sample);

// Index of `feature` in model.feature_names, or nullopt.
std::optional<int> FeatureIndex(const ModelSpec& model,
                                const std::string& feature);

}  // namespace remat

#endif  // REMAT_PLANNER_MODEL_H_
