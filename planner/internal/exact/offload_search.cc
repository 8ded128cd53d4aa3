#include "planner/internal/exact/offload_search.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

namespace remat {
namespace internal {
namespace exact {

OffloadSearch::OffloadSearch(const PlanProblem& problem, const ExactOptions& options,
                             std::chrono::steady_clock::time_point start, ExactStats* st)
    : n_(static_cast<int>(problem.blocks.size())),
      limit_(problem.limit_bytes()),
      max_nodes_(OffloadNodeLimit(options, problem.blocks.size())),
      time_limit_(options.time_limit),
      search_time_(options.time_limit * 3 / 4),
      start_(start),
      st_(st),
      chain_(MakeOffloadChain(problem)),
      blocks_(chain_.blocks),
      need_(chain_.need),
      ahead_(chain_.ahead),
      reach_(chain_.reach),
      relax_(chain_),
      items_(relax_.Items()),
      dominance_(blocks_, arena_) {
  Rank(items_, &rank_of_, &by_rank_);
}

void OffloadSearch::FinishStopped() {
  if (stopped_from_ < 0) return;
  const std::vector<OffloadState> front = std::move(stopped_front_);
  const int from = std::exchange(stopped_from_, -1);
  const auto widest = static_cast<size_t>(
      std::max<int64_t>(kBeamWidth, max_nodes_ / (64 * (n_ - from))));
  for (size_t width = kBeamWidth;; width = std::min(4 * width, widest)) {
    if (!Sweep(front, from, width) || width == widest) return;
  }
}

bool OffloadSearch::Sweep(std::vector<OffloadState> front, int from, size_t beam) {
  LpBound lp(by_rank_);
  lp.AddAll();
  size_t next_item = 0;  // items of blocks below the current one removed
  // (Not in the constructor: most problems are settled before a search.)
  if (!top_prepared_) PrepareTop();
  LpBound top_lp(top_by_rank_);
  top_lp.AddAll();
  size_t next_top_item = 0;
  for (; next_item < items_.size() && items_[next_item].block < from; ++next_item) {
    lp.Add(rank_of_[next_item], -1);
  }
  for (; next_top_item < top_items_.size() && top_items_[next_top_item].block < from;
       ++next_top_item) {
    top_lp.Add(top_rank_of_[next_top_item], -1);
  }
  if (beam > 0 && front.size() > beam) KeepLeastBound(from, lp, beam, &front);
  // (After the heuristic pass: the best plan known prunes its points.)
  if (beam == 0 && !whole_prepared_) PrepareWholes();
  // A step takes up to tens of ms on a front of ten thousand states, and
  // about as long as the one before it: the search stops where the next
  // would pass the time limit, if it takes that long.
  std::chrono::steady_clock::duration last_step{0};
  for (int k = from; k < n_ && !front.empty(); ++k) {
    const auto step_start = std::chrono::steady_clock::now();
    if ((beam == 0 && st_->nodes > max_nodes_) ||
        (time_limit_.count() > 0 &&
         step_start - start_ + last_step >= (beam > 0 ? time_limit_ : search_time_))) {
      if (beam > 0) return false;
      st_->stopped_at_limit = true;
      lower_bound_ = StoppedBound(front, k);
      stopped_front_ = std::move(front);
      stopped_from_ = k;
      return false;
    }
    // The items of block k are decided now.
    for (; next_item < items_.size() && items_[next_item].block <= k;
         ++next_item) {
      lp.Add(rank_of_[next_item], -1);
    }
    for (; next_top_item < top_items_.size() && top_items_[next_top_item].block <= k;
         ++next_top_item) {
      top_lp.Add(top_rank_of_[next_top_item], -1);
    }
    ++st_->steps;
    Step(k, front, lp, top_lp);
    last_step = std::chrono::steady_clock::now() - step_start;
    st_->states += static_cast<int64_t>(front.size());
    st_->max_front =
        std::max<int64_t>(st_->max_front, static_cast<int64_t>(front.size()));
    if (beam > 0 && front.size() > beam) KeepLeastBound(k + 1, lp, beam, &front);
  }
  if (beam == 0) lower_bound_ = best_cost_;
  return true;
}

bool OffloadSearch::RunDeepening() {
  // (With the plan to beat's cost: its points hold for every target.)
  if (!whole_prepared_) PrepareWholes();
  // The plan to beat, which the targets hide while they search.
  const double beat = best_cost_;
  const int64_t beat_count = best_count_;
  const int32_t beat_node = best_node_;
  double proven = RootBound();
  const bool deepens = std::any_of(wholes_.begin(), wholes_.end(),
                                   [](const Whole& w) { return w.from == 0; });
  bool complete = true, settled = false;
  // The work grows with the target: it doubles its step from 1/16 of the
  // gap (on the bench's 96-block chains fewer states than from 1/1024 or
  // 1/64 and about as many as 1/8); a target past halfway to the plan to
  // beat would cost about as much as the search against that plan.
  for (double step = std::max(1.0, (beat - proven) / 16);
       deepens && proven + 2 * step < beat; step *= 2) {
    Beat(proven + step, kInf);  // a bound, not a plan
    complete = Run();
    settled = found() || !complete;
    if (settled) break;
    proven += step;
  }
  if (!found()) {
    best_cost_ = beat;
    best_count_ = beat_count;
    best_node_ = beat_node;
  }
  if (!settled) complete = Run();
  if (!complete) lower_bound_ = std::max(lower_bound_, proven);
  return complete;
}

double OffloadSearch::RootBound() {
  if (!top_prepared_) PrepareTop();
  LpBound lp(by_rank_);
  lp.AddAll();
  int64_t rest = lp.LowerBound(ahead_[0]);
  if (top_ > 0) {
    LpBound top_lp(top_by_rank_);
    top_lp.AddAll();
    rest = std::max(rest, top_lp.LowerBound(need_[top_]));
  }
  if (rest >= kInf) return std::numeric_limits<double>::infinity();
  double bound = static_cast<double>(rest);
  for (const Whole& w : wholes_) {
    if (w.from > 0) continue;
    const double least = std::min(LeastCovering(w.points[0][0], need_[w.top]),
                                  LeastCovering(w.points[0][1], need_[w.top]));
    bound = std::max(bound, least - price_ * std::max(0.0, blocks_[n_ - 1].now -
                                                           blocks_[0].now));
  }
  return bound;
}

void OffloadSearch::KeepLeastBound(int k, const LpBound& lp, size_t beam,
                                   std::vector<OffloadState>* front) {
  bounded_.clear();
  for (const OffloadState& x : *front) {
    bounded_.push_back(
        {x.cost + static_cast<double>(lp.LowerBound(ahead_[k] - x.sigma)), x});
  }
  std::nth_element(bounded_.begin(), bounded_.begin() + beam, bounded_.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  front->clear();
  for (size_t i = 0; i < beam; ++i) front->push_back(bounded_[i].second);
}

double OffloadSearch::StoppedBound(const std::vector<OffloadState>& front, int k) const {
  // The front by what it still needs, least first, so that the LP of
  // each (LpBound::LowerBound's) comes from one sweep of the items.
  std::vector<std::pair<int64_t, const OffloadState*>> by_need;
  by_need.reserve(front.size());
  for (const OffloadState& x : front) by_need.push_back({ahead_[k] - x.sigma, &x});
  std::sort(by_need.begin(), by_need.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  const double forward_ns = blocks_[n_ - 1].now;  // when forward ends
  auto least = [&](const std::vector<Item>& all, double price) {
    std::vector<Item> left, by_rank;
    for (const Item& it : all) {
      if (it.block >= k) left.push_back(it);
    }
    Rank(left, nullptr, &by_rank);
    double bound = best_cost_;
    size_t next = 0;  // the items before it are taken whole
    int64_t saved = 0, cost = 0;
    for (const auto& [need, x] : by_need) {
      int64_t rest = 0;
      if (need > 0) {
        for (; next < by_rank.size() && saved + by_rank[next].s < need; ++next) {
          saved += by_rank[next].s;
          cost += by_rank[next].c;
        }
        if (next == by_rank.size()) break;  // nor can any state after it
        rest = cost + MulDivCeil(need - saved, by_rank[next].c, by_rank[next].s);
      }
      const double from = std::max(Drained(*x), blocks_[k].now);
      bound = std::min(bound, x->cost + static_cast<double>(rest) -
                                  price * std::max(0.0, forward_ns - from));
    }
    return bound;
  };
  auto priced = [&](double price) { return least(HullItems(price), price); };
  return std::max({BestPrice(priced).first, priced(0), least(items_, 0)});
}

void OffloadSearch::PrepareTop() {
  top_prepared_ = true;
  std::vector<Item> hull = HullItems(0);
  std::vector<int> rank_of;
  std::vector<Item> by_rank;
  Rank(hull, &rank_of, &by_rank);
  LpBound lp(by_rank);  // the items below j
  int64_t highest = 0;
  size_t next = 0;
  for (int j = 1; j < n_; ++j) {
    for (; next < hull.size() && hull[next].block < j; ++next) lp.Add(rank_of[next], +1);
    const int64_t bound = lp.LowerBound(need_[j]);
    if (bound > highest && bound < kInf) {
      highest = bound;
      top_ = j;
    }
  }
  hull.erase(std::remove_if(hull.begin(), hull.end(),
                            [&](const Item& it) { return it.block >= top_; }),
             hull.end());
  top_items_ = std::move(hull);
  Rank(top_items_, &top_rank_of_, &top_by_rank_);
}

void OffloadSearch::PrepareWholes() {
  whole_prepared_ = true;
  if (n_ > kMaxWholeBlocks || top_ <= 0) return;
  price_ = RootPrice();
  wholes_.push_back({top_});
  PrepareWhole(top_, &wholes_.back());
  const int largest = static_cast<int>(
      std::max_element(need_.begin(), need_.begin() + n_) - need_.begin());
  if (largest != top_ && largest > 0) {
    wholes_.push_back({largest});
    PrepareWhole(largest, &wholes_.back());
  }
}

double OffloadSearch::RootPrice() const {
  const double forward_ns = blocks_[n_ - 1].now;
  auto value = [&](double price) {
    std::vector<Item> items = HullItems(price), by_rank;
    Rank(items, nullptr, &by_rank);
    LpBound lp(by_rank);
    lp.AddAll();
    const int64_t v = lp.LowerBound(need_[top_]);
    if (v >= kInf) return -std::numeric_limits<double>::infinity();
    return static_cast<double>(v) - price * forward_ns;
  };
  const auto [highest, price] = BestPrice(value);
  return highest > value(0) ? price : 0.0;
}

double OffloadSearch::WholeBound(const Whole& w, const OffloadState& c, int k) const {
  const int64_t g = need_[w.top] - c.sigma;
  double least = std::numeric_limits<double>::infinity();
  for (int above = 0; above < 2; ++above) {
    least = std::min(least, LeastCovering(w.points[k + 1][above], g) +
                                (Sends(c.last) ? ExtraWait(k, c.last, above) : 0.0));
  }
  const double from = std::max(Drained(c), blocks_[k + 1].now);
  return least - price_ * std::max(0.0, blocks_[n_ - 1].now - from);
}

bool OffloadSearch::can_send() const {
  return std::any_of(blocks_.begin(), blocks_.end(), [](const OffloadBlock& x) {
    return x.can_o || x.can_ro;
  });
}

std::vector<Action> OffloadSearch::BestActions() const {
  std::vector<Action> actions(n_, Action::kKeep);
  for (int32_t node = best_node_; node >= 0; node = arena_[node].parent) {
    actions[arena_[node].block] = arena_[node].action;
  }
  return actions;
}

int64_t OffloadSearch::Prefetched(const OffloadState& x, int k) const {
  if (x.last == kLastOffload) return blocks_[k].t;
  if (x.last == kLastRo) return blocks_[k].ro;
  return 0;
}

double OffloadSearch::Drained(const OffloadState& x) const {
  return x.off_node >= 0 ? arena_[x.off_node].landed : 0;
}

double OffloadSearch::DrainWait(double drained) const {
  return std::max(0.0, drained - blocks_[n_ - 1].now);
}

double OffloadSearch::ExtraWait(int k, uint8_t last, bool above_recomputed) const {
  const OffloadBlock& x = blocks_[k];
  const bool ro = last == kLastRo;
  return BackWait(k, ro ? x.ro_back_ns : x.back_ns, above_recomputed) -
         (ro ? x.ro_least_wait : x.least_wait);
}

double OffloadSearch::Finished(const OffloadState& x, int k) const {
  return x.cost + (Sends(x.last) ? ExtraWait(k, x.last, false) : 0.0);
}

void OffloadSearch::Offer(double cost, int64_t count, int32_t node) {
  if (cost < best_cost_ || (cost == best_cost_ && count < best_count_)) {
    best_cost_ = cost;
    best_count_ = count;
    best_node_ = node;
  }
}

void OffloadSearch::Step(int k, std::vector<OffloadState>& front, const LpBound& lp,
                         const LpBound& top_lp) {
  const OffloadBlock& x = blocks_[k];
  children_.clear();
  for (const OffloadState& st : front) {
    // (Block k's own checkpoint, if it sends it, is back in its
    // backward: held still counts it.)
    const int64_t held = x.below - st.sigma;
    if (held + InFlight(st, x.start, nullptr) + x.a > limit_) continue;
    if (held + x.bwd + (k > 0 ? Prefetched(st, k - 1) : 0) > limit_) continue;
    // The wait for block k-1's copy back, hidden by block k's backward.
    auto wait_below = [&](bool recompute) {
      return Sends(st.last) ? ExtraWait(k - 1, st.last, recompute) : 0.0;
    };
    children_.push_back({st.sigma, st.cost + wait_below(false), st.count,
                         st.node, st.off_node, kLastKeep});
    if (x.can_r) {
      arena_.push_back({k, Action::kRecompute, st.node, -1, 0});
      children_.push_back({st.sigma + x.s,
                           st.cost + static_cast<double>(x.c) +
                               wait_below(true),
                           st.count + 1,
                           static_cast<int32_t>(arena_.size() - 1),
                           st.off_node, kLastRecompute});
    }
    // A copy out of `bytes` queued at the end of block k's forward.
    auto send = [&](Action action, int64_t saving, double cost,
                    double out_ns, uint8_t last) {
      const double drained = Drained(st);
      const double landed = std::max(x.now, drained) + out_ns;
      arena_.push_back({k, action, st.node, st.off_node, landed});
      const int32_t id = static_cast<int32_t>(arena_.size() - 1);
      children_.push_back({st.sigma + saving,
                           cost + DrainWait(landed) - DrainWait(drained),
                           st.count + 1, id, id, last});
    };
    if (x.can_o) {
      send(Action::kOffload, x.t,
           st.cost + wait_below(false) + x.least_wait, x.out_ns,
           kLastOffload);
    }
    if (x.can_ro && (st.last == kLastRecompute || st.last == kLastRo)) {
      send(Action::kRecomputeOffload, x.s + x.ro,
           st.cost + static_cast<double>(x.c) + wait_below(true) +
               x.ro_least_wait,
           x.ro_out_ns, kLastRo);
    }
  }
  st_->nodes += static_cast<int64_t>(children_.size());
  // Finish, prune, then group by what the future depends on.
  front.clear();
  dominance_.Clear();
  for (const OffloadState& c : children_) {
    if (k + 1 == n_) {
      Offer(Finished(c, k), c.count, c.node);
      continue;
    }
    const int64_t in_flight = InFlight(c, x.now, nullptr);
    if (c.sigma >= ahead_[k + 1] + in_flight + Prefetched(c, k)) {
      Offer(Finished(c, k), c.count, c.node);  // nothing more is needed
      continue;
    }
    if (c.sigma < reach_[k + 1]) continue;
    int64_t rest = lp.LowerBound(ahead_[k + 1] - c.sigma);
    if (top_ > k + 1) rest = std::max(rest, top_lp.LowerBound(need_[top_] - c.sigma));
    if (rest >= kInf) continue;
    // (A state that is not done may still finish with every block kept,
    // its copies landing in time: no count added.)
    const double bound = c.cost + static_cast<double>(rest);
    if (bound > best_cost_ || (bound == best_cost_ && c.count >= best_count_)) {
      continue;
    }
    if (std::any_of(wholes_.begin(), wholes_.end(), [&](const Whole& w) {
          return k + 1 >= w.from && k + 1 <= w.top &&
                 c.cost + WholeBound(w, c, k) > best_cost_ + kCostSlackNs;
        })) {
      continue;
    }
    // Copies that land before the next block's forward starts change no
    // later moment, landing time or wait: the state is keyed, and its
    // saving guaranteed, from then on. Its next copy starts no earlier
    // than the next block's end.
    dominance_.Add(c, x.now, c.sigma - in_flight,
                   std::max(blocks_[k + 1].now, Drained(c)));
  }
  dominance_.Reduce(front, x.now);
}

}  // namespace exact
}  // namespace internal
}  // namespace remat
