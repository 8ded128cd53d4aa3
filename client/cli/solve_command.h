// `remat solve`: run one or all solvers on an instance file and print the
// plans as a table or as JSON lines. The logic is a plain function
// (RunSolve) so tests call it directly; AddSolveCommand only wires it into
// CLI11.
#ifndef REMAT_CLIENT_CLI_SOLVE_COMMAND_H_
#define REMAT_CLIENT_CLI_SOLVE_COMMAND_H_

#include <ostream>
#include <string>

namespace CLI {
class App;
}  // namespace CLI

namespace remat {
namespace cli {

struct SolveOptions {
  std::string instance_path;     // required
  std::string solver = "exact";  // a SolverNames() entry, or "all"
  std::string output = "table";  // "table" or "json"
};

// Prints the plans to `out` and problems to `err`. Returns an exit code
// from exit_codes.h: kExitOk when every requested plan fits,
// kExitInfeasible when at least one does not (the plans are printed
// anyway), kExitUsage for bad input or an unknown solver.
int RunSolve(const SolveOptions& options, std::ostream& out, std::ostream& err);

// Adds the `solve` subcommand to `app`. When it runs, its exit code is
// stored in *exit_code (which must outlive app's parsing).
void AddSolveCommand(CLI::App* app, int* exit_code);

}  // namespace cli
}  // namespace remat

#endif  // REMAT_CLIENT_CLI_SOLVE_COMMAND_H_
