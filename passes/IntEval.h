// Integer and predicate semantics of the pure ops, shared by const-fold and the thread-level
// evaluator of passes/Uniformity.h: one definition of what `shr.s32` or `mul.hi.u64` computes.
#pragma once

#include <cstdint>
#include <optional>
#include <span>

#include "ir/IR.h"

namespace tn::passes {

// The low w bits of `bits` read as a signed number.
int64_t signExtend(uint64_t bits, unsigned w);

// Evaluates the integer, bits or pred op `in` whose operand type is t on constant operand bits
// (shift amounts: 32-bit). Returns the result's bits (masked to the result width), or nullopt
// for ops it does not cover, modifiers it does not model (.sat, rounding), division by zero and
// the overflowing signed division MIN / -1.
std::optional<uint64_t> evalInt(const ir::Inst& in, ir::Type t, std::span<const uint64_t> x);

// Integer -> integer cvt without modifiers: sign- or zero-extends from s, truncates to t.
uint64_t convertInt(uint64_t bits, ir::Type s, ir::Type t);

}  // namespace tn::passes
