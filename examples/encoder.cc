#include "examples/encoder.h"

namespace remat {
namespace {

// Token ids [batch, seq] -> embeddings [seq, batch, width] (the layout
// TransformerEncoderLayer takes).
class EmbedImpl : public torch::nn::Module {
 public:
  explicit EmbedImpl(const TransformerOptions& o)
      : embedding_(register_module(
            "embedding", torch::nn::Embedding(o.vocab, o.width))) {}
  torch::Tensor forward(const torch::Tensor& ids) {
    return embedding_(ids).transpose(0, 1).contiguous();
  }

 private:
  torch::nn::Embedding embedding_;
};
TORCH_MODULE(Embed);

// [seq, batch, width] -> logits [batch, classes].
class HeadImpl : public torch::nn::Module {
 public:
  explicit HeadImpl(const TransformerOptions& o)
      : linear_(register_module("linear",
                                torch::nn::Linear(o.width, o.classes))) {}
  torch::Tensor forward(const torch::Tensor& x) { return linear_(x.mean(0)); }

 private:
  torch::nn::Linear linear_;
};
TORCH_MODULE(Head);

// The two halves of torch::nn::TransformerEncoderLayer (post-LN, ReLU), as
// blocks of their own: x = norm1(x + dropout(attn(x))), then
// x = norm2(x + dropout(linear2(dropout(relu(linear1(x)))))).
class AttentionHalfImpl : public torch::nn::Module {
 public:
  explicit AttentionHalfImpl(const TransformerOptions& o)
      : attn_(register_module(
            "attn", torch::nn::MultiheadAttention(
                        torch::nn::MultiheadAttentionOptions(o.width, o.heads)
                            .dropout(o.dropout)))),
        drop_(register_module("drop", torch::nn::Dropout(o.dropout))),
        norm_(register_module("norm",
                              torch::nn::LayerNorm(
                                  torch::nn::LayerNormOptions({o.width})))) {}
  torch::Tensor forward(const torch::Tensor& x) {
    return norm_(x + drop_(std::get<0>(attn_(x, x, x, torch::Tensor(),
                                                  /*need_weights=*/false))));
  }

 private:
  torch::nn::MultiheadAttention attn_;
  torch::nn::Dropout drop_;
  torch::nn::LayerNorm norm_;
};
TORCH_MODULE(AttentionHalf);

class MlpHalfImpl : public torch::nn::Module {
 public:
  explicit MlpHalfImpl(const TransformerOptions& o)
      : up_(register_module("up", torch::nn::Linear(o.width, o.ffn))),
        down_(register_module("down", torch::nn::Linear(o.ffn, o.width))),
        drop_(register_module("drop", torch::nn::Dropout(o.dropout))),
        norm_(register_module("norm",
                              torch::nn::LayerNorm(
                                  torch::nn::LayerNormOptions({o.width})))) {}
  torch::Tensor forward(const torch::Tensor& x) {
    return norm_(x + drop_(down_(drop_(torch::relu(up_(x))))));
  }

 private:
  torch::nn::Linear up_;
  torch::nn::Linear down_;
  torch::nn::Dropout drop_;
  torch::nn::LayerNorm norm_;
};
TORCH_MODULE(MlpHalf);

}  // namespace

std::vector<NamedBlock> MakeEncoderBlocks(const TransformerOptions& o) {
  std::vector<NamedBlock> blocks;
  blocks.push_back({"embed", torch::nn::AnyModule(Embed(o)), false});
  for (int64_t i = 0; i < o.depth && o.sublayers; ++i) {
    const std::string layer = "layer" + std::to_string(i);
    blocks.push_back(
        {layer + "_attn", torch::nn::AnyModule(AttentionHalf(o)), true});
    blocks.push_back({layer + "_mlp", torch::nn::AnyModule(MlpHalf(o)), true});
  }
  for (int64_t i = 0; i < o.depth && !o.sublayers; ++i) {
    torch::nn::TransformerEncoderLayer layer(
        torch::nn::TransformerEncoderLayerOptions(o.width, o.heads)
            .dim_feedforward(o.ffn)
            .dropout(o.dropout));
    blocks.push_back(
        {"layer" + std::to_string(i), torch::nn::AnyModule(layer), true});
  }
  blocks.push_back({"head", torch::nn::AnyModule(Head(o)), true});
  return blocks;
}

std::pair<torch::Tensor, torch::Tensor> MakeTokenBatch(
    const TransformerOptions& o, int64_t batch, int64_t seq,
    torch::Generator& generator) {
  // Each sequence leans clearly to the lower or upper half of the
  // vocabulary (75% of its tokens), so the task is learnable in a few dozen
  // steps.
  const torch::Tensor lean =
      torch::where(torch::rand({batch, 1}, generator, torch::kFloat) < 0.5,
                   torch::full({batch, 1}, 0.25), torch::full({batch, 1}, 0.75));
  const torch::Tensor lower =
      torch::rand({batch, seq}, generator, torch::kFloat) < lean;
  const torch::Tensor half =
      torch::randint(o.vocab / 2, {batch, seq}, generator, torch::kLong);
  const torch::Tensor ids = torch::where(lower, half, half + o.vocab / 2);
  const torch::Tensor labels =
      (lower.to(torch::kFloat).mean(1) > 0.5).to(torch::kLong);
  return {ids, labels};
}

}  // namespace remat
