// Small IR mutation helpers shared by the transform passes.
#pragma once

#include <string>
#include <vector>

#include "ir/IR.h"
#include "ir/LaneSemantics.h"

namespace tn::passes {

// Every read of `from` (operands and branch arguments) becomes a read of `to`.
void replaceAllUses(ir::Kernel& k, ir::ValueId from, ir::ValueId to);

// Adds `in` to the instruction pool with a result typed by the op's result rule; the caller
// places it with insertInst. `name` may be empty (the printer then numbers the value).
ir::InstId createInst(ir::Kernel& k, ir::Inst in, std::string name = {});
// Places an instruction of the pool at position `pos` of block b.
void insertInst(ir::Kernel& k, ir::BlockId b, size_t pos, ir::InstId id);

// A `const` instruction of type t holding `bits` (masked to t's width).
ir::Inst constInst(ir::Type t, uint64_t bits, ir::SourceLoc loc);
// Turns `in` into `const bits : t` in place, keeping its result value.
void makeConst(ir::Inst& in, ir::Type t, uint64_t bits);

// Removes the instructions marked in `dead` (indexed by InstId) from their blocks.
void eraseInsts(ir::Kernel& k, const std::vector<bool>& dead);

using ir::lane::lowMask;  // low `bits` bits set

}  // namespace tn::passes
