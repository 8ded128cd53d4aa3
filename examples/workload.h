// The demo's synthetic workload: batch shapes whose sequence lengths follow
// a skewed distribution like a question-answering dataset's (SQuAD with a
// BERT tokenizer: most context+question pairs are 100-250 tokens, a long
// tail reaches the 512-token limit). No LibTorch here.
#ifndef REMAT_EXAMPLES_WORKLOAD_H_
#define REMAT_EXAMPLES_WORKLOAD_H_

#include <cstdint>
#include <random>
#include <vector>

namespace remat {

struct WorkloadOptions {
  int64_t batch = 8;        // sequences per batch (fixed)
  int64_t min_seq = 32;     // shortest sequence, tokens
  int64_t max_seq = 512;    // longest sequence (the truncation limit)
  double median_seq = 150;  // median of the log-normal length distribution
  double sigma = 0.55;      // log-normal shape: larger => longer tail
  // Images (the cnn model): height and width each drawn uniformly from
  // the multiples of 16 in [min_size, max_size], as multi-scale training
  // for detection does, from a generator of their own (the sequence
  // lengths are those of the same seed without images).
  int64_t min_size = 32;
  int64_t max_size = 96;
  uint64_t seed = 1;
};

struct BatchShape {
  int64_t batch = 0;
  int64_t seq = 0;  // every sequence of a batch is padded to this length
  int64_t height = 0;  // images: pixels
  int64_t width = 0;
};

// Draws batch shapes: seq ~ LogNormal(log(median_seq), sigma), clipped to
// [min_seq, max_seq]. Deterministic for a seed, so every strategy of a
// benchmark sees the same sequence of batches.
class Workload {
 public:
  explicit Workload(const WorkloadOptions& options);
  BatchShape Next();
  // The first `steps` shapes from a fresh generator with these options.
  static std::vector<BatchShape> Draw(const WorkloadOptions& options,
                                      int steps);
  // The largest shape these options draw (what a budget is sized for).
  static BatchShape Largest(const WorkloadOptions& options);

 private:
  WorkloadOptions options_;
  std::mt19937_64 rng_;
  std::mt19937_64 size_rng_;
  std::lognormal_distribution<double> seq_;
  std::uniform_int_distribution<int64_t> size_;  // in units of 16 pixels
};

}  // namespace remat

#endif  // REMAT_EXAMPLES_WORKLOAD_H_
