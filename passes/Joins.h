// Join blocks of a conditional branch: where paths from its two successors meet (the blocks
// whose parameters become divergent when the branch diverges). Uniformity's core step, one
// query per divergent branch, so it must not cost a walk over the whole kernel each time.
#pragma once

#include <cstdint>
#include <vector>

#include "ir/Dominance.h"
#include "passes/Analysis.h"

namespace tn::passes {

class JoinFinder {
 public:
  JoinFinder(const Kernel& k, const ir::DominatorTree& cfg, const PostDominatorTree& pdom,
             const StrongComponents& scc);

  // The joins of `term`, the cbr ending block b, in block order. The definition is a label
  // propagation over the blocks reachable from b, in reverse post-order to a fixed point: each
  // successor is labelled with itself, a block takes the label its labelled predecessors (b
  // aside) agree on, and one where they disagree is a join and labels itself; a successor that
  // a predecessor labelled otherwise reaches is a join too. Usually only the blocks between b
  // and its post-dominator can be joins, and only they are labelled (see Joins.cpp).
  std::vector<BlockId> joins(BlockId b, const ir::Inst& term);
  // The same, always propagating over everything b reaches (the reference the fast paths equal).
  std::vector<BlockId> joinsEverywhere(BlockId b, const ir::Inst& term) const;

 private:
  bool regionJoins(BlockId b, BlockId s0, BlockId s1, BlockId post, std::vector<BlockId>& out);
  bool apart(BlockId b, BlockId s0, BlockId s1);
  bool enclosed(BlockId b, const std::vector<uint32_t>& region, uint32_t stamp) const;

  const Kernel& k_;
  const ir::DominatorTree& cfg_;
  const PostDominatorTree& pdom_;
  const StrongComponents& scc_;
  // Scratch, reset after each query: region stamps, labels, join flags.
  std::vector<uint32_t> mark_;
  uint32_t stamp_ = 0;
  std::vector<uint32_t> label_;
  std::vector<bool> isJoin_;
};

}  // namespace tn::passes
