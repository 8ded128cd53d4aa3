#include "planner/internal/exact/offload_relax.h"

#include <algorithm>
#include <cmath>

#include "planner/internal/exact/lp_bound.h"

namespace remat {
namespace internal {
namespace exact {

OffloadRelaxation::OffloadRelaxation(const OffloadChain& chain)
    : blocks_(chain.blocks),
      need_(chain.need),
      n_(static_cast<int>(chain.blocks.size())) {}

std::vector<Item> OffloadRelaxation::Items() const {
  std::vector<Item> items;
  auto wait = [&](int k, double back_ns, bool above_recomputed) {
    const OffloadBlock& up = blocks_[k + 1];
    const double hides =
        up.bns + (above_recomputed ? static_cast<double>(up.c) : 0.0);
    return static_cast<int64_t>(std::floor(std::max(0.0, back_ns - hides)));
  };
  auto add = [&](int k, int64_t saving, int64_t cost) {
    if (saving > 0) items.push_back({k, saving, cost});
  };
  for (int k = 0; k + 1 < n_; ++k) {
    const OffloadBlock& x = blocks_[k];
    const OffloadBlock& up = blocks_[k + 1];
    if (x.can_r) add(k, x.s, x.c);
    // A sender of `saving` at `cost` before its wait, alone and paired.
    auto sender = [&](int64_t saving, int64_t cost, double back_ns) {
      add(k, saving, cost + wait(k, back_ns, false));
      const int64_t paired = cost + wait(k, back_ns, true);
      if (up.can_r && up.s > 0) add(k, saving + up.s, paired + up.c);
      if (up.can_ro && up.s + up.ro > 0) {
        add(k, saving + up.s + up.ro,
            paired + up.c + static_cast<int64_t>(std::floor(up.ro_least_wait)));
      }
    };
    if (x.can_o) sender(x.t, 0, x.back_ns);
    if (x.can_ro) sender(x.s + x.ro, x.c, x.ro_back_ns);
  }
  return items;
}

std::vector<int64_t> OffloadRelaxation::RelaxedNeeds(
    const std::vector<Item>& items) const {
  std::vector<int64_t> req(items.size() + 1, -kInf);
  size_t p = 0;  // the items below block k
  for (int k = 0; k < n_; ++k) {
    while (p < items.size() && items[p].block < k) ++p;
    req[p] = std::max(req[p], need_[k]);
  }
  return req;
}

std::vector<Item> OffloadRelaxation::HullItems(double price) const {
  std::vector<Item> out;
  std::vector<std::pair<int64_t, int64_t>> options, hull;
  auto priced = [&](double wait, double out_ns) {
    return static_cast<int64_t>(std::floor(wait + price * out_ns));
  };
  for (int k = 0; k + 1 < n_; ++k) {
    const OffloadBlock& x = blocks_[k];
    options.clear();
    if (x.can_r) options.push_back({x.s, x.c});
    if (x.can_o) options.push_back({x.t, priced(x.least_wait, x.out_ns)});
    if (x.can_ro && x.s + x.ro > 0) {
      options.push_back({x.s + x.ro, x.c + priced(x.ro_least_wait, x.ro_out_ns)});
    }
    // Saving up, then cost up; from (0, 0), keep the points below the
    // line through their neighbours. Costs are >= 0, so the first slope
    // is too and every kept point costs more than the one before.
    std::sort(options.begin(), options.end());
    hull.assign(1, {0, 0});
    for (const auto& o : options) {
      if (o.first <= 0 || o.first == hull.back().first) continue;
      while (hull.size() >= 2) {
        const auto& p0 = hull[hull.size() - 2];
        const auto& p1 = hull.back();
        const __int128 turn =
            static_cast<__int128>(p1.first - p0.first) * (o.second - p0.second) -
            static_cast<__int128>(p1.second - p0.second) * (o.first - p0.first);
        if (turn > 0) break;
        hull.pop_back();
      }
      hull.push_back(o);
    }
    for (size_t i = 1; i < hull.size(); ++i) {
      out.push_back({k, hull[i].first - hull[i - 1].first,
                     hull[i].second - hull[i - 1].second});
    }
  }
  return out;
}

void OffloadRelaxation::PrepareWhole(int top, double price, double best_cost,
                                     Whole* w) const {
  std::vector<std::array<std::vector<WholePoint>, 2>>& levels = w->points;
  const double forward_ns = blocks_[n_ - 1].now;
  levels.assign(top + 1, {});
  levels[top][0] = {{0, 0.0}};
  if (blocks_[top].can_r || blocks_[top].can_ro) levels[top][1] = {{0, 0.0}};
  w->from = top;
  const int64_t need = need_[top];
  // The LP of the blocks below k, for the points of block k in order of
  // what they leave to save, least first: one sweep of the items by rank.
  std::vector<Item> by_rank;
  Rank(HullItems(0), nullptr, &by_rank);
  size_t points = 0;
  struct Stream {
    const std::vector<WholePoint>* points;
    int64_t saving;
    double cost;
    size_t left;  // its points not merged yet: the first `left`
  };
  std::vector<Stream> streams;
  // The points of `streams` (each sorted by saving, shifted by its saving
  // and cost), merged from the most saving down: a point cheaper than
  // every one that saves more, savings past the need counted as the need.
  auto merge = [&](std::vector<WholePoint>* out) {
    out->clear();
    size_t total = 0;
    for (const Stream& st : streams) total += st.left;
    out->reserve(total);  // (no copies as it grows)
    double least = std::numeric_limits<double>::infinity();
    for (;;) {
      Stream* pick = nullptr;
      WholePoint top_point{0, 0};  // the most saving left, then cheapest
      for (Stream& st : streams) {
        if (st.left == 0) continue;
        const WholePoint& p = (*st.points)[st.left - 1];
        const WholePoint q{std::min(need, p.saving + st.saving), p.cost + st.cost};
        if (pick == nullptr || q.saving > top_point.saving ||
            (q.saving == top_point.saving && q.cost < top_point.cost)) {
          pick = &st;
          top_point = q;
        }
      }
      if (pick == nullptr) return;
      --pick->left;
      if (top_point.cost < least) {
        least = top_point.cost;
        out->push_back(top_point);
      }
    }
  };
  std::vector<WholePoint> either;  // block k+1's points of either kind
  for (int k = top - 1; k >= 0; --k) {
    const OffloadBlock& x = blocks_[k];
    // KEEP and RECOMPUTE cost the same whatever block k+1 does: their
    // points come from those of block k+1 of either kind, merged once.
    streams.clear();
    for (const std::vector<WholePoint>& f : levels[k + 1]) {
      if (!f.empty()) streams.push_back({&f, 0, 0.0, f.size()});
    }
    merge(&either);
    std::reverse(either.begin(), either.end());
    for (int recomputed = 0; recomputed < 2; ++recomputed) {
      // Block k's actions of this kind: the points above shifted by the
      // action's saving and cost (a copy's after each kind of block
      // above, whose action hides its copy back more or less).
      streams.clear();
      if (!recomputed) {
        streams.push_back({&either, 0, 0.0, either.size()});
      } else if (x.can_r) {
        streams.push_back({&either, x.s, static_cast<double>(x.c), either.size()});
      }
      for (int above = 0; above < 2; ++above) {
        const std::vector<WholePoint>& f = levels[k + 1][above];
        if (f.empty()) continue;
        if (!recomputed && x.can_o) {
          streams.push_back({&f, x.t, BackWait(k, x.back_ns, above) + price * x.out_ns, f.size()});
        }
        if (recomputed && x.can_ro) {
          streams.push_back({&f, x.s + x.ro,
                             static_cast<double>(x.c) + BackWait(k, x.ro_back_ns, above) +
                                 price * x.ro_out_ns,
                             f.size()});
        }
      }
      // Then those that the blocks below can complete under the plan to
      // beat (a point dropped so has every point it kept out of the front
      // dropped too).
      std::vector<WholePoint>& out = levels[k][recomputed];
      merge(&out);
      const double unpriced = price * std::max(0.0, forward_ns - x.now);
      size_t r = 0;  // the items of rank below r are taken whole
      int64_t saved = 0, cost = 0;
      out.erase(std::remove_if(out.begin(), out.end(),
                               [&](const WholePoint& p) {
                                 const int64_t d = need - p.saving;
                                 double rest = 0;
                                 if (d > 0) {
                                   for (; r < by_rank.size() &&
                                          (by_rank[r].block >= k || saved + by_rank[r].s < d);
                                        ++r) {
                                     if (by_rank[r].block >= k) continue;
                                     saved += by_rank[r].s;
                                     cost += by_rank[r].c;
                                   }
                                   if (r == by_rank.size()) return true;
                                   // (In doubles, unrounded: a little lower
                                   // than the LP's integer bound, and cheaper.)
                                   rest = static_cast<double>(cost) +
                                          static_cast<double>(d - saved) *
                                              static_cast<double>(by_rank[r].c) /
                                              static_cast<double>(by_rank[r].s);
                                 }
                                 return p.cost + rest - unpriced > best_cost + kCostSlackNs;
                               }),
                out.end());
      std::reverse(out.begin(), out.end());
      points += out.size();
    }
    if (points > kMaxWholePoints) break;
    w->from = k;
  }
}

double LeastCovering(const std::vector<WholePoint>& f, int64_t g) {
  const auto it = std::lower_bound(
      f.begin(), f.end(), g, [](const WholePoint& p, int64_t v) { return p.saving < v; });
  return it == f.end() ? std::numeric_limits<double>::infinity() : it->cost;
}

}  // namespace exact
}  // namespace internal
}  // namespace remat
