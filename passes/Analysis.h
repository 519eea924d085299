// Analyses shared by the passes, on top of ir::DominatorTree (the CFG and dominators):
// post-dominators, control dependence, cycles, instruction positions, definitions and uses.
// Every analysis is a value computed from the kernel as it is now; a pass that changes the IR
// recomputes what it needs (nothing here is cached or updated behind a pass's back).
#pragma once

#include <optional>
#include <span>
#include <vector>

#include "ir/Dominance.h"
#include "ir/IR.h"

namespace tn::passes {

using ir::BlockId;
using ir::InstId;
using ir::Kernel;
using ir::ValueId;

// Where each instruction of the pool sits; block is invalid for instructions in no block.
struct InstPositions {
  std::vector<BlockId> block;
  std::vector<uint32_t> index;
  explicit InstPositions(const Kernel& k);
  bool placed(InstId i) const { return block[i.index].valid(); }
};

// Post-dominators of the reachable blocks, rooted at a virtual exit that follows every block
// ending in `ret`. Blocks from which no `ret` can be reached (endless loops) are, by default,
// attached to the exit as well, latest in reverse post-order first, so that every reachable block
// is in the tree (what control dependence needs: a block after `cbr %c, ^spin, ^work` depends on
// %c). With EndlessLoops::LeaveOut they are not: they have no post-dominator, and the others'
// come from the paths that reach a `ret` only (the interpreter's reconvergence points).
enum class EndlessLoops { AttachToExit, LeaveOut };
class PostDominatorTree {
 public:
  PostDominatorTree(const Kernel& k, const ir::DominatorTree& cfg,
                    EndlessLoops endless = EndlessLoops::AttachToExit);
  // Immediate post-dominator; invalid when it is the virtual exit, or b is unreachable or left out.
  BlockId ipdom(BlockId b) const { return ipdom_[b.index] == exit_ ? BlockId() : BlockId(ipdom_[b.index]); }

 private:
  friend std::vector<std::vector<BlockId>> controlDependences(const Kernel&, const ir::DominatorTree&,
                                                               const PostDominatorTree&);
  uint32_t exit_ = 0;
  std::vector<uint32_t> ipdom_;  // node index; exit_ for the virtual exit; kNone when unreached
};

// deps[b]: the blocks whose branch decides whether b executes (b post-dominates a successor
// of the branch block but does not strictly post-dominate the branch block), in block order.
std::vector<std::vector<BlockId>> controlDependences(const Kernel& k, const ir::DominatorTree& cfg,
                                                     const PostDominatorTree& pdom);

// Strongly connected components of the reachable blocks (Tarjan's algorithm, iterative). The
// blocks on a cycle through b (reachable from b and reaching b) are b's component when it is
// cyclic: more than one block, or a block branching to itself. Components are numbered in
// reverse topological order: a block reachable from b is in a component numbered at most b's.
struct StrongComponents {
  StrongComponents(const Kernel& k, const ir::DominatorTree& cfg);
  static constexpr uint32_t kNone = BlockId::kNone;
  std::vector<uint32_t> component;              // per block; kNone for unreachable blocks
  std::vector<std::vector<BlockId>> members;    // per component, in the order Tarjan closes them
  std::vector<bool> cyclic;                     // per component
  bool onCycle(BlockId b) const { return component[b.index] != kNone && cyclic[component[b.index]]; }
  // False when `to` is certainly not reachable from `from` (its component is numbered higher).
  bool mayReach(BlockId from, BlockId to) const {
    return component[to.index] != kNone && component[to.index] <= component[from.index];
  }
};

// Blocks reachable from `from` by following successors (from itself only if on a cycle).
std::vector<bool> reachableFrom(const Kernel& k, const ir::DominatorTree& cfg, BlockId from);

// The instruction defining v, or nullptr for kernel and block parameters.
const ir::Inst* definingInst(const Kernel& k, ValueId v);
// The block defining v: the entry for kernel parameters; invalid for values of no placed inst.
BlockId definingBlock(const Kernel& k, ValueId v, const InstPositions& pos);
// The bits of v when it is defined by `const`.
std::optional<uint64_t> constBits(const Kernel& k, ValueId v);

// The instructions in blocks that read each value, in block order (an inst reading a value
// twice is listed twice); one flat array for all values.
class UserLists {
 public:
  explicit UserLists(const Kernel& k);
  std::span<const InstId> operator[](ValueId v) const {
    return {inst_.data() + start_[v.index], start_[v.index + 1] - start_[v.index]};
  }

 private:
  std::vector<uint32_t> start_;  // users of value v: inst_[start_[v] .. start_[v + 1])
  std::vector<InstId> inst_;
};

}  // namespace tn::passes
