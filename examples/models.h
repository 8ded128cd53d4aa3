// The demo's models: each a chain of blocks for the checkpoint runtime
// (client/runtime.h) and a synthetic task to train it on, for batches whose
// shape varies (examples/workload.h). The trainer and the benchmarks pick
// one by name: "encoder" (encoder.h) or "decoder" (decoder.h).
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
};

// The model called `name` ("encoder" or "decoder"); null for any other.
std::unique_ptr<DemoModel> NewDemoModel(const std::string& name,
                                        const TransformerOptions& options);
// The names NewDemoModel knows.
std::vector<std::string> DemoModelNames();

}  // namespace remat

#endif  // REMAT_EXAMPLES_MODELS_H_
