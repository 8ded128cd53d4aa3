#include "planner/internal/exact/offload_front.h"

#include <algorithm>
#include <limits>
#include <numeric>

#include "planner/internal/exact/cover.h"

namespace remat {
namespace internal {
namespace exact {

DominanceFront::DominanceFront(const std::vector<OffloadBlock>& blocks,
                               const std::vector<OffloadNode>& arena)
    : blocks_(blocks), arena_(arena) {}

void DominanceFront::Clear() { keyed_.clear(); }

void DominanceFront::Add(const OffloadState& c, double next_start,
                         int64_t guaranteed, double free_at) {
  keyed_.push_back({KeyOf(c, next_start), c, guaranteed, free_at});
}

void DominanceFront::Reduce(std::vector<OffloadState>& front, double next_start) {
  // Within a group: more saving first; keep a state only if it is
  // cheaper (cost, then count) than every one with more saving.
  std::sort(keyed_.begin(), keyed_.end(), [](const Keyed& p, const Keyed& q) {
    if (p.key != q.key) return p.key < q.key;
    if (p.state.sigma != q.state.sigma) return p.state.sigma > q.state.sigma;
    if (p.state.cost != q.state.cost) return p.state.cost < q.state.cost;
    return p.state.count < q.state.count;
  });
  survivors_.clear();
  for (size_t i = 0; i < keyed_.size();) {
    size_t j = i;
    double seen_cost = std::numeric_limits<double>::infinity();
    int64_t seen_count = kInf;
    for (; j < keyed_.size() && keyed_[j].key == keyed_[i].key; ++j) {
      const OffloadState& c = keyed_[j].state;
      if (c.cost < seen_cost || (c.cost == seen_cost && c.count < seen_count)) {
        seen_cost = c.cost;
        seen_count = c.count;
        survivors_.push_back(j);
      }
    }
    i = j;
  }
  DropDominated(front, next_start);
}

uint64_t DominanceFront::KeyOf(const OffloadState& x, double time) {
  flight_.clear();
  InFlight(x, time, &flight_);
  uint32_t queue = 0;  // the empty queue
  for (size_t i = flight_.size(); i-- > 0;) {
    const OffloadNode& o = arena_[flight_[i]];
    const QueueEntry entry{queue, Moved(o), o.landed};
    const auto [it, inserted] = queue_ids_.try_emplace(
        entry, static_cast<uint32_t>(queue_ids_.size() + 1));
    queue = it->second;
  }
  return (static_cast<uint64_t>(queue) << 2) | x.last;
}

void DominanceFront::DropDominated(std::vector<OffloadState>& front, double next_start) {
  const size_t m = survivors_.size();
  std::vector<double> times;
  times.reserve(m);
  for (size_t i : survivors_) times.push_back(keyed_[i].free_at);
  std::sort(times.begin(), times.end());
  times.erase(std::unique(times.begin(), times.end()), times.end());
  const int nt = static_cast<int>(times.size());
  using Cost = std::pair<double, int64_t>;
  const Cost none{std::numeric_limits<double>::infinity(), kInf};
  // Per Last: the states that decided block k so.
  std::vector<Cost> least[4];
  for (std::vector<Cost>& tree : least) tree.assign(nt + 1, none);
  // Which last actions leave a future at least as good as Y's: no more
  // held or waited for at block k+1 and no choice fewer (only a block
  // after a recomputed one may send its checkpoint).
  static constexpr bool kAsGood[4][4] = {
      // X:  keep   recompute offload ro      Y:
      {true, true, false, false},   // keep
      {false, true, false, false},  // recompute
      {true, true, true, false},    // offload
      {false, true, false, true},   // ro
  };
  free_rank_.resize(keyed_.size());
  // The second test's trees: a leaf per state, in the order of free
  // times (those of rank r from ranked_[r] on).
  ranked_.assign(nt + 2, 0);
  for (size_t i : survivors_) {
    free_rank_[i] = static_cast<int>(std::lower_bound(times.begin(), times.end(),
                                                      keyed_[i].free_at) -
                                     times.begin()) + 1;
    ++ranked_[free_rank_[i]];
  }
  std::partial_sum(ranked_.begin(), ranked_.end(), ranked_.begin());
  leaf_of_.resize(keyed_.size());
  for (size_t i : survivors_) leaf_of_[i] = --ranked_[free_rank_[i]];
  ranked_[nt + 1] = static_cast<int>(m);
  kept_.clear();
  kept_begin_.assign(1, 0);
  tree_leaves_ = 1;
  while (tree_leaves_ < static_cast<int>(m)) tree_leaves_ *= 2;
  for (std::vector<Cost>& tree : tree_least_) tree.assign(2 * tree_leaves_, none);
  leaf_state_.resize(tree_leaves_);
  auto insert = [&](std::vector<Cost>& tree, int r, Cost c) {
    for (; r <= nt; r += r & -r) tree[r] = std::min(tree[r], c);
  };
  auto query = [&](const std::vector<Cost>& tree, int r) {
    Cost c = none;
    for (; r > 0; r -= r & -r) c = std::min(c, tree[r]);
    return c;
  };
  std::vector<size_t> by_guaranteed(survivors_), by_saving(survivors_);
  std::sort(by_guaranteed.begin(), by_guaranteed.end(), [&](size_t a, size_t b) {
    return keyed_[a].guaranteed > keyed_[b].guaranteed;
  });
  std::sort(by_saving.begin(), by_saving.end(), [&](size_t a, size_t b) {
    return keyed_[a].state.sigma > keyed_[b].state.sigma;
  });
  size_t next = 0;
  for (size_t y : by_saving) {
    const Keyed& ky = keyed_[y];
    for (; next < m && keyed_[by_guaranteed[next]].guaranteed >= ky.state.sigma;
         ++next) {
      const Keyed& kx = keyed_[by_guaranteed[next]];
      insert(least[kx.state.last], free_rank_[by_guaranteed[next]],
             {kx.state.cost, kx.state.count});
    }
    const int r = free_rank_[y];
    Cost best = none;
    for (int x = 0; x < 4; ++x) {
      if (kAsGood[ky.state.last][x]) best = std::min(best, query(least[x], r));
    }
    // Strictly cheaper: a state never drops itself.
    if (best < Cost{ky.state.cost, ky.state.count}) continue;
    // The same test with the copies in flight as they land: X dominates
    // Y too when at every block start from the next one on, X's saving
    // less its copies then in flight is at least Y's (the moments at the
    // ends of forward hold no more; those of backward, when every copy
    // has landed, see the savings). Tried against the states kept so far
    // (they have at least Y's saving) that cost less, are free no later
    // and whose last action is as good (kAsGood), found through a tree
    // per last action over free times with the least cost under each
    // node: up to kProfileTries of them, as the work of this test is not
    // bounded otherwise. On chains where the link is busy, this is the
    // test that keeps fronts small: on the hardest of the bench's 48-block
    // chains the optimum is proven after 0.59 million states, where the
    // 16 cheapest states as candidates stopped at the work limit (2^20)
    // with a plan 2.8% dearer.
    InFlightProfile(ky.state, next_start, &profile_);
    const bool* as_good = kAsGood[ky.state.last];
    const Cost cy{ky.state.cost, ky.state.count};
    // The leaves of the states free no later than Y.
    const int upto = ranked_[r + 1];
    int tries = kProfileTries;
    auto dominates = [&](size_t x) {
      return LandsAsMuch(front[x].sigma, KeptProfile(x), ky.state.sigma, profile_,
                         next_start);
    };
    // (With no copies of Y's in flight, the first test said it all.)
    bool dominated = false;
    for (int last = 0; last < 4 && !dominated && !profile_.empty(); ++last) {
      dominated = as_good[last] && AnyCheaper(tree_least_[last], 1, 0, tree_leaves_,
                                              upto, cy, &tries, dominates);
    }
    if (dominated) continue;
    front.push_back(ky.state);
    kept_.insert(kept_.end(), profile_.begin(), profile_.end());
    kept_begin_.push_back(kept_.size());
    leaf_state_[leaf_of_[y]] = front.size() - 1;
    std::vector<Cost>& tree = tree_least_[ky.state.last];
    for (int node = tree_leaves_ + leaf_of_[y]; node > 0 && cy < tree[node];
         node /= 2) {
      tree[node] = cy;
    }
  }
}

ProfileView DominanceFront::KeptProfile(size_t x) const {
  return ProfileView(kept_.data() + kept_begin_[x],
                     kept_begin_[x + 1] - kept_begin_[x]);
}

void DominanceFront::InFlightProfile(const OffloadState& x, double next,
                                     Profile* profile) {
  flight_.clear();
  InFlight(x, next, &flight_);
  profile->clear();
  for (size_t i = flight_.size(); i-- > 0;) {
    const OffloadNode& o = arena_[flight_[i]];
    profile->push_back({o.landed, Moved(o)});
  }
}

bool DominanceFront::LandsAsMuch(int64_t sx, ProfileView px, int64_t sy, ProfileView py,
                                 double next) const {
  for (const auto& copy : px) sx -= copy.second;
  for (const auto& copy : py) sy -= copy.second;
  size_t ix = 0, iy = 0;
  for (double t = next;;) {
    for (; ix < px.size() && !(px[ix].first > t); ++ix) sx += px[ix].second;
    for (; iy < py.size() && !(py[iy].first > t); ++iy) sy += py[iy].second;
    if (sx < sy) return false;
    // The next block start at which a copy has landed since.
    double landed = std::numeric_limits<double>::infinity();
    if (ix < px.size()) landed = px[ix].first;
    if (iy < py.size()) landed = std::min(landed, py[iy].first);
    const auto it = std::lower_bound(
        blocks_.begin(), blocks_.end(), landed,
        [](const OffloadBlock& b, double time) { return b.start < time; });
    if (it == blocks_.end()) return true;
    t = it->start;
  }
}

}  // namespace exact
}  // namespace internal
}  // namespace remat
