// Replays a round-robin fixed point -- "visit every position in order; repeat while a round
// changed something" -- without the visits that cannot change anything. Round 0 visits every
// position; after it, a position is visited again only when something it reads has changed,
// at the round and in the order the plain loop would have visited it. The visits, and so
// every first-come choice they make (which origin, which cause), are exactly the plain loop's
// that change something, in the same order; the cost is the changes, not rounds x positions.
#pragma once

#include <cstdint>
#include <set>
#include <utility>

namespace tn::passes {

class Sweeps {
 public:
  // The driver visits round 0 itself, calling at() before each position in increasing order.
  void at(uint64_t pos) { pos_ = pos; }
  // Position `pos` reads something that has just changed: it runs again in this round if the
  // round has not passed it yet, else in the next one.
  void touch(uint64_t pos) {
    if (round_ == 0 && pos > pos_) return;  // round 0 visits it anyway
    pending_.insert({pos > pos_ ? round_ : round_ + 1, pos});
  }
  // After round 0: the next position to visit, in round order; false when none is left.
  bool next(uint64_t& pos) {
    if (pending_.empty()) return false;
    auto first = pending_.begin();
    round_ = first->first;
    pos = pos_ = first->second;
    pending_.erase(first);
    return true;
  }

 private:
  uint32_t round_ = 0;
  uint64_t pos_ = 0;
  std::set<std::pair<uint32_t, uint64_t>> pending_;
};

}  // namespace tn::passes
