#include "passes/Joins.h"

#include <algorithm>

namespace tn::passes {

namespace {
constexpr uint32_t kNone = BlockId::kNone;
}

JoinFinder::JoinFinder(const Kernel& k, const ir::DominatorTree& cfg, const PostDominatorTree& pdom,
                       const StrongComponents& scc)
    : k_(k), cfg_(cfg), pdom_(pdom), scc_(scc), mark_(k.blocks.size(), 0), label_(k.blocks.size(), kNone),
      isJoin_(k.blocks.size(), false) {}

std::vector<BlockId> JoinFinder::joins(BlockId b, const ir::Inst& term) {
  BlockId s0 = term.succs[0].block, s1 = term.succs[1].block;
  if (s0 == s1) return {s0};
  std::vector<BlockId> out;
  if (s0 != b && s1 != b) {
    BlockId post = pdom_.ipdom(b);
    if (post.valid() ? regionJoins(b, s0, s1, post, out) : apart(b, s0, s1)) return out;
    // A loop branch whose paths part for good (a return inside the loop): cut at its exit.
    uint32_t c = scc_.component[b.index];
    bool in0 = scc_.component[s0.index] == c, in1 = scc_.component[s1.index] == c;
    if (!post.valid() && scc_.onCycle(b) && in0 != in1 && regionJoins(b, s0, s1, in0 ? s1 : s0, out)) return out;
  }
  return joinsEverywhere(b, term);
}

// True when every predecessor of the region's blocks (stamped `stamp`) is in the region, is b,
// or cannot be reached from b: then no label from outside the region ever reaches it.
bool JoinFinder::enclosed(BlockId b, const std::vector<uint32_t>& region, uint32_t stamp) const {
  for (uint32_t x : region)
    for (BlockId p : cfg_.predecessors(BlockId(x)))
      if (p != b && mark_[p.index] != stamp && cfg_.reachable(p) && scc_.mayReach(b, p)) return false;
  return true;
}

// Propagation cut at a block `post` (b's immediate post-dominator, or the exit of b's loop):
// let R be the blocks reachable from b's successors without passing through b or post. The
// blocks b reaches beyond R are reached only through post, so they only ever see post's label:
// none of them becomes a join as long as that label, once set, never changes. Nothing flows
// from them back into R when R's blocks other than the successors (whose labels are fixed)
// have no predecessors outside R but b or blocks b cannot reach; a successor's predecessor
// beyond post holds post's final label in the last check. Then propagating over R and post
// alone gives the same labels and joins. False when a condition fails (the caller falls back).
bool JoinFinder::regionJoins(BlockId b, BlockId s0, BlockId s1, BlockId post, std::vector<BlockId>& out) {
  uint32_t inR = ++stamp_;
  std::vector<uint32_t> region;
  for (BlockId s : {s0, s1})
    if (s != post && mark_[s.index] != inR) {
      mark_[s.index] = inR;
      region.push_back(s.index);
    }
  for (size_t i = 0; i < region.size(); ++i)
    for (BlockId y : cfg_.successors(BlockId(region[i])))
      if (y != b && y != post && mark_[y.index] != inR) {
        mark_[y.index] = inR;
        region.push_back(y.index);
      }
  // A successor's predecessor beyond post is allowed when b certainly reaches it (same cycle).
  bool outerPred[2] = {false, false};
  for (uint32_t x : region) {
    int succ = x == s0.index ? 0 : x == s1.index ? 1 : -1;
    for (BlockId p : cfg_.predecessors(BlockId(x))) {
      if (p == b || mark_[p.index] == inR || !cfg_.reachable(p) || !scc_.mayReach(b, p)) continue;
      if (succ < 0 || !(p == post || scc_.component[p.index] == scc_.component[b.index])) return false;
      outerPred[succ] = true;
    }
  }
  region.push_back(post.index);
  std::sort(region.begin(), region.end(),
            [&](uint32_t x, uint32_t y) { return cfg_.rpoIndex(BlockId(x)) < cfg_.rpoIndex(BlockId(y)); });

  label_[s0.index] = s0.index;
  label_[s1.index] = s1.index;
  unsigned postChanges = 0;
  for (bool changed = true; changed;) {
    changed = false;
    for (uint32_t x : region) {
      if (x == s0.index || x == s1.index) continue;
      uint32_t want = kNone;
      bool disagree = false;
      for (BlockId p : cfg_.predecessors(BlockId(x))) {
        if (p == b || label_[p.index] == kNone) continue;
        if (want == kNone) want = label_[p.index];
        else if (want != label_[p.index]) disagree = true;
      }
      if (disagree || isJoin_[x]) {
        isJoin_[x] = true;
        want = x;
      }
      if (want != label_[x]) {
        label_[x] = want;
        changed = true;
        postChanges += x == post.index;
      }
    }
  }
  bool exact = postChanges <= 1;
  if (exact) {
    for (int i = 0; i < 2; ++i) {
      BlockId s = i ? s1 : s0;
      for (BlockId p : cfg_.predecessors(s))
        if (p != b && label_[p.index] != kNone && label_[p.index] != s.index) isJoin_[s.index] = true;
      uint32_t beyond = label_[post.index];
      if (outerPred[i] && beyond != kNone && beyond != s.index) isJoin_[s.index] = true;
    }
    for (uint32_t x : region)
      if (isJoin_[x]) out.push_back(BlockId(x));
    std::sort(out.begin(), out.end());
  }
  for (uint32_t x : region) {
    label_[x] = kNone;
    isJoin_[x] = false;
  }
  return exact;
}

// Without a post-dominator below the exit (one side returns), the paths from s0 and from s1
// can only meet in blocks both reach. Searching both sides in step until one is exhausted:
// when that side cannot be entered from outside (its blocks' predecessors are inside it, b,
// or blocks b cannot reach) and does not hold the other successor, they never meet and there
// are no joins (out stays empty). False when that cannot be shown.
bool JoinFinder::apart(BlockId b, BlockId s0, BlockId s1) {
  uint32_t stamps[2] = {++stamp_, ++stamp_};
  std::vector<uint32_t> side[2] = {{s0.index}, {s1.index}};
  mark_[s0.index] = stamps[0];
  if (mark_[s1.index] == stamps[0]) return false;
  mark_[s1.index] = stamps[1];
  size_t next[2] = {0, 0};
  for (int turn = 0;; turn ^= 1) {
    if (next[turn] == side[turn].size()) {
      BlockId other = turn ? s0 : s1;
      return mark_[other.index] != stamps[turn] && enclosed(b, side[turn], stamps[turn]);
    }
    for (BlockId y : cfg_.successors(BlockId(side[turn][next[turn]++]))) {
      if (y == b || mark_[y.index] == stamps[turn]) continue;
      if (mark_[y.index] == stamps[turn ^ 1]) return false;  // both sides reach y
      mark_[y.index] = stamps[turn];
      side[turn].push_back(y.index);
    }
  }
}

std::vector<BlockId> JoinFinder::joinsEverywhere(BlockId b, const ir::Inst& term) const {
  std::vector<BlockId> out;
  if (term.succs[0].block == term.succs[1].block) return {term.succs[0].block};
  size_t nb = k_.blocks.size();
  std::vector<uint32_t> label(nb, kNone);
  std::vector<bool> isJoin(nb, false);
  std::vector<bool> from = reachableFrom(k_, cfg_, b);
  for (const ir::BlockCall& c : term.succs)
    if (c.block != b) label[c.block.index] = c.block.index;
  for (bool changed = true; changed;) {
    changed = false;
    for (BlockId x : cfg_.reversePostOrder()) {
      if (x == b || !from[x.index] || x == term.succs[0].block || x == term.succs[1].block) continue;
      uint32_t want = kNone;
      bool disagree = false;
      for (BlockId p : cfg_.predecessors(x)) {
        if (p == b || label[p.index] == kNone) continue;
        if (want == kNone) want = label[p.index];
        else if (want != label[p.index]) disagree = true;
      }
      if (disagree || isJoin[x.index]) {
        isJoin[x.index] = true;
        want = x.index;
      }
      if (want != label[x.index]) {
        label[x.index] = want;
        changed = true;
      }
    }
  }
  // A successor that the other successor's paths also reach is a join as well.
  for (const ir::BlockCall& c : term.succs) {
    BlockId s = c.block;
    for (BlockId p : cfg_.predecessors(s))
      if (p != b && label[p.index] != kNone && label[p.index] != s.index) isJoin[s.index] = true;
  }
  for (size_t x = 0; x < nb; ++x)
    if (isJoin[x]) out.push_back(BlockId(static_cast<uint32_t>(x)));
  return out;
}

}  // namespace tn::passes
