// Planning instances as JSON files, for `remat solve` and tests:
//
//   {
//     "base_bytes": "2GiB",          // alive before forward
//     "budget_bytes": "6GiB",        // device memory the step may use
//     "margin_bytes": "256MiB",      // optional, default 0
//     "blocks": [
//       {"name": "layer0", "act_bytes": "444MiB", "input_bytes": 12582912,
//        "forward_ns": 4200000, "checkpointable": true,   // optional, true
//        // optional (planner/plan.h's defaults when absent):
//        "output_bytes": "12MiB", "workspace_bytes": "96MiB",
//        "transfer_bytes": "432MiB", "backward_ns": 8400000},
//       ...
//     ],
//     // optional: the host link per direction, bytes per second; with
//     // both, OFFLOAD is planned
//     "d2h_bytes_per_s": "25GB", "h2d_bytes_per_s": "25GB",
//     // optional, default false: with the link, RECOMPUTE_OFFLOAD too
//     "offload_checkpoints": true
//   }
//
// Byte fields take a non-negative integer or a size string ("6GiB",
// "512MiB", "1.5GB", "100KiB", "123"; see planner/units.h). forward_ns is a
// non-negative integer. Unknown keys are errors, so a typo never passes
// silently. The optional fields' defaults (BlockCost in planner/plan.h):
// output_bytes the next block's input_bytes (the last block's: min(its
// input_bytes, act_bytes)); transfer_bytes max(act_bytes - output, 0), and
// a transfer_bytes above act_bytes counts as act_bytes; workspace_bytes 0;
// backward_ns twice forward_ns.
//
// Thread safety: pure functions.
#ifndef REMAT_CLIENT_CLI_INSTANCE_JSON_H_
#define REMAT_CLIENT_CLI_INSTANCE_JSON_H_

#include <string>

#include "absl/status/statusor.h"
#include "planner/plan.h"

namespace remat {
namespace cli {

// INVALID_ARGUMENT naming the field, e.g.
//   blocks[3].act_bytes: must be a non-negative integer or a size like
//   "6GiB" (got -5)
absl::StatusOr<PlanProblem> ParseInstanceJson(const std::string& text);

// Reads and parses `path`. NOT_FOUND when the file cannot be read; parse
// errors are prefixed with the path.
absl::StatusOr<PlanProblem> LoadInstanceFile(const std::string& path);

}  // namespace cli
}  // namespace remat

#endif  // REMAT_CLIENT_CLI_INSTANCE_JSON_H_
