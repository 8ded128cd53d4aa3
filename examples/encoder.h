// The demo model: a transformer encoder classifier built from torch::nn
// parts, as a chain of blocks that each take and return one tensor, so the
// checkpoint runtime can decide per block whether to keep or recompute.
//
//   embed: token ids [batch, seq] -> [seq, batch, width] (not checkpointable:
//          its input is integer ids, and it is cheap)
//   layer0..layerN-1: torch::nn::TransformerEncoderLayer, [seq, batch, width]
//   head:  mean over seq, Linear -> logits [batch, classes]
#ifndef REMAT_EXAMPLES_ENCODER_H_
#define REMAT_EXAMPLES_ENCODER_H_

#include <string>
#include <utility>
#include <vector>

#include <torch/torch.h>

namespace remat {

struct EncoderOptions {
  int64_t vocab = 1024;
  int64_t width = 128;  // d_model
  int64_t heads = 4;
  int64_t ffn = 512;    // feed-forward width
  int64_t depth = 6;    // encoder layers
  int64_t classes = 2;
  double dropout = 0.1;
};

struct NamedBlock {
  std::string name;
  torch::nn::AnyModule module;
  bool checkpointable = true;
};

std::vector<NamedBlock> MakeEncoderBlocks(const EncoderOptions& options);

// A synthetic, learnable task: the label says whether most tokens of a
// sequence come from the lower half of the vocabulary. Returns token ids
// [batch, seq] and labels [batch].
std::pair<torch::Tensor, torch::Tensor> MakeTokenBatch(
    const EncoderOptions& options, int64_t batch, int64_t seq,
    torch::Generator& generator);

}  // namespace remat

#endif  // REMAT_EXAMPLES_ENCODER_H_
