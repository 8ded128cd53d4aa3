// Exit codes of the `remat` command line, shared by every subcommand so a
// script can tell "the input is wrong" from "the budget is too small" from
// "the daemon is down".
#ifndef REMAT_CLIENT_CLI_EXIT_CODES_H_
#define REMAT_CLIENT_CLI_EXIT_CODES_H_

namespace remat {
namespace cli {

// Success; for `solve`: every requested solver found a plan that fits.
inline constexpr int kExitOk = 0;
// Bad usage or bad input (unknown flag, malformed file, unknown solver).
inline constexpr int kExitUsage = 2;
// The command ran, but at least one plan does not fit the budget.
inline constexpr int kExitInfeasible = 3;
// Subcommands that talk to rematd (health, models, model, plan, explain);
// plan and explain also use kExitInfeasible when no plan fits the budget.
inline constexpr int kExitUnreachable = 4;  // daemon unreachable
inline constexpr int kExitRejected = 5;     // request rejected by the daemon
inline constexpr int kExitNotServing = 6;   // daemon up but not serving

// The --help footer that documents the codes above.
inline constexpr char kExitCodesHelp[] =
    "Exit codes:\n"
    "  0  ok (solve: every requested plan fits the budget)\n"
    "  2  usage or input error (the message names the field)\n"
    "  3  solve: at least one requested solver found no plan that fits;\n"
    "     plan, explain: no plan fits the budget\n"
    "  4  daemon unreachable\n"
    "  5  request rejected by the daemon\n"
    "  6  daemon not serving";

}  // namespace cli
}  // namespace remat

#endif  // REMAT_CLIENT_CLI_EXIT_CODES_H_
