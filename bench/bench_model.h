// The model bench:grpc_load and bench:report_load put in the real daemon:
// "bench", features {batch, seq}, a non-checkpointable "embed", transformer
// layers and a "head", with samples on a grid that the estimator fits.
#ifndef REMAT_BENCH_BENCH_MODEL_H_
#define REMAT_BENCH_BENCH_MODEL_H_

#include "absl/status/status.h"
#include "proto/remat.grpc.pb.h"

namespace remat {

// `blocks` >= 2 blocks: embed, blocks - 2 layers, head.
v1::ModelSpec BenchModel(int blocks);
v1::Sample BenchSample(int blocks, double batch, double seq);
// Registers BenchModel(blocks) and reports BenchSample for batch in
// {1, 2, 3, 4, 6, 8} x seq in 64..640 by 32 (114 samples).
absl::Status RegisterAndSeed(v1::Planner::Stub& stub, int blocks);

}  // namespace remat

#endif  // REMAT_BENCH_BENCH_MODEL_H_
