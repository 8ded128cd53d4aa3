// The chain as the search with OFFLOAD sees it (the problem has a host
// link): per block what each action saves and costs (OffloadBlock), the
// needs along the chain, the states of the search and the copies they have
// in flight, and the limits of its work.
//
// The search with OFFLOAD (offload_search.h) works on the memory model v2
// as SimulateStep has it, restated for a search along the chain in forward
// order. Forward times do not depend on the plan (block k's forward ends
// at now_k, the sum of forward_ns up to k), so neither do the landing
// times of the copies out: first in first out, block i's copy lands at
// L_i = max(now_i, L of the copy before) + T_i. Before block k is decided,
// with sigma the savings of the blocks below k (a_i - o_i recomputed, t_i
// offloaded, whether landed or not), A_k = base + the a_i below k and
// inflight_k the t_i of copies not landed by now_{k-1}, when block k's
// forward starts (the runtime waits there for those that have):
//
//   end of block k's forward:  A_k - sigma + inflight_k + a_k <= limit
//   block k's backward:        A_k - sigma + bwd_k + [k-1 offloaded] t_{k-1}
//                              <= limit
//
// (backward begins once every copy out has landed, and the block below a
// backward is prefetched whole during it). Exposed time: the wait for the
// copies out at the end of forward, max(0, L_last - now_{L-1}), and per
// offloaded block j the wait for its copy back, which is issued when the
// backward of block j+1 begins and never queues:
// max(0, H_j - backward_ns_{j+1} - [j+1 recomputed] forward_ns_{j+1}).
// Every term is known once blocks k-1 and k are decided, so the cost
// (recompute plus exposed time) adds up along the chain.
// RECOMPUTE_OFFLOAD (PlanProblem::offload_checkpoints) is a recompute
// whose checkpoint o_{k-1} is a copy like an offload's t_k: sigma gains
// s_k + o_{k-1}, the copy queues and comes back the same way, and block
// k's own backward holds it again (sigma before k does not count it, so
// the moment above is unchanged). It is only chosen after a recomputed
// block (either kind), which the state's last action says; a block whose
// recompute saves nothing is then recomputed too when the block above
// can send its checkpoint.
//
// Thread safety: plain values and pure functions.
#ifndef REMAT_PLANNER_INTERNAL_EXACT_OFFLOAD_CHAIN_H_
#define REMAT_PLANNER_INTERNAL_EXACT_OFFLOAD_CHAIN_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "absl/types/span.h"
#include "planner/internal/exact/options.h"
#include "planner/plan.h"

namespace remat {
namespace internal {
namespace exact {

// The most states the search with OFFLOAD examines, whatever
// ExactOptions::max_nodes says: each keeps a node (32 bytes) and costs
// up to 2 microseconds of bookkeeping (its copies in flight), so this
// bounds the search to about 2 seconds and 100 MiB.
inline constexpr int64_t kMaxOffloadNodes = int64_t{1} << 20;
// And on chains longer than kMaxWholeBlocks (no whole-block bounds, no
// deepening) at most this over the chain's length: there a search that
// has not finished early does not finish. On the bench's 200- and
// 1000-block chains with noisy layers and a link, the four that stop have
// the same plan and within 0.01% the same lower bound after 2^15 states
// as after 2^20, in a tenth of the time (on 1000 blocks, 69 against 780
// ms at p99); with equal layers two of the six stopped then finish after
// 2^20, and the plans of three are 0.04..0.06% dearer.
inline constexpr int64_t kOffloadBlockNodes = int64_t{1} << 25;
// The longest chain OffloadSearch::PrepareWholes prepares the whole-block
// bounds for (on the bench's 200- and 1000-block chains its points pruned
// no state and cost up to 20% of the median solve); longer chains have the
// work limit above.
inline constexpr int kMaxWholeBlocks = 128;

// The search with OFFLOAD's work limit on a chain of n blocks.
int64_t OffloadNodeLimit(const ExactOptions& options, size_t n);
// Costs summed in different orders may differ by a rounding of the
// doubles, never by this much: a bound prunes only past it.
inline constexpr double kCostSlackNs = 1e-3;

// One block, with the defaults filled in (planner/plan.h, MemoryOf), and
// what each action it may take saves and costs.
struct OffloadBlock {
  int64_t below = 0;  // A_k: base plus the a_i of the blocks below
  int64_t a = 0, s = 0, t = 0, bwd = 0, c = 0;
  int64_t ro = 0;  // RECOMPUTE_OFFLOAD's copy: o_{k-1}, its checkpoint
  // now: when the block's forward ends; start: when it starts (a copy
  // landed by then is off the device at the block's end, SimulateStep).
  double bns = 0, now = 0, start = 0;
  // Per copy kind (OFFLOAD's t, RECOMPUTE_OFFLOAD's ro): time out, time
  // back, and the least wait for the copy back: with the block above
  // recomputed when that one can be. Charged when the block is chosen so;
  // the rest once the block above is decided.
  double out_ns = 0, back_ns = 0, least_wait = 0;
  double ro_out_ns = 0, ro_back_ns = 0, ro_least_wait = 0;
  bool can_r = false, can_o = false, can_ro = false;
};

// The action of the block a state decided last (what the next block's
// moments, waits and choices depend on).
enum Last : uint8_t { kLastKeep, kLastRecompute, kLastOffload, kLastRo };

// Whether a block decided so sends a copy to host (OFFLOAD's, or
// RECOMPUTE_OFFLOAD's checkpoint).
inline bool Sends(uint8_t last) { return last == kLastOffload || last == kLastRo; }

// A decision of a plan, in the node arena of a search: a block not kept,
// linked to the one below it.
struct OffloadNode {
  int32_t block;
  Action action;
  int32_t parent;    // previous non-KEEP node
  int32_t prev_off;  // previous node with a copy out
  double landed;     // with a copy out: when it lands
};

// Copies in flight as (landing time, bytes), the first to land first.
using Profile = std::vector<std::pair<double, int64_t>>;
using ProfileView = absl::Span<const std::pair<double, int64_t>>;

// A state of the search before block k: the savings of the blocks below
// (sigma: a_i - o_i recomputed, t_i offloaded, s_i + o_{i-1} with the
// checkpoint sent, landed or not), its cost so far (recompute plus the
// exposed time charged so far, OffloadSearch::Step says when), its count
// of blocks not kept, its newest nodes, and block k-1's action.
struct OffloadState {
  int64_t sigma;
  double cost;
  int32_t count;
  int32_t node;      // newest non-KEEP node, -1 for none
  int32_t off_node;  // newest node with a copy out, -1 for none
  uint8_t last;      // Last: the action of the block just decided
};

// The blocks of a problem with a link, and the needs the search prunes by.
struct OffloadChain {
  std::vector<OffloadBlock> blocks;
  // need[k]: what sigma must be at block k's moments, ignoring the copies
  // in flight and the prefetched block (which only add to it); n + 1
  // entries, the last -kInf.
  std::vector<int64_t> need;
  // ahead[p]: the largest need at p or above; reach[p]: the least sigma
  // before block p from which every need at p or above can still be met
  // with each block from p on at its larger saving, counted at once.
  std::vector<int64_t> ahead, reach;
};
// Its actions (can_r, can_o, can_ro) leave out only what never helps: the
// last block, a block whose saving is not positive (unless its recompute
// lets the block above send its checkpoint), RECOMPUTE_OFFLOAD where the
// problem does not allow it, and an offload whose recompute is never
// worse (it frees at least as much, at once, for no more time). Some plan
// over those actions is as cheap as any plan over all of them, and each
// fitting plan's savings meet every need. O(blocks).
OffloadChain MakeOffloadChain(const PlanProblem& problem);

// The bytes a node's copy moves.
inline int64_t Moved(const std::vector<OffloadBlock>& blocks, const OffloadNode& o) {
  return o.action == Action::kOffload ? blocks[o.block].t : blocks[o.block].ro;
}

// The copies of `x` (its nodes in `arena`) still in flight after `time`:
// their total bytes, and (when `nodes` is not null) their nodes, newest
// first. O(copies in flight).
inline int64_t InFlight(const std::vector<OffloadBlock>& blocks,
                        const std::vector<OffloadNode>& arena,
                        const OffloadState& x, double time,
                        std::vector<int32_t>* nodes) {
  int64_t bytes = 0;
  for (int32_t node = x.off_node; node >= 0; node = arena[node].prev_off) {
    const OffloadNode& o = arena[node];
    if (!(o.landed > time)) break;  // first in first out: the rest landed
    bytes += Moved(blocks, o);
    if (nodes != nullptr) nodes->push_back(node);
  }
  return bytes;
}

// The wait for a copy of `back_ns` back to block k, issued when the
// backward of block k+1 begins: what that backward, and block k+1's
// recompute if it has one, leave unhidden.
inline double BackWait(const std::vector<OffloadBlock>& blocks, int k,
                       double back_ns, bool above_recomputed) {
  const OffloadBlock& up = blocks[k + 1];
  return std::max(0.0, back_ns - up.bns -
                           (above_recomputed ? static_cast<double>(up.c) : 0.0));
}

}  // namespace exact
}  // namespace internal
}  // namespace remat

#endif  // REMAT_PLANNER_INTERNAL_EXACT_OFFLOAD_CHAIN_H_
