// bench:budget_sweep: for each of the demo's models, every strategy's
// throughput relative to `none` and its steps over budget at budgets from
// 0.2 to 1.0 of the model's no-checkpoint peak at its largest input, in
// steps of 0.1: the figure Checkmate, Rotor and Mimose compare planners
// with. One JSON line per model, strategy and budget:
//
//   {"bench":"budget_sweep","model":M,"strategy":S,"budget_fraction":F,
//    "budget_bytes":..,"steps":..,"median_round_throughput_vs_none":..,
//    "round_throughput_vs_none":[..],"round_spread":[min,max],
//    "steps_over_budget":..,"max_peak_bytes":..,"max_peak_of_budget":..,
//    "recomputed_blocks_per_step":..,"offloaded_blocks_per_step":..,
//    "steps_plan_differs_from_exact":..,
//    "median_step_time_vs_exact_where_plans_differ":..}
//
// (the last two: over the steps where the strategy's plan was not exact's,
// the median of its step time over exact's on the same batch, null where
// none differ; above 1, exact was faster there), after a
// "budget_sweep_model" line per model with the two peaks the budgets are
// read against (no_checkpoint_peak_bytes, and
// recompute_all_peak_bytes: every block recomputed, at the largest input),
// then one "budget_sweep_check" line per model that reads the sweep as
// remat's acceptance does (exact against every other strategy that stays
// within budget, at each budget where `all` fits (at or above
// recompute_all_peak_bytes, with no step over budget), beside the range of
// exact against exact_recompute where the two ran the same plans: the
// run's noise; and step by step, the least of the medians above among the
// strategies that recompute and fit, beside the spread of that ratio on
// the steps where the plans were the same; and each point where exact's
// median trails such a strategy, with the rounds exact won all the same),
// and an SVG per model
// (--svg-dir/budget_sweep_<model>.svg): throughput against budget, one
// line per strategy, points over budget crossed.
//
// Measurement (bench/lockstep.h): per model, --rounds rounds, each a
// replicate of the whole sweep on fresh processes, one per strategy, all
// alive for the round and driven in lockstep. Each first trains --warmup
// steps at the full budget, not measured, in which the dynamic strategies
// collect (as a long run would have by then); then, for each budget, its
// share of the same --steps batches (--steps-below-safe at budgets below
// the peak of recomputing every block at the largest input, where every
// planned strategy runs that plan), batch k on every strategy in an order
// that rotates with k. The rounds' ratios to `none` give the median and
// the spread. The models are sized (below) so that
// the whole sweep of all three takes minutes on a 2-core machine; the host
// link is emulated at an H200's bytes per FLOP (bench:e2e says how).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "bench/lockstep.h"
#include "bench/svg_chart.h"
#include "examples/models.h"
#include "examples/trainer.h"
#include "examples/workload.h"
#include "nlohmann/json.hpp"

namespace remat {
namespace {

// The sizes each model is swept at.
TrainerOptions SweepOptions(const std::string& model) {
  TrainerOptions o;
  o.model_name = model;
  o.model.depth = 4;
  o.model.width = 64;
  o.model.heads = 2;
  o.model.ffn = 256;
  // Attention and MLP as blocks of their own, and three residual blocks a
  // stage: the finer the blocks, the closer a plan can bring the peak to
  // the budget (a 4-layer chain frees 12..15% of its peak per layer).
  o.model.sublayers = true;
  o.cnn.blocks_per_stage = 3;
  o.workload.batch = 8;
  if (model == "encoder") {
    o.workload.max_seq = 256;
    o.workload.median_seq = 90;
  } else if (model == "decoder") {
    o.model.vocab = 64;
    o.workload.max_seq = 192;
    o.workload.median_seq = 70;
  } else {  // cnn
    o.cnn.channels = 8;
    o.workload.min_size = 32;
    o.workload.max_size = 64;
  }
  return o;
}

struct Point {  // one strategy at one budget
  std::vector<StepRecord> records;
};

// Per step k where the two ran different plans (`differ`), or the same
// plan (!differ): y's step time over x's. Both ran batch k back to back,
// so drift cancels from the ratio, and a plan that differs on a few steps
// of many shows there rather than within the rounds' noise.
std::vector<double> StepRatios(const std::vector<StepRecord>& x,
                               const std::vector<StepRecord>& y,
                               bool differ) {
  std::vector<double> ratios;
  for (size_t k = 0; k < x.size() && k < y.size(); ++k) {
    if ((x[k].actions != y[k].actions) == differ && x[k].step_ms > 0) {
      ratios.push_back(y[k].step_ms / x[k].step_ms);
    }
  }
  return ratios;
}

// The round that runs step k of a budget's n.
int RoundOf(int k, int n, int rounds) {
  return static_cast<int>(static_cast<int64_t>(k) * rounds / n);
}

// Sum of step times per round.
std::vector<double> RoundMs(const std::vector<StepRecord>& records,
                            int rounds) {
  std::vector<double> ms(rounds, 0);
  const int n = static_cast<int>(records.size());
  for (int k = 0; k < n; ++k) {
    ms[RoundOf(k, n, rounds)] += records[k].step_ms;
  }
  return ms;
}

void SweepModel(const std::string& model,
                const std::vector<std::string>& strategies,
                const std::vector<double>& fractions, int warmup,
                int steps, int steps_below_safe, int rounds,
                const std::string& svg_dir, bool verbose) {
  TrainerOptions options = SweepOptions(model);
  EmulateH200Link(&options);
  const std::vector<BatchShape> shapes =
      Workload::Draw(options.workload, warmup + steps);
  const int64_t full_peak = std::stoll(RunIsolated([&] {
    FixedPlanner planner("none");
    Trainer trainer(options, &planner);
    return std::to_string(
        trainer.NoCheckpointPeakBytes(Workload::Largest(options.workload)));
  }));
  // Below the peak of recomputing every block at the largest input, every
  // planned strategy runs that safe plan on the largest batches and breaks
  // the budget whatever it plans: those budgets get fewer steps, and the
  // time goes to the budgets where strategies differ.
  const int64_t safe_peak = std::stoll(RunIsolated([&] {
    FixedPlanner planner("all");
    Trainer trainer(StrategyOptions(options, "all"), &planner);
    return std::to_string(
        trainer.Step(Workload::Largest(options.workload), full_peak)
            .measured_peak_bytes);
  }));
  std::printf("%s\n", nlohmann::json({{"bench", "budget_sweep_model"},
                                      {"model", model},
                                      {"no_checkpoint_peak_bytes", full_peak},
                                      {"recompute_all_peak_bytes", safe_peak}})
                          .dump()
                          .c_str());
  const auto budget_at = [&](size_t b) {
    return static_cast<int64_t>(fractions[b] * full_peak);
  };
  const auto steps_at = [&](size_t b) {
    return budget_at(b) >= safe_peak ? steps
                                     : std::min(steps, steps_below_safe);
  };

  // Round r runs the steps k of each budget with RoundOf(k, n, rounds) ==
  // r, on a set of processes of its own: each round replicates the whole
  // sweep, warm-up included. A process keeps for its life a speed of its
  // own (most likely from where its memory landed, and so its caches'
  // conflicts): on this machine that made one strategy's steps 1..2%
  // faster or slower than another's running the same plan on the same
  // batches, for a whole sweep. Fresh processes per round turn that into
  // noise the median over rounds outvotes.
  const auto start_processes = [&] {
    std::vector<std::unique_ptr<StepProcess>> processes;
    std::vector<int> parent_fds;
    for (const std::string& name : strategies) {
      processes.push_back(std::make_unique<StepProcess>(
          [&, name]() -> StepProcess::StepFn {
            std::shared_ptr<Planner> planner = MakeStrategyPlanner(name);
            auto trainer = std::make_shared<Trainer>(
                StrategyOptions(options, name), planner.get());
            return [trainer, planner, &shapes](const std::string& request) {
              size_t k = 0;
              int64_t budget = 0;
              std::sscanf(request.c_str(), "%zu %ld", &k, &budget);
              return nlohmann::json(trainer->Step(shapes.at(k), budget))
                  .dump();
            };
          },
          parent_fds));
      for (int fd : processes.back()->fds()) parent_fds.push_back(fd);
    }
    return processes;
  };
  size_t turn = 0;
  const auto run = [&](std::vector<std::unique_ptr<StepProcess>>& processes,
                       size_t k, int64_t budget) {
    std::vector<StepRecord> out(processes.size());
    for (size_t j = 0; j < processes.size(); ++j) {
      const size_t i = (j + turn) % processes.size();
      out[i] = nlohmann::json::parse(
                   processes[i]->Call(std::to_string(k) + " " +
                                      std::to_string(budget)))
                   .get<StepRecord>();
    }
    ++turn;
    return out;
  };
  // points[budget][strategy], each budget's records in step order.
  std::vector<std::vector<Point>> points(
      fractions.size(), std::vector<Point>(strategies.size()));
  for (int round = 0; round < rounds; ++round) {
    std::vector<std::unique_ptr<StepProcess>> processes = start_processes();
    for (int k = 0; k < warmup; ++k) run(processes, k, full_peak);
    for (size_t b = 0; b < fractions.size(); ++b) {
      const int n = steps_at(b);
      for (int k = 0; k < n; ++k) {
        if (RoundOf(k, n, rounds) != round) continue;
        const std::vector<StepRecord> step =
            run(processes, warmup + k, budget_at(b));
        for (size_t i = 0; i < step.size(); ++i) {
          points[b][i].records.push_back(step[i]);
          if (verbose) {
            nlohmann::json j = step[i];
            j["strategy"] = strategies[i];
            j["budget_fraction"] = fractions[b];
            j["round"] = round;
            std::fprintf(stderr, "%s\n", j.dump().c_str());
          }
        }
      }
    }
  }

  const auto at = [&](const std::string& s) {
    return static_cast<size_t>(
        std::find(strategies.begin(), strategies.end(), s) -
        strategies.begin());
  };
  const size_t none = at("none"), exact = at("exact"), all = at("all"),
               recompute_only = at("exact_recompute");
  const bool has_exact = exact < strategies.size();
  Panel throughput{"throughput relative to none (median over rounds; x: over "
                   "budget)", {}, {}, "budget (fraction of the no-checkpoint "
                   "peak at the largest input)", {}};
  Panel peaks{"largest measured peak / budget", {}, {{"budget", 1.0}},
              "budget", {}};
  for (double f : fractions) {
    char tick[16];
    std::snprintf(tick, sizeof tick, "%.1f", f);
    throughput.x_ticks.push_back(tick);
    peaks.x_ticks.push_back(tick);
  }
  // median[b][i], fits[b][i]
  std::vector<std::vector<double>> median(fractions.size());
  std::vector<std::vector<bool>> fits(fractions.size());
  std::vector<std::vector<double>> peak_of_budget(fractions.size());
  std::vector<std::vector<double>> recomputed(fractions.size());
  for (size_t b = 0; b < fractions.size(); ++b) {
    const int64_t budget = budget_at(b);
    const int point_rounds = std::min(rounds, steps_at(b));
    const std::vector<double> none_ms =
        RoundMs(points[b][none].records, point_rounds);
    for (size_t i = 0; i < strategies.size(); ++i) {
      const std::vector<StepRecord>& records = points[b][i].records;
      const std::vector<double> ms = RoundMs(records, point_rounds);
      std::vector<double> ratios;
      for (int r = 0; r < point_rounds; ++r) {
        ratios.push_back(ms[r] > 0 ? none_ms[r] / ms[r] : 0.0);
      }
      int over = 0, recompute = 0, offload = 0;
      int64_t max_peak = 0;
      for (const StepRecord& r : records) {
        over += r.over_budget();
        recompute += r.recomputed_blocks;
        offload += r.offloaded_blocks;
        max_peak = std::max(max_peak, r.measured_peak_bytes);
      }
      median[b].push_back(Percentile(ratios, 0.5));
      fits[b].push_back(over == 0);
      peak_of_budget[b].push_back(static_cast<double>(max_peak) / budget);
      recomputed[b].push_back(static_cast<double>(recompute) / records.size());
      nlohmann::json line = {
          {"bench", "budget_sweep"},
          {"model", model},
          {"strategy", strategies[i]},
          {"budget_fraction", fractions[b]},
          {"budget_bytes", budget},
          {"steps", records.size()},
          {"median_round_throughput_vs_none", median[b][i]},
          {"round_throughput_vs_none", ratios},
          {"round_spread",
           {*std::min_element(ratios.begin(), ratios.end()),
            *std::max_element(ratios.begin(), ratios.end())}},
          {"steps_over_budget", over},
          {"max_peak_bytes", max_peak},
          {"max_peak_of_budget", peak_of_budget[b][i]},
          {"recomputed_blocks_per_step", recomputed[b][i]},
          {"offloaded_blocks_per_step",
           static_cast<double>(offload) / records.size()},
      };
      if (has_exact && i != exact) {
        const std::vector<double> differ =
            StepRatios(points[b][exact].records, records, true);
        line["steps_plan_differs_from_exact"] = differ.size();
        line["median_step_time_vs_exact_where_plans_differ"] =
            differ.empty() ? nlohmann::json(nullptr)
                           : nlohmann::json(Percentile(differ, 0.5));
      }
      std::printf("%s\n", line.dump().c_str());
    }
    std::fflush(stdout);
  }
  for (size_t i = 0; i < strategies.size(); ++i) {
    Series t{strategies[i], {}, {}}, p{strategies[i], {}, {}};
    for (size_t b = 0; b < fractions.size(); ++b) {
      t.y.push_back(median[b][i]);
      t.marked.push_back(!fits[b][i]);
      p.y.push_back(peak_of_budget[b][i]);
      p.marked.push_back(!fits[b][i]);
    }
    throughput.series.push_back(std::move(t));
    peaks.series.push_back(std::move(p));
  }

  // The acceptance's reading, at each budget where `all` fits (at the
  // largest input, and on every step): exact
  // within budget, its throughput against the best other strategy that
  // also fits, against none where none fits, and its largest peak where
  // it recomputes. Beside it the run's noise floor: exact_recompute is
  // exact without a copy engine, so where exact offloads nothing and both
  // recompute as many blocks on every step they run plans of the same
  // cost (the blocks may differ where layers are alike), and their
  // ratio's range over those budgets is what this run cannot tell apart
  // from 1. Then the same question step by step: against each other
  // strategy that recomputes and fits, over the steps where its plan
  // differs from exact's, the median of its step time over exact's (above
  // 1: exact is ahead), the least of those medians, and the 10th and 90th
  // percentiles of that ratio over every step where the plans were the
  // same (what one step's ratio cannot tell apart from 1). Last, every
  // point where exact's median trails such a strategy, with the rounds in
  // which exact was faster all the same: with plans of equal cost the
  // medians fall either way, and the rounds say which way the run leans.
  const auto same_plans = [&](size_t b) {
    const std::vector<StepRecord>& x = points[b][exact].records;
    const std::vector<StepRecord>& y = points[b][recompute_only].records;
    for (size_t k = 0; k < x.size(); ++k) {
      if (x[k].offloaded_blocks != 0 ||
          x[k].recomputed_blocks != y[k].recomputed_blocks) {
        return false;
      }
    }
    return true;
  };
  if (has_exact && all < strategies.size()) {
    int exact_over = 0;
    double worst_vs_others = 1e9, worst_vs_none = 1e9, least_peak = 1e9;
    std::string worst_other;
    double same_plan_lo = 1e9, same_plan_hi = 0;
    double least_step_lead = 1e9;
    std::string least_step_lead_at;
    std::vector<double> same_plan_steps;
    nlohmann::json trails = nlohmann::json::array();
    for (size_t b = 0; b < fractions.size(); ++b) {
      // Where recomputing every block fits the largest input, and did:
      // below that `all` fits only the batches that were drawn, and those
      // points run --steps-below-safe steps, too few to compare speeds.
      if (budget_at(b) < safe_peak || !fits[b][all]) continue;
      exact_over += !fits[b][exact];
      for (size_t i = 0; i < strategies.size(); ++i) {
        if (i == exact || !fits[b][i] || recomputed[b][i] == 0) continue;
        const std::vector<StepRecord>& x = points[b][exact].records;
        const std::vector<StepRecord>& y = points[b][i].records;
        const std::vector<double> same = StepRatios(x, y, false);
        same_plan_steps.insert(same_plan_steps.end(), same.begin(),
                               same.end());
        const std::vector<double> differ = StepRatios(x, y, true);
        if (median[b][exact] < median[b][i]) {
          // Where exact's median trails one that recomputes and fits: in
          // how many rounds it was faster all the same (each round pairs
          // the two on the same batches), and how often their plans
          // differed at all.
          const int point_rounds = std::min(rounds, steps_at(b));
          const std::vector<double> xs = RoundMs(x, point_rounds);
          const std::vector<double> ys = RoundMs(y, point_rounds);
          int faster = 0;
          for (int r = 0; r < point_rounds; ++r) faster += xs[r] < ys[r];
          trails.push_back(
              {{"strategy", strategies[i]},
               {"budget_fraction", fractions[b]},
               {"exact_vs_it", median[b][exact] / median[b][i]},
               {"rounds_exact_faster", faster},
               {"rounds", point_rounds},
               {"steps_plans_differ", differ.size()},
               {"its_step_time_vs_exact_where_plans_differ",
                differ.empty() ? nlohmann::json(nullptr)
                               : nlohmann::json(Percentile(differ, 0.5))}});
        }
        if (differ.empty()) continue;
        const double lead = Percentile(differ, 0.5);
        if (lead < least_step_lead) {
          least_step_lead = lead;
          char where[96];
          std::snprintf(where, sizeof where, "%s at %.1f (%zu steps)",
                        strategies[i].c_str(), fractions[b], differ.size());
          least_step_lead_at = where;
        }
      }
      if (recompute_only < strategies.size() && same_plans(b) &&
          median[b][recompute_only] > 0) {
        const double r = median[b][exact] / median[b][recompute_only];
        same_plan_lo = std::min(same_plan_lo, r);
        same_plan_hi = std::max(same_plan_hi, r);
      }
      for (size_t i = 0; i < strategies.size(); ++i) {
        if (i == exact || !fits[b][i] || median[b][i] <= 0) continue;
        const double r = median[b][exact] / median[b][i];
        if (i == none) worst_vs_none = std::min(worst_vs_none, r);
        if (r < worst_vs_others) {
          worst_vs_others = r;
          char where[64];
          std::snprintf(where, sizeof where, "%s at %.1f",
                        strategies[i].c_str(), fractions[b]);
          worst_other = where;
        }
      }
      if (recomputed[b][exact] > 0) {
        least_peak = std::min(least_peak, peak_of_budget[b][exact]);
      }
    }
    nlohmann::json check = {
        {"bench", "budget_sweep_check"},
        {"model", model},
        {"exact_points_over_budget", exact_over},
        {"exact_vs_best_fitting_other_min", worst_vs_others},
        {"exact_vs_best_fitting_other_min_at", worst_other},
        {"exact_vs_none_min_where_none_fits", worst_vs_none},
        {"exact_least_peak_of_budget_where_it_recomputes", least_peak},
        {"exact_vs_exact_recompute_range_where_plans_match",
         same_plan_hi > 0 ? nlohmann::json{same_plan_lo, same_plan_hi}
                          : nlohmann::json(nullptr)},
        {"others_step_time_vs_exact_where_plans_differ_min",
         least_step_lead_at.empty() ? nlohmann::json(nullptr)
                                    : nlohmann::json(least_step_lead)},
        {"others_step_time_vs_exact_where_plans_differ_min_at",
         least_step_lead_at},
        {"exact_trails_where_others_recompute_and_fit", trails},
        {"step_time_vs_exact_where_plans_match_p10_p90",
         same_plan_steps.empty()
             ? nlohmann::json(nullptr)
             : nlohmann::json{Percentile(same_plan_steps, 0.1),
                              Percentile(same_plan_steps, 0.9)}},
    };
    std::printf("%s\n", check.dump().c_str());
    std::fflush(stdout);
  }

  if (!svg_dir.empty()) {
    const char* workspace = std::getenv("BUILD_WORKSPACE_DIRECTORY");
    const std::string dir = svg_dir[0] == '/' || workspace == nullptr
                                ? svg_dir
                                : std::string(workspace) + "/" + svg_dir;
    const std::string path = dir + "/budget_sweep_" + model + ".svg";
    std::ofstream out(path);
    out << RenderSvg("remat budget sweep: " + model, {throughput, peaks});
    if (!out) {
      std::fprintf(stderr, "--svg-dir: cannot write %s\n", path.c_str());
      std::exit(1);
    }
    std::fprintf(stderr, "chart written to %s\n", path.c_str());
  }
}

}  // namespace
}  // namespace remat

int main(int argc, char** argv) {
  using namespace remat;
  RunQuietly(argv);
  std::vector<std::string> models = DemoModelNames();
  std::vector<std::string> strategies = StrategyNames();
  std::vector<double> fractions;
  for (int i = 2; i <= 10; ++i) fractions.push_back(i / 10.0);
  int warmup = 20, steps = 180, steps_below_safe = 12, rounds = 9;
  std::string svg_dir = "bench";
  bool verbose = false;
  CLI::App app{"Every strategy's throughput and steps over budget against "
               "the budget, per demo model, measured in lockstep."};
  app.add_option("--models", models, "models to sweep")
      ->delimiter(',')
      ->check(CLI::IsMember(DemoModelNames()))
      ->capture_default_str();
  app.add_option("--strategies", strategies,
                 "strategies (none and all are always run)")
      ->delimiter(',')
      ->check(CLI::IsMember(StrategyNames()))
      ->capture_default_str();
  app.add_option("--budgets", fractions,
                 "budgets, as fractions of the no-checkpoint peak at the "
                 "largest input")
      ->delimiter(',')
      ->check(CLI::Range(0.01, 10.0))
      ->capture_default_str();
  app.add_option("--warmup", warmup,
                 "steps at the full budget before the sweep, not measured")
      ->check(CLI::Range(0, 10000))->capture_default_str();
  app.add_option("--steps", steps, "measured steps per budget")
      ->check(CLI::Range(1, 10000))->capture_default_str();
  app.add_option("--steps-below-safe", steps_below_safe,
                 "measured steps at budgets below the peak of recomputing "
                 "every block at the largest input")
      ->check(CLI::Range(1, 10000))->capture_default_str();
  app.add_option("--rounds", rounds, "rounds each budget's steps form")
      ->check(CLI::Range(1, 1000))->capture_default_str();
  app.add_option("--svg-dir", svg_dir,
                 "where the charts go (relative to the workspace under "
                 "bazel run; empty: none)")->capture_default_str();
  app.add_flag("-v,--verbose", verbose,
               "print every measured step to stderr (JSON)");
  CLI11_PARSE(app, argc, argv);
  for (const char* needed : {"all", "none"}) {
    if (std::find(strategies.begin(), strategies.end(), needed) ==
        strategies.end()) {
      strategies.insert(strategies.begin(), needed);
    }
  }
  for (const std::string& model : models) {
    SweepModel(model, strategies, fractions, warmup, steps,
               steps_below_safe, rounds, svg_dir, verbose);
  }
  return 0;
}
