// remat: the command line. Only wiring lives here: each subcommand group is
// a library under client/cli/ with its own Add...Command.
#include <iostream>

#include "CLI/CLI.hpp"
#include "client/cli/daemon_commands.h"
#include "client/cli/exit_codes.h"
#include "client/cli/solve_command.h"

int main(int argc, char** argv) {
  CLI::App app{"remat: input-aware activation-checkpointing planner"};
  app.require_subcommand(1);
  app.footer(remat::cli::kExitCodesHelp);
  int exit_code = remat::cli::kExitOk;
  remat::cli::AddSolveCommand(&app, &exit_code);
  remat::AddDaemonCommands(app, &exit_code);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);  // prints help or the error
    return rc == 0 ? remat::cli::kExitOk : remat::cli::kExitUsage;
  }
  return exit_code;
}
