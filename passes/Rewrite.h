// Small IR mutation helpers shared by the transform passes.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "ir/IR.h"
#include "ir/LaneSemantics.h"

namespace tn::passes {

// Replacements of values, applied as a pass reaches each instruction (rewrite, before it looks
// at it) and once more over the whole kernel at the end (rewriteAll: the reads it did not reach,
// in unreachable blocks or behind back edges). The same reads as replacing every use at once
// each time, without a walk over the kernel per replacement.
class Replacements {
 public:
  explicit Replacements(const ir::Kernel& k) : to_(k.values.size()) {}
  // Every read of `from` (operands and branch arguments) becomes a read of `to`.
  void add(ir::ValueId from, ir::ValueId to) { to_[from.index] = to; }
  ir::ValueId resolve(ir::ValueId v) const {
    while (to_[v.index].valid()) v = to_[v.index];
    return v;
  }
  void rewrite(ir::Inst& in) const;
  void rewriteAll(ir::Kernel& k) const;

 private:
  std::vector<ir::ValueId> to_;
};

// Adds `in` to the instruction pool with a result typed by the op's result rule; the caller
// places it with Insertions. `name` may be empty (the printer then numbers the value).
ir::InstId createInst(ir::Kernel& k, ir::Inst in, std::string name = {});

// Instructions of the pool to place, each just before an instruction already in a block;
// apply() places them all in one pass over the blocks (several before the same instruction
// go in the order they were added), instead of shifting a block for each one.
class Insertions {
 public:
  void before(ir::InstId at, ir::InstId id) { pending_.push_back({at, id}); }
  void apply(ir::Kernel& k);

 private:
  std::vector<std::pair<ir::InstId, ir::InstId>> pending_;
};

// A `const` instruction of type t holding `bits` (masked to t's width).
ir::Inst constInst(ir::Type t, uint64_t bits, ir::SourceLoc loc);
// Turns `in` into `const bits : t` in place, keeping its result value.
void makeConst(ir::Inst& in, ir::Type t, uint64_t bits);

// Removes the instructions marked in `dead` (indexed by InstId) from their blocks.
void eraseInsts(ir::Kernel& k, const std::vector<bool>& dead);

using ir::lane::lowMask;  // low `bits` bits set

}  // namespace tn::passes
