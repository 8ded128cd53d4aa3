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

// Values v[0..n) under "add delta to v[first..n)" and "least value", each
// O(log n): a segment tree whose nodes hold the least value below them,
// the adds that covered a whole node kept at that node.
class SuffixAddMin {
 public:
  explicit SuffixAddMin(const std::vector<int64_t>& values)
      : n_(static_cast<int>(values.size())), min_(4 * n_ + 4, 0),
        add_(4 * n_ + 4, 0) {
    if (n_ > 0) Build(1, 0, n_ - 1, values);
  }
  void AddFrom(int first, int64_t delta) {
    if (first < n_) Add(1, 0, n_ - 1, first, delta);
  }
  int64_t Min() const { return n_ > 0 ? min_[1] : kInf; }

 private:
  void Build(int node, int lo, int hi, const std::vector<int64_t>& values) {
    if (lo == hi) {
      min_[node] = values[lo];
      return;
    }
    const int mid = (lo + hi) / 2;
    Build(2 * node, lo, mid, values);
    Build(2 * node + 1, mid + 1, hi, values);
    min_[node] = std::min(min_[2 * node], min_[2 * node + 1]);
  }
  void Add(int node, int lo, int hi, int first, int64_t delta) {
    if (hi < first) return;
    if (lo >= first) {
      min_[node] += delta;
      add_[node] += delta;
      return;
    }
    const int mid = (lo + hi) / 2;
    Add(2 * node, lo, mid, first, delta);
    Add(2 * node + 1, mid + 1, hi, first, delta);
    min_[node] = add_[node] + std::min(min_[2 * node], min_[2 * node + 1]);
  }

  int n_;
  std::vector<int64_t> min_, add_;
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
