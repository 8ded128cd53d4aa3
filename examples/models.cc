#include "examples/models.h"

#include "examples/cnn.h"
#include "examples/decoder.h"
#include "examples/encoder.h"

namespace remat {
namespace {

class EncoderModel final : public DemoModel {
 public:
  explicit EncoderModel(const TransformerOptions& o) : options_(o) {}
  std::vector<NamedBlock> MakeBlocks() const override {
    return MakeEncoderBlocks(options_);
  }
  DemoBatch MakeBatch(const BatchShape& shape,
                      torch::Generator& generator) const override {
    auto [ids, labels] =
        MakeTokenBatch(options_, shape.batch, shape.seq, generator);
    return {{ids}, {}, labels};
  }
  torch::Tensor Loss(const torch::Tensor& logits,
                     const torch::Tensor& labels) const override {
    return torch::nn::functional::cross_entropy(logits, labels);
  }

 private:
  TransformerOptions options_;
};

class DecoderModel final : public DemoModel {
 public:
  explicit DecoderModel(const TransformerOptions& o) : options_(o) {}
  std::vector<NamedBlock> MakeBlocks() const override {
    return MakeDecoderBlocks(options_);
  }
  DemoBatch MakeBatch(const BatchShape& shape,
                      torch::Generator& generator) const override {
    return MakeDecoderBatch(options_, shape.batch, shape.seq, generator);
  }
  torch::Tensor Loss(const torch::Tensor& logits,
                     const torch::Tensor& labels) const override {
    return torch::nn::functional::cross_entropy(
        logits.reshape({-1, logits.size(-1)}), labels.reshape({-1}),
        torch::nn::functional::CrossEntropyFuncOptions().ignore_index(-100));
  }

 private:
  TransformerOptions options_;
};

class CnnModel final : public DemoModel {
 public:
  explicit CnnModel(const CnnOptions& o) : options_(o) {}
  std::vector<NamedBlock> MakeBlocks() const override {
    return MakeCnnBlocks(options_);
  }
  DemoBatch MakeBatch(const BatchShape& shape,
                      torch::Generator& generator) const override {
    return MakeImageBatch(options_, shape.batch, shape.height, shape.width,
                          generator);
  }
  torch::Tensor Loss(const torch::Tensor& logits,
                     const torch::Tensor& labels) const override {
    return torch::nn::functional::cross_entropy(logits, labels);
  }
  std::vector<std::string> FeatureNames() const override {
    return {"batch", "height", "width"};
  }
  std::vector<double> FeaturesOf(const BatchShape& shape) const override {
    return {static_cast<double>(shape.batch),
            static_cast<double>(shape.height),
            static_cast<double>(shape.width)};
  }

 private:
  CnnOptions options_;
};

}  // namespace

std::unique_ptr<DemoModel> NewDemoModel(const std::string& name,
                                        const TransformerOptions& transformer,
                                        const CnnOptions& cnn) {
  if (name == "encoder") return std::make_unique<EncoderModel>(transformer);
  if (name == "decoder") return std::make_unique<DecoderModel>(transformer);
  if (name == "cnn") return std::make_unique<CnnModel>(cnn);
  return nullptr;
}

std::vector<std::string> DemoModelNames() {
  return {"encoder", "decoder", "cnn"};
}

}  // namespace remat
