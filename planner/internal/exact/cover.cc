#include "planner/internal/exact/cover.h"

#include <algorithm>

namespace remat {
namespace internal {
namespace exact {

void PrefixSums(const std::vector<int64_t>& v, std::vector<int64_t>* sums) {
  sums->assign(v.size() + 1, 0);
  for (size_t k = 0; k < v.size(); ++k) (*sums)[k + 1] = (*sums)[k] + v[k];
}

bool MeetsNeeds(const std::vector<Item>& items, const std::vector<char>& chosen,
                const std::vector<int64_t>& req) {
  int64_t sigma = 0;
  for (size_t p = 0; p <= items.size(); ++p) {
    if (sigma < req[p]) return false;
    if (p < items.size() && chosen[p]) sigma += items[p].s;
  }
  return true;
}

Cover RecomputeCover(const PlanProblem& problem) {
  const size_t n = problem.blocks.size();
  const int64_t limit = problem.limit_bytes();
  Cover cover;
  std::vector<Item>& items = cover.items;
  std::vector<int64_t>& req = cover.req;
  req.assign(1, -kInf);
  int64_t below = problem.base_bytes;  // A_k
  for (size_t k = 0; k < n; ++k) {
    const BlockMemory m = MemoryOf(problem, k);
    const BlockCost& b = problem.blocks[k];
    const int64_t s = m.keep_bytes - m.recompute_bytes;
    if (b.checkpointable && s > 0 && k + 1 < n) {
      items.push_back({static_cast<int>(k), s, b.forward_ns});
      req.push_back(-kInf);
    }
    // Block k's backward: the items below k are those before the newest
    // one when block k is itself an item.
    const size_t p = items.size() - (!items.empty() &&
                                     items.back().block == static_cast<int>(k));
    req[p] = std::max(req[p], below + m.backward_bytes - limit);
    below += m.keep_bytes;
  }
  req.back() = std::max(req.back(), below - limit);  // end of forward
  return cover;
}

}  // namespace exact
}  // namespace internal
}  // namespace remat
