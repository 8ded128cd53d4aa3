#include "planner/internal/exact/reverse_search.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace remat {
namespace internal {
namespace exact {

ReverseSearch::ReverseSearch(const std::vector<Item>& items, const std::vector<int64_t>& req,
                             double lambda, int64_t max_nodes,
                             std::chrono::nanoseconds time_limit, ExactStats* st)
    : items_(items),
      req_(req),
      m_(static_cast<int>(items.size())),
      lambda_(lambda),
      max_nodes_(max_nodes),
      time_limit_(time_limit),
      start_(std::chrono::steady_clock::now()),
      st_(st) {
  const int m = m_;
  // The tail: items from the lowest position where the max can act.
  std::vector<int64_t> gmin(m + 1);
  gmin[m] = req[m];
  for (int p = m; p-- > 0;) gmin[p] = std::max(req[p], gmin[p + 1] - items[p].s);
  body_ = 0;
  while (body_ < m && req[body_] <= gmin[body_ + 1] - items[body_].s) ++body_;
  // Whether every need below position p is met by saving nothing.
  none_below_.assign(m + 1, true);
  for (int p = 1; p <= m; ++p) {
    none_below_[p] = none_below_[p - 1] && req[p - 1] <= 0;
  }
  // Processing order: the tail from the top down, then the body closest
  // to the LP's price first (ties by chain position).
  r_.resize(m);
  double magnitude = 0;
  for (int p = 0; p < m; ++p) {
    r_[p] = static_cast<double>(items[p].c) - lambda * items[p].s;
    magnitude += std::abs(r_[p]) + static_cast<double>(items[p].c) +
                 lambda * static_cast<double>(items[p].s);
  }
  order_.reserve(m);
  for (int p = m; p-- > body_;) order_.push_back(p);
  std::vector<int> body(body_);
  std::iota(body.begin(), body.end(), 0);
  std::sort(body.begin(), body.end(), [&](int x, int y) {
    const double ax = std::abs(r_[x]) / static_cast<double>(items[x].s);
    const double ay = std::abs(r_[y]) / static_cast<double>(items[y].s);
    return ax != ay ? ax < ay : x < y;
  });
  order_.insert(order_.end(), body.begin(), body.end());
  // Suffix sums over the processing order.
  neg_.assign(m + 1, 0);
  left_s_.assign(m + 1, 0);
  def_s_.assign(m + 1, 0);
  def_c_.assign(m + 1, 0);
  def_n_.assign(m + 1, 0);
  add_s_.assign(m + 1, 0);
  add_c_.assign(m + 1, 0);
  drop_s_.assign(m + 1, 0);
  drop_c_.assign(m + 1, 0);
  for (int t = 0; t < m; ++t) {
    const Item& it = items[order_[t]];
    const bool lp_takes = r_[order_[t]] < 0;
    add_s_[t + 1] = add_s_[t] + (lp_takes ? 0 : it.s);
    add_c_[t + 1] = add_c_[t] + (lp_takes ? 0 : it.c);
    drop_s_[t + 1] = drop_s_[t] + (lp_takes ? it.s : 0);
    drop_c_[t + 1] = drop_c_[t] + (lp_takes ? it.c : 0);
  }
  rho_.assign(m + 1, std::numeric_limits<double>::infinity());
  min_abs_.assign(m + 1, std::numeric_limits<double>::infinity());
  for (int t = m; t-- > 0;) {
    const int p = order_[t];
    const bool lp_takes = r_[p] < 0;
    rho_[t] = std::min(rho_[t + 1], std::abs(r_[p]) / items[p].s);
    min_abs_[t] = std::min(min_abs_[t + 1], std::abs(r_[p]));
    neg_[t] = neg_[t + 1] + std::min(0.0, r_[p]);
    left_s_[t] = left_s_[t + 1] + items[p].s;
    def_s_[t] = def_s_[t + 1] + (lp_takes ? items[p].s : 0);
    def_c_[t] = def_c_[t + 1] + (lp_takes ? items[p].c : 0);
    def_n_[t] = def_n_[t + 1] + lp_takes;
  }
  for (int64_t need : req) largest_need_ = std::max(largest_need_, need);
  slack_ = 1e-9 * (lambda * static_cast<double>(largest_need_) + magnitude) + 4;
}

int64_t ReverseSearch::Bound(int t, int64_t g, int64_t cost) const {
  // A completion that saves S >= g costs lambda S + neg + the |r| of the
  // items where it differs from the LP's choice, which save at least
  // |S - def_s| between them at no less than rho per byte.
  const double gd = static_cast<double>(g);
  const double def = static_cast<double>(def_s_[t]);
  const double rho = std::isfinite(rho_[t]) ? rho_[t] : 0;
  const double least =
      gd >= def ? lambda_ * gd + rho * (gd - def)
                : std::min(lambda_ * gd + rho * (def - gd), lambda_ * def);
  return Ceil(static_cast<double>(cost) + neg_[t] + least, cost);
}

int64_t ReverseSearch::Ceil(double v, int64_t floor) const {
  v -= slack_;
  if (v <= static_cast<double>(floor)) return floor;
  return v >= static_cast<double>(kInf) ? kInf
                                       : static_cast<int64_t>(std::ceil(v));
}

int64_t ReverseSearch::BodyLp(int t, int64_t g, int64_t cost) const {
  const int64_t e = g - def_s_[t];
  double rest = 0;
  if (e != 0) {
    const std::vector<int64_t>& sum_s = e > 0 ? add_s_ : drop_s_;
    const std::vector<int64_t>& sum_c = e > 0 ? add_c_ : drop_c_;
    const int64_t target = sum_s[t] + (e > 0 ? e : -e);
    double moved;  // the cost of the items added or dropped
    if (sum_s[m_] < target) {
      if (e > 0) return kInf;  // the items left cannot save g
      moved = static_cast<double>(sum_c[m_] - sum_c[t]);
    } else {
      // The first u whose item brings the sum to the target.
      const int u = static_cast<int>(
          std::lower_bound(sum_s.begin() + t + 1, sum_s.end(), target) -
          sum_s.begin()) - 1;
      const Item& it = items_[order_[u]];
      moved = static_cast<double>(sum_c[u] - sum_c[t]) +
              static_cast<double>(target - sum_s[u]) *
                  static_cast<double>(it.c) / static_cast<double>(it.s);
    }
    rest = e > 0 ? moved : -moved;
  }
  return Ceil(static_cast<double>(cost + def_c_[t]) + rest, cost);
}

int64_t ReverseSearch::BodyBound(int t, int64_t g, int64_t cost) const {
  return std::max(BodyLp(t, g, cost), WholeBound(t, g, cost));
}

int64_t ReverseSearch::WholeBound(int t, int64_t g, int64_t cost,
                                  int64_t prune_at) const {
  // Within `slop` of prune_at - cost the exact bound decides (a tie
  // prunes on the count).
  const double slop = 2 + 1e-8 * static_cast<double>(prune_at);
  const double rest = split_.Rest(
      t, g, &split_hint_,
      prune_at >= kInf ? SplitBound::kExact
                       : SplitBound::Enough{
                             static_cast<double>(prune_at - cost) - slop,
                             static_cast<double>(prune_at - cost) + slop});
  if (rest >= static_cast<double>(kInf)) return kInf;
  if (!(rest > 0)) return cost;
  const double v = static_cast<double>(cost) + rest;
  return std::max(cost, static_cast<int64_t>(std::ceil(v - 1e-9 * v)));
}

bool ReverseSearch::Run(int64_t root_bound, Best* best, size_t beam,
                        int64_t max_nodes) {
  const int m = m_;
  max_nodes = std::min(max_nodes, max_nodes_);
  std::vector<State> front = {{std::max<int64_t>(req_[m], 0), 0, 0, -1}};
  if (split_.active()) split_.Start(0);
  if (count_.active()) count_.Start(order_, 0);
  for (int t = 0; t < m && !front.empty(); ++t) {
    if ((beam == 0 && st_->nodes > max_nodes) ||
        (time_limit_.count() > 0 &&
         std::chrono::steady_clock::now() - start_ >= time_limit_)) {
      if (beam > 0) return false;
      st_->stopped_at_limit = true;
      // BodyBound holds only below the tail; in it, Bound.
      int64_t bound = best->cost;
      for (const State& x : front) {
        bound = std::min(bound, t < tail() ? Bound(t, x.g, x.cost)
                                           : BodyBound(t, x.g, x.cost));
      }
      st_->lower_bound_ns = std::max(root_bound, std::min(bound, best->cost));
      return false;
    }
    Step(t, &front, best, beam);
    if (beam > 0 && front.size() > beam) KeepLeastBound(t + 1, beam, &front);
  }
  return true;
}

void ReverseSearch::Step(int t, std::vector<State>* front_out, Best* best, size_t beam) {
  std::vector<State>& front = *front_out;
  ++st_->steps;
  const int p = order_[t];
  const Item& it = items_[p];
  const bool in_tail = t < tail();
  const int64_t floor = in_tail ? std::max<int64_t>(req_[p], 0) : 0;
  keep_.clear();
  take_.clear();
  keep_.reserve(front.size());
  take_.reserve(front.size());
  for (const State& x : front) {
    keep_.push_back({std::max(x.g, floor), x.cost, x.count, x.node});
    if (x.g > 0) {  // its saving can matter
      arena_.push_back({p, x.node});
      take_.push_back({std::max(x.g - it.s, floor), x.cost + it.c,
                       x.count + 1,
                       static_cast<int32_t>(arena_.size() - 1)});
    }
  }
  st_->nodes += static_cast<int64_t>(keep_.size() + take_.size());
  // Merge by g (both lists ascend), then sweep from the least g up,
  // keeping a state only if it is cheaper than all with less g, and
  // only if it can still be completed and beat the best plan.
  merged_.resize(keep_.size() + take_.size());
  std::merge(keep_.begin(), keep_.end(), take_.begin(), take_.end(),
             merged_.begin(),
             [](const State& x, const State& y) { return x.g < y.g; });
  front.clear();
  split_.Advance(t + 1);
  split_hint_ = -1;
  if (count_.active()) count_.Remove(p);
  // A state below the tail or at its bottom is done at g = 0; in the
  // tail, only if no need below asks for a saving.
  const bool done_at_zero = !in_tail || none_below_[p];
  int64_t seen_cost = kInf, seen_count = kInf;
  for (const State& x : merged_) {
    if (x.g > left_s_[t + 1]) break;  // it, and every state above, falls short
    if (!LexLess(x.cost, x.count, seen_cost, seen_count)) continue;
    seen_cost = x.cost;
    seen_count = x.count;
    if (x.g == 0 && done_at_zero) {  // meets every need as it is
      if (LexLess(x.cost, x.count, best->cost, best->count)) {
        *best = {x.cost, x.count, x.node, -1};
      }
      continue;  // more items only cost more
    }
    const int64_t bound =
        in_tail ? Bound(t + 1, x.g, x.cost) : BodyLp(t + 1, x.g, x.cost);
    if (!LexLess(bound, x.count + (x.g > 0), best->cost, best->count)) {
      continue;
    }
    if (!in_tail) {
      if (x.g <= def_s_[t + 1]) {  // the LP's choice completes it
        const int64_t c = x.cost + def_c_[t + 1];
        const int64_t n = x.count + def_n_[t + 1];
        if (LexLess(c, n, best->cost, best->count)) {
          *best = {c, n, x.node, t + 1};
        }
      }
      // Any other completion differs from the LP's choice somewhere,
      // which costs at least min_abs more than the Lagrangian bound.
      const double lagrangian = static_cast<double>(x.cost) + neg_[t + 1] +
                                lambda_ * static_cast<double>(x.g);
      if (Ceil(lagrangian + min_abs_[t + 1], x.cost) > best->cost) continue;
      // The dearer bound last, for the states the others keep; it is
      // prepared for the first such state (an easy search does
      // without).
      if (!split_.active()) {
        split_.Prepare(items_, order_, r_, t + 1, x.g);
        split_hint_ = -1;
      }
      if (beam == 0 && count_.active() &&
          !count_.MayBeat(x.cost, x.count, x.g, best->cost, best->count)) {
        ++st_->count_pruned;
        continue;
      }
      const int64_t whole = WholeBound(t + 1, x.g, x.cost, best->cost);
      if (!LexLess(whole, x.count + (x.g > 0), best->cost, best->count)) {
        ++st_->whole_pruned;
        continue;
      }
    }
    // Equal g: the cheaper replaces the state already kept (the merge
    // leaves ties in either order).
    if (!front.empty() && front.back().g == x.g) {
      front.back() = x;
    } else {
      front.push_back(x);
    }
  }
  st_->states += static_cast<int64_t>(front.size());
  st_->max_front =
      std::max<int64_t>(st_->max_front, static_cast<int64_t>(front.size()));
}

void ReverseSearch::KeepLeastBound(int t, size_t beam, std::vector<State>* front) {
  bounded_.clear();
  for (const State& x : *front) {
    bounded_.push_back(
        {t < tail() ? Bound(t, x.g, x.cost) : BodyBound(t, x.g, x.cost), x});
  }
  std::nth_element(bounded_.begin(), bounded_.begin() + beam, bounded_.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  bounded_.resize(beam);
  std::sort(bounded_.begin(), bounded_.end(), [](const auto& a, const auto& b) {
    return a.second.g < b.second.g;
  });
  front->clear();
  for (const auto& [bound, x] : bounded_) front->push_back(x);
}

int64_t ReverseSearch::PrepareCounts(Best* best) {
  // Its entries: the states that the tail leaves (its items decided with
  // their needs, as Run does), so that the counts and their mu are those
  // of the body's knapsack. Where the tail leaves too many, the
  // relaxation of every need to the largest over all the items.
  // (A long tail's fronts can grow large: the walk gives up early.)
  std::vector<State> front = {{std::max<int64_t>(req_[m_], 0), 0, 0, -1}};
  if (split_.active()) split_.Start(0);
  int t = 0;
  for (; t < tail() && !front.empty() && front.size() <= 16 * kMaxEntries; ++t) {
    Step(t, &front, best, 0);
  }
  std::vector<CountBound::Entry> entries;
  std::vector<int> free(order_.begin() + tail(), order_.end());
  if ((t == tail() || front.empty()) && front.size() <= kMaxEntries) {
    for (const State& x : front) entries.push_back({x.cost, x.count, x.g});
    count_.Prepare(items_, free, entries, best->cost, best->count);
  }
  if (!count_.active()) {
    free = order_;
    entries = {{0, 0, largest_need_}};
    count_.Prepare(items_, free, entries, best->cost, best->count);
  }
  return entries.empty() ? best->cost : count_.RootBound();
}

void ReverseSearch::Mark(const Best& best, std::vector<char>* chosen) const {
  for (int32_t node = best.node; node >= 0; node = arena_[node].parent) {
    (*chosen)[arena_[node].item] = 1;
  }
  if (best.from < 0) return;
  for (int t = best.from; t < m_; ++t) {
    if (r_[order_[t]] < 0) (*chosen)[order_[t]] = 1;
  }
}

}  // namespace exact
}  // namespace internal
}  // namespace remat
