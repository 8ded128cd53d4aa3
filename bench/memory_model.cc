// bench:memory_model: how well the memory model predicts measured peaks.
//
// The demo encoder (examples/encoder.h) trains on CPU; the CPU tracker
// measures each step's peak. At each batch shape, one collecting step (every
// checkpointable block recomputed, a BlockSampler attached) measures the
// per-block quantities exactly; then random KEEP/RECOMPUTE plans run at that
// shape and their measured peaks are compared with what the memory model
// predicts from those measurements: version 2 (PredictedPeakBytes, the one
// the planner uses), version 2 without the measured backward workspace
// (as for a client that does not report it), and version 1
// (PredictedPeakBytesV1) side by side. With exact inputs, what is compared
// is the model alone.
//
// One JSON line per plan:
//   {"bench":"memory_model_plan","batch":B,"seq":S,"recomputed":K,
//    "measured_bytes":..,"v2_bytes":..,"v2_no_workspace_bytes":..,
//    "v1_bytes":..}
// and one summary:
//   {"bench":"memory_model","plans":N,"v2_within":F,
//    "v2_no_workspace_within":F,"v1_within":F,
//    "v2_ratio":{"min":..,"p05":..,"p50":..,"p95":..,"max":..},
//    "v2_no_workspace_ratio":{...},"v1_ratio":{...}}
// where ratio = predicted / measured and "within" is the share of plans
// whose ratio lies in [0.98, 1.05].
//
// Then the demo trains (examples/trainer.h: its workload, its default
// budget) under the in-process planner with the exact solver, so plans
// stand on the estimator's upper bounds, not on exact measurements: once
// with the default buckets, a plan per sequence length (the prediction is
// for the step's own shape), once with buckets of 8 tokens (a plan is
// sized for its bucket's longest member). One line each over the planned
// steps (collecting steps have no prediction):
//   {"bench":"memory_model_planned","buckets":"per_shape"|"seq_8",
//    "steps":N,"planned_steps":P,
//    "steps_above_prediction":K,"within_1_08":F,
//    "ratio":{"min":..,"p05":..,"p50":..,"p95":..,"max":..}}
// ratio = the plan's predicted peak / the step's measured peak;
// within_1_08 is the share of planned steps with a ratio of at most 1.08.
//
// Flags: --plans N (per shape, default 24), --steps N (demo steps, default
// 80), --quick (fewer shapes, plans and steps).
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <torch/torch.h>

#include "client/planner.h"
#include "client/runtime.h"
#include "collector/block_sampler.h"
#include "collector/cpu_memory_tracker.h"
#include "examples/encoder.h"
#include "examples/trainer.h"
#include "examples/workload.h"
#include "planner/plan.h"

namespace remat {
namespace {

struct Shape {
  int64_t batch;
  int64_t seq;
};

struct Ratios {
  std::vector<double> v1, v2, v2_no_workspace;
};

double Quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(q * static_cast<double>(v.size() - 1))];
}

double Within(const std::vector<double>& v) {
  const auto n = std::count_if(v.begin(), v.end(), [](double r) {
    return r >= 0.98 && r <= 1.05;
  });
  return static_cast<double>(n) / static_cast<double>(v.size());
}

std::string Summary(const std::vector<double>& v) {
  char buf[256];
  std::snprintf(buf, sizeof(buf),
                "{\"min\":%.4f,\"p05\":%.4f,\"p50\":%.4f,\"p95\":%.4f,"
                "\"max\":%.4f}",
                Quantile(v, 0), Quantile(v, 0.05), Quantile(v, 0.5),
                Quantile(v, 0.95), Quantile(v, 1));
  return buf;
}

class Bench {
 public:
  explicit Bench(const TransformerOptions& options)
      : options_(options),
        generator_(at::detail::createCPUGenerator(7)),
        model_(RuntimeOptions().model_name("encoder").feature_names(
            {"batch", "seq"})) {
    torch::manual_seed(7);
    for (NamedBlock& b : MakeEncoderBlocks(options)) {
      model_->push_back(b.name, std::move(b.module), b.checkpointable,
                        b.takes_tensors);
    }
    model_->train();
    // Gradients live for the whole run, as in training.
    auto [ids, labels] = MakeTokenBatch(options_, 2, 8, generator_);
    Loss(ids, labels, std::vector<Action>(model_->size(), Action::kKeep))
        .backward();
  }

  // Per-block measurements at this shape, as the planner would get them.
  PlanProblem Measure(const torch::Tensor& ids, const torch::Tensor& labels) {
    BlockSampler sampler(&tracker_, static_cast<int>(model_->size()));
    ZeroGrad();
    auto attached = tracker_.Attach();
    sampler.BeginStep(Resident(ids));
    model_->set_observer(&sampler);
    Loss(ids, labels, SafeActions(model_->spec())).backward();
    model_->set_observer(nullptr);
    auto sample = sampler.EndStep({static_cast<double>(ids.size(0)),
                                   static_cast<double>(ids.size(1))});
    if (!sample.ok()) {
      std::fprintf(stderr, "memory_model: %s\n",
                   sample.status().ToString().c_str());
      std::exit(1);
    }
    PlanProblem p;
    p.base_bytes = sample->base_bytes.value_or(0);
    const ModelSpec spec = model_->spec();
    for (size_t i = 0; i < spec.blocks.size(); ++i) {
      const BlockMeasurement& m = sample->blocks[i];
      p.blocks.push_back({spec.blocks[i].name, m.act_bytes, m.input_bytes,
                          m.forward_ns, spec.blocks[i].checkpointable});
      p.blocks.back().workspace_bytes = m.workspace_bytes.value_or(kUnknown);
    }
    return p;
  }

  // The measured peak of one step under `actions`, resident bytes included.
  int64_t Peak(const torch::Tensor& ids, const torch::Tensor& labels,
               const std::vector<Action>& actions) {
    ZeroGrad();
    auto attached = tracker_.Attach();
    tracker_.reset_peak();
    const int64_t begin = tracker_.current_bytes();
    Loss(ids, labels, actions).backward();
    return Resident(ids) + tracker_.peak_bytes() - begin;
  }

  torch::Generator& generator() { return generator_; }
  const TransformerOptions& options() const { return options_; }
  ModelSpec spec() const { return model_->spec(); }

 private:
  torch::Tensor Loss(const torch::Tensor& ids, const torch::Tensor& labels,
                     const std::vector<Action>& actions) {
    return torch::nn::functional::cross_entropy(model_->forward(ids, actions),
                                                labels);
  }
  void ZeroGrad() {
    for (auto& p : model_->parameters()) {
      if (p.grad().defined()) p.mutable_grad().zero_();
    }
  }
  int64_t Resident(const torch::Tensor& ids) const {
    return model_->resident_bytes() +
           static_cast<int64_t>(ids.storage().nbytes());
  }

  TransformerOptions options_;
  torch::Generator generator_;
  CheckpointedSequential model_;
  CpuMemoryTracker tracker_;
};

// The demo under the exact solver: how its predictions (upper bounds)
// compare with what its planned steps measured. With the default buckets
// (seq_granularity 1) every sequence length is its own plan-cache bucket,
// so the prediction is the one for the step's own shape: the estimator
// and the memory model alone. With 8, a plan, and its prediction, is
// sized for its bucket's longest member, up to 7 tokens longer.
void PlannedSteps(int steps, int seq_granularity) {
  TrainerOptions options;
  options.solver = "exact";
  CoreOptions core;
  core.granularity = {{"seq", seq_granularity}};
  LocalPlanner planner(core);
  Trainer trainer(options, &planner);
  const int64_t budget_bytes = static_cast<int64_t>(
      kDefaultBudgetFraction *
      static_cast<double>(trainer.NoCheckpointPeakBytes(
          {options.workload.batch, options.workload.max_seq})));
  std::vector<double> ratios;
  int above = 0;
  for (const BatchShape& shape : Workload::Draw(options.workload, steps)) {
    const StepRecord r = trainer.Step(shape, budget_bytes);
    if (r.collect || r.predicted_peak_bytes <= 0) continue;
    ratios.push_back(static_cast<double>(r.predicted_peak_bytes) /
                     static_cast<double>(r.measured_peak_bytes));
    above += r.measured_peak_bytes > r.predicted_peak_bytes;
  }
  if (ratios.empty()) {
    std::fprintf(stderr, "memory_model: no planned step in %d steps\n", steps);
    std::exit(1);
  }
  const auto within = std::count_if(ratios.begin(), ratios.end(),
                                    [](double r) { return r <= 1.08; });
  std::printf(
      "{\"bench\":\"memory_model_planned\",\"buckets\":\"%s\","
      "\"steps\":%d,\"planned_steps\":%zu,\"steps_above_prediction\":%d,"
      "\"within_1_08\":%.3f,\"ratio\":%s}\n",
      seq_granularity == 1 ? "per_shape" : "seq_8", steps, ratios.size(),
      above,
      static_cast<double>(within) / static_cast<double>(ratios.size()),
      Summary(ratios).c_str());
}

int Run(int argc, char** argv) {
  CLI::App app{"bench:memory_model: predicted vs measured step peaks"};
  int plans = 24;
  bool quick = false;
  app.add_option("--plans", plans, "random plans per shape")
      ->check(CLI::PositiveNumber);
  int steps = 80;
  app.add_option("--steps", steps, "demo steps under the exact solver")
      ->check(CLI::PositiveNumber);
  app.add_flag("--quick", quick,
               "two shapes, four plans each, 24 demo steps (a smoke run)");
  CLI11_PARSE(app, argc, argv);
  if (quick) {
    plans = 4;
    steps = 24;
  }
  torch::set_num_threads(1);

  TransformerOptions options;  // the demo's encoder
  Bench bench(options);
  std::vector<Shape> shapes = {{4, 64},  {16, 64},  {8, 128},
                               {2, 256}, {16, 128}, {8, 256}};
  if (quick) shapes.resize(2);
  std::mt19937_64 rng(11);
  Ratios ratios;
  for (const Shape& shape : shapes) {
    auto [ids, labels] = MakeTokenBatch(bench.options(), shape.batch,
                                        shape.seq, bench.generator());
    const PlanProblem problem = bench.Measure(ids, labels);
    PlanProblem no_workspace = problem;
    for (BlockCost& b : no_workspace.blocks) b.workspace_bytes = kUnknown;
    const ModelSpec spec = bench.spec();
    for (int k = 0; k < plans; ++k) {
      // Plans from keep-everything to recompute-everything.
      const double q = static_cast<double>(k) / std::max(1, plans - 1);
      std::vector<Action> actions(spec.blocks.size(), Action::kKeep);
      int recomputed = 0;
      for (size_t i = 0; i < actions.size(); ++i) {
        if (spec.blocks[i].checkpointable &&
            std::bernoulli_distribution(q)(rng)) {
          actions[i] = Action::kRecompute;
          ++recomputed;
        }
      }
      const int64_t measured = bench.Peak(ids, labels, actions);
      const int64_t v2 = PredictedPeakBytes(problem, actions);
      const int64_t v2_nw = PredictedPeakBytes(no_workspace, actions);
      const int64_t v1 = PredictedPeakBytesV1(problem, actions);
      ratios.v2.push_back(static_cast<double>(v2) / measured);
      ratios.v2_no_workspace.push_back(static_cast<double>(v2_nw) / measured);
      ratios.v1.push_back(static_cast<double>(v1) / measured);
      std::printf(
          "{\"bench\":\"memory_model_plan\",\"batch\":%lld,\"seq\":%lld,"
          "\"recomputed\":%d,\"measured_bytes\":%lld,\"v2_bytes\":%lld,"
          "\"v2_no_workspace_bytes\":%lld,\"v1_bytes\":%lld}\n",
          static_cast<long long>(shape.batch),
          static_cast<long long>(shape.seq), recomputed,
          static_cast<long long>(measured), static_cast<long long>(v2),
          static_cast<long long>(v2_nw), static_cast<long long>(v1));
    }
  }
  std::printf(
      "{\"bench\":\"memory_model\",\"plans\":%zu,\"v2_within\":%.3f,"
      "\"v2_no_workspace_within\":%.3f,\"v1_within\":%.3f,"
      "\"v2_ratio\":%s,\"v2_no_workspace_ratio\":%s,\"v1_ratio\":%s}\n",
      ratios.v2.size(), Within(ratios.v2), Within(ratios.v2_no_workspace),
      Within(ratios.v1), Summary(ratios.v2).c_str(),
      Summary(ratios.v2_no_workspace).c_str(), Summary(ratios.v1).c_str());
  std::fflush(stdout);
  PlannedSteps(steps, /*seq_granularity=*/1);
  std::fflush(stdout);
  PlannedSteps(steps, /*seq_granularity=*/8);
  return 0;
}

}  // namespace
}  // namespace remat

int main(int argc, char** argv) { return remat::Run(argc, argv); }
