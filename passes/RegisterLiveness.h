// Liveness over the CFG with block parameters, and a register assignment in which values whose
// live ranges are disjoint share a register. The register classes are the target's, given as a
// RegisterFile by the backend (backends/ptx/Registers.h for PTX); the PTX emitter consumes the
// assignment, tile-validation its predicted register count for the occupancy estimate.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "ir/Dominance.h"
#include "ir/IR.h"

namespace tn::passes {

// A target's register file as the assignment sees it: its classes (a value's lanes each take one
// register of one class) and what a register of each class costs in 32-bit hardware registers.
struct RegisterFile {
  static constexpr size_t kMaxClasses = 8;
  size_t classes = 0;
  uint8_t (*classOf)(ir::Type t) = nullptr;              // the class of one lane of t
  std::array<std::string_view, kMaxClasses> names{};     // for reports: "pred", "b32", ...
  std::array<std::string_view, kMaxClasses> prefixes{};  // register names: "%p", "%r", ...
  std::array<unsigned, kMaxClasses> units{};             // 32-bit registers per register (0: a file of its own)
};

struct Reg {
  uint8_t cls = 0;
  uint32_t index = 0;  // first register; lane i of a vector is index + i
  uint8_t count = 0;   // registers taken: the lane count; 0 = the value needs none
};

struct RegisterAssignment {
  // Per ValueId. Values with no definition in reachable code have count 0.
  std::vector<Reg> regs;
  // Registers used per class (indices 0 .. counts-1): `.reg .f32 %f<counts[F32]>`.
  std::array<uint32_t, RegisterFile::kMaxClasses> counts{};
  // Peak number of simultaneously live registers per class (vector lanes counted one by one).
  std::array<uint32_t, RegisterFile::kMaxClasses> peak{};
  // Predicted 32-bit hardware registers per thread: the peak over program points of the live
  // values, each register counting its class's units (PTX: b16, b32 and f32 one, b64 and f64
  // two, predicates none); constants count only at the instructions that read them (ptxas
  // rematerializes them or uses immediates). Measured in IR order: ptxas's scheduling can move
  // it either way (see docs/passes.md).
  unsigned predicted = 0;
};

// Live-in / live-out sets per block, as sorted lists of values (sparse: their total size is the
// sum of the live ranges, in blocks). Block parameters are defined at the top of their block (not
// live-in); branch arguments are read at the end of the branching block. Unreachable blocks have
// empty sets.
struct Liveness {
  std::vector<std::vector<ir::ValueId>> liveIn, liveOut;
};
Liveness computeLiveness(const ir::Kernel& k, const ir::DominatorTree& cfg);

// Computes the CFG, dominators and liveness of k, then assigns registers by walking the
// dominator tree in pre-order (optimal per class for SSA up to vector-lane fragmentation).
// Guarantees: a result never shares a register with an operand of its own instruction (except
// a tied result, ir::tiedOperand: wgmma's D takes the registers of its accumulator when that is
// the accumulator's last use), nor with any value live across its definition; a block parameter never shares a register with a
// value live into its block; kernel parameters are defined on entry.
RegisterAssignment assignRegisters(const ir::Kernel& k, const RegisterFile& file);

}  // namespace tn::passes
