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
  // w_i: what its backward needs beyond its saved tensors, the gradient of
  // its output and that of its input (plan.h); none when not measured (a
  // block measured in forward, an older client or trace).
  std::optional<int64_t> workspace_bytes;
  // t_i: what OFFLOAD moves to host and back: the storages the block saves
  // for backward, less its input, its parameters and buffers, its output
  // and those below the runtime's offload threshold (client/offload.h);
  // none when not measured (a runtime without a copy engine, an older
  // client or trace: the memory model then takes act_bytes less output).
  std::optional<int64_t> transfer_bytes;
};

// One observation: a batch's features and what each block cost.
struct Sample {
  Features features;
  std::vector<BlockMeasurement> blocks;  // one per ModelSpec block, in order
  std::optional<int64_t> base_bytes;     // alive before forward
  std::optional<int64_t> peak_bytes;     // measured peak of the whole step
  // What the step computes between the last block's forward and its
  // backward (a model's head and loss, and their backward), at its peak,
  // above what was allocated when the last block returned; none when not
  // measured (older clients and traces: the planner then counts 0). The
  // planner counts it in the last block's backward (estimator.h,
  // MakePlanProblem).
  std::optional<int64_t> tail_bytes;
  // The host link's bandwidth in each direction (device to host, host to
  // device), measured by timed copies on the runtime's copy engine after
  // the step (client/runtime.h); none when the runtime has no copy engine.
  // In (0, kMaxLinkBytesPerS].
  std::optional<double> d2h_bytes_per_s;
  std::optional<double> h2d_bytes_per_s;
  // The device type the sample was measured on (DeviceType): a model's
  // samples, and so its plans, are kept per device type. Empty: not said
  // (older clients), a device type of its own.
  std::string device;
};

// Equal in every field: an imported profile adds no sample its target
// holds already.
bool operator==(const BlockMeasurement& a, const BlockMeasurement& b);
bool operator==(const Sample& a, const Sample& b);

// Limits that keep one bad request from exhausting memory.
inline constexpr int kMaxBlocks = 4096;
inline constexpr int kMaxFeatures = 16;
// Names are 1..256 characters (Unicode code points of valid UTF-8).
inline constexpr size_t kMaxNameLength = 256;

// Ranges of every quantity the planner accepts. They are chosen so that no
// sum the memory model forms can overflow int64 and every value is exact in
// a double; a value outside its range is an error naming the field and the
// range, never clamped (clamping could under-predict a peak).
//
// A feature is a size (tokens, images, pixels): [0, 2^53].
inline constexpr double kMaxFeatureValue = 9007199254740992.0;  // 2^53
// A block's bytes or forward time, and the base: [0, 2^48] (256 TiB, or 78
// hours). kMaxBlocks blocks of 2^48 bytes sum to 2^60.
inline constexpr int64_t kMaxQuantity = int64_t{1} << 48;
// A host link's measured bandwidth: (0, 10^15] bytes per second (a PB/s,
// far beyond any link; the bound keeps transfer times finite and exact).
inline constexpr double kMaxLinkBytesPerS = 1e15;
// A measured step peak and a budget: [0, 2^60] (1 EiB).
inline constexpr int64_t kMaxPeakBytes = int64_t{1} << 60;
// The most calibration a plan problem adds to its base (2^59): with the
// base and every block at kMaxQuantity it keeps the problem's keep-all
// peak below the exact solver's sentinel (checked there).
inline constexpr int64_t kMaxCalibrationBytes = kMaxPeakBytes / 2;

// INVALID_ARGUMENT "field: what": every validation message starts with the
// field it is about.
absl::Status InvalidField(const std::string& field, const std::string& what);
// `s` with `prefix` before its message (the enclosing field, e.g.
// "samples[3]."), same code; OK stays OK.
absl::Status Prefixed(const std::string& prefix, const absl::Status& s);

// OK, or INVALID_ARGUMENT naming the offending field (e.g. "blocks[3].name").
absl::Status ValidateModelSpec(const ModelSpec& model);

// OK when `features` has one value in [0, kMaxFeatureValue] per feature of
// `model`; else INVALID_ARGUMENT naming the field (prefix + "[i]").
absl::Status ValidateFeatures(const ModelSpec& model, const Features& features,
                              const std::string& field = "features");

// OK when the sample matches `model` (feature and block counts) and every
// value lies in its range (features: ValidateFeatures; block quantities,
// base_bytes and tail_bytes: [0, kMaxQuantity]; peak_bytes: [0, kMaxPeakBytes]; the link's
// bandwidths: (0, kMaxLinkBytesPerS]); else
// INVALID_ARGUMENT naming the field and the range.
absl::Status ValidateSample(const ModelSpec& model, const Sample& sample);

// OK when `device` names a device type: empty (not said), or at most
// kMaxNameLength characters of valid UTF-8; else INVALID_ARGUMENT naming
// `field`.
absl::Status ValidateDevice(const std::string& device,
                            const std::string& field = "device");

// OK when `bytes` is in (0, kMaxPeakBytes]; else INVALID_ARGUMENT naming
// `field` and the range.
absl::Status ValidateBudget(int64_t bytes, const std::string& field =
                                               "budget_bytes");

// Index of `feature` in model.feature_names, or nullopt.
std::optional<int> FeatureIndex(const ModelSpec& model,
                                const std::string& feature);

}  // namespace remat

#endif  // REMAT_PLANNER_MODEL_H_
