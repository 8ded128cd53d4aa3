// Estimator accuracy: how well the whole-step peak of a batch is predicted
// from the first K measured batches of a run, for remat's estimator and
// Mimose's baseline side by side.
//
// Synthetic traces model a BERT-base-like encoder fine-tuned on SQuAD with
// mixed precision: an embedding block, --blocks transformer layers and a QA
// head. Per layer the retained activations follow Korthikanti et al. (2022),
// s*b*h*(34 + 5*a*s/h) bytes: an MLP-like b*s term and an attention-like
// b*s^2 term, plus a constant (workspace, allocator rounding). Every measured
// block quantity carries independent multiplicative log-normal noise
// (--noise); the base (parameters, gradients, optimizer state) is the same
// every step, plus the batch's own tensors (noisy). Sequence lengths are
// log-normal (median 160 tokens) clipped to [32, 512], like SQuAD's
// question+context lengths; batch sizes vary uniformly in [1, 32].
//
// --model cnn replaces the encoder with a ResNet-50-like CNN trained on
// multi-scale images (DELTA's setting), three features: batch size (4..16)
// and image height and width (multiples of 32 in [64, 512], each drawn
// alone). A stem, 16 bottleneck blocks in four stages of 3, 4, 6 and 3 (the
// first of stages 2..4 halving the resolution) and a pooling head; every
// block's quantities follow b*h*w (channels times the pixels at its
// stage's resolution) plus a constant, with the same noise.
//
// The ground truth of a step is its measured keep-all peak: base plus every
// block's measured act_bytes (the memory model with nothing recomputed). With
// --trace, a recorded trace replaces the generator: the truth is peak_bytes
// when the row has it, predicted under the plan the row ran (a collected
// step runs the safe plan: every checkpointable block recomputed), else
// base_bytes (0 when absent) plus the row's act_bytes under keep-all.
//
// Output: one JSON line per estimator. Errors are over every held-out
// sample, trusted or not; untrusted_rate says how many the estimator flagged.

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "planner/estimator.h"
#include "planner/model.h"
#include "planner/plan.h"
#include "planner/trace.h"

namespace remat {
namespace {

struct Config {
  int train = 8;
  int test = 500;
  uint64_t seed = 1;
  int layers = 12;
  std::string model = "encoder";
  double noise = 0.03;
  std::string trace;
  std::string write_trace;
};

// BERT-base dimensions.
constexpr double kHidden = 768;
constexpr double kHeads = 12;
constexpr double kParams = 110e6;
// Bytes per parameter alive across steps with mixed-precision Adam: fp32
// master weights, fp16 weights and gradients, two fp32 moments.
constexpr double kBytesPerParam = 4 + 2 + 2 + 8;
// Effective tensor-core throughput for the forward-time model, flop/ns.
constexpr double kFlopPerNs = 100e3;
// Memory bandwidth for memory-bound blocks, bytes/ns (2 TB/s).
constexpr double kBytesPerNs = 2e3;
constexpr double kMiB = 1 << 20;

ModelSpec SyntheticModel(int layers) {
  ModelSpec m;
  m.name = "bert_squad_synthetic";
  m.feature_names = {"batch", "seq"};
  m.blocks.push_back({"embeddings", true});
  for (int i = 0; i < layers; ++i) {
    m.blocks.push_back({"layer" + std::to_string(i), true});
  }
  m.blocks.push_back({"qa_head", true});
  return m;
}

// Noise-free costs of each block, in the model's block order.
struct TrueCost {
  double act, input, forward_ns;
};

std::vector<TrueCost> TrueCosts(int layers, double b, double s) {
  const double h = kHidden;
  std::vector<TrueCost> out;
  // Embeddings: token ids in; fp16 sum, layer-norm input and a dropout mask.
  out.push_back({5 * b * s * h + 2 * kMiB, 8 * b * s,
                 (10 * b * s * h) / kBytesPerNs + 20e3});
  for (int i = 0; i < layers; ++i) {
    const double act = s * b * h * (34 + 5 * kHeads * s / h) + 4 * kMiB;
    const double flops = 24 * b * s * h * h + 4 * b * s * s * h;
    out.push_back({act, 2 * b * s * h, flops / kFlopPerNs + 60e3});
  }
  // QA head: its fp16 input kept for the weight gradient, fp32 logits.
  out.push_back({2 * b * s * h + 8 * b * s + 1 * kMiB, 2 * b * s * h,
                 (4 * b * s * h) / kFlopPerNs + 15e3});
  return out;
}

// ResNet-50's bottleneck stages: blocks per stage and mid channels.
constexpr int kCnnStageBlocks[] = {3, 4, 6, 3};
constexpr double kCnnStageChannels[] = {64, 128, 256, 512};
constexpr double kCnnParams = 25.6e6;

ModelSpec CnnModel() {
  ModelSpec m;
  m.name = "resnet50_multiscale_synthetic";
  m.feature_names = {"batch", "height", "width"};
  m.blocks.push_back({"stem", true});
  for (int s = 0; s < 4; ++s) {
    for (int b = 0; b < kCnnStageBlocks[s]; ++b) {
      m.blocks.push_back(
          {"stage" + std::to_string(s) + "_" + std::to_string(b), true});
    }
  }
  m.blocks.push_back({"head", true});
  return m;
}

// fp16 activations; a bottleneck of mid channels c keeps its input (4c),
// three convolutions' outputs with their norms and ReLUs (c, c, 4c, each
// twice) and the residual sum (4c).
std::vector<TrueCost> CnnTrueCosts(double b, double h, double w) {
  std::vector<TrueCost> out;
  // Stem: 7x7 stride-2 convolution and a stride-2 pool, at 1/4 resolution.
  const double stem_pixels = b * h * w / 16;
  out.push_back({2 * 64 * stem_pixels * 6 + 1 * kMiB, 4 * 3 * b * h * w,
                 118e6 * b * h * w / (224 * 224) / kFlopPerNs + 30e3});
  double pixels = stem_pixels;
  for (int s = 0; s < 4; ++s) {
    const double c = kCnnStageChannels[s];
    for (int k = 0; k < kCnnStageBlocks[s]; ++k) {
      const double in_pixels = pixels;
      if (s > 0 && k == 0) pixels /= 4;  // stride 2
      const double act =
          2 * (4 * c * in_pixels + (2 * c + 2 * c + 8 * c + 4 * c) * pixels) +
          2 * kMiB;
      const double flops = 2 * pixels * (4 * c * c + 9 * c * c + 4 * c * c);
      out.push_back({act, 2 * 4 * c * in_pixels, flops / kFlopPerNs + 40e3});
    }
  }
  // Head: the pooled features and the logits.
  out.push_back({2 * 2048 * pixels + 4 * 1000 * b + 0.5 * kMiB,
                 2 * 2048 * pixels, 2 * 2048 * pixels / kBytesPerNs + 10e3});
  return out;
}

std::vector<Sample> Generate(const Config& c, int count) {
  std::mt19937_64 rng(c.seed);
  std::lognormal_distribution<double> seq_dist(std::log(160.0), 0.55);
  std::uniform_int_distribution<int> batch_dist(1, 32);
  std::uniform_int_distribution<int> image_batch_dist(4, 16);
  std::uniform_int_distribution<int> side_dist(2, 16);  // times 32 pixels
  std::normal_distribution<double> noise(0.0, c.noise);
  auto noisy = [&](double v) {
    return static_cast<int64_t>(std::llround(v * std::exp(noise(rng))));
  };
  const bool cnn = c.model == "cnn";
  std::vector<Sample> out;
  for (int i = 0; i < count; ++i) {
    Sample s;
    std::vector<TrueCost> costs;
    double batch_tensor_bytes = 0;
    if (cnn) {
      const double batch = image_batch_dist(rng);
      const double height = 32.0 * side_dist(rng);
      const double width = 32.0 * side_dist(rng);
      s.features = {batch, height, width};
      costs = CnnTrueCosts(batch, height, width);
      batch_tensor_bytes = 4 * 3 * batch * height * width + 8 * batch;
    } else {
      const double seq = std::clamp(std::round(seq_dist(rng)), 32.0, 512.0);
      const double batch = batch_dist(rng);
      s.features = {batch, seq};
      costs = TrueCosts(c.layers, batch, seq);
      batch_tensor_bytes = 4 * 8 * batch * seq;
    }
    int64_t act_sum = 0;
    for (const TrueCost& t : costs) {
      BlockMeasurement m;
      m.act_bytes = noisy(t.act);
      m.input_bytes = noisy(t.input);
      m.forward_ns = noisy(t.forward_ns);
      act_sum += m.act_bytes;
      s.blocks.push_back(m);
    }
    // Parameters and optimizer state are the same bytes every step; the
    // batch's tensors (ids, masks, labels) are measured.
    s.base_bytes =
        static_cast<int64_t>((cnn ? kCnnParams : kParams) * kBytesPerParam) +
        noisy(batch_tensor_bytes);
    s.peak_bytes = *s.base_bytes + act_sum;
    out.push_back(std::move(s));
  }
  return out;
}

// The truth for a sample: its measured peak, else the keep-all memory model
// on its measurements.
int64_t TruePeak(const Sample& s) {
  if (s.peak_bytes) return *s.peak_bytes;
  int64_t peak = s.base_bytes.value_or(0);
  for (const BlockMeasurement& b : s.blocks) peak += b.act_bytes;
  return peak;
}

double Quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  // Nearest rank.
  size_t k = static_cast<size_t>(std::ceil(q * static_cast<double>(v.size())));
  k = std::min(std::max<size_t>(k, 1), v.size());
  return v[k - 1];
}

absl::StatusOr<std::unique_ptr<Estimator>> NewEstimator(
    const std::string& kind, const ModelSpec& model) {
  return kind == "remat" ? NewRematEstimator(model) : NewMimoseEstimator(model);
}

// How many samples, fed one at a time in the trace's order, the estimator
// needs before it trusts a query inside their observed range (the first
// sample's features); 0 when it never does within `samples`.
absl::StatusOr<size_t> SamplesToTrust(const std::string& kind,
                                      const ModelSpec& model,
                                      const std::vector<Sample>& samples) {
  auto estimator = NewEstimator(kind, model);
  if (!estimator.ok()) return estimator.status();
  for (size_t k = 0; k < samples.size(); ++k) {
    if (auto s = (*estimator)->AddSamples({samples[k]}); !s.ok()) return s;
    auto p = (*estimator)->Predict(samples[0].features);
    if (!p.ok()) return p.status();
    if (p->trusted) return k + 1;
  }
  return 0;
}

int Evaluate(const std::string& kind, const ModelSpec& model,
             const std::vector<Sample>& train, const std::vector<Sample>& test,
             const std::vector<Sample>& all, const Config& c,
             const std::string& source) {
  auto made = NewEstimator(kind, model);
  if (!made.ok()) {
    std::cerr << kind << ": " << made.status() << "\n";
    return 1;
  }
  std::unique_ptr<Estimator> estimator = std::move(*made);
  auto trust_after = SamplesToTrust(kind, model, all);
  if (!trust_after.ok()) {
    std::cerr << kind << ": " << trust_after.status() << "\n";
    return 1;
  }
  if (auto s = estimator->AddSamples(train); !s.ok()) {
    std::cerr << kind << ": " << s << "\n";
    return 1;
  }
  const bool synthetic = source == "synthetic";
  const std::vector<Action> keep_all(model.blocks.size(), Action::kKeep);
  const std::vector<Action> safe = SafeActions(model);
  std::vector<double> rel_err, trusted_err, slack;
  int misses = 0, untrusted = 0;
  for (const Sample& s : test) {
    const bool collected = !synthetic && s.peak_bytes.has_value();
    auto peak =
        estimator->PredictPeakBytes(s.features, collected ? safe : keep_all);
    auto prediction = estimator->Predict(s.features);
    if (!peak.ok() || !prediction.ok()) {
      std::cerr << kind << ": "
                << (peak.ok() ? prediction.status() : peak.status()) << "\n";
      return 1;
    }
    const double truth = static_cast<double>(TruePeak(s));
    const double err = std::abs(peak->value - truth) / truth;
    rel_err.push_back(err);
    slack.push_back(peak->upper / truth - 1);
    if (peak->upper < truth) ++misses;
    if (prediction->trusted) {
      trusted_err.push_back(err);
    } else {
      ++untrusted;
    }
  }
  const double n = static_cast<double>(test.size());
  nlohmann::json out = {
      {"bench", "estimator_accuracy"},
      {"estimator", kind},
      {"source", source},
      // Generator settings; null for a recorded trace.
      {"model", synthetic ? nlohmann::json(c.model) : nlohmann::json(nullptr)},
      {"seed", synthetic ? nlohmann::json(c.seed) : nlohmann::json(nullptr)},
      {"noise", synthetic ? nlohmann::json(c.noise) : nlohmann::json(nullptr)},
      {"blocks", model.blocks.size()},
      {"train_samples", train.size()},
      {"test_samples", test.size()},
      {"p50_rel_err", Quantile(rel_err, 0.5)},
      {"p95_rel_err", Quantile(rel_err, 0.95)},
      {"max_rel_err", Quantile(rel_err, 1.0)},
      {"p95_rel_err_trusted", Quantile(trusted_err, 0.95)},
      {"upper_bound_miss_rate", misses / n},
      {"p50_upper_slack", Quantile(slack, 0.5)},
      {"untrusted_rate", untrusted / n},
      // Samples (in the trace's order) after which it first trusts a query
      // in their range; null when it never does in this trace.
      {"trusted_after_samples", *trust_after > 0
                                    ? nlohmann::json(*trust_after)
                                    : nlohmann::json(nullptr)},
  };
  std::cout << out.dump() << std::endl;
  return 0;
}

int Run(const Config& c) {
  ModelSpec model;
  std::vector<Sample> samples;
  std::string source = "synthetic";
  if (!c.trace.empty()) {
    auto trace = ReadTraceCsv(c.trace);
    if (!trace.ok()) {
      std::cerr << trace.status() << "\n";
      return 1;
    }
    model = std::move(trace->model);
    samples = std::move(trace->samples);
    source = c.trace;
    if (samples.size() < static_cast<size_t>(c.train) + 1) {
      std::cerr << c.trace << ": " << samples.size() << " samples; --train "
                << c.train << " needs at least one more to evaluate\n";
      return 1;
    }
  } else {
    model = c.model == "cnn" ? CnnModel() : SyntheticModel(c.layers);
    samples = Generate(c, c.train + c.test);
    if (!c.write_trace.empty()) {
      if (auto s = WriteTraceCsv(c.write_trace, {model, samples}); !s.ok()) {
        std::cerr << s << "\n";
        return 1;
      }
    }
  }
  const size_t k = static_cast<size_t>(c.train);
  const size_t end = std::min(samples.size(), k + static_cast<size_t>(c.test));
  const std::vector<Sample> train(samples.begin(), samples.begin() + k);
  const std::vector<Sample> test(samples.begin() + k, samples.begin() + end);
  const std::vector<Sample> all(samples.begin(), samples.begin() + end);
  for (const char* kind : {"remat", "mimose"}) {
    if (int rc = Evaluate(kind, model, train, test, all, c, source); rc != 0) {
      return rc;
    }
  }
  return 0;
}

}  // namespace
}  // namespace remat

int main(int argc, char** argv) {
  remat::Config c;
  CLI::App app{
      "Estimator accuracy: fit on the first K batches, predict the keep-all "
      "peak of the rest; remat vs Mimose. One JSON line per estimator."};
  app.add_option("--train", c.train, "samples to fit on (the first K)")
      ->check(CLI::Range(1, 1000000));
  app.add_option("--test", c.test, "held-out samples to evaluate")
      ->check(CLI::Range(1, 10000000));
  app.add_option("--seed", c.seed, "generator seed");
  app.add_option("--model", c.model,
                 "synthetic model: encoder (batch, seq) or cnn (batch, "
                 "height, width)")
      ->check(CLI::IsMember({"encoder", "cnn"}));
  app.add_option("--blocks", c.layers,
                 "the encoder's transformer layers (plus an embedding block "
                 "and a head)")
      ->check(CLI::Range(1, 4000));
  app.add_option("--noise", c.noise,
                 "standard deviation of the multiplicative log-normal "
                 "measurement noise")
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--trace", c.trace,
                 "evaluate on a recorded trace CSV instead of synthetic data")
      ->check(CLI::ExistingFile);
  app.add_option("--write-trace", c.write_trace,
                 "also write the synthetic samples (train, then test) as a "
                 "trace CSV")
      ->excludes("--trace");
  app.get_option("--trace")->excludes("--model");
  CLI11_PARSE(app, argc, argv);
  return remat::Run(c);
}
