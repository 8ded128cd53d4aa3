// The demo's GPT-like decoder: pre-LN layers with causal self-attention,
// trained on next-token prediction over sequences of varying length,
// padded to the longest of their batch. Its layers are blocks of several
// tensors (client/runtime.h): the hidden state flows from block to block,
// the causal and padding masks are the step's side inputs.
//
//   embed: token ids [batch, seq] -> hidden [seq, batch, width], token and
//          learned position embeddings (not checkpointable: integer input)
//   layer0..layerN-1: {hidden}, side {causal [seq, seq], padding
//          [batch, seq]} -> {hidden}; h += attn(ln1(h)); h += mlp(ln2(h))
//          (with TransformerOptions::sublayers, each as two blocks:
//          layerI_attn, of several tensors, and layerI_mlp, of one)
//   head:  LayerNorm, Linear -> logits [seq, batch, vocab]
#ifndef REMAT_EXAMPLES_DECODER_H_
#define REMAT_EXAMPLES_DECODER_H_

#include <vector>

#include "examples/models.h"

namespace remat {

// The longest sequence the position embedding covers.
inline constexpr int64_t kDecoderMaxSeq = 8192;

std::vector<NamedBlock> MakeDecoderBlocks(const TransformerOptions& options);

// The tokens the task uses: the first ones of the vocabulary.
inline constexpr int64_t kDecoderCountRange = 64;

// A synthetic, learnable task: each sequence counts up from a random token
// with a stride of 1, 2 or 3 modulo kDecoderCountRange (or the vocabulary,
// if smaller), one token in ten replaced by a random one of that range; its length is drawn between half the batch's and all of it
// (one sequence has the full length). inputs {ids [batch, seq]}, side
// {causal mask [seq, seq], padding mask [batch, seq]} (both boolean, true
// where attention is not allowed), labels [seq, batch]: the next token,
// -100 (ignored) after a sequence's last token.
DemoBatch MakeDecoderBatch(const TransformerOptions& options, int64_t batch,
                           int64_t seq, torch::Generator& generator);

}  // namespace remat

#endif  // REMAT_EXAMPLES_DECODER_H_
