#include "planner/internal/exact/count_bound.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace remat {
namespace internal {
namespace exact {

void CountBound::Prepare(const std::vector<Item>& items, const std::vector<int>& free,
                         const std::vector<Entry>& entries, int64_t best_cost,
                         int64_t best_count) {
  active_ = true;
  counts_.clear();
  least_ = std::numeric_limits<double>::infinity();
  double lo_ratio = std::numeric_limits<double>::infinity(), hi_ratio = 0;
  for (int p : free) {
    const double ratio =
        static_cast<double>(items[p].c) / static_cast<double>(items[p].s);
    lo_ratio = std::min(lo_ratio, ratio);
    hi_ratio = std::max(hi_ratio, ratio);
  }
  lo_ratio = std::max(lo_ratio, 1e-6 * hi_ratio);
  if (!(hi_ratio > 0)) {
    active_ = false;
    return;
  }
  // The counts each entry leaves, with their mu; then, at every count
  // some entry leaves, each entry's mu: a state from an entry that rules
  // a count out is then bounded at that count by its entry's mu (a
  // bound over the same mu only rises along the search), not by the
  // weaker mu of the entry that leaves it.
  std::vector<std::vector<Count>> left(entries.size());
  std::vector<int> counts;
  for (size_t i = 0; i < entries.size(); ++i) {
    if (!CountsLeft(items, free, entries[i], lo_ratio, hi_ratio, best_cost,
                    best_count, &left[i])) {
      active_ = false;
      return;
    }
    for (const Count& c : left[i]) counts.push_back(c.k);
  }
  std::sort(counts.begin(), counts.end());
  counts.erase(std::unique(counts.begin(), counts.end()), counts.end());
  if (counts.size() > kMaxCounts) {
    active_ = false;
    return;
  }
  for (int k : counts) {
    for (size_t i = 0; i < entries.size(); ++i) {
      const Entry& e = entries[i];
      const auto known = std::find_if(left[i].begin(), left[i].end(),
                                      [&](const Count& c) { return c.k == k; });
      if (known != left[i].end()) {
        counts_.push_back(std::move(*known));
        continue;
      }
      const int64_t more = k - e.count;
      if (more < (e.g > 0 ? 1 : 0) || more > static_cast<int64_t>(free.size())) {
        continue;  // no completion of that count: the bound is infinite
      }
      counts_.push_back(
          {k, BestMu(items, free, e, static_cast<int>(more), hi_ratio).first});
    }
  }
  // Per count left, every item by c - mu s, and Fenwick sums over the
  // undecided ones.
  const int m = static_cast<int>(items.size());
  std::vector<double> v(m);
  for (Count& c : counts_) {
    for (int i = 0; i < m; ++i) {
      v[i] = static_cast<double>(items[i].c) -
             c.mu * static_cast<double>(items[i].s);
    }
    std::vector<int> by_value(m);
    std::iota(by_value.begin(), by_value.end(), 0);
    std::sort(by_value.begin(), by_value.end(),
              [&](int a, int b) { return v[a] < v[b]; });
    c.rank.assign(m, 0);
    c.value.assign(m + 1, 0);
    c.fn.assign(m + 1, 0);
    c.fv.assign(m + 1, 0);
    for (int r = 0; r < m; ++r) {
      c.rank[by_value[r]] = r + 1;
      c.value[r + 1] = v[by_value[r]];
    }
  }
  top_ = 1;
  while (top_ * 2 <= m) top_ *= 2;
}

void CountBound::Start(const std::vector<int>& order, int t) {
  for (Count& c : counts_) {
    std::fill(c.fn.begin(), c.fn.end(), 0);
    std::fill(c.fv.begin(), c.fv.end(), 0.0);
    for (size_t u = t; u < order.size(); ++u) Add(&c, order[u], +1);
  }
}

int64_t CountBound::RootBound() const {
  if (!active_) return 0;
  if (least_ >= static_cast<double>(kInf)) return kInf;
  return static_cast<int64_t>(
      std::max(0.0, std::floor(least_ - 1 - 1e-9 * std::abs(least_))));
}

void CountBound::Remove(int p) {
  for (Count& c : counts_) Add(&c, p, -1);
}

bool CountBound::MayBeat(int64_t cost, int64_t count, int64_t g, int64_t best_cost,
                         int64_t best_count) const {
  for (size_t i = 0; i < counts_.size();) {
    const int k = counts_[i].k;
    double bound = -std::numeric_limits<double>::infinity();
    for (; i < counts_.size() && counts_[i].k == k; ++i) {
      const Count& c = counts_[i];
      const int64_t more = c.k - count;
      double sum = 0;
      if (more < 0 || (more == 0 && g > 0) || !SumOfLeast(c, more, &sum)) {
        bound = std::numeric_limits<double>::infinity();
        continue;
      }
      bound = std::max(bound, static_cast<double>(cost) +
                                  c.mu * static_cast<double>(g) + sum);
    }
    if (!Excludes(bound, k, best_cost, best_count)) return true;
  }
  return false;
}

bool CountBound::CountsLeft(const std::vector<Item>& items, const std::vector<int>& free,
                            const Entry& e, double lo_ratio, double hi_ratio,
                            int64_t best_cost, int64_t best_count, std::vector<Count>* left) {
  const int m = static_cast<int>(free.size());
  const double g = static_cast<double>(std::max<int64_t>(e.g, 0));
  const double base = static_cast<double>(e.cost);
  // The counts not ruled out by a grid of mu (around the LP's price,
  // from the least to the greatest cost per byte). No item at all is a
  // completion only where nothing is needed (g is 0).
  std::vector<double> v(m);
  std::vector<double> lb(m + 1, -std::numeric_limits<double>::infinity());
  lb[0] = base;
  constexpr int kGrid = 24;
  for (int j = 0; j <= kGrid; ++j) {
    const double mu = j == 0 ? 0.0 : lo_ratio * std::pow(4 * hi_ratio / lo_ratio,
                                                         (j - 1.0) / (kGrid - 1));
    for (int i = 0; i < m; ++i) {
      const Item& it = items[free[i]];
      v[i] = static_cast<double>(it.c) - mu * static_cast<double>(it.s);
    }
    std::sort(v.begin(), v.end());
    double sum = base + mu * g;
    for (int k = 1; k <= m; ++k) {
      sum += v[k - 1];
      lb[k] = std::max(lb[k], sum);
    }
  }
  std::vector<int> ks;
  for (int k = g > 0 ? 1 : 0; k <= m; ++k) {
    if (!Excludes(lb[k], e.count + k, best_cost, best_count)) ks.push_back(k);
  }
  if (ks.size() > kMaxCounts * 4) return false;
  for (int k : ks) {
    const auto [mu, best] = BestMu(items, free, e, k, hi_ratio);
    const double bound = std::max(best, lb[k]);
    if (!Excludes(bound, e.count + k, best_cost, best_count)) {
      left->push_back({static_cast<int>(e.count + k), mu});
      least_ = std::min(least_, bound);
    }
  }
  return true;
}

std::pair<double, double> CountBound::BestMu(const std::vector<Item>& items,
                                             const std::vector<int>& free,
                                             const Entry& e, int k, double hi_ratio) {
  const int m = static_cast<int>(free.size());
  const double g = static_cast<double>(std::max<int64_t>(e.g, 0));
  std::vector<double> v(m);
  std::vector<int> idx(m);
  double lo = 0, hi = 4 * hi_ratio, best_mu = 0;
  double best = k == 0 ? static_cast<double>(e.cost)
                       : -std::numeric_limits<double>::infinity();
  for (int it = 0; it < 32 && k > 0; ++it) {
    const double mu = 0.5 * (lo + hi);
    for (int i = 0; i < m; ++i) {
      const Item& item = items[free[i]];
      v[i] = static_cast<double>(item.c) - mu * static_cast<double>(item.s);
    }
    std::iota(idx.begin(), idx.end(), 0);
    std::nth_element(idx.begin(), idx.begin() + (k - 1), idx.end(),
                     [&](int a, int b) { return v[a] < v[b]; });
    double sum = static_cast<double>(e.cost) + mu * g, saved = 0;
    for (int i = 0; i < k; ++i) {
      sum += v[idx[i]];
      saved += static_cast<double>(items[free[idx[i]]].s);
    }
    if (sum > best) {
      best = sum;
      best_mu = mu;
    }
    (saved < g ? lo : hi) = mu;
  }
  return {best_mu, best};
}

bool CountBound::Excludes(double lb, int k, int64_t best_cost, int64_t best_count) {
  const double margin = 1 + 1e-9 * std::abs(lb);
  return lb - margin > static_cast<double>(best_cost) ||
         (lb - margin > static_cast<double>(best_cost) - 1 && k >= best_count);
}

void CountBound::Add(Count* c, int p, int sign) {
  const int m = static_cast<int>(c->rank.size());
  const double value = c->value[c->rank[p]];
  for (int i = c->rank[p]; i <= m; i += i & -i) {
    c->fn[i] += sign;
    c->fv[i] += sign * value;
  }
}

bool CountBound::SumOfLeast(const Count& c, int64_t k, double* sum) const {
  const int m = static_cast<int>(c.rank.size());
  int pos = 0;
  int64_t n = 0;
  double acc = 0;
  for (int step = top_; step > 0; step >>= 1) {
    const int next = pos + step;
    if (next <= m && n + c.fn[next] <= k) {
      pos = next;
      n += c.fn[next];
      acc += c.fv[next];
    }
  }
  *sum = acc;
  return n == k;
}

}  // namespace exact
}  // namespace internal
}  // namespace remat
