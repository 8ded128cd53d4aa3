// The model, workload and device flags that the demo trainer (`train`) and
// the strategy benchmark (bench:e2e) share, so both describe a run alike.
#ifndef REMAT_EXAMPLES_TRAINER_FLAGS_H_
#define REMAT_EXAMPLES_TRAINER_FLAGS_H_

#include <string>

#include <CLI/CLI.hpp>

#include "examples/trainer.h"

namespace remat {

// --device, --depth, --width, --heads, --ffn, --vocab, --batch, --min-seq,
// --max-seq, --median-seq, --seed, with their defaults from `options`.
void AddTrainerFlags(CLI::App* app, TrainerOptions* options);

// After parsing: checks what one flag cannot (width a multiple of heads)
// and derives the rest (the workload's seed). Returns an error text for
// the user, empty when the options are fine.
std::string FinishTrainerFlags(TrainerOptions* options);

}  // namespace remat

#endif  // REMAT_EXAMPLES_TRAINER_FLAGS_H_
