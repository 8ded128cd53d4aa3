// The demo's models: each a chain of blocks for the checkpoint runtime
// (client/runtime.h) and a synthetic task to train it on, for batches whose
// shape varies (examples/workload.h). The trainer and the benchmarks pick
// one by name: "encoder" (encoder.h), "decoder" (decoder.h) or "cnn"
// (cnn.h).
#ifndef REMAT_EXAMPLES_MODELS_H_
#define REMAT_EXAMPLES_MODELS_H_

#include <memory>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "client/block_function.h"
#include "examples/workload.h"

namespace remat {

// Sizes of the transformer models.
struct TransformerOptions {
  int64_t vocab = 1024;
  int64_t width = 128;  // d_model
  int64_t heads = 4;
  int64_t ffn = 512;    // feed-forward width
  int64_t depth = 6;    // layers
  int64_t classes = 2;  // the encoder's classifier
  double dropout = 0.1;
  // Each layer as two blocks, attention and MLP (the granularity at which
  // Megatron's selective recompute decides), rather than one.
  bool sublayers = false;
};

// Sizes of the CNN (cnn.h).
struct CnnOptions {
  int64_t channels = 16;  // of the stem; stages have 1x, 2x and 4x
  int64_t blocks_per_stage = 2;
  int64_t classes = 2;
};

struct NamedBlock {
  std::string name;
  torch::nn::AnyModule module;
  bool checkpointable = true;
  // forward(const Tensors&, const Tensors&) -> Tensors; else one tensor.
  bool takes_tensors = false;
};

// One training batch on the CPU: the model's inputs, the side inputs every
// block reads (masks), and what the loss compares the output with.
struct DemoBatch {
  Tensors inputs;
  Tensors side;
  torch::Tensor labels;
};

class DemoModel {
 public:
  virtual ~DemoModel() = default;
  virtual std::vector<NamedBlock> MakeBlocks() const = 0;
  // A batch of `shape`, drawn from `generator` alone (every strategy of a
  // benchmark sees the same data).
  virtual DemoBatch MakeBatch(const BatchShape& shape,
                              torch::Generator& generator) const = 0;
  virtual torch::Tensor Loss(const torch::Tensor& output,
                             const torch::Tensor& labels) const = 0;
  // The features plans depend on, and their values for a batch shape:
  // batch and seq for the transformers; batch, height, width for the CNN.
  virtual std::vector<std::string> FeatureNames() const {
    return {"batch", "seq"};
  }
  virtual std::vector<double> FeaturesOf(const BatchShape& shape) const {
    return {static_cast<double>(shape.batch), static_cast<double>(shape.seq)};
  }
};

// The model called `name` ("encoder", "decoder" or "cnn"); null for any
// other.
std::unique_ptr<DemoModel> NewDemoModel(const std::string& name,
                                        const TransformerOptions& transformer,
                                        const CnnOptions& cnn = {});
// The names NewDemoModel knows.
std::vector<std::string> DemoModelNames();

}  // namespace remat

#endif  // REMAT_EXAMPLES_MODELS_H_
