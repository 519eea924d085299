#include "ir/Dominance.h"

#include <algorithm>
#include <utility>

namespace tn::ir {

DominatorTree::DominatorTree(const Kernel& k) {
  size_t n = k.blocks.size();
  succs_.resize(n);
  preds_.resize(n);
  rpoIndex_.assign(n, kUnreached);
  idom_.assign(n, BlockId());
  for (size_t b = 0; b < n; ++b) {
    const Inst* term = k.terminator(BlockId(static_cast<uint32_t>(b)));
    if (!term) continue;
    for (const BlockCall& c : term->succs) {
      if (!c.block.valid() || c.block.index >= n) continue;
      std::vector<BlockId>& out = succs_[b];
      if (std::find(out.begin(), out.end(), c.block) != out.end()) continue;
      out.push_back(c.block);
      preds_[c.block.index].push_back(BlockId(static_cast<uint32_t>(b)));
    }
  }
  if (n == 0) return;

  // Iterative depth-first search from the entry; post-order, then reversed.
  std::vector<bool> seen(n, false);
  std::vector<std::pair<BlockId, size_t>> stack{{BlockId(0), 0}};
  seen[0] = true;
  while (!stack.empty()) {
    auto& [b, next] = stack.back();
    if (next < succs_[b.index].size()) {
      BlockId s = succs_[b.index][next++];
      if (!seen[s.index]) {
        seen[s.index] = true;
        stack.push_back({s, 0});
      }
      continue;
    }
    rpo_.push_back(b);
    stack.pop_back();
  }
  std::reverse(rpo_.begin(), rpo_.end());
  for (size_t i = 0; i < rpo_.size(); ++i) rpoIndex_[rpo_[i].index] = static_cast<uint32_t>(i);

  // The entry is its own dominator while iterating; it is reported as having none.
  idom_[0] = BlockId(0);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t i = 1; i < rpo_.size(); ++i) {
      BlockId b = rpo_[i];
      BlockId best;
      for (BlockId p : preds_[b.index]) {
        if (!idom_[p.index].valid()) continue;  // unreachable, or not processed yet
        best = best.valid() ? intersect(p, best) : p;
      }
      if (idom_[b.index] != best) {
        idom_[b.index] = best;
        changed = true;
      }
    }
  }
  idom_[0] = BlockId();
}

BlockId DominatorTree::intersect(BlockId a, BlockId b) const {
  while (a != b) {
    while (rpoIndex_[a.index] > rpoIndex_[b.index]) a = idom_[a.index];
    while (rpoIndex_[b.index] > rpoIndex_[a.index]) b = idom_[b.index];
  }
  return a;
}

bool DominatorTree::dominates(BlockId a, BlockId b) const {
  if (!reachable(a) || !reachable(b)) return false;
  // Dominators have smaller reverse post-order numbers: climb from b until at or above a.
  while (rpoIndex_[b.index] > rpoIndex_[a.index]) b = idom_[b.index];
  return a == b;
}

}  // namespace tn::ir
