// remat: the command-line tool. Subcommands talk to rematd (see
// client/cli/daemon_commands.h).
#include <iostream>

#include "CLI/CLI.hpp"
#include "client/cli/daemon_commands.h"

int main(int argc, char** argv) {
  CLI::App app{"remat: input-aware activation-checkpointing planner", "remat"};
  app.footer(remat::kDaemonExitCodesHelp);
  app.require_subcommand(1);
  int exit_code = remat::kExitOk;
  remat::AddDaemonCommands(app, &exit_code);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return remat::kExitUsage;
  }
  return exit_code;
}
