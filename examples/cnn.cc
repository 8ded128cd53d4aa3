#include "examples/cnn.h"

#include <string>

namespace remat {
namespace {

torch::nn::Conv2d Conv(int64_t in, int64_t out, int64_t kernel,
                       int64_t stride) {
  return torch::nn::Conv2d(torch::nn::Conv2dOptions(in, out, kernel)
                               .stride(stride)
                               .padding(kernel / 2)
                               .bias(false));
}

torch::nn::GroupNorm Norm(int64_t channels) {
  return torch::nn::GroupNorm(
      torch::nn::GroupNormOptions(std::min<int64_t>(8, channels), channels));
}

class StemImpl : public torch::nn::Module {
 public:
  explicit StemImpl(int64_t channels)
      : conv_(register_module("conv", Conv(3, channels, 3, 1))),
        norm_(register_module("norm", Norm(channels))) {}
  torch::Tensor forward(const torch::Tensor& x) {
    return torch::relu(norm_(conv_(x)));
  }

 private:
  torch::nn::Conv2d conv_;
  torch::nn::GroupNorm norm_;
};
TORCH_MODULE(Stem);

class ResidualImpl : public torch::nn::Module {
 public:
  ResidualImpl(int64_t in, int64_t out, int64_t stride)
      : conv1_(register_module("conv1", Conv(in, out, 3, stride))),
        norm1_(register_module("norm1", Norm(out))),
        conv2_(register_module("conv2", Conv(out, out, 3, 1))),
        norm2_(register_module("norm2", Norm(out))) {
    if (stride != 1 || in != out) {
      project_ = register_module("project", Conv(in, out, 1, stride));
    }
  }
  torch::Tensor forward(const torch::Tensor& x) {
    const torch::Tensor y = norm2_(conv2_(torch::relu(norm1_(conv1_(x)))));
    return torch::relu(y + (project_ ? project_(x) : x));
  }

 private:
  torch::nn::Conv2d conv1_;
  torch::nn::GroupNorm norm1_;
  torch::nn::Conv2d conv2_;
  torch::nn::GroupNorm norm2_;
  torch::nn::Conv2d project_{nullptr};
};
TORCH_MODULE(Residual);

class PoolHeadImpl : public torch::nn::Module {
 public:
  PoolHeadImpl(int64_t channels, int64_t classes)
      : linear_(register_module("linear",
                                torch::nn::Linear(channels, classes))) {}
  torch::Tensor forward(const torch::Tensor& x) {
    return linear_(x.mean({2, 3}));
  }

 private:
  torch::nn::Linear linear_;
};
TORCH_MODULE(PoolHead);

}  // namespace

std::vector<NamedBlock> MakeCnnBlocks(const CnnOptions& o) {
  std::vector<NamedBlock> blocks;
  blocks.push_back({"stem", torch::nn::AnyModule(Stem(o.channels)), true});
  int64_t channels = o.channels;
  for (int stage = 0; stage < 3; ++stage) {
    const int64_t out = o.channels << stage;
    for (int64_t b = 0; b < o.blocks_per_stage; ++b) {
      const int64_t stride = stage > 0 && b == 0 ? 2 : 1;
      blocks.push_back({"stage" + std::to_string(stage) + "_" +
                            std::to_string(b),
                        torch::nn::AnyModule(Residual(channels, out, stride)),
                        true});
      channels = out;
    }
  }
  blocks.push_back(
      {"head", torch::nn::AnyModule(PoolHead(channels, o.classes)), true});
  return blocks;
}

DemoBatch MakeImageBatch(const CnnOptions& o, int64_t batch, int64_t height,
                         int64_t width, torch::Generator& generator) {
  TORCH_CHECK(height > 0 && width > 0, "cnn: image size ", height, "x", width);
  const torch::Tensor labels =
      torch::randint(o.classes, {batch}, generator, torch::kLong);
  const torch::Tensor across =
      torch::linspace(-1, 1, width).view({1, 1, 1, width});
  const torch::Tensor down =
      torch::linspace(-1, 1, height).view({1, 1, height, 1});
  const torch::Tensor vertical =
      (labels % 2 == 1).to(torch::kFloat).view({batch, 1, 1, 1});
  const torch::Tensor ramp = across * (1 - vertical) + down * vertical;
  const torch::Tensor noise =
      torch::randn({batch, 3, height, width}, generator, torch::kFloat);
  return {{noise + 0.5 * ramp}, {}, labels};
}

}  // namespace remat
