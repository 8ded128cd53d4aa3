// The bound over plan counts (count_bound.h): a state it rules out has no
// completion better than the plan given, and its root bound is at most
// the cost of every completion better than that plan; checked against
// every completion of every state of small problems.
#include "planner/internal/exact/count_bound.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "planner/internal/exact/brute_force_for_test.h"

namespace remat {
namespace internal {
namespace exact {
namespace {

struct Partial {
  int64_t cost, count, g;
};

// Every selection of items[order[t..m)]: its saving, cost and count.
struct Completion {
  int64_t s, c, n;
};
std::vector<Completion> Completions(const std::vector<Item>& items,
                                    const std::vector<int>& order, int t) {
  const int left = static_cast<int>(order.size()) - t;
  std::vector<Completion> out;
  for (uint32_t mask = 0; mask < (1u << left); ++mask) {
    Completion c{0, 0, 0};
    for (int i = 0; i < left; ++i) {
      if ((mask >> i) & 1) {
        c.s += items[order[t + i]].s;
        c.c += items[order[t + i]].c;
        ++c.n;
      }
    }
    out.push_back(c);
  }
  return out;
}

// Whether some completion of `x` from `all` beats (best_cost, best_count).
bool CanBeat(const Partial& x, const std::vector<Completion>& all,
             int64_t best_cost, int64_t best_count) {
  for (const Completion& c : all) {
    if (c.s >= x.g && LexLess(x.cost + c.c, x.count + c.n, best_cost, best_count)) {
      return true;
    }
  }
  return false;
}

TEST_CASE("CountBound rules out only states that cannot beat the best plan") {
  std::mt19937_64 rng(606);
  int active = 0, ruled_out = 0, states = 0, roots = 0;
  for (int iter = 0; iter < 300; ++iter) {
    const int m = 4 + static_cast<int>(rng() % 7);  // 4..10 items
    const std::vector<Item> items =
        testing::RandomItems(rng, m, 20 + rng() % 300, 1 + rng() % 60, iter % 3 != 0);
    std::vector<int> order(m);
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);
    const int tail = static_cast<int>(rng() % 3);  // decided before the entries
    int64_t total = 0;
    for (const Item& it : items) total += it.s;
    const int64_t need = 1 + static_cast<int64_t>(rng() % total);
    // The entries: every decision of the tail's items.
    std::vector<CountBound::Entry> entries;
    for (uint32_t mask = 0; mask < (1u << tail); ++mask) {
      CountBound::Entry e{0, 0, need};
      for (int i = 0; i < tail; ++i) {
        if ((mask >> i) & 1) {
          e.cost += items[order[i]].c;
          ++e.count;
          e.g = std::max<int64_t>(e.g - items[order[i]].s, 0);
        }
      }
      entries.push_back(e);
    }
    const std::vector<int> free(order.begin() + tail, order.end());
    // The optimum over every completion of every entry, and a best plan
    // from it to a little above.
    const std::vector<Completion> from_tail = Completions(items, order, tail);
    int64_t opt_cost = kInf, opt_count = kInf;
    for (const CountBound::Entry& e : entries) {
      for (const Completion& c : from_tail) {
        if (c.s >= e.g && LexLess(e.cost + c.c, e.count + c.n, opt_cost, opt_count)) {
          opt_cost = e.cost + c.c;
          opt_count = e.count + c.n;
        }
      }
    }
    REQUIRE(opt_cost < kInf);
    const int64_t best_cost =
        opt_cost + (iter % 4 == 0 ? 0 : static_cast<int64_t>(rng() % (1 + opt_cost / 5)));
    const int64_t best_count = opt_count + static_cast<int64_t>(rng() % 3) - 1;
    INFO("iter " << iter << " m=" << m << " tail " << tail << " need " << need
                 << " best " << best_cost << "/" << best_count);

    CountBound bound;
    bound.Prepare(items, free, entries, best_cost, best_count);
    if (!bound.active()) {
      CHECK(bound.RootBound() == 0);
      continue;
    }
    ++active;
    // The root bound, under every completion that beats the best.
    const int64_t root = bound.RootBound();
    for (const CountBound::Entry& e : entries) {
      for (const Completion& c : from_tail) {
        if (c.s >= e.g && LexLess(e.cost + c.c, e.count + c.n, best_cost, best_count)) {
          CHECK(e.cost + c.c >= root);
          ++roots;
        }
      }
    }
    // Every state the search may reach from the entries, item by item.
    bound.Start(order, 0);
    for (int t = 0; t < tail; ++t) bound.Remove(order[t]);
    std::vector<Partial> level;
    for (const CountBound::Entry& e : entries) level.push_back({e.cost, e.count, e.g});
    for (int t = tail;; ++t) {
      const std::vector<Completion> all = Completions(items, order, t);
      for (const Partial& x : level) {
        ++states;
        const bool may = bound.MayBeat(x.cost, x.count, x.g, best_cost, best_count);
        if (!may) {
          ++ruled_out;
          INFO("state at " << t << ": cost " << x.cost << " count " << x.count
                           << " g " << x.g);
          REQUIRE_FALSE(CanBeat(x, all, best_cost, best_count));
        }
      }
      if (t == m) break;
      bound.Remove(order[t]);
      std::vector<Partial> next;
      const Item& it = items[order[t]];
      for (const Partial& x : level) {
        next.push_back(x);
        next.push_back({x.cost + it.c, x.count + 1, std::max<int64_t>(x.g - it.s, 0)});
      }
      level = std::move(next);
    }
  }
  CHECK(active > 100);
  CHECK(roots > 100);
  CHECK(states > 10000);
  CHECK(ruled_out > 1000);
}

}  // namespace
}  // namespace exact
}  // namespace internal
}  // namespace remat
