// The control-flow graph of a kernel and its dominator tree.
// Edges come from each block's terminator (the successors of br/cbr); blocks[0] is the entry.
// Immediate dominators come from immediateDominators (Lengauer and Tarjan, O(m log n)); a
// pre/post numbering of the dominator tree answers `dominates` in constant time.
#pragma once

#include <cstdint>
#include <vector>

#include "ir/IR.h"

namespace tn::ir {

// Immediate dominators of a graph of succs.size() nodes, from `root`: result[root] = root,
// kNone for the nodes `root` does not reach. Lengauer and Tarjan's algorithm with path
// compression (no recursion: chains of 100k blocks are fine). The post-dominator tree of
// passes/Analysis.h runs it on the reverse CFG.
std::vector<uint32_t> immediateDominators(const std::vector<std::vector<uint32_t>>& succs, uint32_t root);

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
  // Position of a reachable block in reversePostOrder().
  uint32_t rpoIndex(BlockId b) const { return rpoIndex_[b.index]; }

  bool reachable(BlockId b) const { return rpoIndex_[b.index] != kUnreached; }
  // Immediate dominator of b; invalid for the entry block and for unreachable blocks.
  BlockId idom(BlockId b) const { return idom_[b.index]; }
  // True when every path from the entry to b passes through a (a block dominates itself).
  // False when either block is unreachable.
  bool dominates(BlockId a, BlockId b) const {
    if (!reachable(a) || !reachable(b)) return false;
    return pre_[a.index] <= pre_[b.index] && post_[b.index] <= post_[a.index];
  }
  bool strictlyDominates(BlockId a, BlockId b) const { return a != b && dominates(a, b); }

 private:
  static constexpr uint32_t kUnreached = BlockId::kNone;

  std::vector<std::vector<BlockId>> succs_;
  std::vector<std::vector<BlockId>> preds_;
  std::vector<BlockId> rpo_;
  std::vector<uint32_t> rpoIndex_;
  std::vector<BlockId> idom_;
  std::vector<uint32_t> pre_, post_;  // dominator-tree interval of each reachable block
};

}  // namespace tn::ir
