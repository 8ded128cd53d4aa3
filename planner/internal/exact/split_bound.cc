#include "planner/internal/exact/split_bound.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <utility>

namespace remat {
namespace internal {
namespace exact {

void CoverBound::Build(const std::vector<Item>& items, const std::vector<int>& ids,
                       int first, int last) {
  ids_.assign(ids.begin() + first, ids.begin() + last);
  const size_t m = ids_.size();
  sizes_.clear();
  costs_.clear();
  sizes_.reserve(m);
  costs_.reserve(m);
  for (int i : ids_) {
    sizes_.push_back(items[i].s);
    costs_.push_back(items[i].c);
  }
  std::sort(sizes_.begin(), sizes_.end(), std::greater<int64_t>());
  std::sort(costs_.begin(), costs_.end());
  PrefixSums(sizes_, &largest_);
  PrefixSums(costs_, &cheapest_);
  std::sort(ids_.begin(), ids_.end(), [&](int x, int y) {
    const __int128 lhs = static_cast<__int128>(items[x].c) * items[y].s;
    const __int128 rhs = static_cast<__int128>(items[y].c) * items[x].s;
    return lhs != rhs ? lhs < rhs : x < y;
  });
  lp_s_.assign(1, 0);
  lp_c_.assign(1, 0);
  per_byte_.clear();
  lp_s_.reserve(m + 1);
  lp_c_.reserve(m + 1);
  per_byte_.reserve(m);
  for (int i : ids_) {
    lp_s_.push_back(lp_s_.back() + items[i].s);
    lp_c_.push_back(lp_c_.back() + items[i].c);
    per_byte_.push_back(static_cast<double>(items[i].c) /
                        static_cast<double>(items[i].s));
  }
}

double CoverBound::Lp(int64_t x) const {
  if (x <= 0) return 0;
  if (x > total()) return std::numeric_limits<double>::infinity();
  const int u = static_cast<int>(
      std::lower_bound(lp_s_.begin() + 1, lp_s_.end(), x) - lp_s_.begin()) - 1;
  return static_cast<double>(lp_c_[u]) +
         static_cast<double>(x - lp_s_[u]) * per_byte_[u];
}

double CoverBound::Counted(int64_t x) const {
  if (x <= 0) return 0;
  if (x > total()) return std::numeric_limits<double>::infinity();
  const int k = static_cast<int>(
      std::lower_bound(largest_.begin(), largest_.end(), x) - largest_.begin());
  return static_cast<double>(cheapest_[k]);
}

double SplitBound::Prepare(const std::vector<Item>& items, const std::vector<int>& order,
                           const std::vector<double>& r, int from, int64_t g) {
  const int m = static_cast<int>(order.size());
  std::vector<std::pair<double, int>> jumps;
  auto away = [&](int t) {
    return std::abs(r[order[t]]) / static_cast<double>(items[order[t]].s);
  };
  for (int q = from + 1; q < m; ++q) jumps.push_back({away(q) - away(q - 1), q});
  const size_t kept = std::min<size_t>(jumps.size(), 4);
  std::partial_sort(jumps.begin(), jumps.begin() + kept, jumps.end(),
                    std::greater<>());
  jumps.resize(kept);
  jumps.push_back({0, m});
  double best = -std::numeric_limits<double>::infinity();
  int best_q = m;
  CoverBound c;
  for (const auto& [jump, q] : jumps) {
    c.Build(items, order, from, q);
    o_.Build(items, order, q, m);
    const double v = Scan(c.largest().data(), c.cheapest().data(), q - from,
                          o_, g, nullptr, kExact);
    if (v > best) {
      best = v;
      best_q = q;
    }
  }
  items_ = &items;
  order_ = &order;
  from_ = from;
  q_ = best_q;
  if (best_q != m) o_.Build(items, order, best_q, m);  // m was the last
  active_ = true;
  Start(from);
  return best;
}

void SplitBound::Start(int t) {
  row_ = std::max(t, from_);
  sizes_.clear();
  costs_.clear();
  for (int u = row_; u < q_; ++u) {
    sizes_.push_back((*items_)[(*order_)[u]].s);
    costs_.push_back((*items_)[(*order_)[u]].c);
  }
  std::sort(sizes_.begin(), sizes_.end(), std::greater<int64_t>());
  std::sort(costs_.begin(), costs_.end());
  Sums();
}

void SplitBound::Advance(int t) {
  if (!active_ || t <= row_) return;
  for (; row_ < t; ++row_) {
    if (row_ >= q_) continue;
    const Item& it = (*items_)[(*order_)[row_]];
    sizes_.erase(std::lower_bound(sizes_.begin(), sizes_.end(), it.s,
                                  std::greater<int64_t>()));
    costs_.erase(std::lower_bound(costs_.begin(), costs_.end(), it.c));
  }
  Sums();
}

double SplitBound::Rest(int t, int64_t g, int* hint, Enough enough) const {
  if (!active_ || t != row_ || t >= q_ || g <= 0) {
    return -std::numeric_limits<double>::infinity();
  }
  return Scan(largest_.data(), cheapest_.data(),
              static_cast<int>(sizes_.size()), o_, g, hint, enough);
}

void SplitBound::Sums() {
  PrefixSums(sizes_, &largest_);
  PrefixSums(costs_, &cheapest_);
}

double SplitBound::Scan(const int64_t* largest, const int64_t* cheapest, int n,
                        const CoverBound& o, int64_t g, int* hint, Enough enough) {
  const int k0 = static_cast<int>(
      std::lower_bound(largest, largest + n + 1, g - o.total()) - largest);
  if (k0 > n) return std::numeric_limits<double>::infinity();
  auto h = [&](int k) {
    return static_cast<double>(cheapest[k]) + o.Lp(g - largest[k]);
  };
  int lo;
  double at;  // h(lo)
  if (hint != nullptr && *hint >= 0) {
    lo = std::min(std::max(*hint, k0), n);
    at = h(lo);
    for (double next; lo < n && (next = h(lo + 1)) < at; ++lo) at = next;
    for (double next; lo > k0 && (next = h(lo - 1)) < at; --lo) at = next;
  } else {
    lo = k0;
    for (int hi = n; lo < hi;) {
      const int mid = (lo + hi) / 2;
      if (h(mid + 1) >= h(mid)) {
        hi = mid;
      } else {
        lo = mid + 1;
      }
    }
    at = h(lo);
  }
  if (hint != nullptr) *hint = lo;
  if (at >= enough.high) return at;
  auto f = [&](int k, double h_k) {
    return std::max(h_k, static_cast<double>(cheapest[k]) +
                             o.Counted(g - largest[k]));
  };
  double least = f(lo, at);
  if (least < enough.low) return at;
  for (int k = lo + 1; k <= n; ++k) {
    const double h_k = h(k);
    if (h_k >= least) break;
    least = std::min(least, f(k, h_k));
  }
  for (int k = lo - 1; k >= k0; --k) {
    const double h_k = h(k);
    if (h_k >= least) break;
    least = std::min(least, f(k, h_k));
  }
  return least;
}

}  // namespace exact
}  // namespace internal
}  // namespace remat
