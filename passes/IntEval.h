// Compile-time evaluation of the integer, bits and pred ops on constant bits, for const-fold and
// the thread-level evaluator of passes/ThreadEval.h: the lane semantics of ir/LaneSemantics.h
// (the interpreter's), limited to the results that are fixed by the PTX ISA and folded today.
#pragma once

#include <cstdint>
#include <optional>
#include <span>

#include "ir/IR.h"

namespace tn::passes {

// Evaluates the integer, bits or pred op `in` whose operand type is t on constant operand bits
// (operands are read at t's width; shift amounts: 32-bit). Returns the result's bits (zero-extended
// from the result width), or nullopt for ops without integer semantics, dp4a, .sat and rounding
// modifiers (not folded), division by zero and the signed MIN / -1 (left unspecified by PTX).
std::optional<uint64_t> evalInt(const ir::Inst& in, ir::Type t, std::span<const uint64_t> x);

// Integer -> integer cvt without modifiers: sign- or zero-extends from s, truncates to t; nullopt
// unless both are integer or bits types.
std::optional<uint64_t> convertInt(uint64_t bits, ir::Type s, ir::Type t);

}  // namespace tn::passes
