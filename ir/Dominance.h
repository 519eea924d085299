// The control-flow graph of a kernel and its dominator tree.
// Edges come from each block's terminator (the successors of br/cbr); blocks[0] is the entry.
// Immediate dominators come from immediateDominators (Lengauer and Tarjan, O(m log n)); a
// pre/post numbering of the dominator tree answers `dominates` in constant time. Every list
// is one flat array with offsets per block (the analyses build a tree per pass, per kernel).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "ir/IR.h"

namespace tn::ir {

// A directed graph in compressed form: the successors of node x are
// targets[start[x] .. start[x + 1]). `start` has one entry per node plus one.
struct Digraph {
  std::vector<uint32_t> start{0};
  std::vector<uint32_t> targets;
  uint32_t size() const { return static_cast<uint32_t>(start.size() - 1); }
  std::span<const uint32_t> out(uint32_t x) const { return {targets.data() + start[x], start[x + 1] - start[x]}; }
};

// Immediate dominators of graph g from `root`: result[root] = root, kNone for the nodes root
// does not reach. Lengauer and Tarjan's algorithm with path compression, without recursion
// (chains of 100k blocks are fine). The post-dominator tree of passes/Analysis.h runs it on
// the reverse CFG.
std::vector<uint32_t> immediateDominators(const Digraph& g, uint32_t root);

class DominatorTree {
 public:
  // Builds the CFG and dominators of k. Branch targets that name no block are ignored, so the
  // tree can be built on IR that the verifier is about to reject.
  explicit DominatorTree(const Kernel& k);

  // Distinct successors / predecessors of b, in first-seen order (predecessors in block order).
  std::span<const BlockId> successors(BlockId b) const { return slice(succ_, succStart_, b); }
  std::span<const BlockId> predecessors(BlockId b) const { return slice(pred_, predStart_, b); }
  // Reachable blocks in reverse post-order; the entry comes first.
  const std::vector<BlockId>& reversePostOrder() const { return rpo_; }
  // Position of a reachable block in reversePostOrder().
  uint32_t rpoIndex(BlockId b) const { return rpoIndex_[b.index]; }

  bool reachable(BlockId b) const { return rpoIndex_[b.index] != kUnreached; }
  // Immediate dominator of b; invalid for the entry block and for unreachable blocks.
  BlockId idom(BlockId b) const { return idom_[b.index]; }
  // The blocks b immediately dominates, in reverse post-order.
  std::span<const BlockId> children(BlockId b) const { return slice(child_, childStart_, b); }
  // True when every path from the entry to b passes through a (a block dominates itself).
  // False when either block is unreachable.
  bool dominates(BlockId a, BlockId b) const {
    if (!reachable(a) || !reachable(b)) return false;
    return pre_[a.index] <= pre_[b.index] && post_[b.index] <= post_[a.index];
  }
  bool strictlyDominates(BlockId a, BlockId b) const { return a != b && dominates(a, b); }

 private:
  static constexpr uint32_t kUnreached = BlockId::kNone;
  static std::span<const BlockId> slice(const std::vector<BlockId>& all, const std::vector<uint32_t>& start,
                                        BlockId b) {
    return {all.data() + start[b.index], start[b.index + 1] - start[b.index]};
  }

  std::vector<uint32_t> succStart_, predStart_, childStart_;
  std::vector<BlockId> succ_, pred_, child_;
  std::vector<BlockId> rpo_;
  std::vector<uint32_t> rpoIndex_;
  std::vector<BlockId> idom_;
  std::vector<uint32_t> pre_, post_;  // dominator-tree interval of each reachable block
};

}  // namespace tn::ir
