#include "client/cli/solve_command.h"

#include <algorithm>
#include <cstdio>
#include <memory>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_join.h"
#include "client/cli/exit_codes.h"
#include "client/cli/instance_json.h"
#include "nlohmann/json.hpp"
#include "planner/plan.h"
#include "planner/solver.h"
#include "planner/units.h"

namespace remat {
namespace cli {
namespace {

int64_t CountRecomputed(const Plan& plan) {
  return std::count(plan.actions.begin(), plan.actions.end(),
                    Action::kRecompute);
}

void PrintJson(const PlanProblem& problem, const Plan& plan,
               std::ostream& out) {
  nlohmann::json line;
  line["solver"] = plan.solver;
  line["feasible"] = plan.feasible;
  std::vector<std::string> actions;
  for (Action a : plan.actions) actions.push_back(ActionName(a));
  line["actions"] = actions;
  line["predicted_peak_bytes"] = plan.predicted_peak_bytes;
  line["recompute_ns"] = plan.recompute_ns;
  line["exposed_transfer_ns"] = plan.exposed_transfer_ns;
  // null for heuristics; 0 when the exact search proved the optimum.
  line["optimality_gap_ns"] = plan.optimality_gap_ns
                                  ? nlohmann::json(*plan.optimality_gap_ns)
                                  : nlohmann::json(nullptr);
  line["recomputed_blocks"] = CountRecomputed(plan);
  line["limit_bytes"] = problem.limit_bytes();
  line["shortfall_bytes"] =
      std::max<int64_t>(0, plan.predicted_peak_bytes - problem.limit_bytes());
  out << line.dump() << "\n";
}

std::string Pad(const std::string& s, size_t width, bool right = false) {
  if (s.size() >= width) return s;
  const std::string fill(width - s.size(), ' ');
  return right ? fill + s : s + fill;
}

void PrintTable(const PlanProblem& problem, const Plan& plan,
                std::ostream& out) {
  size_t name_width = 5;
  for (const BlockCost& b : problem.blocks) {
    name_width = std::max(name_width, b.name.size());
  }
  out << "solver " << plan.solver << ": budget "
      << FormatBytes(problem.budget_bytes) << ", margin "
      << FormatBytes(problem.margin_bytes) << ", limit "
      << FormatBytes(problem.limit_bytes()) << ", base "
      << FormatBytes(problem.base_bytes) << "\n";
  out << "  " << Pad("#", 4, true) << "  " << Pad("block", name_width) << "  "
      << Pad("action", 9) << "  " << Pad("act", 10, true) << "  "
      << Pad("input", 10, true) << "  " << Pad("forward", 9, true)
      << "  reason\n";
  for (size_t i = 0; i < problem.blocks.size(); ++i) {
    const BlockCost& b = problem.blocks[i];
    out << "  " << Pad(std::to_string(i), 4, true) << "  "
        << Pad(b.name, name_width) << "  "
        << Pad(ActionName(plan.actions[i]), 9) << "  "
        << Pad(FormatBytes(b.act_bytes), 10, true) << "  "
        << Pad(FormatBytes(b.input_bytes), 10, true) << "  "
        << Pad(FormatNs(b.forward_ns), 9, true) << "  " << plan.reasons[i]
        << "\n";
  }
  const int64_t limit = problem.limit_bytes();
  out << "  summary: ";
  if (plan.feasible) {
    out << "FITS, peak " << FormatBytes(plan.predicted_peak_bytes)
        << " of limit " << FormatBytes(limit) << " ("
        << FormatBytes(limit - plan.predicted_peak_bytes) << " free)";
  } else {
    out << "DOES NOT FIT, peak " << FormatBytes(plan.predicted_peak_bytes)
        << " exceeds limit " << FormatBytes(limit) << " by "
        << FormatBytes(plan.predicted_peak_bytes - limit);
  }
  out << ", recompute " << FormatNs(plan.recompute_ns) << " over "
      << CountRecomputed(plan) << " of " << problem.blocks.size()
      << " blocks\n\n";
}

}  // namespace

int RunSolve(const SolveOptions& options, std::ostream& out,
             std::ostream& err) {
  if (options.output != "table" && options.output != "json") {
    err << "error: -o must be \"table\" or \"json\"\n";
    return kExitUsage;
  }
  std::vector<std::unique_ptr<Solver>> solvers;
  const std::vector<std::string> names =
      options.solver == "all" ? SolverNames()
                              : std::vector<std::string>{options.solver};
  for (const std::string& name : names) {
    auto solver = NewSolver(name);
    if (!solver.ok()) {
      err << "error: --solver: " << solver.status().message()
          << ", or \"all\"\n";
      return kExitUsage;
    }
    solvers.push_back(std::move(*solver));
  }
  auto problem = LoadInstanceFile(options.instance_path);
  if (!problem.ok()) {
    err << "error: " << problem.status().message() << "\n";
    return kExitUsage;
  }
  bool all_fit = true;
  for (const auto& solver : solvers) {
    const Plan plan = solver->Solve(*problem);
    all_fit = all_fit && plan.feasible;
    if (options.output == "json") {
      PrintJson(*problem, plan, out);
    } else {
      PrintTable(*problem, plan, out);
    }
  }
  out.flush();
  return all_fit ? kExitOk : kExitInfeasible;
}

void AddSolveCommand(CLI::App* app, int* exit_code) {
  auto options = std::make_shared<SolveOptions>();
  CLI::App* cmd = app->add_subcommand(
      "solve", "Plan an instance file offline with one solver or all of them");
  cmd->add_option("--instance", options->instance_path,
                  "Instance JSON: {\"base_bytes\", \"budget_bytes\", "
                  "[\"margin_bytes\"], \"blocks\": [{\"name\", \"act_bytes\", "
                  "\"input_bytes\", \"forward_ns\", [\"checkpointable\"]}]}; "
                  "byte fields take integers or sizes like \"6GiB\"")
      ->required();
  cmd->add_option("--solver", options->solver,
                  "One of " + absl::StrJoin(SolverNames(), ", ") + ", or all")
      ->capture_default_str();
  cmd->add_option("-o,--output", options->output,
                  "table or json (one JSON "
                  "object per line per solver)")
      ->capture_default_str()
      ->check(CLI::IsMember({"table", "json"}));
  cmd->footer(kExitCodesHelp);
  cmd->callback([options, exit_code] {
    *exit_code = RunSolve(*options, std::cout, std::cerr);
  });
}

}  // namespace cli
}  // namespace remat
