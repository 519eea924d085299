// The control-flow graph of a kernel and its dominator tree.
// Edges come from each block's terminator (the successors of br/cbr); blocks[0] is the entry.
// Immediate dominators are computed with the iterative algorithm of Cooper, Harvey and Kennedy
// ("A Simple, Fast Dominance Algorithm") over the reverse post-order of the reachable blocks.
#pragma once

#include <vector>

#include "ir/IR.h"

namespace tn::ir {

class DominatorTree {
 public:
  // Builds the CFG and dominators of k. Branch targets that name no block are ignored, so the
  // tree can be built on IR that the verifier is about to reject.
  explicit DominatorTree(const Kernel& k);

  // Distinct successors / predecessors of b, in first-seen order.
  const std::vector<BlockId>& successors(BlockId b) const { return succs_[b.index]; }
  const std::vector<BlockId>& predecessors(BlockId b) const { return preds_[b.index]; }
  // Reachable blocks in reverse post-order; the entry comes first.
  const std::vector<BlockId>& reversePostOrder() const { return rpo_; }

  bool reachable(BlockId b) const { return rpoIndex_[b.index] != kUnreached; }
  // Immediate dominator of b; invalid for the entry block and for unreachable blocks.
  BlockId idom(BlockId b) const { return idom_[b.index]; }
  // True when every path from the entry to b passes through a (a block dominates itself).
  // False when either block is unreachable.
  bool dominates(BlockId a, BlockId b) const;
  bool strictlyDominates(BlockId a, BlockId b) const { return a != b && dominates(a, b); }

 private:
  static constexpr uint32_t kUnreached = BlockId::kNone;
  BlockId intersect(BlockId a, BlockId b) const;

  std::vector<std::vector<BlockId>> succs_;
  std::vector<std::vector<BlockId>> preds_;
  std::vector<BlockId> rpo_;
  std::vector<uint32_t> rpoIndex_;
  std::vector<BlockId> idom_;
};

}  // namespace tn::ir
