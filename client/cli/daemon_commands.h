// The `remat` CLI's daemon subcommands: health, models, model, plan,
// explain. Each takes --address (default rematd's 127.0.0.1:7421, or
// unix:/path), -o table|json, and for a TLS daemon --tls-ca FILE (plus
// --tls-cert FILE --tls-key FILE when it asks for client certificates).
//
// Exit codes (client/cli/exit_codes.h): 0 ok, 2 usage error, 3 no plan fits
// the budget, 4 daemon unreachable, 5 request rejected, 6 daemon not
// serving.
#ifndef REMAT_CLIENT_CLI_DAEMON_COMMANDS_H_
#define REMAT_CLIENT_CLI_DAEMON_COMMANDS_H_

#include "CLI/CLI.hpp"

namespace remat {

// Adds the subcommands to `app`. When one of them runs (during app.parse),
// it prints its result to stdout (errors to stderr) and stores its exit
// code in *exit_code. Usage errors inside a subcommand (a malformed
// --feature or --budget) throw CLI::ValidationError, like CLI11's own.
void AddDaemonCommands(CLI::App& app, int* exit_code);

}  // namespace remat

#endif  // REMAT_CLIENT_CLI_DAEMON_COMMANDS_H_
