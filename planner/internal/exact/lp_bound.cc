#include "planner/internal/exact/lp_bound.h"

#include <algorithm>
#include <numeric>

namespace remat {
namespace internal {
namespace exact {

LpBound::LpBound(const std::vector<Item>& by_rank)
    : by_rank_(by_rank),
      n_(static_cast<int>(by_rank.size())),
      fs_(n_ + 1, 0),
      fc_(n_ + 1, 0) {
  top_ = 1;
  while (top_ * 2 <= n_) top_ *= 2;
}

void LpBound::AddAll() {
  for (int r = 1; r <= n_; ++r) Add(r, +1);
}

void Rank(const std::vector<Item>& items, std::vector<int>* rank_of,
          std::vector<Item>* by_rank) {
  const int m = static_cast<int>(items.size());
  std::vector<int> order(m);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int x, int y) {
    const __int128 lhs = static_cast<__int128>(items[x].c) * items[y].s;
    const __int128 rhs = static_cast<__int128>(items[y].c) * items[x].s;
    return lhs != rhs ? lhs < rhs : x < y;
  });
  by_rank->resize(m);
  if (rank_of != nullptr) rank_of->resize(m);
  for (int r = 0; r < m; ++r) {
    (*by_rank)[r] = items[order[r]];
    if (rank_of != nullptr) (*rank_of)[order[r]] = r + 1;
  }
}

}  // namespace exact
}  // namespace internal
}  // namespace remat
