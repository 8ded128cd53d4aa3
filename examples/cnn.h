// The demo's ResNet-like CNN, DELTA's setting: images whose height and
// width vary per batch (multi-scale training), features batch, height and
// width. GroupNorm rather than BatchNorm, so that a recomputed block does
// not update running statistics a second time (a block must be a pure
// function of its inputs, client/checkpoint.h).
//
//   stem:    conv 3x3, 3 -> C channels, GroupNorm, ReLU
//   stageS_B (stage S = 0, 1, 2 of C, 2C, 4C channels; block B): `blocks_per_stage` residual
//            blocks (conv 3x3, GroupNorm, ReLU, conv 3x3, GroupNorm, plus
//            the input, ReLU), the first of stages 1 and 2 with stride 2
//            and a 1x1 projection on the skip path
//   head:    global average pool, Linear -> logits [batch, classes]
#ifndef REMAT_EXAMPLES_CNN_H_
#define REMAT_EXAMPLES_CNN_H_

#include <vector>

#include "examples/models.h"

namespace remat {

std::vector<NamedBlock> MakeCnnBlocks(const CnnOptions& options);

// A synthetic, learnable task: an image [3, height, width] of noise with a
// faint brightness ramp, left to right for class 0 and top to bottom for
// class 1. inputs {images [batch, 3, height, width]}, labels [batch].
DemoBatch MakeImageBatch(const CnnOptions& options, int64_t batch,
                         int64_t height, int64_t width,
                         torch::Generator& generator);

}  // namespace remat

#endif  // REMAT_EXAMPLES_CNN_H_
