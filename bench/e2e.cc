// bench:e2e: the same workload and the same sequence of batches for every
// checkpointing strategy, each with its own freshly initialised model and
// planner in a process of its own. Prints one JSON line per strategy and
// writes an SVG of step time and measured peak per step, with the budget
// drawn as a line.
//
// Lockstep: every strategy's process is alive at once and idle but for
// the step it is told to run; batch k runs on every strategy, in an order
// that rotates with k, before batch k+1 runs on any. A machine whose speed
// drifts for minutes at a time (these 2-core machines do) then slows every
// strategy alike. The steps are split into --rounds consecutive rounds;
// each strategy reports its throughput relative to `none` over each round,
// their median and their spread (min..max), beside the ratio over all
// steps.
//
// Strategies: none, all, sqrt (budget-blind, fixed plans); static_max (one
// exact plan for the largest input seen, reused); mimose_greedy (Mimose's
// estimator and greedy scheduler, dynamic, with its own collection
// warm-up); delta (DELTA's rule over recompute and swap, dynamic, on
// remat's estimator); exact (remat: its estimator and the exact solver,
// with the host link) and exact_recompute (the same without a copy engine,
// so no plan may offload).
//
// The host link on CPU. Offload pays when copying a block's activations
// costs less than recomputing them, so what matters is the link's speed
// relative to compute. An H200 does 989e12 dense BF16 FLOP/s and reaches
// its host over PCIe Gen5 x16 at 64e9 bytes/s per direction: 6.5e-5 bytes
// per FLOP. Unless --host-link-gbps says otherwise, the CPU run times a
// float matmul on this machine (FLOP/s) and emulates a link of that many
// FLOP/s times 6.5e-5 bytes/s, so that offload weighs against recompute
// here as it would there (printed as the "e2e_link" line). With
// --device cuda the link is the GPU's own (the CUDA copy engine).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "bench/lockstep.h"
#include "bench/svg_chart.h"
#include "client/planner.h"
#include "examples/trainer.h"
#include "examples/trainer_flags.h"
#include "examples/workload.h"
#include "nlohmann/json.hpp"

namespace remat {
namespace {

struct Strategy {
  std::string name;
  std::vector<StepRecord> records;
};

}  // namespace
}  // namespace remat

int main(int argc, char** argv) {
  using namespace remat;
  RunQuietly(argv);
  TrainerOptions options;
  int steps = 120;
  int rounds = 3;
  double budget_fraction = 0;  // 0: the model's default
  std::string svg_path = "bench/e2e.svg";
  bool verbose = false;
  const std::vector<std::string> known = StrategyNames();
  std::vector<std::string> names = known;
  CLI::App app{"End-to-end strategy benchmark on the demo trainer."};
  app.add_option("--steps", steps, "steps per strategy")
      ->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--rounds", rounds,
                 "rounds the steps are split into, each reporting every "
                 "strategy's throughput relative to none")
      ->check(CLI::Range(1, 1000))->capture_default_str();
  app.add_option("--budget-fraction", budget_fraction,
                 "budget as a fraction of the no-checkpoint peak at the "
                 "largest batch (default: the model's, as for train)")
      ->check(CLI::Range(0.05, 10.0));
  app.add_option("--strategies", names,
                 "strategies to run (space- or comma-separated)")
      ->delimiter(',')
      ->check(CLI::IsMember(known))
      ->capture_default_str();
  AddTrainerFlags(&app, &options);
  app.add_option("--svg", svg_path,
                 "where to write the chart (relative to the workspace under "
                 "bazel run; empty: none)")->capture_default_str();
  app.add_flag("-v,--verbose", verbose, "print every step to stderr");
  CLI11_PARSE(app, argc, argv);
  if (const std::string error = FinishTrainerFlags(&options); !error.empty()) {
    std::fprintf(stderr, "%s\n", error.c_str());
    return 2;
  }

  // Each strategy runs in a process of its own, so nothing one leaves in
  // LibTorch's process-wide state (allocator, autograd threads, RNG) can
  // shift another's measurements. This process runs no LibTorch code itself,
  // which keeps fork() safe.
  if (budget_fraction == 0) {
    budget_fraction = DefaultBudgetFraction(options.model_name);
  }
  const std::vector<BatchShape> shapes = Workload::Draw(options.workload, steps);
  const std::string budget_text = RunIsolated([&] {
    FixedPlanner planner("none");
    Trainer trainer(options, &planner);
    return std::to_string(static_cast<int64_t>(
        budget_fraction *
        trainer.NoCheckpointPeakBytes(Workload::Largest(options.workload))));
  });
  const int64_t budget_bytes = std::stoll(budget_text);
  EmulateH200Link(&options);

  std::vector<Strategy> strategies;
  std::vector<std::unique_ptr<StepProcess>> processes;
  std::vector<int> parent_fds;  // the other children's pipes
  for (const std::string& name : names) {
    strategies.push_back({name, {}});
    processes.push_back(std::make_unique<StepProcess>(
        [&, name]() -> StepProcess::StepFn {
          std::unique_ptr<Planner> planner = MakeStrategyPlanner(name);
          auto trainer = std::make_shared<Trainer>(
              StrategyOptions(options, name), planner.get());
          std::shared_ptr<Planner> held = std::move(planner);
          return [&, name, trainer, held](const std::string& request) {
            StepRecord r =
                trainer->Step(shapes[std::stoi(request)], budget_bytes);
            // What the planner learned of the allocator's reserved bytes.
            if (auto* local = dynamic_cast<LocalPlanner*>(held.get())) {
              auto state = local->core().GetModelState(options.model_name);
              if (state.ok()) r.reserved_ratio = state->reserved_ratio;
            }
            if (verbose) {
              std::fprintf(stderr, "%-15s %s\n", name.c_str(),
                           FormatStep(r, steps).c_str());
            }
            return nlohmann::json(r).dump();
          };
        },
        parent_fds));
    for (int fd : processes.back()->fds()) parent_fds.push_back(fd);
  }
  for (int k = 0; k < steps; ++k) {
    for (size_t j = 0; j < processes.size(); ++j) {
      const size_t i = (j + static_cast<size_t>(k)) % processes.size();
      strategies[i].records.push_back(
          nlohmann::json::parse(processes[i]->Call(std::to_string(k)))
              .get<StepRecord>());
    }
  }
  processes.clear();

  // Each round's total step time per strategy, and none's.
  rounds = std::min(rounds, steps);
  auto round_of = [&](int k) { return static_cast<size_t>(k) * rounds / steps; };
  std::vector<double> none_round_ms(rounds, 0);
  double none_total_ms = 0;
  for (const Strategy& s : strategies) {
    if (s.name != "none") continue;
    for (size_t k = 0; k < s.records.size(); ++k) {
      none_total_ms += s.records[k].step_ms;
      none_round_ms[round_of(static_cast<int>(k))] += s.records[k].step_ms;
    }
  }
  Panel time_panel{"step time (ms)", {}, {}};
  Panel peak_panel{"measured peak (MiB)", {}, {{"budget", budget_bytes / 1048576.0}}};
  for (const Strategy& s : strategies) {
    std::vector<double> ms;
    double total_ms = 0, plan_ms = 0, collect_ms = 0;
    int64_t max_peak = 0, max_reserved = 0;
    int over = 0, over_planned = 0, collect = 0, recomputed = 0,
        offloaded = 0, checkpoints_sent = 0;
    Series time_series{s.name, {}}, peak_series{s.name, {}};
    std::vector<double> round_ms(rounds, 0);
    for (size_t k = 0; k < s.records.size(); ++k) {
      const StepRecord& r = s.records[k];
      round_ms[round_of(static_cast<int>(k))] += r.step_ms;
      ms.push_back(r.step_ms);
      total_ms += r.step_ms;
      plan_ms += r.plan_ms;
      max_peak = std::max(max_peak, r.measured_peak_bytes);
      max_reserved = std::max(max_reserved, r.reserved_peak_bytes);
      over += r.over_budget();
      recomputed += r.recomputed_blocks;
      offloaded += r.offloaded_blocks;
      checkpoints_sent += r.checkpoints_sent;
      if (r.collect) {
        ++collect;
        collect_ms += r.step_ms;
      } else {
        over_planned += r.over_budget();
      }
      time_series.y.push_back(r.step_ms);
      peak_series.y.push_back(r.measured_peak_bytes / 1048576.0);
    }
    std::vector<double> round_ratios;
    for (int r = 0; r < rounds; ++r) {
      round_ratios.push_back(none_round_ms[r] > 0 && round_ms[r] > 0
                                 ? none_round_ms[r] / round_ms[r]
                                 : 0.0);
    }
    time_panel.series.push_back(std::move(time_series));
    peak_panel.series.push_back(std::move(peak_series));
    nlohmann::json line = {
        {"bench", "e2e"},
        {"strategy", s.name},
        {"device", options.device},
        {"steps", s.records.size()},
        {"warmup_steps", collect},
        {"mean_step_ms", total_ms / s.records.size()},
        {"p95_step_ms", Percentile(ms, 0.95)},
        {"throughput_vs_none", none_total_ms > 0 ? none_total_ms / total_ms
                                                 : 0.0},
        {"round_throughput_vs_none", round_ratios},
        {"median_round_throughput_vs_none", Percentile(round_ratios, 0.5)},
        {"round_spread",
         {*std::min_element(round_ratios.begin(), round_ratios.end()),
          *std::max_element(round_ratios.begin(), round_ratios.end())}},
        {"max_peak_bytes", max_peak},
        {"budget_bytes", budget_bytes},
        // The allocator's reserved peak over planned steps (0 on the CPU),
        // and the reserved-over-allocated margin the planner learned.
        {"max_reserved_peak_bytes", max_reserved},
        {"reserved_ratio_learned", s.records.back().reserved_ratio},
        {"steps_over_budget", over},
        {"steps_over_budget_after_warmup", over_planned},
        {"plan_overhead_ms", plan_ms},
        {"collect_ms", collect_ms},
        {"recomputed_blocks_per_step",
         static_cast<double>(recomputed) / s.records.size()},
        {"offloaded_blocks_per_step",
         static_cast<double>(offloaded) / s.records.size()},
        {"checkpoints_to_host_per_step",
         static_cast<double>(checkpoints_sent) / s.records.size()},
        {"final_loss", s.records.back().loss},
    };
    std::printf("%s\n", line.dump().c_str());
    std::fflush(stdout);
  }

  if (!svg_path.empty()) {
    const char* workspace = std::getenv("BUILD_WORKSPACE_DIRECTORY");
    const std::string path =
        svg_path[0] == '/' || workspace == nullptr
            ? svg_path
            : std::string(workspace) + "/" + svg_path;
    std::ofstream out(path);
    out << RenderSvg("remat end-to-end: step time and peak memory per step",
                     {time_panel, peak_panel});
    if (!out) {
      std::fprintf(stderr, "--svg: cannot write %s\n", path.c_str());
      return 1;
    }
    std::fprintf(stderr, "chart written to %s\n", path.c_str());
  }
  return 0;
}
