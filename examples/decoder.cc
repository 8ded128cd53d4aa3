#include "examples/decoder.h"

#include <algorithm>
#include <string>

namespace remat {
namespace {

class EmbedImpl : public torch::nn::Module {
 public:
  explicit EmbedImpl(const TransformerOptions& o)
      : tokens_(register_module("tokens",
                                torch::nn::Embedding(o.vocab, o.width))),
        positions_(register_module(
            "positions", torch::nn::Embedding(kDecoderMaxSeq, o.width))) {}
  // ids [batch, seq] -> [seq, batch, width]
  torch::Tensor forward(const torch::Tensor& ids) {
    const torch::Tensor at = torch::arange(ids.size(1), ids.options());
    return (tokens_(ids) + positions_(at).unsqueeze(0))
        .transpose(0, 1)
        .contiguous();
  }

 private:
  torch::nn::Embedding tokens_;
  torch::nn::Embedding positions_;
};
TORCH_MODULE(Embed);


// A decoder layer's halves, each a block of its own with --sublayers:
// h += attn(ln1(h)), then h += mlp(ln2(h)).
class DecoderAttentionImpl : public torch::nn::Module {
 public:
  explicit DecoderAttentionImpl(const TransformerOptions& o)
      : ln_(register_module(
            "ln", torch::nn::LayerNorm(
                      torch::nn::LayerNormOptions({o.width})))),
        attn_(register_module(
            "attn", torch::nn::MultiheadAttention(
                        torch::nn::MultiheadAttentionOptions(o.width, o.heads)
                            .dropout(o.dropout)))),
        drop_(register_module("drop", torch::nn::Dropout(o.dropout))) {}
  Tensors forward(const Tensors& in, const Tensors& side) {
    const torch::Tensor a = ln_(in[0]);
    return {in[0] + drop_(std::get<0>(attn_(a, a, a, side[1],
                                            /*need_weights=*/false, side[0])))};
  }

 private:
  torch::nn::LayerNorm ln_;
  torch::nn::MultiheadAttention attn_;
  torch::nn::Dropout drop_;
};
TORCH_MODULE(DecoderAttention);

class DecoderMlpImpl : public torch::nn::Module {
 public:
  explicit DecoderMlpImpl(const TransformerOptions& o)
      : ln_(register_module(
            "ln", torch::nn::LayerNorm(
                      torch::nn::LayerNormOptions({o.width})))),
        up_(register_module("up", torch::nn::Linear(o.width, o.ffn))),
        down_(register_module("down", torch::nn::Linear(o.ffn, o.width))),
        drop_(register_module("drop", torch::nn::Dropout(o.dropout))) {}
  torch::Tensor forward(const torch::Tensor& h) {
    return h + drop_(down_(torch::gelu(up_(ln_(h)))));
  }

 private:
  torch::nn::LayerNorm ln_;
  torch::nn::Linear up_;
  torch::nn::Linear down_;
  torch::nn::Dropout drop_;
};
TORCH_MODULE(DecoderMlp);

// One layer: both halves in one block.
class DecoderLayerImpl : public torch::nn::Module {
 public:
  explicit DecoderLayerImpl(const TransformerOptions& o)
      : attention_(register_module("attention", DecoderAttention(o))),
        mlp_(register_module("mlp", DecoderMlp(o))) {}
  Tensors forward(const Tensors& in, const Tensors& side) {
    return {mlp_(attention_->forward(in, side)[0])};
  }

 private:
  DecoderAttention attention_;
  DecoderMlp mlp_;
};
TORCH_MODULE(DecoderLayer);

class HeadImpl : public torch::nn::Module {
 public:
  explicit HeadImpl(const TransformerOptions& o)
      : ln_(register_module("ln", torch::nn::LayerNorm(
                                      torch::nn::LayerNormOptions({o.width})))),
        linear_(register_module("linear",
                                torch::nn::Linear(o.width, o.vocab))) {}
  torch::Tensor forward(const torch::Tensor& h) { return linear_(ln_(h)); }

 private:
  torch::nn::LayerNorm ln_;
  torch::nn::Linear linear_;
};
TORCH_MODULE(Head);

}  // namespace

std::vector<NamedBlock> MakeDecoderBlocks(const TransformerOptions& o) {
  std::vector<NamedBlock> blocks;
  blocks.push_back({"embed", torch::nn::AnyModule(Embed(o)), false, false});
  for (int64_t i = 0; i < o.depth; ++i) {
    const std::string layer = "layer" + std::to_string(i);
    if (o.sublayers) {
      blocks.push_back({layer + "_attn",
                        torch::nn::AnyModule(DecoderAttention(o)), true, true});
      blocks.push_back(
          {layer + "_mlp", torch::nn::AnyModule(DecoderMlp(o)), true, false});
    } else {
      blocks.push_back(
          {layer, torch::nn::AnyModule(DecoderLayer(o)), true, true});
    }
  }
  blocks.push_back({"head", torch::nn::AnyModule(Head(o)), true, false});
  return blocks;
}

DemoBatch MakeDecoderBatch(const TransformerOptions& o, int64_t batch,
                           int64_t seq, torch::Generator& generator) {
  TORCH_CHECK(seq >= 2 && seq <= kDecoderMaxSeq, "decoder: seq ", seq,
              " outside [2, ", kDecoderMaxSeq, "]");
  const int64_t range = std::min<int64_t>(o.vocab, kDecoderCountRange);
  const torch::Tensor start =
      torch::randint(range, {batch, 1}, generator, torch::kLong);
  const torch::Tensor stride =
      torch::randint(1, 4, {batch, 1}, generator, torch::kLong);
  const torch::Tensor counting =
      (start + stride * torch::arange(seq, torch::kLong)) % range;
  const torch::Tensor noise =
      torch::randint(range, {batch, seq}, generator, torch::kLong);
  const torch::Tensor replaced =
      torch::rand({batch, seq}, generator, torch::kFloat) < 0.1;
  const torch::Tensor ids = torch::where(replaced, noise, counting);
  // Lengths in [seq/2, seq], the first sequence at seq.
  torch::Tensor lengths =
      torch::randint(std::max<int64_t>(seq / 2, 1), seq + 1, {batch},
                     generator, torch::kLong);
  lengths[0] = seq;
  const torch::Tensor position = torch::arange(seq, torch::kLong);
  const torch::Tensor padding = position.unsqueeze(0) >= lengths.unsqueeze(1);
  // The next token, where there is one within the sequence.
  torch::Tensor labels = torch::full({batch, seq}, -100, torch::kLong);
  labels.slice(1, 0, seq - 1).copy_(ids.slice(1, 1, seq));
  labels.masked_fill_(position.unsqueeze(0) >= lengths.unsqueeze(1) - 1, -100);
  const torch::Tensor causal =
      torch::ones({seq, seq}, torch::kBool).triu(/*diagonal=*/1);
  return {{ids}, {causal, padding}, labels.t().contiguous()};
}

}  // namespace remat
