// What collecting costs: a step that measures every block (the safe plan
// with the CPU tracker attached and the sampler hooked into the recompute)
// against a step that only recomputes every block, and against a step with
// no checkpointing; a collecting step as the runtime runs it with a copy
// engine attached (the CPU engine at memory speed): every block also
// counts the bytes OFFLOAD would move for it (its saved tensors, through
// the saved-tensor hooks), and the host link is measured after the step
// (kernels::MeasureLink, one copy each way of PlannedModelOptions' default
// 16 MiB probe); and how far the collected per-block bytes are from a
// direct measurement of each block run alone under the tracker.
//
// Model: a small transformer encoder on CPU (hand-written attention from
// Linear + matmul + softmax, pre-LayerNorm, GELU MLP, dropout), one block
// per layer. Step times are medians over interleaved repeats.
//
// Sizes and repeats come from the environment (REMAT_BENCH_LAYERS=4,
// REMAT_BENCH_BATCH=4, REMAT_BENCH_SEQ=64, REMAT_BENCH_D=128,
// REMAT_BENCH_ROUNDS=21, REMAT_BENCH_THREADS=1 intra-op threads).
//
// Prints one JSON line:
//   {"bench":"collector_overhead","ratio_vs_recompute_all":...,
//    "ratio_vs_none":...,"collect_with_link_ms":...,
//    "link_ratio_vs_recompute_all":...,"max_rel_err":...,...}
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include "client/runtime.h"
#include "collector/block_sampler.h"
#include "collector/cpu_memory_tracker.h"
#include "kernels/copy_engine.h"
#include "planner/plan.h"

namespace remat {
namespace {

struct EncoderLayerImpl : torch::nn::Module {
  EncoderLayerImpl(int64_t d, int64_t heads, int64_t ff, double p)
      : heads(heads),
        ln1(register_module(
            "ln1", torch::nn::LayerNorm(torch::nn::LayerNormOptions({d})))),
        qkv(register_module("qkv", torch::nn::Linear(d, 3 * d))),
        proj(register_module("proj", torch::nn::Linear(d, d))),
        ln2(register_module(
            "ln2", torch::nn::LayerNorm(torch::nn::LayerNormOptions({d})))),
        up(register_module("up", torch::nn::Linear(d, ff))),
        down(register_module("down", torch::nn::Linear(ff, d))),
        drop(register_module("drop", torch::nn::Dropout(p))) {}

  // x: [batch, seq, d].
  torch::Tensor forward(const torch::Tensor& x) {
    const int64_t b = x.size(0), s = x.size(1), d = x.size(2);
    const int64_t hd = d / heads;
    auto parts =
        qkv(ln1(x)).view({b, s, 3, heads, hd}).permute({2, 0, 3, 1, 4});
    torch::Tensor q = parts[0], k = parts[1], v = parts[2];  // [b, h, s, hd]
    torch::Tensor scores =
        torch::matmul(q, k.transpose(-2, -1)) / std::sqrt(double(hd));
    torch::Tensor attn = drop(torch::softmax(scores, -1));
    torch::Tensor ctx =
        torch::matmul(attn, v).transpose(1, 2).reshape({b, s, d});
    torch::Tensor h = x + drop(proj(ctx));
    return h + drop(down(torch::gelu(up(ln2(h)))));
  }

  int64_t heads;
  torch::nn::LayerNorm ln1;
  torch::nn::Linear qkv;
  torch::nn::Linear proj;
  torch::nn::LayerNorm ln2;
  torch::nn::Linear up;
  torch::nn::Linear down;
  torch::nn::Dropout drop;
};
TORCH_MODULE(EncoderLayer);

int64_t EnvInt(const char* name, int64_t fallback) {
  const char* v = std::getenv(name);
  return v ? std::atoll(v) : fallback;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

using Clock = std::chrono::steady_clock;

double Ms(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

int Main() {
  const int64_t layers = EnvInt("REMAT_BENCH_LAYERS", 4);
  const int64_t batch = EnvInt("REMAT_BENCH_BATCH", 4);
  const int64_t seq = EnvInt("REMAT_BENCH_SEQ", 64);
  const int64_t d = EnvInt("REMAT_BENCH_D", 128);
  const int64_t rounds = EnvInt("REMAT_BENCH_ROUNDS", 21);
  const int64_t threads = EnvInt("REMAT_BENCH_THREADS", 1);
  torch::set_num_threads(static_cast<int>(threads));
  torch::manual_seed(0);

  auto model = CheckpointedSequential(
      RuntimeOptions().model_name("encoder").feature_names({"batch", "seq"}));
  for (int64_t i = 0; i < layers; ++i) {
    model->push_back("layer" + std::to_string(i),
                     EncoderLayer(d, /*heads=*/4, /*ff=*/4 * d, 0.1));
  }
  const ModelSpec spec = model->spec();
  const std::vector<Action> none(layers, Action::kKeep);
  const std::vector<Action> all = SafeActions(spec);
  torch::Tensor x = torch::randn({batch, seq, d});
  CpuMemoryTracker tracker;
  BlockSampler sampler(&tracker, static_cast<int>(layers));
  Sample collected, with_transfer;
  auto engine = kernels::NewCpuCopyEngine();
  const int64_t probe_bytes = PlannedModelOptions().link_probe_bytes();
  torch::Tensor probe = torch::zeros({probe_bytes}, torch::kUInt8);
  kernels::LinkBandwidth link;

  // One training step of each kind; returns milliseconds.
  auto step = [&](int kind) {
    for (auto& p : model->parameters()) {
      if (p.grad().defined()) p.mutable_grad().zero_();
    }
    const Clock::time_point start = Clock::now();
    if (kind >= 2) {
      auto attached = tracker.Attach();
      sampler.BeginStep(model->resident_bytes() + x.nbytes());
      model->set_observer(&sampler);
      if (kind == 3) model->set_copy_engine(engine.get());
      model->forward(x, all).sum().backward();
      model->set_observer(nullptr);
      model->set_copy_engine(nullptr);
      auto sample = sampler.EndStep({double(batch), double(seq)});
      if (!sample.ok()) {
        std::fprintf(stderr, "collect failed: %s\n",
                     sample.status().ToString().c_str());
        std::exit(1);
      }
      (kind == 3 ? with_transfer : collected) = *sample;
      if (kind == 3) {
        auto measured =
            kernels::MeasureLink(engine.get(), probe.data_ptr(), probe_bytes);
        if (!measured.ok()) {
          std::fprintf(stderr, "link probe failed: %s\n",
                       measured.status().ToString().c_str());
          std::exit(1);
        }
        link = *measured;
      }
    } else {
      model->forward(x, kind == 0 ? none : all).sum().backward();
    }
    return Ms(start, Clock::now());
  };

  // none, recompute all, collect, collect + transfer bytes + link
  constexpr int kKinds = 4;
  for (int w = 0; w < 2; ++w) {
    for (int kind = 0; kind < kKinds; ++kind) step(kind);
  }
  std::vector<double> times[kKinds];
  for (int64_t r = 0; r < rounds; ++r) {
    for (int j = 0; j < kKinds; ++j) {
      const int kind = static_cast<int>((r + j) % kKinds);  // rotate
      times[kind].push_back(step(kind));
    }
  }
  const double none_ms = Median(times[0]);
  const double all_ms = Median(times[1]);
  const double collect_ms = Median(times[2]);
  const double link_ms = Median(times[3]);

  // Direct measurement: each block alone, with grad, on the input it sees
  // in the chain (requiring grad as in the chain: all but the batch).
  double max_rel_err = 0;
  nlohmann::json per_block = nlohmann::json::array();
  torch::Tensor input = x;
  for (int64_t i = 0; i < layers; ++i) {
    torch::Tensor in = input.detach().requires_grad_(i > 0);
    int64_t act_bytes = 0;
    torch::Tensor out;
    {
      auto attached = tracker.Attach();
      const int64_t before = tracker.current_bytes();
      out = model->forward_block(static_cast<size_t>(i), in);
      act_bytes = tracker.current_bytes() - before;
    }
    // What the runtime counts as a block's input: the storages that need
    // grad (the batch, which does not, is alive before the step and
    // counted in base_bytes: block 0's input_bytes is 0).
    const int64_t input_bytes =
        in.requires_grad() ? static_cast<int64_t>(in.nbytes()) : 0;
    const BlockMeasurement& m = collected.blocks[i];
    const double act_err = std::abs(double(m.act_bytes - act_bytes)) /
                           std::max<int64_t>(1, act_bytes);
    const double in_err = std::abs(double(m.input_bytes - input_bytes)) /
                          std::max<int64_t>(1, input_bytes);
    max_rel_err = std::max({max_rel_err, act_err, in_err});
    per_block.push_back({{"block", spec.blocks[i].name},
                         {"act_bytes", m.act_bytes},
                         {"direct_act_bytes", act_bytes},
                         {"input_bytes", m.input_bytes},
                         {"direct_input_bytes", input_bytes},
                         {"transfer_bytes",
                          with_transfer.blocks[i].transfer_bytes.value_or(-1)},
                         {"forward_ns", m.forward_ns}});
    torch::NoGradGuard no_grad;
    input = out.detach();
  }

  nlohmann::json line = {
      {"bench", "collector_overhead"},
      {"model", "encoder"},
      {"layers", layers},
      {"batch", batch},
      {"seq", seq},
      {"d_model", d},
      {"threads", threads},
      {"rounds", rounds},
      {"none_ms", none_ms},
      {"recompute_all_ms", all_ms},
      {"collect_ms", collect_ms},
      {"ratio_vs_recompute_all", collect_ms / all_ms},
      {"ratio_vs_none", collect_ms / none_ms},
      {"collect_with_link_ms", link_ms},
      {"link_ratio_vs_recompute_all", link_ms / all_ms},
      {"link_probe_bytes", probe_bytes},
      {"d2h_bytes_per_s", link.d2h_bytes_per_s},
      {"h2d_bytes_per_s", link.h2d_bytes_per_s},
      {"max_rel_err", max_rel_err},
      {"base_bytes", *collected.base_bytes},
      {"peak_bytes", *collected.peak_bytes},
      {"blocks", per_block},
  };
  std::printf("%s\n", line.dump().c_str());
  return 0;
}

}  // namespace
}  // namespace remat

int main() { return remat::Main(); }
