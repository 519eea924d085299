// Liveness over the CFG with block parameters, and a PTX register assignment in which values
// whose live ranges are disjoint share a register. The PTX emitter consumes RegisterAssignment;
// tile-validation uses its predicted register count for the occupancy estimate.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

#include "ir/IR.h"

namespace tn::passes {

// PTX register classes, in the order the emitter declares them (backends/ptx/PtxEmitter.h):
// 8- and 16-bit integers, f16 and bf16 live in .b16; shared/local pointers in .b32; the other
// pointers in .b64.
enum class RegClass : uint8_t { Pred, B16, B32, F32, B64, F64 };
constexpr size_t kRegClasses = 6;

RegClass regClassOf(ir::Type t);             // the class of one lane of t
std::string_view regClassName(RegClass c);   // "pred", "b16", "b32", "f32", "b64", "f64"
std::string_view regClassPrefix(RegClass c); // "%p", "%rs", "%r", "%f", "%rd", "%fd"

struct Reg {
  RegClass cls = RegClass::B32;
  uint32_t index = 0;  // first register; lane i of a vector is index + i
  uint8_t count = 0;   // registers taken: the lane count; 0 = the value needs none
};

struct RegisterAssignment {
  // Per ValueId. Values with no definition in reachable code have count 0.
  std::vector<Reg> regs;
  // Registers used per class (indices 0 .. counts-1): `.reg .f32 %f<counts[F32]>`.
  std::array<uint32_t, kRegClasses> counts{};
  // Peak number of simultaneously live registers per class (vector lanes counted one by one).
  std::array<uint32_t, kRegClasses> peak{};
  // Predicted 32-bit hardware registers per thread: the peak over program points of the live
  // values, b16, b32 and f32 counting one, b64 and f64 two. Predicates (their own register
  // file) are not counted; constants count only at the instructions that read them (ptxas
  // rematerializes them or uses immediates). Measured in IR order: ptxas's scheduling can move
  // it either way (see docs/passes.md).
  unsigned predicted = 0;
};

// Live-in / live-out sets per block, as bit sets over ValueIds. Block parameters are defined at
// the top of their block (not live-in); branch arguments are read at the end of the branching block.
struct Liveness {
  std::vector<std::vector<bool>> liveIn, liveOut;
};
Liveness computeLiveness(const ir::Kernel& k);

// Computes the CFG, dominators and liveness of k, then assigns registers by walking the
// dominator tree in pre-order (optimal per class for SSA up to vector-lane fragmentation).
// Guarantees: a result never shares a register with an operand of its own instruction, nor
// with any value live across its definition; a block parameter never shares a register with a
// value live into its block; kernel parameters are defined on entry.
RegisterAssignment assignRegisters(const ir::Kernel& k);

}  // namespace tn::passes
