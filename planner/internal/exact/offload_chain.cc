#include "planner/internal/exact/offload_chain.h"

#include "planner/internal/exact/cover.h"

namespace remat {
namespace internal {
namespace exact {

int64_t OffloadNodeLimit(const ExactOptions& options, size_t n) {
  const int64_t limit = std::min(options.max_nodes, kMaxOffloadNodes);
  if (n <= static_cast<size_t>(kMaxWholeBlocks)) return limit;
  return std::min(limit, kOffloadBlockNodes / static_cast<int64_t>(n));
}

OffloadChain MakeOffloadChain(const PlanProblem& problem) {
  const int n = static_cast<int>(problem.blocks.size());
  const int64_t limit = problem.limit_bytes();
  OffloadChain chain;
  std::vector<OffloadBlock>& blocks = chain.blocks;
  std::vector<int64_t>& need = chain.need;
  std::vector<int64_t>& ahead = chain.ahead;
  std::vector<int64_t>& reach = chain.reach;
  blocks.resize(n);
  double now = 0;
  for (int k = 0; k < n; ++k) {
    const BlockMemory m = MemoryOf(problem, k);
    const BlockCost& b = problem.blocks[k];
    OffloadBlock& x = blocks[k];
    x.a = m.keep_bytes;
    x.s = m.keep_bytes - m.recompute_bytes;
    x.t = m.transfer_bytes;
    x.bwd = m.backward_bytes;
    x.c = b.forward_ns;
    x.bns = static_cast<double>(m.backward_ns);
    x.start = now;
    now += static_cast<double>(b.forward_ns);
    x.now = now;
    x.out_ns = static_cast<double>(x.t) / problem.d2h_bytes_per_s * 1e9;
    x.back_ns = static_cast<double>(x.t) / problem.h2d_bytes_per_s * 1e9;
    x.can_r = b.checkpointable && x.s > 0 && k + 1 < n;
    x.can_o = b.checkpointable && x.t > 0 && k + 1 < n;
    // RECOMPUTE_OFFLOAD acts after a recomputed block (plan.h); on the
    // last block it lowers no moment.
    if (problem.offload_checkpoints && k > 0 && k + 1 < n &&
        b.checkpointable && problem.blocks[k - 1].checkpointable) {
      x.ro = MemoryOf(problem, k - 1).output_bytes;
      x.can_ro = x.ro > 0;
      x.ro_out_ns = static_cast<double>(x.ro) / problem.d2h_bytes_per_s * 1e9;
      x.ro_back_ns = static_cast<double>(x.ro) / problem.h2d_bytes_per_s * 1e9;
    }
  }
  // A block whose recompute (or checkpoint sent) saves nothing is still
  // chosen so when that lets the block above send its checkpoint.
  for (int k = n - 1; k-- > 0;) {
    OffloadBlock& x = blocks[k];
    const bool enables = blocks[k + 1].can_ro;
    x.can_ro = x.can_ro && (x.s + x.ro > 0 || enables);
    if (enables) x.can_r = true;
  }
  for (int k = 0; k + 1 < n; ++k) {
    OffloadBlock& x = blocks[k];
    const OffloadBlock& up = blocks[k + 1];
    const double hides =
        up.bns + (up.can_r || up.can_ro ? static_cast<double>(up.c) : 0.0);
    x.ro_least_wait = std::max(0.0, x.ro_back_ns - hides);
    if (!x.can_o) continue;
    x.least_wait = std::max(0.0, x.back_ns - hides);
    // Recomputing frees at least as much, at once, for no more time, and
    // hides more of the block below's copy back; offloading also holds
    // its bytes in the backward above and delays later copies: such an
    // offload is never better.
    if (x.can_r && x.t <= x.s && x.least_wait >= static_cast<double>(x.c)) {
      x.can_o = false;
    }
  }
  // need[k]: what sigma must be at block k's moments, ignoring the
  // copies in flight and the prefetched block (which only add to it).
  need.assign(n + 1, -kInf);
  int64_t below = problem.base_bytes;
  for (int k = 0; k < n; ++k) {
    blocks[k].below = below;
    need[k] = below + std::max(blocks[k].a, blocks[k].bwd) - limit;
    below += blocks[k].a;
  }
  // ahead[p]: the largest need at p or above; reach[p]: the least sigma
  // before block p from which every need at p or above can still be met
  // with each block from p on at its larger saving, counted at once.
  ahead.assign(n + 1, -kInf);
  reach.assign(n + 1, -kInf);
  for (int p = n - 1; p >= 0; --p) {
    const OffloadBlock& x = blocks[p];
    const int64_t most = std::max<int64_t>(
        {0, x.can_r ? x.s : 0, x.can_o ? x.t : 0, x.can_ro ? x.s + x.ro : 0});
    ahead[p] = std::max(ahead[p + 1], need[p]);
    reach[p] = std::max(need[p], reach[p + 1] - most);
  }
  return chain;
}

}  // namespace exact
}  // namespace internal
}  // namespace remat
