// train: the demo trainer. Trains a transformer encoder classifier on
// synthetic token batches of varying sequence length under a memory budget,
// with a plan per batch from remat's planner (in process by default, or
// rematd with --planner ADDRESS). Prints one line per step and a summary.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <torch/torch.h>

#include "client/planner.h"
#include "client/remote_planner.h"
#include "client/runtime.h"
#include "examples/trainer.h"
#include "examples/trainer_flags.h"
#include "planner/units.h"

namespace {

double Mean(const std::vector<double>& v) {
  double sum = 0;
  for (double x : v) sum += x;
  return v.empty() ? 0 : sum / v.size();
}

double Percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(q * (v.size() - 1))];
}

}  // namespace

int main(int argc, char** argv) {
  remat::TrainerOptions options;
  int steps = 100;
  std::string budget_text;
  double budget_fraction = 0;  // 0: the model's default
  std::string planner_address;
  int threads = 0;

  CLI::App app{
      "Trains a demo model (--model: a transformer encoder classifier by "
      "default) on synthetic batches whose shape varies, under a memory "
      "budget, with a checkpointing plan per batch from remat's planner."};
  app.add_option("--steps", steps, "training steps")
      ->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--budget", budget_text,
                 "memory budget per step, e.g. 300MiB (default: "
                 "--budget-fraction of the no-checkpoint peak at the "
                 "largest batch)");
  app.add_option("--budget-fraction", budget_fraction,
                 "budget as a fraction of the no-checkpoint peak at the "
                 "largest batch (--max-seq; the cnn's: --max-size a side); "
                 "default 0.45 for the transformers, 0.75 for the cnn (where "
                 "recomputing every block needs 0.67)")
      ->check(CLI::Range(0.05, 10.0));
  app.add_option("--planner", planner_address,
                 "rematd address (unix:/path or host:port); default: the "
                 "in-process planner");
  app.add_option("--solver", options.solver,
                 "solver to ask for (exact, static_max, mimose_greedy, ...); "
                 "default: the planner's")->capture_default_str();
  remat::AddTrainerFlags(&app, &options);
  options.split_batches = true;
  app.add_flag("!--no-split", options.split_batches,
               "run a batch no plan fits whole, over budget (default: as "
               "micro-batches that fit, gradients accumulated)");
  app.add_option("--trace", options.trace_path,
                 "write collected samples to this trace CSV (replaced)");
  app.add_option("--threads", threads, "LibTorch threads (0: default)")
      ->check(CLI::NonNegativeNumber);
  CLI11_PARSE(app, argc, argv);

  if (const std::string error = remat::FinishTrainerFlags(&options);
      !error.empty()) {
    std::fprintf(stderr, "%s\n", error.c_str());
    return 2;
  }
  if (threads > 0) torch::set_num_threads(threads);

  std::unique_ptr<remat::Planner> planner;
  if (planner_address.empty()) {
    // The link is what collect steps measure on the copy engine.
    planner = std::make_unique<remat::LocalPlanner>();
  } else {
    remat::RemotePlannerOptions remote;
    remote.address = planner_address;
    planner = std::make_unique<remat::RemotePlanner>(remote);
  }

  std::unique_ptr<remat::Trainer> trainer_ptr;
  try {
    trainer_ptr = std::make_unique<remat::Trainer>(options, planner.get());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 2;
  }
  remat::Trainer& trainer = *trainer_ptr;
  int64_t budget_bytes = 0;
  const remat::BatchShape largest = remat::Workload::Largest(options.workload);
  const int64_t full_peak = trainer.NoCheckpointPeakBytes(largest);
  if (!budget_text.empty()) {
    auto parsed = remat::ParseBytes(budget_text);
    if (!parsed.ok() || *parsed <= 0) {
      std::fprintf(stderr, "--budget: \"%s\" is not a positive size like 300MiB\n",
                   budget_text.c_str());
      return 2;
    }
    budget_bytes = *parsed;
  } else {
    if (budget_fraction == 0) {
      budget_fraction = remat::DefaultBudgetFraction(options.model_name);
    }
    budget_bytes = static_cast<int64_t>(budget_fraction * full_peak);
  }
  const std::string planner_text =
      planner_address.empty() ? "in-process" : planner_address;
  if (options.model_name == "cnn") {
    std::printf(
        "remat demo: cnn (%lld channels), batch %lld, images %lld..%lld "
        "pixels a side, planner %s\n"
        "no-checkpoint peak at %lldx%lld: %s; budget %s\n",
        static_cast<long long>(options.cnn.channels),
        static_cast<long long>(options.workload.batch),
        static_cast<long long>(options.workload.min_size),
        static_cast<long long>(largest.height), planner_text.c_str(),
        static_cast<long long>(largest.height),
        static_cast<long long>(largest.width),
        remat::FormatBytes(full_peak).c_str(),
        remat::FormatBytes(budget_bytes).c_str());
  } else {
    std::printf(
        "remat demo: %lld-layer %s (width %lld), batch %lld, seq %lld..%lld "
        "(median %.0f), planner %s\n"
        "no-checkpoint peak at seq %lld: %s; budget %s\n",
        static_cast<long long>(options.model.depth),
        options.model_name.c_str(),
        static_cast<long long>(options.model.width),
        static_cast<long long>(options.workload.batch),
        static_cast<long long>(options.workload.min_seq),
        static_cast<long long>(options.workload.max_seq),
        options.workload.median_seq, planner_text.c_str(),
        static_cast<long long>(options.workload.max_seq),
        remat::FormatBytes(full_peak).c_str(),
        remat::FormatBytes(budget_bytes).c_str());
  }

  remat::Workload workload(options.workload);
  std::vector<remat::StepRecord> records;
  for (int i = 0; i < steps; ++i) {
    try {
      records.push_back(trainer.Step(workload.Next(), budget_bytes));
    } catch (const remat::BudgetError& e) {
      // Even the safest plan's peak is over the budget (a retry after out
      // of memory; or a batch not split, see --no-split).
      std::fprintf(stderr, "step %d: %s\n", i + 1, e.what());
      return 3;
    }
    std::printf("%s\n", remat::FormatStep(records.back(), steps).c_str());
    std::fflush(stdout);
  }

  // Summary: collecting steps apart from planned ones.
  std::vector<double> planned_ms, collect_ms;
  int over = 0, recomputed = 0, retried = 0;
  int64_t max_peak = 0;
  for (const auto& r : records) {
    retried += r.retries > 0;
    (r.collect ? collect_ms : planned_ms).push_back(r.step_ms);
    if (!r.collect) recomputed += r.recomputed_blocks;
    over += r.over_budget();
    max_peak = std::max(max_peak, r.measured_peak_bytes);
  }
  const size_t k = std::min<size_t>(10, records.size());
  std::vector<double> first, last;
  for (size_t i = 0; i < k; ++i) {
    first.push_back(records[i].loss);
    last.push_back(records[records.size() - 1 - i].loss);
  }
  std::printf(
      "\n%-10s %6s %10s %10s %18s\n"
      "%-10s %6zu %10.1f %10.1f %18s\n"
      "%-10s %6zu %10.1f %10.1f %18.2f\n\n"
      "max measured peak %s of budget %s; steps over budget: %d; steps run "
      "again after out of memory: %d\n"
      "loss: %.3f (mean of first %zu steps) -> %.3f (mean of last %zu)\n",
      "steps", "count", "mean ms", "p95 ms", "blocks recomputed",
      "collect", collect_ms.size(), Mean(collect_ms),
      Percentile(collect_ms, 0.95), "all",
      "planned", planned_ms.size(), Mean(planned_ms),
      Percentile(planned_ms, 0.95),
      planned_ms.empty() ? 0.0 : double(recomputed) / planned_ms.size(),
      remat::FormatBytes(max_peak).c_str(),
      remat::FormatBytes(budget_bytes).c_str(), over, retried, Mean(first), k,
      Mean(last), k);
  return over == 0 ? 0 : 3;
}
