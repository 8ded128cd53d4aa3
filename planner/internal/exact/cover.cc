#include "planner/internal/exact/cover.h"

#include <algorithm>
#include <numeric>

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

namespace {

// Values v[0..n) under "add delta to v[first..n)" and "least value", in
// blocks of kBlock values, each block with its least value and an add
// pending on all of it. AddFrom changes the values of one block and the
// pending adds of the blocks after it; Min reads one number a block. Both
// are plain loops over at most kBlock + n / kBlock numbers: fewer steps
// than a tree's at the sizes the solver meets (tens to thousands of items).
class SuffixAddMin {
 public:
  explicit SuffixAddMin(const std::vector<int64_t>& values)
      : v_(values), block_min_((values.size() + kBlock - 1) / kBlock),
        block_add_(block_min_.size(), 0) {
    for (size_t b = 0; b < block_min_.size(); ++b) Refresh(b);
  }
  void AddFrom(int first, int64_t delta) {
    const size_t f = static_cast<size_t>(first);
    if (f >= v_.size()) return;
    const size_t b = f / kBlock;
    const size_t end = std::min(v_.size(), (b + 1) * kBlock);
    for (size_t i = f; i < end; ++i) v_[i] += delta;
    Refresh(b);
    for (size_t k = b + 1; k < block_add_.size(); ++k) block_add_[k] += delta;
  }
  int64_t Min() const {
    int64_t least = kInf;
    for (size_t k = 0; k < block_min_.size(); ++k) {
      least = std::min(least, block_min_[k] + block_add_[k]);
    }
    return least;
  }

 private:
  static constexpr size_t kBlock = 16;
  void Refresh(size_t b) {
    const size_t end = std::min(v_.size(), (b + 1) * kBlock);
    block_min_[b] = *std::min_element(v_.begin() + b * kBlock, v_.begin() + end);
  }

  std::vector<int64_t> v_;  // less the pending add of their block
  std::vector<int64_t> block_min_, block_add_;
};

}  // namespace

std::vector<char> GreedyCover(const std::vector<Item>& items,
                              const std::vector<int64_t>& req,
                              const std::vector<int>& order) {
  const int m = static_cast<int>(items.size());
  // slack[p]: the savings of the taken items below need p, less the need.
  // No overflow: a need is at least -kInf, and all the savings together
  // stay below kInf.
  std::vector<int64_t> slack(m + 1);
  for (int p = 0; p <= m; ++p) slack[p] = -req[p];
  SuffixAddMin tree(slack);
  std::vector<char> chosen(m, 0);
  for (int r = 0; r < m && tree.Min() < 0; ++r) {
    chosen[order[r]] = 1;
    tree.AddFrom(order[r] + 1, items[order[r]].s);
  }
  std::vector<int> dearest(m);
  std::iota(dearest.begin(), dearest.end(), 0);
  std::sort(dearest.begin(), dearest.end(), [&](int x, int y) {
    return items[x].c != items[y].c ? items[x].c > items[y].c : x > y;
  });
  for (int p : dearest) {
    if (!chosen[p]) continue;
    tree.AddFrom(p + 1, -items[p].s);
    if (tree.Min() >= 0) {
      chosen[p] = 0;
    } else {
      tree.AddFrom(p + 1, items[p].s);
    }
  }
  return chosen;
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
