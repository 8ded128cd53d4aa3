#include "planner/hard_chain_for_test.h"

#include <random>

namespace remat {
namespace testing {
namespace {

struct Jitter {
  std::vector<double> act, input, time;
};

Jitter MakeJitter(size_t blocks) {
  std::mt19937_64 rng(4242);
  std::normal_distribution<double> noise(1.0, 0.01);
  Jitter j;
  for (size_t i = 0; i < blocks; ++i) {
    const double kind = i % 2 == 0 ? 1.5 : 1.0;
    j.act.push_back(kind * noise(rng));
    j.input.push_back(noise(rng));
    j.time.push_back(kind * noise(rng));
  }
  return j;
}

// b*s^2 (attention-like) plus b*s (MLP-like) terms, which a degree-2 fit
// over {batch, seq} recovers, scaled per block.
Sample At(const ModelSpec& spec, const Jitter& j, double b, double s) {
  Sample sample;
  sample.features = {b, s};
  const double bs = b * s;
  for (size_t i = 0; i < spec.blocks.size(); ++i) {
    sample.blocks.push_back(
        {static_cast<int64_t>((4000 * bs + 4 * bs * s) * j.act[i]),
         static_cast<int64_t>(512 * bs * j.input[i]),
         static_cast<int64_t>(1000 * bs * j.time[i])});
  }
  sample.base_bytes = 1 << 20;
  return sample;
}

// Under ASan or TSan, fitting takes ten times longer and so does the search:
// 200 blocks are still far harder than any solve deadline the tests set.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr int kBlocks = 200;
#else
constexpr int kBlocks = 400;
#endif

}  // namespace

ModelSpec HardChainModel(const std::string& name) {
  ModelSpec spec{name, {"batch", "seq"}, {}};
  for (int i = 0; i < kBlocks; ++i) {
    spec.blocks.push_back({"layer" + std::to_string(i), i != 0});
  }
  return spec;
}

std::vector<Sample> HardChainSamples(const ModelSpec& spec) {
  const Jitter j = MakeJitter(spec.blocks.size());
  std::vector<Sample> samples;
  for (double b : {1, 2, 4, 8}) {
    for (double s : {64, 128, 256, 512}) samples.push_back(At(spec, j, b, s));
  }
  return samples;
}

int64_t HardChainBudgetBytes(const ModelSpec& spec) {
  const Sample s =
      At(spec, MakeJitter(spec.blocks.size()), kHardBatch, kHardSeq);
  int64_t peak = *s.base_bytes;
  for (const BlockMeasurement& m : s.blocks) peak += m.act_bytes;
  return peak * 7 / 10;
}

}  // namespace testing
}  // namespace remat
