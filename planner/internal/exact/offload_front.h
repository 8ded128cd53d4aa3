// The dominance front of the search with OFFLOAD (offload_search.h): of
// the states a step leaves (each before the next block), those no other
// state dominates. What the future of a state depends on besides its
// saving and cost is its last action (Last) and its copies in flight when
// the next block's forward starts (their bytes and landing times; which
// blocks they are does not matter, so identical layers merge).
//
// The rules, for the states offered since Clear:
//  * Within a group (equal last action and equal copies in flight): a
//    state is kept only if it is cheaper, in (cost, count) order, than
//    every one with more saving (sigma), and of equal states only one.
//  * Across groups: X dominates Y when X's saving with every copy in
//    flight at the next block's start counted as never landing (its
//    guaranteed saving) is at least Y's saving, X's copy engine is free no
//    later, X's last action is as good as Y's (kAsGood: no more held or
//    waited for at the next block and no choice fewer), and X costs less
//    (cost, then count).
//  * And X dominates Y too when its saving less its copies in flight is at
//    least Y's at every block start from the next one on, the rest as
//    above; tried against up to kProfileTries kept states, the cheapest
//    subtrees first.
// Then every completion of Y fits for X too (its moments hold no more;
// its later copies land no later) and costs X no more, so a state dropped
// never leads to a plan cheaper than every plan the kept ones lead to.
//
// Invariants: the front is a subset of the states offered, each at most
// once, in the order of saving, most first; a state never drops itself.
//
// Cost: per step O(states log states) for the sorts and the Fenwick trees,
// plus O(kProfileTries * copies in flight) per state for the second test.
// The interned queues (KeyOf) live as long as the front.
//
// Thread safety: one thread per DominanceFront.
#ifndef REMAT_PLANNER_INTERNAL_EXACT_OFFLOAD_FRONT_H_
#define REMAT_PLANNER_INTERNAL_EXACT_OFFLOAD_FRONT_H_

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "planner/internal/exact/offload_chain.h"

namespace remat {
namespace internal {
namespace exact {

class DominanceFront {
 public:
  // Over the blocks of a chain and the node arena of a search, which the
  // states' nodes are in (both must outlive the front; the arena may grow
  // between steps).
  DominanceFront(const std::vector<OffloadBlock>& blocks,
                 const std::vector<OffloadNode>& arena);

  // Starts a step: no state offered yet.
  void Clear();

  // Offers a state for the front before the next block, whose forward
  // starts at `next_start`: `guaranteed`, its saving less its copies in
  // flight then, and `free_at`, when its copy engine takes its next copy.
  void Add(const OffloadState& c, double next_start, int64_t guaranteed,
           double free_at);

  // Appends to `front` the states offered since Clear that the rules above
  // keep (the same `next_start` as Add's).
  void Reduce(std::vector<OffloadState>& front, double next_start);

 private:
  // What the future of a state depends on besides its saving and cost:
  // the action of the block just decided, and the copies in flight
  // as (bytes, landing time) from the oldest (which blocks they are does
  // not matter: identical layers offloaded at the same moments merge).
  // Equal queues get equal ids (interned), so the key is one integer.
  uint64_t KeyOf(const OffloadState& x, double time);

  // Across groups: X dominates Y when X's saving with every copy in flight
  // at the next block's start counted as never landing is at least Y's
  // saving, X's copy engine is free no later, X did not offload block k
  // unless Y did too (kAsGood), and X costs
  // less (cost, then count). Then every completion of Y fits for X too
  // (its moments hold no more; its later copies land no later) and costs
  // X no more (the waits depend on the actions alone, the wait at the end
  // of forward grows no faster from an earlier free time). A sweep by
  // saving with a Fenwick tree over free times holding the least cost.
  void DropDominated(std::vector<OffloadState>& front, double next_start);

  // The copies in flight of the state kept at position x of the front.
  ProfileView KeptProfile(size_t x) const;

  // Whether `dominates` holds for one of the first *tries states kept at
  // leaves before `upto` that cost less than `cost`: a descent of `tree`
  // (node covers leaves [lo, hi)) that skips the subtrees with no state
  // that cheap.
  template <typename Dominates>
  bool AnyCheaper(const std::vector<std::pair<double, int64_t>>& tree, int node,
                  int lo, int hi, int upto, const std::pair<double, int64_t>& cost,
                  int* tries, Dominates& dominates) const {
    if (*tries <= 0 || lo >= upto || !(tree[node] < cost)) return false;
    if (hi - lo == 1) {
      --*tries;
      return dominates(leaf_state_[lo]);
    }
    const int mid = (lo + hi) / 2;
    return AnyCheaper(tree, 2 * node, lo, mid, upto, cost, tries, dominates) ||
           AnyCheaper(tree, 2 * node + 1, mid, hi, upto, cost, tries, dominates);
  }

  // The copies of `x` in flight at `next` (the next block's start) as
  // (landing time, bytes), the first to land first.
  void InFlightProfile(const OffloadState& x, double next, Profile* profile);

  // Whether a saving of `sx` with the copies `px` in flight is at least
  // `sy` with `py` at the start of every block from the one that starts at
  // `next` on: the moments that count copies in flight are the ends of
  // forward, and each counts those not landed by its block's start (the
  // copies that land after the last block's start count at none). The
  // profiles are in the order they land; a merge of the two.
  bool LandsAsMuch(int64_t sx, ProfileView px, int64_t sy, ProfileView py,
                   double next) const;

  int64_t InFlight(const OffloadState& x, double time,
                   std::vector<int32_t>* nodes) const {
    return exact::InFlight(blocks_, arena_, x, time, nodes);
  }
  int64_t Moved(const OffloadNode& o) const { return exact::Moved(blocks_, o); }

  struct Keyed {
    uint64_t key;  // KeyOf
    OffloadState state;
    int64_t guaranteed;  // sigma less the copies in flight at the next
                         // block's start
    double free_at;      // when the copy engine takes the next copy
  };

  const std::vector<OffloadBlock>& blocks_;
  const std::vector<OffloadNode>& arena_;
  std::vector<Keyed> keyed_;
  // Interned queues of copies in flight (KeyOf): the queue below the
  // newest copy, and the newest copy's bytes and landing time.
  struct QueueEntry {
    uint32_t older;
    int64_t bytes;
    double landed;
    bool operator==(const QueueEntry& o) const {
      return older == o.older && bytes == o.bytes && landed == o.landed;
    }
    template <typename H>
    friend H AbslHashValue(H h, const QueueEntry& e) {
      return H::combine(std::move(h), e.older, e.bytes, e.landed);
    }
  };
  absl::flat_hash_map<QueueEntry, uint32_t> queue_ids_;
  std::vector<int32_t> flight_;
  std::vector<size_t> survivors_;  // of keyed_, Pareto within their group
  std::vector<int> free_rank_;     // of keyed_: rank of free_at (1-based)
  // DropDominated's second test: the copies in flight of every state kept
  // so far (by position in the front), and per Last a tree with a leaf per
  // state in the order of free times (leaves from tree_leaves_ on), the
  // least (cost, count) of those kept under each node.
  Profile kept_;                   // their profiles, one after another
  std::vector<size_t> kept_begin_;  // where each state's starts in kept_
  std::vector<int> ranked_;   // the first leaf of each free rank
  std::vector<int> leaf_of_;  // of keyed_: its leaf
  int tree_leaves_ = 1;
  std::vector<std::pair<double, int64_t>> tree_least_[4];  // per Last
  std::vector<size_t> leaf_state_;  // the state kept at each leaf
  // The most states each state is compared with by DropDominated's
  // second test (those free earliest first): a bound on its work.
  static constexpr int kProfileTries = 8;
  Profile profile_;
};

}  // namespace exact
}  // namespace internal
}  // namespace remat

#endif  // REMAT_PLANNER_INTERNAL_EXACT_OFFLOAD_FRONT_H_
