// The demo model: a transformer encoder classifier built from torch::nn
// parts, as a chain of blocks that each take and return one tensor, so the
// checkpoint runtime can decide per block whether to keep or recompute.
//
//   embed: token ids [batch, seq] -> [seq, batch, width] (not checkpointable:
//          its input is integer ids, and it is cheap)
//   layer0..layerN-1: torch::nn::TransformerEncoderLayer, [seq, batch, width]
//          (with TransformerOptions::sublayers, each as two blocks,
//          layerI_attn and layerI_mlp, with the same computation)
//   head:  mean over seq, Linear -> logits [batch, classes]
#ifndef REMAT_EXAMPLES_ENCODER_H_
#define REMAT_EXAMPLES_ENCODER_H_

#include <string>
#include <utility>
#include <vector>

#include <torch/torch.h>

#include "examples/models.h"

namespace remat {

std::vector<NamedBlock> MakeEncoderBlocks(const TransformerOptions& options);

// A synthetic, learnable task: the label says whether most tokens of a
// sequence come from the lower half of the vocabulary. Returns token ids
// [batch, seq] and labels [batch].
std::pair<torch::Tensor, torch::Tensor> MakeTokenBatch(
    const TransformerOptions& options, int64_t batch, int64_t seq,
    torch::Generator& generator);

}  // namespace remat

#endif  // REMAT_EXAMPLES_ENCODER_H_
